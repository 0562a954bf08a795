// Grammar lowering (expressions → rules → positions), left-recursion check and dump.
#include "engine/structured_grammar.h"

#include <algorithm>
#include <string>

namespace deepinfer::engine::structured {

Expr Expr::literal(std::string_view text) {
  Expr e;
  for (char c : text) e.items.push_back(byte(static_cast<uint8_t>(c)));
  return e;
}

Expr Expr::seq(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.items = std::move(items);
  return e;
}

Expr Expr::alt(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kAlt;
  e.items = std::move(items);
  return e;
}

Expr Expr::repeat(Expr item, int32_t min, int32_t max) {
  Expr e;
  e.kind = Kind::kRepeat;
  e.items.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}

Expr utf8_any_char(const ByteSet& ascii_excluded) {
  ByteSet ascii = ByteSet::range(0x00, 0x7f);
  for (int i = 0; i < 4; ++i) ascii.bits[i] &= ~ascii_excluded.bits[i];
  const ByteSet cont = ByteSet::range(0x80, 0xbf);
  auto b = [](uint8_t lo, uint8_t hi) { return Expr::byteset(ByteSet::range(lo, hi)); };
  auto c = [&] { return Expr::byteset(cont); };
  return Expr::alt({
      Expr::byteset(ascii),
      Expr::seq({b(0xc2, 0xdf), c()}),
      Expr::seq({b(0xe0, 0xe0), b(0xa0, 0xbf), c()}),
      Expr::seq({b(0xe1, 0xec), c(), c()}),
      Expr::seq({b(0xed, 0xed), b(0x80, 0x9f), c()}),
      Expr::seq({b(0xee, 0xef), c(), c()}),
      Expr::seq({b(0xf0, 0xf0), b(0x90, 0xbf), c(), c()}),
      Expr::seq({b(0xf1, 0xf3), c(), c(), c()}),
      Expr::seq({b(0xf4, 0xf4), b(0x80, 0x8f), c(), c()}),
  });
}

Expr utf8_any_char_except_dsml_bar(const ByteSet& ascii_excluded) {
  Expr e = utf8_any_char(ascii_excluded);
  const ByteSet cont = ByteSet::range(0x80, 0xbf);
  auto b = [](uint8_t lo, uint8_t hi) { return Expr::byteset(ByteSet::range(lo, hi)); };
  auto c = [&] { return Expr::byteset(cont); };
  // Replaces the EE..EF lead branch: EE c c | EF 80..BC c | EF BD (80..9B | 9D..BF) | EF BE..BF c.
  ByteSet bd_tail = ByteSet::range(0x80, 0xbf);
  bd_tail.bits[0x9c >> 6] &= ~(uint64_t{1} << (0x9c & 63));
  e.items[5] = Expr::seq({b(0xee, 0xee), c(), c()});
  e.items.push_back(Expr::seq({b(0xef, 0xef), b(0x80, 0xbc), c()}));
  e.items.push_back(Expr::seq({b(0xef, 0xef), b(0xbd, 0xbd), Expr::byteset(bd_tail)}));
  e.items.push_back(Expr::seq({b(0xef, 0xef), b(0xbe, 0xbf), c()}));
  return e;
}

uint32_t Grammar::add_rule(std::string name) {
  rules_.push_back(Rule{std::move(name), {}, false, {}});
  return static_cast<uint32_t>(rules_.size() - 1);
}

void Grammar::define(uint32_t rule, Expr body) {
  rules_[rule].body.clear();
  rules_[rule].body.push_back(std::move(body));
  rules_[rule].defined = true;
}

uint32_t Grammar::intern_bytes(const ByteSet& s) {
  for (size_t i = 0; i < bytesets_.size(); ++i)
    if (bytesets_[i] == s) return static_cast<uint32_t>(i);
  bytesets_.push_back(s);
  return static_cast<uint32_t>(bytesets_.size() - 1);
}

Result<uint32_t> Grammar::helper_rule(uint32_t parent, const Expr& e) {
  const uint32_t r = add_rule(rules_[parent].name + "_" + std::to_string(rules_.size()));
  rules_[r].defined = true;
  Status s = lower_top(r, e);
  if (!s.ok()) return s.error();
  return r;
}

Result<uint32_t> Grammar::repeat_rule(uint32_t parent, const Expr& item, int32_t min, int32_t max) {
  if (min < 0 || (max != kUnbounded && max < min))
    return Error{"invalid repetition bounds {" + std::to_string(min) + "," + std::to_string(max) +
                 "}"};
  if (min > limits_.max_repeat || max > limits_.max_repeat)
    return Error{"repetition bound " + std::to_string(std::max(min, max)) +
                 " exceeds the limit of " + std::to_string(limits_.max_repeat)};
  Expr unit = item;
  const bool inline_loop = max == kUnbounded && min == 0 && item.kind == Expr::Kind::kAlt;
  if (!inline_loop && item.kind != Expr::Kind::kBytes && item.kind != Expr::Kind::kRef) {
    auto r = helper_rule(parent, item);
    if (!r.ok()) return r.error();
    unit = Expr::ref(r.value());
  }
  // Tail: S -> unit S | ε (unbounded) or O_k -> unit O_{k-1} | ε (k = max - min).
  uint32_t tail = 0;
  bool has_tail = false;
  if (max == kUnbounded) {
    tail = add_rule(rules_[parent].name + "_star" + std::to_string(rules_.size()));
    rules_[tail].defined = true;
    // Alternatives are inlined into the loop rule so that a run of them stays in one frame
    // (what the context-independent mask precompute needs to be effective).
    std::vector<Expr> alts;
    if (item.kind == Expr::Kind::kAlt) {
      for (const Expr& a : item.items) alts.push_back(Expr::seq({a, Expr::ref(tail)}));
    } else {
      alts.push_back(Expr::seq({unit, Expr::ref(tail)}));
    }
    alts.push_back(Expr::empty());
    Status s = lower_top(tail, Expr::alt(std::move(alts)));
    if (!s.ok()) return s.error();
    has_tail = true;
  } else {
    for (int32_t k = 1; k <= max - min; ++k) {
      const uint32_t r = add_rule(rules_[parent].name + "_opt" + std::to_string(rules_.size()));
      rules_[r].defined = true;
      Expr body = has_tail ? Expr::seq({unit, Expr::ref(tail)}) : unit;
      Status s = lower_top(r, Expr::alt({std::move(body), Expr::empty()}));
      if (!s.ok()) return s.error();
      tail = r;
      has_tail = true;
    }
  }
  std::vector<Expr> items(static_cast<size_t>(min), unit);
  if (has_tail) items.push_back(Expr::ref(tail));
  if (items.size() == 1 && items[0].kind == Expr::Kind::kRef) return items[0].rule;
  auto r = helper_rule(parent, Expr::seq(std::move(items)));
  return r;
}

Status Grammar::lower_alt(uint32_t rule, const Expr& e, std::vector<Position>& out) {
  auto push = [&](Position p) -> Status {
    if (++elements_ > limits_.max_elements)
      return Error{"grammar too large: more than " + std::to_string(limits_.max_elements) +
                   " elements after expansion"};
    out.push_back(p);
    return Status::Ok();
  };
  switch (e.kind) {
    case Expr::Kind::kBytes:
      return push({Position::Kind::kBytes, intern_bytes(e.bytes), 0});
    case Expr::Kind::kRef:
      if (e.rule >= rules_.size()) return Error{"reference to an unknown rule"};
      return push({Position::Kind::kRule, e.rule, 0});
    case Expr::Kind::kSeq:
      for (const Expr& item : e.items) {
        Status s = lower_alt(rule, item, out);
        if (!s.ok()) return s;
      }
      return Status::Ok();
    case Expr::Kind::kAlt: {
      auto r = helper_rule(rule, e);
      if (!r.ok()) return r.error();
      return push({Position::Kind::kRule, r.value(), 0});
    }
    case Expr::Kind::kRepeat: {
      if (e.min == 1 && e.max == 1) return lower_alt(rule, e.items[0], out);
      if (e.max == 0) return Status::Ok();
      auto r = repeat_rule(rule, e.items[0], e.min, e.max);
      if (!r.ok()) return r.error();
      return push({Position::Kind::kRule, r.value(), 0});
    }
  }
  return Status::Ok();
}

Status Grammar::lower_top(uint32_t rule, const Expr& e) {
  std::vector<std::vector<Position>> alts;
  if (e.kind == Expr::Kind::kAlt) {
    for (const Expr& item : e.items) {
      std::vector<Position> alt;
      Status s = lower_alt(rule, item, alt);
      if (!s.ok()) return s;
      alts.push_back(std::move(alt));
    }
  } else {
    std::vector<Position> alt;
    Status s = lower_alt(rule, e, alt);
    if (!s.ok()) return s;
    alts.push_back(std::move(alt));
  }
  rules_[rule].alts = std::move(alts);
  return Status::Ok();
}

Status Grammar::finalize(uint32_t root) {
  root_ = root;
  const size_t declared = rules_.size();
  for (size_t r = 0; r < declared; ++r) {
    if (!rules_[r].defined) return Error{"rule '" + rules_[r].name + "' is not defined"};
    Expr body = std::move(rules_[r].body[0]);
    rules_[r].body.clear();
    Status s = lower_top(static_cast<uint32_t>(r), body);
    if (!s.ok()) return s;
  }
  Status s = check_left_recursion();
  if (!s.ok()) return s;
  starts_.assign(rules_.size(), {});
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const auto& alt : rules_[r].alts) {
      const auto first = static_cast<uint32_t>(positions_.size());
      starts_[r].push_back(first);
      for (size_t j = 0; j < alt.size(); ++j) {
        Position p = alt[j];
        p.next = first + static_cast<uint32_t>(j + 1);
        positions_.push_back(p);
      }
      positions_.push_back(Position{});  // kEnd
    }
  }
  return Status::Ok();
}

Status Grammar::check_left_recursion() const {
  const size_t n = rules_.size();
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r].alts) {
        bool all = std::all_of(alt.begin(), alt.end(), [&](const Position& p) {
          return p.kind == Position::Kind::kRule && nullable[p.arg];
        });
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // Edges r -> s: s can be expanded at the start of r; `tail` when s is the last element
  // (a tail call replaces the frame, so a cycle of tail calls does not grow the stack).
  struct Edge {
    uint32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : rules_[r].alts)
      for (size_t j = 0; j < alt.size(); ++j) {
        if (alt[j].kind != Position::Kind::kRule) break;
        edges[r].push_back({alt[j].arg, j + 1 == alt.size()});
        if (!nullable[alt[j].arg]) break;
      }
  // Iterative Tarjan SCC.
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<char> on_stack(n, 0);
  std::vector<uint32_t> stack;
  std::vector<std::pair<uint32_t, size_t>> call;
  int32_t counter = 0, comps = 0;
  for (size_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    call.push_back({static_cast<uint32_t>(start), 0});
    while (!call.empty()) {
      auto& [v, i] = call.back();
      if (i == 0 && index[v] < 0) {
        index[v] = low[v] = counter++;
        stack.push_back(v);
        on_stack[v] = 1;
      }
      if (i < edges[v].size()) {
        const uint32_t w = edges[v][i++].to;
        if (index[w] < 0) {
          call.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        while (true) {
          const uint32_t w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = comps;
          if (w == v) break;
        }
        ++comps;
      }
      const uint32_t done = v;
      call.pop_back();
      if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[done]);
    }
  }
  for (size_t r = 0; r < n; ++r)
    for (const Edge& e : edges[r])
      if (!e.tail && comp[e.to] == comp[r])
        return Error{"grammar is left-recursive at rule '" + rules_[r].name + "'"};
  return Status::Ok();
}

std::string Grammar::dump() const {
  std::string out;
  auto hex = [](uint64_t w) {
    static const char* d = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, w >>= 4) s[static_cast<size_t>(i)] = d[w & 15];
    return s;
  };
  for (size_t r = 0; r < rules_.size(); ++r) {
    out += rules_[r].name + " ::=";
    for (size_t a = 0; a < rules_[r].alts.size(); ++a) {
      out += a ? " |" : "";
      for (const Position& p : rules_[r].alts[a]) {
        if (p.kind == Position::Kind::kRule) {
          out += " <" + std::to_string(p.arg) + ">";
        } else {
          out += " [";
          for (uint64_t w : bytesets_[p.arg].bits) out += hex(w);
          out += "]";
        }
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace deepinfer::engine::structured
