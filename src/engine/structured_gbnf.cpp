// GBNF text → Grammar (rules, literals, classes, groups, repetition).
#include <map>
#include <string>

#include "common/utf8.h"
#include "engine/structured_grammar.h"

namespace deepinfer::engine::structured {
namespace {

constexpr int kMaxDepth = 200;

class GbnfParser {
 public:
  GbnfParser(std::string_view text, Grammar& g) : t_(text), g_(g) {}

  Status parse() {
    while (true) {
      skip(true);
      if (at_end()) break;
      auto name = identifier();
      if (name.empty()) return fail("expected a rule name");
      skip(false);
      if (t_.substr(i_, 3) != "::=") return fail("expected '::=' after '" + name + "'");
      i_ += 3;
      const uint32_t r = rule_id(name);
      if (defined_.count(name)) return fail("rule '" + name + "' defined twice");
      defined_[name] = true;
      auto body = alternatives(0);
      if (!body.ok()) return body.error();
      g_.define(r, std::move(body.value()));
      skip(false);
      if (!at_end() && t_[i_] != '\n') return fail("unexpected character");
    }
    if (!ids_.count("root")) return Error{"grammar: no 'root' rule"};
    return Status::Ok();
  }
  uint32_t root() const { return ids_.at("root"); }

 private:
  Error fail(const std::string& what) const {
    size_t line = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) line += t_[k] == '\n';
    return Error{"grammar: " + what + " (line " + std::to_string(line) + ")"};
  }
  bool at_end() const { return i_ >= t_.size(); }

  // Skips spaces and comments; newlines too when `newlines`.
  void skip(bool newlines) {
    while (!at_end()) {
      const char c = t_[i_];
      if (c == '#') {
        while (!at_end() && t_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else {
        break;
      }
    }
  }

  std::string identifier() {
    const size_t s = i_;
    while (!at_end() &&
           (isalnum(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_' || t_[i_] == '-'))
      ++i_;
    return std::string(t_.substr(s, i_ - s));
  }

  uint32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t r = g_.add_rule(name);
    ids_[name] = r;
    return r;
  }

  // After a newline at depth 0 the rule continues only when the next line starts with '|'.
  bool continues_after_newline() {
    size_t j = i_;
    while (j < t_.size() && (t_[j] == ' ' || t_[j] == '\t' || t_[j] == '\r' || t_[j] == '\n')) ++j;
    return j < t_.size() && t_[j] == '|';
  }

  Result<Expr> alternatives(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    std::vector<Expr> alts;
    while (true) {
      auto s = sequence(depth);
      if (!s.ok()) return s;
      alts.push_back(std::move(s.value()));
      skip(depth > 0);
      if (!at_end() && t_[i_] == '\n' && depth == 0 && continues_after_newline()) skip(true);
      if (!at_end() && t_[i_] == '|') {
        ++i_;
        skip(true);
        continue;
      }
      break;
    }
    return Expr::alt(std::move(alts));
  }

  Result<Expr> sequence(int depth) {
    std::vector<Expr> items;
    while (true) {
      skip(depth > 0);
      if (at_end()) break;
      const char c = t_[i_];
      if (c == '|' || c == ')' || c == '\n') break;
      Result<Expr> item = Error{""};
      if (c == '"') {
        item = literal();
      } else if (c == '[') {
        item = char_class();
      } else if (c == '(') {
        ++i_;
        skip(true);
        item = alternatives(depth + 1);
        if (!item.ok()) return item;
        skip(true);
        if (at_end() || t_[i_] != ')') return fail("missing ')'");
        ++i_;
      } else if (c == '.') {
        ++i_;
        item = utf8_any_char(ByteSet{});
      } else if (isalpha(static_cast<unsigned char>(c)) || c == '_') {
        const std::string name = identifier();
        skip(false);
        if (t_.substr(i_, 3) == "::=") return fail("missing newline before rule '" + name + "'");
        item = Expr::ref(rule_id(name));
      } else {
        return fail(std::string("unexpected character '") + c + "'");
      }
      if (!item.ok()) return item;
      Expr e = std::move(item.value());
      while (!at_end()) {
        const char q = t_[i_];
        if (q == '*') {
          e = Expr::star(std::move(e)), ++i_;
        } else if (q == '+') {
          e = Expr::plus(std::move(e)), ++i_;
        } else if (q == '?') {
          e = Expr::optional(std::move(e)), ++i_;
        } else if (q == '{') {
          auto b = braces();
          if (!b.ok()) return b.error();
          e = Expr::repeat(std::move(e), b.value().first, b.value().second);
        } else {
          break;
        }
      }
      items.push_back(std::move(e));
    }
    return Expr::seq(std::move(items));
  }

  Result<std::pair<int32_t, int32_t>> braces() {
    ++i_;
    auto number = [&](int32_t& v) {
      skip(false);
      const size_t s = i_;
      int64_t n = 0;
      while (!at_end() && isdigit(static_cast<unsigned char>(t_[i_]))) {
        n = std::min<int64_t>(n * 10 + (t_[i_] - '0'), 1 << 30);
        ++i_;
      }
      v = static_cast<int32_t>(n);
      return i_ > s;
    };
    int32_t lo = 0, hi = 0;
    if (!number(lo)) return fail("expected a number in {}");
    hi = lo;
    skip(false);
    if (!at_end() && t_[i_] == ',') {
      ++i_;
      if (!number(hi)) hi = kUnbounded;
    }
    skip(false);
    if (at_end() || t_[i_] != '}') return fail("expected '}'");
    ++i_;
    return std::make_pair(lo, hi);
  }

  Result<uint32_t> char_or_escape() {
    if (at_end()) return fail("unterminated literal");
    auto c = static_cast<uint8_t>(t_[i_]);
    if (c == '\\') {
      ++i_;
      if (at_end()) return fail("trailing backslash");
      const char e = t_[i_++];
      switch (e) {
        case 'n':
          return uint32_t{'\n'};
        case 't':
          return uint32_t{'\t'};
        case 'r':
          return uint32_t{'\r'};
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          return static_cast<uint32_t>(e);
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (int k = 0; k < n; ++k) {
            if (at_end() || !isxdigit(static_cast<unsigned char>(t_[i_])))
              return fail("invalid hex escape");
            const char h = t_[i_++];
            v = v * 16 + static_cast<uint32_t>(isdigit(static_cast<unsigned char>(h))
                                                   ? h - '0'
                                                   : (tolower(h) - 'a' + 10));
          }
          if (v > 0x10ffff || (v >= 0xd800 && v < 0xe000)) return fail("invalid code point");
          return v;
        }
        default:
          return fail(std::string("unknown escape \\") + e);
      }
    }
    const int len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (i_ + static_cast<size_t>(len) > t_.size()) return fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(t_[i_ + k]) & 0x3f);
    i_ += static_cast<size_t>(len);
    return cp;
  }

  Result<Expr> literal() {
    ++i_;
    std::string bytes;
    while (true) {
      if (at_end() || t_[i_] == '\n') return fail("unterminated string literal");
      if (t_[i_] == '"') {
        ++i_;
        break;
      }
      auto cp = char_or_escape();
      if (!cp.ok()) return cp.error();
      append_utf8(bytes, cp.value());
    }
    return Expr::literal(bytes);
  }

  Result<Expr> char_class() {
    ++i_;
    bool negated = false;
    if (!at_end() && t_[i_] == '^') negated = true, ++i_;
    ByteSet ascii;
    std::vector<Expr> wide;
    while (true) {
      if (at_end() || t_[i_] == '\n') return fail("unterminated character class");
      if (t_[i_] == ']') {
        ++i_;
        break;
      }
      auto lo = char_or_escape();
      if (!lo.ok()) return lo.error();
      uint32_t hi = lo.value();
      if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
        ++i_;
        auto h = char_or_escape();
        if (!h.ok()) return h.error();
        hi = h.value();
        if (hi < lo.value()) return fail("character range out of order");
      }
      if (hi < 0x80) {
        ascii.set_range(static_cast<uint8_t>(lo.value()), static_cast<uint8_t>(hi));
      } else if (lo.value() < 0x80 || negated || hi - lo.value() > 256) {
        return fail("non-ASCII class ranges, or non-ASCII in negated classes, are not supported");
      } else {
        for (uint32_t cp = lo.value(); cp <= hi; ++cp) {
          std::string s;
          append_utf8(s, cp);
          wide.push_back(Expr::literal(s));
        }
      }
    }
    if (negated) return utf8_any_char(ascii);
    if (!ascii.empty()) wide.insert(wide.begin(), Expr::byteset(ascii));
    if (wide.empty()) return fail("empty character class");
    return Expr::alt(std::move(wide));
  }

  std::string_view t_;
  Grammar& g_;
  size_t i_ = 0;
  std::map<std::string, uint32_t> ids_;
  std::map<std::string, bool> defined_;
};

}  // namespace

Result<std::unique_ptr<Grammar>> parse_gbnf(std::string_view text, GrammarLimits limits) {
  auto g = std::make_unique<Grammar>(limits);
  GbnfParser p(text, *g);
  Status s = p.parse();
  if (!s.ok()) return s.error();
  s = g->finalize(p.root());
  if (!s.ok()) return s.error();
  return g;
}

}  // namespace deepinfer::engine::structured
