// Structured output end to end on the real DeepSeek V4.1 vocabulary with a worst-case model
// (random logits): generated schemas validated by ajv (node), generated regexes by PCRE2,
// batching invariance, thinking + schema, request-field parsing and the grammar cache.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/sampler.h"
#include "engine/structured_request.h"
#include "tokenizer/cache_dir.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine::structured {
namespace {

struct Vocab {
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::shared_ptr<const TokenTable> table;
  int32_t eos = -1, think_end = -1;
};

const Vocab* vocab() {
  static const Vocab* v = [] {
    auto tok = tokenizer::Tokenizer::from_path(tokenizer::deepseek_tokenizer_dir(true));
    if (!tok.ok()) return static_cast<Vocab*>(nullptr);
    auto* out = new Vocab;
    out->tok = std::move(tok.value());
    out->table = TokenTable::from_tokenizer(*out->tok);
    out->eos = out->tok->added_token_id(
        "<\xef\xbd\x9c"
        "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>");
    out->think_end = out->tok->added_token_id("</think>");
    return out;
  }();
  return v;
}

// Under the sanitizers (several times slower) fewer samples run; the plain build runs them all.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
constexpr int kScale = 4;
#else
constexpr int kScale = 1;
#endif

#define REQUIRE_VOCAB()                                                                   \
  const Vocab* V = vocab();                                                               \
  if (V == nullptr) GTEST_SKIP() << "the V4.1 tokenizer is not built (scripts/setup.sh)"; \
  ASSERT_GE(V->eos, 0)

// Worst-case model: random logits; after `drift` tokens, the end token and the single-byte
// tokens on a shortest completion get large bonuses so that every output finishes in budget.
class RandomModel {
 public:
  RandomModel(const Vocab& v, uint64_t seed, int drift) : v_(v), rng_(seed), drift_(drift) {
    logits_.resize(v.table->vocab_size());
    params_.temperature = 1.0f;
    params_.seed = seed;
  }
  std::span<const float> step(int index, const ByteSet& closing) {
    std::normal_distribution<float> n(0.0f, 2.0f);
    for (size_t t = 0; t < logits_.size(); ++t) {
      float l = n(rng_);
      if (index >= drift_) {
        const std::string_view b = v_.table->bytes(static_cast<int32_t>(t));
        if (b.size() == 1 && closing.test(static_cast<uint8_t>(b[0]))) l += 400.0f;
        if (static_cast<int32_t>(t) == v_.eos) l += 800.0f;
      }
      logits_[t] = l;
    }
    return logits_;
  }
  const SamplingParams& params() const { return params_; }

 private:
  const Vocab& v_;
  std::mt19937_64 rng_;
  int drift_;
  std::vector<float> logits_;
  SamplingParams params_;
};

struct Generated {
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
};

// One step of one sequence: mask, sample, advance.
bool step(StructuredConstraint& c, RandomModel& model, Sampler& sampler,
          std::vector<uint64_t>& mask, Generated& out, const Vocab& v) {
  const int index = static_cast<int>(out.tokens.size());
  std::span<const float> logits = model.step(index, c.matcher().shortest_completion_bytes());
  const bool masked = c.fill_mask(mask);
  SampleContext ctx{model.params(), *model.params().seed, {}, out.tokens};
  if (masked) ctx.allowed = mask;
  const int32_t t = sampler.sample(logits, ctx).token;
  EXPECT_TRUE(c.accept(t)) << "sampled token " << t << " was rejected";
  out.tokens.push_back(t);
  if (t == v.eos) {
    out.finished = true;
    return false;
  }
  out.text += v.table->bytes(t).empty() ? std::string(v.tok->token_bytes(t))
                                        : std::string(v.table->bytes(t));
  return true;
}

Generated generate(std::shared_ptr<const CompiledGrammar> g, const Vocab& v, uint64_t seed,
                   int max_tokens = 400, int drift = 24, int32_t think_end = -1,
                   RandomModel* forced = nullptr) {
  StructuredConstraint c(std::move(g), {v.eos}, think_end);
  RandomModel own(v, seed, drift);
  RandomModel& model = forced ? *forced : own;
  Sampler sampler(static_cast<int32_t>(v.table->vocab_size()));
  std::vector<uint64_t> mask(mask_words(v.table->vocab_size()));
  Generated out;
  while (static_cast<int>(out.tokens.size()) < max_tokens &&
         step(c, model, sampler, mask, out, v)) {
  }
  return out;
}

// Random schemas over the supported subset (deterministic for a seed).
class SchemaGen {
 public:
  explicit SchemaGen(uint64_t seed) : rng_(seed) {}
  Json schema(int depth) {
    const int kind = static_cast<int>(rng_() % (depth >= 3 ? 6 : 10));
    JsonObject s;
    switch (kind) {
      case 0: {
        s["type"] = "string";
        const int v = static_cast<int>(rng_() % 6);
        if (v == 1) s["format"] = pick({"date", "time", "date-time", "uuid", "email", "ipv4"});
        if (v == 2)
          s["pattern"] = pick(
              {"^[a-z]{2,5}-\\d+$", "^(yes|no|maybe)$", "[A-F0-9]{4}", "^\\w+( \\w+)?$", "^x.y$"});
        if (v == 3) s["maxLength"] = static_cast<int64_t>(rng_() % 6);
        if (v == 4) s["minLength"] = static_cast<int64_t>(1 + rng_() % 3);
        break;
      }
      case 1: {
        s["type"] = "integer";
        if (rng_() % 2) s["minimum"] = static_cast<int64_t>(rng_() % 200) - 100;
        if (rng_() % 2) s["maximum"] = static_cast<int64_t>(rng_() % 200) + 100;
        if (rng_() % 4 == 0) s["exclusiveMinimum"] = static_cast<int64_t>(rng_() % 50);
        break;
      }
      case 2: {
        s["type"] = "number";
        if (rng_() % 2) {
          s["minimum"] = 0.5 * static_cast<double>(rng_() % 10);
          s["maximum"] = 10.0 + static_cast<double>(rng_() % 100);
        }
        break;
      }
      case 3:
        s["type"] = "boolean";
        break;
      case 4: {
        JsonArray e;
        for (int i = 0, n = 1 + static_cast<int>(rng_() % 4); i < n; ++i)
          e.push_back(rng_() % 2 ? Json(pick({"red", "gr\"een", "bl\\ue", "\xc3\xa9t\xc3\xa9"}))
                                 : Json(static_cast<int64_t>(rng_() % 1000)));
        s["enum"] = e;
        break;
      }
      case 5:
        s["type"] = JsonArray{"null", "integer"};
        break;
      case 6:
      case 7: {
        s["type"] = "object";
        JsonObject props;
        JsonArray req;
        for (int i = 0, n = 1 + static_cast<int>(rng_() % 4); i < n; ++i) {
          const std::string name = std::string("p") + std::to_string(i);
          props[name] = schema(depth + 1);
          if (rng_() % 2) req.push_back(Json(name));
        }
        s["properties"] = props;
        s["required"] = req;
        s["additionalProperties"] = false;
        break;
      }
      case 8: {
        s["type"] = "array";
        s["items"] = schema(depth + 1);
        if (rng_() % 2) s["minItems"] = static_cast<int64_t>(rng_() % 3);
        if (rng_() % 2) s["maxItems"] = static_cast<int64_t>(3 + rng_() % 3);
        if (rng_() % 3 == 0) s["prefixItems"] = JsonArray{schema(depth + 1)};
        break;
      }
      default: {
        s["anyOf"] = JsonArray{JsonObject{{"type", "string"}, {"maxLength", 3}}, schema(depth + 1)};
        if (rng_() % 2) s["description"] = "a union";
        break;
      }
    }
    if (kind <= 2 && rng_() % 5 == 0) s["nullable"] = true;
    return s;
  }

 private:
  const char* pick(std::initializer_list<const char*> xs) { return xs.begin()[rng_() % xs.size()]; }
  std::mt19937_64 rng_;
};

bool node_with_ajv() {
  const std::string dir = std::string(DEEPINFER_SOURCE_DIR) + "/tests/js/node_modules/ajv";
  return std::ifstream(dir + "/package.json").good() &&
         std::system("node --version > /dev/null 2>&1") == 0;
}

TEST(StructuredGenerate, GeneratedSchemasValidateWithAjv) {
  REQUIRE_VOCAB();
  if (!node_with_ajv())
    GTEST_SKIP() << "node or the ajv package is missing (npm install in tests/js)";
  GrammarCache cache(V->table);
  const std::string path = std::string(DEEPINFER_BINARY_DIR) + "/structured_schema_samples.jsonl";
  std::ofstream out(path);
  int n = 0;
  for (uint64_t seed = 1; n < 160 / kScale; ++seed) {
    SchemaGen gen(seed);
    Json s = gen.schema(seed % 4 == 0 ? 0 : 1);
    if (seed % 10 == 0) {
      // $defs / $ref
      JsonObject wrapped{
          {"$defs", JsonObject{{"item", s}}},
          {"type", "object"},
          {"properties",
           JsonObject{{"first", JsonObject{{"$ref", "#/$defs/item"}}},
                      {"rest", JsonObject{{"type", "array"},
                                          {"items", JsonObject{{"$ref", "#/$defs/item"}}},
                                          {"maxItems", 2}}}}},
          {"required", JsonArray{"first", "rest"}},
          {"additionalProperties", false}};
      s = wrapped;
    }
    ConstraintSpec spec{ConstraintSpec::Kind::kJsonSchema, to_json(s), "response_format"};
    auto g = cache.get(spec);
    ASSERT_TRUE(g.ok()) << to_json(s) << ": " << g.error().message;
    Generated r = generate(g.value(), *V, seed);
    ASSERT_TRUE(r.finished) << "no end within the budget for " << to_json(s) << "\n" << r.text;
    JsonObject line{{"schema", s}, {"output", Json(r.text)}};
    out << to_json(line) << "\n";
    ++n;
  }
  // json_object mode.
  ConstraintSpec obj{ConstraintSpec::Kind::kJsonObject, "", "response_format"};
  for (uint64_t seed = 500; seed < 500 + 20 / kScale; ++seed, ++n) {
    Generated r = generate(cache.get(obj).value(), *V, seed);
    ASSERT_TRUE(r.finished);
    out << to_json(JsonObject{{"schema", JsonObject{{"type", "object"}}}, {"output", Json(r.text)}})
        << "\n";
  }
  out.close();
  const std::string cmd =
      "node " + std::string(DEEPINFER_SOURCE_DIR) + "/tests/js/structured_validate.mjs " + path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "ajv rejected samples in " << path;
  EXPECT_GE(n, 180 / kScale);
}

bool pcre2_full_match(const std::string& pattern, const std::string& text) {
  int err = 0;
  PCRE2_SIZE off = 0;
  const std::string anchored = "^(?:" + pattern + ")$";
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(anchored.data()), anchored.size(),
                                 PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &off, nullptr);
  if (re == nullptr) return false;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  const int rc =
      pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return rc >= 0;
}

TEST(StructuredGenerate, GeneratedRegexesMatchWithPcre2) {
  REQUIRE_VOCAB();
  GrammarCache cache(V->table);
  std::mt19937_64 rng(99);
  const std::vector<std::string> atoms = {"[a-z]",    "\\d", "(ab|cd)", "x",   "[A-F0-9]",
                                          "\xc3\xa9", ".",   "[^,]",    "\\s", "(foo|ba)",
                                          "[-+]",     "\\.", "\\w"};
  const std::vector<std::string> quants = {"", "", "?", "+", "*", "{2}", "{1,3}"};
  int n = 0;
  for (int i = 0; i < 60 / kScale; ++i, ++n) {
    std::string re;
    for (int k = 0, m = 1 + static_cast<int>(rng() % 5); k < m; ++k) {
      re += atoms[rng() % atoms.size()] + quants[rng() % quants.size()];
      if (rng() % 7 == 0) re = "(" + re + ")|" + atoms[rng() % atoms.size()];
    }
    ConstraintSpec spec{ConstraintSpec::Kind::kRegex, re, "guided_regex"};
    auto g = cache.get(spec);
    ASSERT_TRUE(g.ok()) << re << ": " << g.error().message;
    Generated r = generate(g.value(), *V, 1000 + static_cast<uint64_t>(i), 200, 12);
    ASSERT_TRUE(r.finished) << re;
    EXPECT_TRUE(pcre2_full_match(re, r.text)) << "regex " << re << " output '" << r.text << "'";
  }
  EXPECT_GE(n, 60 / kScale);
}

TEST(StructuredGenerate, GbnfAndChoice) {
  REQUIRE_VOCAB();
  GrammarCache cache(V->table);
  ConstraintSpec gbnf{ConstraintSpec::Kind::kGrammar,
                      "root ::= \"(\" list \")\"\nlist ::= item (\",\" item)*\n"
                      "item ::= [0-9]+ | \"(\" list \")\"\n",
                      "guided_grammar"};
  auto g = cache.get(gbnf);
  ASSERT_TRUE(g.ok()) << g.error().message;
  for (uint64_t seed = 1; seed < 6; ++seed) {
    Generated r = generate(g.value(), *V, seed, 200, 10);
    ASSERT_TRUE(r.finished);
    EXPECT_TRUE(pcre2_full_match("(\\((?:[0-9]+|(?1))(?:,(?:[0-9]+|(?1)))*\\))", r.text)) << r.text;
  }
  ConstraintSpec choice{ConstraintSpec::Kind::kChoice, R"(["positive","negative","neutral"])",
                        "guided_choice"};
  for (uint64_t seed = 1; seed < 6; ++seed) {
    Generated r = generate(cache.get(choice).value(), *V, seed, 50, 0);
    ASSERT_TRUE(r.finished);
    EXPECT_TRUE(r.text == "positive" || r.text == "negative" || r.text == "neutral") << r.text;
  }
}

TEST(StructuredGenerate, BatchingInvariance) {
  REQUIRE_VOCAB();
  GrammarCache cache(V->table);
  // Four requests with different grammars, stepped interleaved (one sampler, shared mask
  // buffer as a batch would) must give the same tokens as each run alone.
  std::vector<ConstraintSpec> specs = {
      {ConstraintSpec::Kind::kJsonSchema,
       R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a","b"]})",
       "response_format"},
      {ConstraintSpec::Kind::kRegex, "[a-z]{3}-\\d{2,4}", "guided_regex"},
      {ConstraintSpec::Kind::kJsonObject, "", "response_format"},
      {ConstraintSpec::Kind::kJsonSchema, R"({"type":"array","items":{"type":"boolean"}})",
       "response_format"},
  };
  std::vector<Generated> alone;
  for (size_t i = 0; i < specs.size(); ++i)
    alone.push_back(generate(cache.get(specs[i]).value(), *V, 77 + i, 120, 16));
  std::vector<std::unique_ptr<StructuredConstraint>> cs;
  std::vector<std::unique_ptr<RandomModel>> models;
  std::vector<Generated> batched(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    cs.push_back(std::make_unique<StructuredConstraint>(cache.get(specs[i]).value(),
                                                        std::vector<int32_t>{V->eos}));
    models.push_back(std::make_unique<RandomModel>(*V, 77 + i, 16));
  }
  Sampler sampler(static_cast<int32_t>(V->table->vocab_size()));
  std::vector<uint64_t> mask(mask_words(V->table->vocab_size()));
  std::vector<char> live(specs.size(), 1);
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (!live[i] || batched[i].tokens.size() >= 120) continue;
      live[i] = step(*cs[i], *models[i], sampler, mask, batched[i], *V);
      any = true;
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(batched[i].tokens, alone[i].tokens) << i;
    EXPECT_TRUE(alone[i].finished) << i;
  }
  EXPECT_GE(cache.hits(), 4u);
}

TEST(StructuredGenerate, ThinkingThenSchema) {
  REQUIRE_VOCAB();
  ASSERT_EQ(V->think_end, 128822);
  GrammarCache cache(V->table);
  ConstraintSpec spec{
      ConstraintSpec::Kind::kJsonSchema,
      R"({"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]})",
      "response_format"};
  auto g = cache.get(spec).value();
  StructuredConstraint c(g, {V->eos}, V->think_end);
  std::vector<uint64_t> mask(mask_words(V->table->vocab_size()));
  // While thinking there is no mask: free text (even text the schema forbids) is accepted.
  EXPECT_FALSE(c.fill_mask(mask));
  auto thought = V->tok->encode_plain("Let me think: 6*7 is not {json}.").value();
  for (int32_t t : thought) EXPECT_TRUE(c.accept(t));
  EXPECT_FALSE(c.active());
  EXPECT_TRUE(c.accept(V->think_end));
  EXPECT_TRUE(c.active());
  ASSERT_TRUE(c.fill_mask(mask));
  EXPECT_FALSE(mask_test(mask, V->think_end));
  EXPECT_FALSE(mask_test(mask, V->eos));
  EXPECT_TRUE(mask_test(mask, V->tok->token_to_id("{")));
  // Then the random model must produce a valid answer.
  RandomModel model(*V, 5, 8);
  Sampler sampler(static_cast<int32_t>(V->table->vocab_size()));
  Generated out;
  while (out.tokens.size() < 100 && step(c, model, sampler, mask, out, *V)) {
  }
  ASSERT_TRUE(out.finished);
  auto parsed = parse_json(out.text);
  ASSERT_TRUE(parsed.ok()) << out.text;
  EXPECT_TRUE(parsed.value().as_object().at("answer").is_int64()) << out.text;
  // Reset + replay restores the same state (preemption by recompute).
  c.reset();
  EXPECT_FALSE(c.active());
  for (int32_t t : thought) EXPECT_TRUE(c.accept(t));
  EXPECT_TRUE(c.accept(V->think_end));
  for (int32_t t : out.tokens) EXPECT_TRUE(c.accept(t));
}

TEST(StructuredRequest, ReadsApiFields) {
  auto read = [](const std::string& body) {
    return read_structured_output(parse_json(body).value().as_object());
  };
  using K = ConstraintSpec::Kind;
  auto a = read(R"({"response_format":{"type":"json_schema","json_schema":{"name":"x",
      "schema":{"type":"string"},"strict":true}}})");
  ASSERT_TRUE(a.ok() && a.value());
  EXPECT_EQ(a.value()->kind, K::kJsonSchema);
  EXPECT_EQ(a.value()->source, R"({"type":"string"})");
  auto b =
      read(R"({"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"integer"}}}})");
  ASSERT_TRUE(b.ok() && b.value());
  EXPECT_EQ(b.value()->source, R"({"type":"integer"})");
  auto c = read(R"({"response_format":{"type":"json_object"}})");
  ASSERT_TRUE(c.ok() && c.value());
  EXPECT_EQ(c.value()->kind, K::kJsonObject);
  auto d = read(R"({"guided_json":"{\"type\":\"boolean\"}"})");
  ASSERT_TRUE(d.ok() && d.value());
  EXPECT_EQ(d.value()->source, R"({"type":"boolean"})");
  auto e = read(R"({"structured_outputs":{"regex":"a+"}})");
  ASSERT_TRUE(e.ok() && e.value());
  EXPECT_EQ(e.value()->kind, K::kRegex);
  auto f = read(R"({"guided_choice":["a","b"]})");
  ASSERT_TRUE(f.ok() && f.value());
  EXPECT_EQ(f.value()->kind, K::kChoice);
  auto none = read(R"({"response_format":{"type":"text"},"messages":[]})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value());
  // Errors are 400 messages naming the field.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"response_format":{"type":"xml"}})", "'response_format.type'"},
      {R"({"response_format":{"type":"json_schema"}})", "'response_format.json_schema'"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"x"}}})",
       "'response_format.json_schema.schema' is required"},
      {R"({"guided_regex":5})", "'guided_regex' must be a string"},
      {R"({"guided_choice":[]})", "'guided_choice' must be a non-empty array"},
      {R"({"guided_json":"{oops"})", "'guided_json' is not valid JSON"},
      {R"({"guided_regex":"a","guided_choice":["b"]})", "only one structured output"},
      {R"({"structured_outputs":{"xml":"a"}})", "'structured_outputs.xml' is not supported"},
  };
  for (const auto& [body, what] : bad) {
    auto r = read(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << body << ": " << r.error().message;
  }
}

TEST(StructuredRequest, CompileErrorsNameFieldAndKeyword) {
  auto table = TokenTable::from_bytes({"a", "b", "{", "}", "\"", ":", ""});
  GrammarCache cache(table);
  auto r = cache.get(
      {ConstraintSpec::Kind::kJsonSchema,
       R"({"type":"object","properties":{"x":{"type":"string","contentEncoding":"base64"}}})",
       "response_format.json_schema.schema"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("'response_format.json_schema.schema'"), std::string::npos);
  EXPECT_NE(r.error().message.find("unsupported keyword 'contentEncoding'"), std::string::npos)
      << r.error().message;
  auto same1 = cache.get({ConstraintSpec::Kind::kRegex, "ab*", "guided_regex"});
  auto same2 = cache.get({ConstraintSpec::Kind::kRegex, "ab*", "guided_regex"});
  ASSERT_TRUE(same1.ok() && same2.ok());
  EXPECT_EQ(same1.value().get(), same2.value().get());
  EXPECT_EQ(cache.hits(), 1u);
  GrammarLimits tight;
  tight.max_precompute_ms = 0;
  GrammarCache strict(table, 4, tight);
  auto slow = strict.get({ConstraintSpec::Kind::kJsonObject, "", "response_format"});
  // A zero budget is either met trivially on this tiny vocabulary or reported as a time limit.
  if (!slow.ok()) {
    EXPECT_NE(slow.error().message.find("time limit"), std::string::npos);
  }
}

}  // namespace
}  // namespace deepinfer::engine::structured
