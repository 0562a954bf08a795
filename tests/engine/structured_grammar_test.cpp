// Structured output grammars: regex / GBNF / JSON Schema languages (accepted and rejected
// strings), errors naming the unsupported feature, compile bounds on pathological input, and
// the token mask checked against a brute-force per-token check on a synthetic vocabulary.
#include "engine/structured_grammar.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/structured_json_schema.h"
#include "engine/structured_mask.h"
#include "engine/structured_regex.h"
#include "engine/structured_stack.h"

namespace deepinfer::engine::structured {
namespace {

bool full_match(const Grammar& g, std::string_view text) {
  StackRunner r(g);
  StackSet a, b;
  r.start_rule(g.root(), a);
  for (char c : text) {
    r.advance(a, static_cast<uint8_t>(c), b);
    std::swap(a, b);
    if (!a.alive()) return false;
  }
  return a.finished;
}

std::unique_ptr<Grammar> regex(const std::string& p) {
  auto g = regex_grammar(p);
  EXPECT_TRUE(g.ok()) << p << ": " << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g.value()) : nullptr;
}

std::unique_ptr<Grammar> schema(const std::string& s) {
  auto j = parse_json(s);
  EXPECT_TRUE(j.ok()) << s;
  auto g = json_schema_grammar(j.value());
  EXPECT_TRUE(g.ok()) << s << ": " << (g.ok() ? "" : g.error().message);
  return g.ok() ? std::move(g.value()) : nullptr;
}

std::string schema_error(const std::string& s) {
  auto j = parse_json(s);
  EXPECT_TRUE(j.ok()) << s;
  auto g = json_schema_grammar(j.value());
  EXPECT_FALSE(g.ok()) << s;
  return g.ok() ? "" : g.error().message;
}

struct Case {
  std::string pattern;
  std::vector<std::string> yes, no;
};

TEST(StructuredRegex, Languages) {
  const std::vector<Case> cases = {
      {"[a-z]+@[a-z]+\\.com", {"ab@cd.com", "x@y.com"}, {"ab@cd.co", "@cd.com", "AB@cd.com"}},
      {"\\d{2,3}", {"12", "123"}, {"1", "1234", "ab"}},
      {"(foo|bar)*baz", {"baz", "foobarbaz", "barbarbaz"}, {"foobar", "fooba"}},
      {"^a.c$",
       {"abc", "a-c",
        "a\xc3\xa9"
        "c"},
       {"a\nc", "ac", "abbc"}},
      {"\xc3\xa9+", {"\xc3\xa9", "\xc3\xa9\xc3\xa9"}, {"", "e"}},
      {"[^0-9]x", {"ax", "\xe4\xb8\xadx"}, {"1x", "x"}},
      {"(?:ab){2}c?", {"abab", "ababc"}, {"ab", "abababc"}},
      {"\\w+\\s\\W", {"a_1 !", "Z\t-"}, {"a b", " !"}},
      {"-?(0|[1-9][0-9]*)", {"0", "-12", "907"}, {"01", "-", "--1"}},
      {"a|", {"a", ""}, {"b"}},
  };
  for (const Case& c : cases) {
    auto g = regex(c.pattern);
    ASSERT_NE(g, nullptr);
    for (const auto& s : c.yes) EXPECT_TRUE(full_match(*g, s)) << c.pattern << " / " << s;
    for (const auto& s : c.no) EXPECT_FALSE(full_match(*g, s)) << c.pattern << " / " << s;
  }
}

TEST(StructuredRegex, UnsupportedFeaturesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"(a", "missing ')'"},
      {"(a)\\1", "backreferences"},
      {"(?=a)b", "lookaround"},
      {"\\bword", "word boundaries"},
      {"a{5,2}", "invalid repetition bounds"},
      {"[z-a]", "out of order"},
      {"*a", "quantifier without an operand"},
      {"a)", "unbalanced"},
  };
  for (const auto& [p, what] : bad) {
    auto g = regex_grammar(p);
    ASSERT_FALSE(g.ok()) << p;
    EXPECT_NE(g.error().message.find(what), std::string::npos) << p << ": " << g.error().message;
  }
}

TEST(StructuredRegex, PathologicalInputsFailFastWithClearErrors) {
  const auto t0 = std::chrono::steady_clock::now();
  // Nested bounds lower to shared rules: size is additive, not multiplicative.
  auto nested_bounds = regex_grammar("((a{100}){100}){100}");
  ASSERT_TRUE(nested_bounds.ok());
  EXPECT_LT(nested_bounds.value()->num_positions(), 1000u);
  std::string wide;
  for (int i = 0; i < 50; ++i) wide += "(b|c){9999}";
  auto big = regex_grammar(wide);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("grammar too large"), std::string::npos);
  auto huge = regex_grammar("a{200000}");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("exceeds the limit"), std::string::npos);
  std::string deep(5000, '(');
  auto nested = regex_grammar(deep + "a" + std::string(5000, ')'));
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.error().message.find("nesting too deep"), std::string::npos);
  // Exponential-blowup classics stay linear: the matcher tracks a set of stacks.
  auto g = regex("(a|a)*(a*)*b");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(full_match(*g, std::string(2000, 'a') + "b"));
  EXPECT_FALSE(full_match(*g, std::string(2000, 'a')));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(StructuredGbnf, ArithmeticGrammar) {
  auto g = parse_gbnf(
      "# arithmetic\n"
      "root ::= expr\n"
      "expr ::= term (\"+\" term)*\n"
      "term ::= [0-9]+ | \"(\" expr \")\"\n"
      "      | \"-\" term\n");
  ASSERT_TRUE(g.ok()) << g.error().message;
  for (const char* s : {"1", "1+(2+3)", "-(4)+56", "((7))"})
    EXPECT_TRUE(full_match(*g.value(), s)) << s;
  for (const char* s : {"", "1+", "(1", "a"}) EXPECT_FALSE(full_match(*g.value(), s)) << s;
}

TEST(StructuredGbnf, ErrorsNameTheProblem) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"root ::= root \"a\" | \"a\"\n", "left-recursive at rule 'root'"},
      {"root ::= x y\nx ::= y? root\ny ::= \"b\"\n", "left-recursive"},
      {"root ::= missing\n", "rule 'missing' is not defined"},
      {"expr ::= \"a\"\n", "no 'root' rule"},
      {"root ::= \"a\nb\"\n", "unterminated string literal (line 1)"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "defined twice"},
      {"root ::= [ab\n", "unterminated character class"},
  };
  for (const auto& [text, what] : bad) {
    auto g = parse_gbnf(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.error().message.find(what), std::string::npos) << text << ": " << g.error().message;
  }
  // A tail-call cycle is fine (it does not grow the stack).
  auto ok = parse_gbnf("root ::= \"a\" root | \"b\"\n");
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(full_match(*ok.value(), "aaab"));
}

TEST(StructuredJsonSchema, ObjectsWithRequiredAndOptional) {
  auto g = schema(R"({"type":"object","properties":{"a":{"type":"integer"},
      "b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"],
      "additionalProperties":false})");
  ASSERT_NE(g, nullptr);
  for (const char* s : {R"({"b":"x"})", R"({"a":1,"b":""})", R"({"a":-5,"b":"q","c":true})",
                        R"({"b":"\n\u00e9","c":false})"})
    EXPECT_TRUE(full_match(*g, s)) << s;
  for (const char* s : {R"({})", R"({"a":1})", R"({"b":"x",})", R"({"b":"x","a":1})",
                        R"({"b":"x","d":1})", R"({"b":"a"b"})", "{\"b\":\"\x01\"}"})
    EXPECT_FALSE(full_match(*g, s)) << s;
}

TEST(StructuredJsonSchema, IntegerAndNumberRanges) {
  auto g = schema(R"({"type":"integer","minimum":5,"maximum":123})");
  for (const char* s : {"5", "9", "10", "99", "100", "123"}) EXPECT_TRUE(full_match(*g, s)) << s;
  for (const char* s : {"4", "124", "05", "-5", "1000"}) EXPECT_FALSE(full_match(*g, s)) << s;
  auto n = schema(R"({"type":"integer","minimum":-20,"exclusiveMaximum":-3})");
  for (const char* s : {"-20", "-4", "-10"}) EXPECT_TRUE(full_match(*n, s)) << s;
  for (const char* s : {"-3", "-21", "0", "-0"}) EXPECT_FALSE(full_match(*n, s)) << s;
  auto lo = schema(R"({"type":"integer","minimum":42})");
  for (const char* s : {"42", "99", "100", "123456"}) EXPECT_TRUE(full_match(*lo, s)) << s;
  for (const char* s : {"41", "0", "-50"}) EXPECT_FALSE(full_match(*lo, s)) << s;
  auto f = schema(R"({"type":"number","minimum":0,"maximum":2.5})");
  for (const char* s : {"0", "1", "2", "0.5", "1.25"}) EXPECT_TRUE(full_match(*f, s)) << s;
  for (const char* s : {"3", "2.75", "-0.5", "-1"}) EXPECT_FALSE(full_match(*f, s)) << s;
}

TEST(StructuredJsonSchema, StringsArraysRefsAndFormats) {
  auto d = schema(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(full_match(*d, "\"2024-02-28\""));
  EXPECT_TRUE(full_match(*d, "\"1999-12-31\""));
  EXPECT_FALSE(full_match(*d, "\"2024-02-30\""));
  EXPECT_FALSE(full_match(*d, "\"2024-13-01\""));
  auto u = schema(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(full_match(*u, "\"123e4567-e89b-12d3-a456-426614174000\""));
  auto len = schema(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(full_match(*len, "\"ab\""));
  EXPECT_TRUE(full_match(*len, "\"\xc3\xa9\\n\\\"\""));
  EXPECT_FALSE(full_match(*len, "\"a\""));
  EXPECT_FALSE(full_match(*len, "\"abcd\""));
  auto pat = schema(R"({"type":"string","pattern":"^a\"b\\\\c$"})");
  EXPECT_TRUE(full_match(*pat, R"("a\"b\\c")"));
  auto arr = schema(R"({"type":"array","prefixItems":[{"type":"null"}],
      "items":{"enum":["x",2]},"minItems":2,"maxItems":3})");
  for (const char* s : {R"([null,"x"])", R"([null,2,2])"}) EXPECT_TRUE(full_match(*arr, s)) << s;
  for (const char* s : {"[null]", R"([null,"x",2,2])", R"(["x",2])"})
    EXPECT_FALSE(full_match(*arr, s)) << s;
  auto tree = schema(R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v","kids"],"additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(full_match(*tree, R"({"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(full_match(*tree, R"({"v":1,"kids":[{"v":2}]})"));
  auto nul = schema(R"({"type":"string","nullable":true})");
  EXPECT_TRUE(full_match(*nul, "null"));
  EXPECT_TRUE(full_match(*nul, "\"s\""));
  auto any =
      schema(R"({"anyOf":[{"type":"integer"},{"type":"array","items":{"type":"boolean"}}]})");
  EXPECT_TRUE(full_match(*any, "[true,false]"));
  EXPECT_TRUE(full_match(*any, "7"));
  EXPECT_FALSE(full_match(*any, "\"7\""));
}

TEST(StructuredJsonSchema, UnsupportedKeywordsAreNamed) {
  EXPECT_NE(schema_error(R"({"type":"object","patternProperties":{}})")
                .find("unsupported keyword 'patternProperties'"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"allOf":[{"type":"string"}]})").find("'allOf'"), std::string::npos);
  const std::string nested =
      schema_error(R"({"type":"object","properties":{"n":{"type":"number","multipleOf":3}}})");
  EXPECT_NE(nested.find("at /properties/n"), std::string::npos) << nested;
  EXPECT_NE(nested.find("'multipleOf'"), std::string::npos) << nested;
  EXPECT_NE(schema_error(R"({"type":"string","format":"hostname"})").find("format 'hostname'"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"#/$defs/missing"})").find("does not resolve"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"strin"})").find("unknown type 'strin'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"array","maxItems":1000000})").find("too large"),
            std::string::npos);
}

// A small vocabulary over JSON-ish bytes: every single byte plus random multi-byte tokens.
std::shared_ptr<const TokenTable> synthetic_vocab(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::string alphabet = "{}[]\",:0123456789abcxyz.-+eE \\ntrue";
  std::vector<std::string> tokens;
  for (int b = 1; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.emplace_back();  // id 255: the end token (no bytes)
  while (tokens.size() < n) {
    std::string t;
    const size_t len = 2 + rng() % 6;
    for (size_t k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    tokens.push_back(t);
  }
  return TokenTable::from_bytes(tokens);
}

TEST(StructuredMask, MatchesBruteForceOnSyntheticVocabulary) {
  auto vocab = synthetic_vocab(3000, 7);
  const int32_t eos = 255;
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"a":{"type":"integer","minimum":3,"maximum":250},
          "b":{"type":"array","items":{"type":"string","maxLength":4}},"c":{"enum":["x","true"]}},
          "required":["a"],"additionalProperties":false})",
      R"({"type":"array","items":{"anyOf":[{"type":"number"},{"type":"null"},{"type":"boolean"}]}})",
      R"({})",
  };
  std::mt19937 rng(11);
  for (const std::string& s : schemas) {
    auto g = json_schema_grammar(parse_json(s).value());
    ASSERT_TRUE(g.ok()) << g.error().message;
    auto compiled = CompiledGrammar::compile(std::move(g.value()), vocab);
    ASSERT_TRUE(compiled.ok());
    GrammarMatcher m(compiled.value(), {eos});
    std::vector<uint64_t> mask(mask_words(vocab->vocab_size()));
    for (int step = 0; step < 40 && !m.terminated(); ++step) {
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < static_cast<int32_t>(vocab->vocab_size()); ++t) {
        GrammarMatcher copy = m;
        const bool ok = copy.accept(t);
        ASSERT_EQ(ok, mask_test(mask, t))
            << s << " step " << step << " token '" << vocab->bytes(t) << "'";
        if (ok) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty());
      // Prefer ending after a while so that the walk covers closing states too.
      int32_t pick = allowed[rng() % allowed.size()];
      if (step > 20 && mask_test(mask, eos)) pick = eos;
      ASSERT_TRUE(m.accept(pick));
    }
  }
}

TEST(StructuredMask, EndTokenOnlyWhenComplete) {
  auto vocab = synthetic_vocab(400, 3);
  auto compiled = CompiledGrammar::compile(regex_grammar("ab?").value(), vocab);
  ASSERT_TRUE(compiled.ok());
  GrammarMatcher m(compiled.value(), {255});
  std::vector<uint64_t> mask(mask_words(vocab->vocab_size()));
  m.fill_mask(mask);
  EXPECT_FALSE(mask_test(mask, 255));
  EXPECT_TRUE(mask_test(mask, 'a' - 1));  // token ids are byte - 1
  EXPECT_FALSE(m.accept('b' - 1));
  EXPECT_TRUE(m.accept('a' - 1));
  m.fill_mask(mask);
  EXPECT_TRUE(mask_test(mask, 255));
  EXPECT_TRUE(mask_test(mask, 'b' - 1));
  EXPECT_TRUE(m.accept(255));
  EXPECT_TRUE(m.terminated());
  EXPECT_FALSE(m.accept('b' - 1));
  m.reset();
  EXPECT_FALSE(m.can_finish());
  EXPECT_TRUE(m.accept('a' - 1));
}

}  // namespace
}  // namespace deepinfer::engine::structured
