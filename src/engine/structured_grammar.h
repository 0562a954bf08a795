// Structured output grammars: an expression tree over byte sets (what regex, JSON Schema and
// GBNF front ends build), its lowering into a context-free grammar of rules, and the flattened
// position table the pushdown matcher runs on. Lowering checks size limits and left recursion.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace deepinfer::engine::structured {

// A set of bytes (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1u; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  void merge(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) bits[i] |= o.bits[i];
  }
  void invert() {
    for (auto& w : bits) w = ~w;
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
  static ByteSet of(uint8_t b) {
    ByteSet s;
    s.set(b);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.set_range(lo, hi);
    return s;
  }
};

inline constexpr int32_t kUnbounded = -1;

// An expression: what front ends build. Ref names a rule of the Grammar by id.
struct Expr {
  enum class Kind { kBytes, kSeq, kAlt, kRef, kRepeat };
  Kind kind = Kind::kSeq;  // an empty kSeq is the empty string
  ByteSet bytes;
  std::vector<Expr> items;  // kSeq / kAlt members; kRepeat: items[0]
  uint32_t rule = 0;
  int32_t min = 0, max = 0;  // kRepeat bounds; max kUnbounded = no limit

  static Expr empty() { return Expr{}; }
  static Expr byteset(const ByteSet& s) {
    Expr e;
    e.kind = Kind::kBytes;
    e.bytes = s;
    return e;
  }
  static Expr byte(uint8_t b) { return byteset(ByteSet::of(b)); }
  static Expr literal(std::string_view text);
  static Expr seq(std::vector<Expr> items);
  static Expr alt(std::vector<Expr> items);
  static Expr ref(uint32_t rule) {
    Expr e;
    e.kind = Kind::kRef;
    e.rule = rule;
    return e;
  }
  static Expr repeat(Expr item, int32_t min, int32_t max);
  static Expr optional(Expr item) { return repeat(std::move(item), 0, 1); }
  static Expr star(Expr item) { return repeat(std::move(item), 0, kUnbounded); }
  static Expr plus(Expr item) { return repeat(std::move(item), 1, kUnbounded); }
};

struct GrammarLimits {
  size_t max_elements = 400000;       // grammar elements after lowering (repetition bounds expand)
  int32_t max_repeat = 10000;         // largest finite repetition bound
  int64_t max_precompute_ms = 20000;  // mask-table precompute budget per grammar
};

// One flattened position: an element of an alternative or the end of one.
struct Position {
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = Kind::kEnd;
  uint32_t arg = 0;   // kBytes: byteset index; kRule: rule id
  uint32_t next = 0;  // position after this element (kBytes / kRule)
};

// A lowered grammar. Rules are added first (so expressions can Ref them, also recursively),
// then defined; finalize() lowers and builds the position table.
class Grammar {
 public:
  explicit Grammar(GrammarLimits limits = {}) : limits_(limits) {}
  uint32_t add_rule(std::string name);
  void define(uint32_t rule, Expr body);
  const std::string& rule_name(uint32_t rule) const { return rules_[rule].name; }
  size_t num_rules() const { return rules_.size(); }
  // Lowers all rules (root = rule `root`), checks limits, undefined rules and left recursion.
  Status finalize(uint32_t root);

  // After finalize():
  uint32_t root() const { return root_; }
  const Position& pos(uint32_t p) const { return positions_[p]; }
  size_t num_positions() const { return positions_.size(); }
  const ByteSet& byteset(uint32_t i) const { return bytesets_[i]; }
  // Start positions of the alternatives of a rule.
  const std::vector<uint32_t>& starts(uint32_t rule) const { return starts_[rule]; }
  const GrammarLimits& limits() const { return limits_; }
  // A text form of the lowered grammar (GBNF-like), for hashing and error messages.
  std::string dump() const;

 private:
  struct Rule {
    std::string name;
    std::vector<Expr> body;  // defined expression (size 1) before lowering
    bool defined = false;
    std::vector<std::vector<Position>> alts;  // lowered: elements (no kEnd)
  };
  Status lower_alt(uint32_t rule, const Expr& e, std::vector<Position>& out);
  Status lower_top(uint32_t rule, const Expr& e);
  Result<uint32_t> helper_rule(uint32_t parent, const Expr& e);
  Result<uint32_t> repeat_rule(uint32_t parent, const Expr& item, int32_t min, int32_t max);
  uint32_t intern_bytes(const ByteSet& s);
  Status check_left_recursion() const;

  GrammarLimits limits_;
  std::vector<Rule> rules_;
  std::vector<ByteSet> bytesets_;
  std::vector<Position> positions_;
  std::vector<std::vector<uint32_t>> starts_;
  size_t elements_ = 0;
  uint32_t root_ = 0;
};

// Parses a GBNF grammar (llama.cpp style: `name ::= alternatives`, "literals", [classes],
// [^negated], ( groups ), * + ? {m,n}, # comments; root rule `root`). Errors name the line.
Result<std::unique_ptr<Grammar>> parse_gbnf(std::string_view text, GrammarLimits limits = {});

// UTF-8 helpers for front ends: any one code point (valid UTF-8, no surrogates), optionally
// excluding a set of ASCII bytes.
Expr utf8_any_char(const ByteSet& ascii_excluded);
// The same without U+FF5C (EF BD 9C), the bar of the DSML marker spelled as text.
Expr utf8_any_char_except_dsml_bar(const ByteSet& ascii_excluded);

}  // namespace deepinfer::engine::structured
