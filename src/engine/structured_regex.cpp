// Regex parser (recursive descent) producing grammar expressions; JSON-string escaping.
#include "engine/structured_regex.h"

#include <string>
#include <vector>

#include "common/utf8.h"

namespace deepinfer::engine::structured {
namespace {

constexpr int kMaxDepth = 200;

// Any code point except \n, \r, U+2028 and U+2029 (what '.' matches in ECMAScript and PCRE).
Expr dot_expr() {
  ByteSet nl;
  nl.set('\n');
  nl.set('\r');
  Expr any = utf8_any_char(nl);
  // Replace the E1-EC branch so that E2 80 A8 / E2 80 A9 are excluded.
  const ByteSet cont = ByteSet::range(0x80, 0xbf);
  auto b = [](uint8_t lo, uint8_t hi) { return Expr::byteset(ByteSet::range(lo, hi)); };
  auto c = [&] { return Expr::byteset(cont); };
  ByteSet third = ByteSet::range(0x80, 0xa7);
  third.set_range(0xaa, 0xbf);
  std::vector<Expr> items;
  for (Expr& e : any.items) {
    if (e.kind == Expr::Kind::kSeq && e.items.size() == 3 && e.items[0].bytes.test(0xe1)) {
      items.push_back(Expr::seq({b(0xe1, 0xe1), c(), c()}));
      items.push_back(Expr::seq({b(0xe2, 0xe2), b(0x80, 0x80), Expr::byteset(third)}));
      items.push_back(Expr::seq({b(0xe2, 0xe2), b(0x81, 0xbf), c()}));
      items.push_back(Expr::seq({b(0xe3, 0xec), c(), c()}));
    } else {
      items.push_back(std::move(e));
    }
  }
  return Expr::alt(std::move(items));
}

ByteSet digits() { return ByteSet::range('0', '9'); }
ByteSet word() {
  ByteSet s = ByteSet::range('a', 'z');
  s.set_range('A', 'Z');
  s.set_range('0', '9');
  s.set('_');
  return s;
}
ByteSet space() {
  ByteSet s;
  for (char c : std::string_view(" \t\n\r\f\v")) s.set(static_cast<uint8_t>(c));
  return s;
}
ByteSet ascii_complement(const ByteSet& s) {
  ByteSet r = ByteSet::range(0, 0x7f);
  for (int i = 0; i < 4; ++i) r.bits[i] &= ~s.bits[i];
  return r;
}

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  Result<Expr> parse() {
    if (!p_.empty() && p_[0] == '^') ++i_;
    auto e = alternation(0);
    if (!e.ok()) return e;
    if (i_ < p_.size()) return fail("unbalanced ')'");
    return e;
  }

 private:
  Error fail(const std::string& what) const {
    return Error{"regex: " + what + " at offset " + std::to_string(i_)};
  }
  bool at_end() const { return i_ >= p_.size(); }
  char peek() const { return p_[i_]; }

  Result<Expr> alternation(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    std::vector<Expr> alts;
    while (true) {
      auto s = sequence(depth);
      if (!s.ok()) return s;
      alts.push_back(std::move(s.value()));
      if (!at_end() && peek() == '|') {
        ++i_;
        continue;
      }
      break;
    }
    return Expr::alt(std::move(alts));
  }

  Result<Expr> sequence(int depth) {
    std::vector<Expr> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && i_ + 1 == p_.size()) {
        ++i_;
        break;
      }
      auto a = atom(depth);
      if (!a.ok()) return a;
      Expr e = std::move(a.value());
      while (!at_end()) {
        int32_t lo = 0, hi = 0;
        const char q = peek();
        if (q == '*') {
          lo = 0, hi = kUnbounded, ++i_;
        } else if (q == '+') {
          lo = 1, hi = kUnbounded, ++i_;
        } else if (q == '?') {
          lo = 0, hi = 1, ++i_;
        } else if (q == '{' && braces(lo, hi)) {
        } else {
          break;
        }
        if (!at_end() && peek() == '?') ++i_;  // lazy: same language
        if (!at_end() && peek() == '+') return fail("possessive quantifiers are not supported");
        e = Expr::repeat(std::move(e), lo, hi);
      }
      items.push_back(std::move(e));
    }
    return Expr::seq(std::move(items));
  }

  // {n}, {n,}, {n,m}; false (and no input consumed) when it is not a quantifier.
  bool braces(int32_t& lo, int32_t& hi) {
    size_t j = i_ + 1;
    auto number = [&](int32_t& v) {
      const size_t s = j;
      int64_t n = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
        n = std::min<int64_t>(n * 10 + (p_[j] - '0'), 1 << 30);
        ++j;
      }
      v = static_cast<int32_t>(n);
      return j > s;
    };
    if (!number(lo)) return false;
    hi = lo;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(hi)) hi = kUnbounded;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    i_ = j + 1;
    return true;
  }

  Result<uint32_t> code_point() {
    const auto c = static_cast<uint8_t>(p_[i_]);
    int len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (i_ + static_cast<size_t>(len) > p_.size()) return fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(p_[i_ + k]) & 0x3f);
    i_ += static_cast<size_t>(len);
    return cp;
  }

  Result<uint32_t> hex(int n) {
    if (i_ + static_cast<size_t>(n) > p_.size()) return fail("truncated hex escape");
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char h = p_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<uint32_t>(h - 'A' + 10);
      else
        return fail("invalid hex escape");
    }
    return v;
  }

  // An escape after '\'. Sets `set` (class escapes) or returns a code point.
  struct Escape {
    bool is_set = false;
    ByteSet set;
    bool negated = false;  // \D \W \S
    uint32_t cp = 0;
  };
  Result<Escape> escape(bool in_class) {
    if (at_end()) return fail("trailing backslash");
    const char c = p_[i_++];
    Escape e;
    switch (c) {
      case 'd':
        e.is_set = true, e.set = digits();
        return e;
      case 'w':
        e.is_set = true, e.set = word();
        return e;
      case 's':
        e.is_set = true, e.set = space();
        return e;
      case 'D':
        e.is_set = true, e.negated = true, e.set = digits();
        return e;
      case 'W':
        e.is_set = true, e.negated = true, e.set = word();
        return e;
      case 'S':
        e.is_set = true, e.negated = true, e.set = space();
        return e;
      case 'n':
        e.cp = '\n';
        return e;
      case 't':
        e.cp = '\t';
        return e;
      case 'r':
        e.cp = '\r';
        return e;
      case 'f':
        e.cp = '\f';
        return e;
      case 'v':
        e.cp = '\v';
        return e;
      case '0':
        e.cp = 0;
        return e;
      case 'x': {
        auto h = hex(2);
        if (!h.ok()) return h.error();
        e.cp = h.value();
        return e;
      }
      case 'u': {
        auto h = hex(4);
        if (!h.ok()) return h.error();
        if (h.value() >= 0xd800 && h.value() < 0xe000) return fail("surrogate escape");
        e.cp = h.value();
        return e;
      }
      case 'b':
        if (in_class) {
          e.cp = '\b';
          return e;
        }
        return fail("word boundaries (\\b) are not supported");
      case 'B':
        return fail("word boundaries (\\B) are not supported");
      default:
        if (c >= '1' && c <= '9') return fail("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
          return fail(std::string("unsupported escape \\") + c);
        e.cp = static_cast<uint8_t>(c);
        return e;
    }
  }

  static Expr code_point_expr(uint32_t cp) {
    std::string s;
    append_utf8(s, cp);
    return Expr::literal(s);
  }

  Result<Expr> atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (!at_end() && peek() == '?') {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else if (i_ + 2 < p_.size() && (p_[i_ + 1] == 'P' || p_[i_ + 1] == '<') &&
                   p_[i_ + 2] != '=' && p_[i_ + 2] != '!') {
          const size_t close = p_.find('>', i_);
          if (close == std::string_view::npos) return fail("unterminated group name");
          i_ = close + 1;
        } else {
          return fail("lookaround and inline flags are not supported");
        }
      }
      auto e = alternation(depth + 1);
      if (!e.ok()) return e;
      if (at_end() || peek() != ')') return fail("missing ')'");
      ++i_;
      return e;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return dot_expr();
    }
    if (c == '^' || c == '$') return fail("anchors are only supported at the ends");
    if (c == '*' || c == '+' || c == '?') return fail("quantifier without an operand");
    if (c == '\\') {
      ++i_;
      auto e = escape(false);
      if (!e.ok()) return e.error();
      if (!e.value().is_set) return code_point_expr(e.value().cp);
      if (!e.value().negated) return Expr::byteset(e.value().set);
      ByteSet outside = ascii_complement(e.value().set);
      if (e.value().set == space()) return Expr::byteset(outside);  // \S: ASCII only
      return utf8_any_char(e.value().set);
    }
    auto cp = code_point();
    if (!cp.ok()) return cp.error();
    return code_point_expr(cp.value());
  }

  Result<Expr> char_class() {
    ++i_;  // '['
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++i_;
    }
    ByteSet ascii;
    std::vector<uint32_t> wide;
    bool has_space_class = false, first = true;
    while (true) {
      if (at_end()) return fail("unterminated character class");
      if (peek() == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      uint32_t lo = 0;
      if (peek() == '\\') {
        ++i_;
        auto e = escape(true);
        if (!e.ok()) return e.error();
        if (e.value().is_set) {
          if (e.value().negated) {
            if (negated) return fail("negated class escapes inside [^...] are not supported");
            ascii.merge(ascii_complement(e.value().set));
          } else {
            ascii.merge(e.value().set);
            has_space_class |= e.value().set == space();
          }
          continue;
        }
        lo = e.value().cp;
      } else {
        auto cp = code_point();
        if (!cp.ok()) return cp.error();
        lo = cp.value();
      }
      uint32_t hi = lo;
      if (i_ + 1 < p_.size() && peek() == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (peek() == '\\') {
          ++i_;
          auto e = escape(true);
          if (!e.ok()) return e.error();
          if (e.value().is_set) return fail("class escape as a range end");
          hi = e.value().cp;
        } else {
          auto cp = code_point();
          if (!cp.ok()) return cp.error();
          hi = cp.value();
        }
        if (hi < lo) return fail("character range out of order");
      }
      if (hi < 0x80) {
        ascii.set_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
      } else if (lo < 0x80) {
        return fail("character ranges across ASCII and non-ASCII are not supported");
      } else {
        if (hi - lo > 256) return fail("non-ASCII character ranges wider than 256");
        if (negated) return fail("non-ASCII characters in negated classes are not supported");
        for (uint32_t cp = lo; cp <= hi; ++cp) wide.push_back(cp);
      }
    }
    if (negated) {
      if (has_space_class) return Expr::byteset(ascii_complement(ascii));
      return utf8_any_char(ascii);
    }
    std::vector<Expr> alts;
    if (!ascii.empty()) alts.push_back(Expr::byteset(ascii));
    for (uint32_t cp : wide) alts.push_back(code_point_expr(cp));
    if (alts.empty()) return fail("empty character class");
    return Expr::alt(std::move(alts));
  }

  std::string_view p_;
  size_t i_ = 0;
};

}  // namespace

Result<Expr> regex_to_expr(std::string_view pattern) { return Parser(pattern).parse(); }

Expr json_string_escape(const Expr& e) {
  if (e.kind != Expr::Kind::kBytes) {
    Expr out = e;
    for (Expr& item : out.items) item = json_string_escape(item);
    return out;
  }
  ByteSet plain = e.bytes;
  std::vector<Expr> alts;
  static const char* kHex = "0123456789abcdef";
  for (int b = 0; b < 0x20; ++b) {
    if (!e.bytes.test(static_cast<uint8_t>(b))) continue;
    plain.bits[0] &= ~(uint64_t{1} << b);
    switch (b) {
      case '\n':
        alts.push_back(Expr::literal("\\n"));
        break;
      case '\t':
        alts.push_back(Expr::literal("\\t"));
        break;
      case '\r':
        alts.push_back(Expr::literal("\\r"));
        break;
      default: {
        std::string s = "\\u00";
        s += kHex[b >> 4];
        s += kHex[b & 15];
        alts.push_back(Expr::literal(s));
      }
    }
  }
  for (char special : {'"', '\\'}) {
    const auto b = static_cast<uint8_t>(special);
    if (!e.bytes.test(b)) continue;
    plain.bits[b >> 6] &= ~(uint64_t{1} << (b & 63));
    alts.push_back(Expr::literal(std::string("\\") + special));
  }
  if (alts.empty()) return e;
  if (!plain.empty()) alts.insert(alts.begin(), Expr::byteset(plain));
  return Expr::alt(std::move(alts));
}

}  // namespace deepinfer::engine::structured
