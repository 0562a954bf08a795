// Token trie, per-position precompute and the per-step mask of structured output.
#include "engine/structured_mask.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>

#include "tokenizer/tokenizer.h"

namespace deepinfer::engine::structured {
namespace {

// Above this many accepted tokens a position keeps a full bitmask instead of an id list.
constexpr size_t kDenseThreshold = 2048;
constexpr size_t kMaskCacheSize = 8;
constexpr size_t kMergedCacheSize = 256;

}  // namespace

std::shared_ptr<const TokenTable> TokenTable::from_tokenizer(const tokenizer::Tokenizer& tok) {
  std::vector<std::string> tokens(tok.vocab_size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto id = static_cast<tokenizer::TokenId>(i);
    if (!tok.has_token(id) || tok.is_added(id) || tok.is_special(id)) continue;
    const std::string_view b = tok.token_bytes(id);
    // Bytes F8..FF never occur in UTF-8 text; they stand for special tokens here.
    if (std::any_of(b.begin(), b.end(), [](char c) { return static_cast<uint8_t>(c) >= 0xf8; }))
      continue;
    tokens[i] = std::string(b);
  }
  for (const auto& [spelling, byte] :
       {std::pair<std::string_view, uint8_t>{kDsmlSpelling, kDsmlByte},
        std::pair<std::string_view, uint8_t>{"</think>", kThinkEndByte}}) {
    const int32_t id = tok.added_token_id(spelling);
    if (id >= 0 && static_cast<size_t>(id) < tokens.size())
      tokens[static_cast<size_t>(id)] = std::string(1, static_cast<char>(byte));
  }
  return from_bytes(tokens);
}

std::shared_ptr<const TokenTable> TokenTable::from_bytes(const std::vector<std::string>& tokens) {
  auto t = std::make_shared<TokenTable>();
  t->vocab_size_ = tokens.size();
  t->offsets_.reserve(tokens.size() + 1);
  t->offsets_.push_back(0);
  for (const std::string& s : tokens) {
    t->blob_ += s;
    t->offsets_.push_back(static_cast<uint32_t>(t->blob_.size()));
  }
  t->build();
  return t;
}

void TokenTable::build() {
  for (size_t i = 0; i < vocab_size_; ++i)
    if (offsets_[i + 1] > offsets_[i]) sorted_.push_back(static_cast<int32_t>(i));
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    const auto x = bytes(a), y = bytes(b);
    return x != y ? x < y : a < b;
  });
  for (int32_t id : sorted_) max_len_ = std::max(max_len_, bytes(id).size());
  trie_.push_back(TrieNode{0, 0, 0, static_cast<uint32_t>(sorted_.size()), 0, 0});
  std::vector<std::pair<uint32_t, uint32_t>> stack{{0, 0}};  // node, depth
  while (!stack.empty()) {
    const auto [n, depth] = stack.back();
    stack.pop_back();
    uint32_t i = trie_[n].lo;
    const uint32_t hi = trie_[n].hi;
    while (i < hi && bytes(sorted_[i]).size() == depth) ++i;
    trie_[n].end_hi = i;
    const auto child_begin = static_cast<uint32_t>(trie_.size());
    while (i < hi) {
      const auto b = static_cast<uint8_t>(bytes(sorted_[i])[depth]);
      uint32_t j = i;
      while (j < hi && static_cast<uint8_t>(bytes(sorted_[j])[depth]) == b) ++j;
      trie_.push_back(TrieNode{0, 0, i, j, i, b});
      i = j;
    }
    trie_[n].child_begin = child_begin;
    trie_[n].child_end = static_cast<uint32_t>(trie_.size());
    for (uint32_t c = child_begin; c < trie_[n].child_end; ++c) stack.push_back({c, depth + 1});
  }
  fingerprint_ = XXH3_64bits(blob_.data(), blob_.size()) ^
                 XXH3_64bits(offsets_.data(), offsets_.size() * sizeof(uint32_t));
}

namespace {

// FOLLOW sets: per rule, the bytes that can come right after it ends (in any context); a
// token whose path leaves the context before a byte outside FOLLOW is rejected statically.
// Callers: a rule with a single call site has a known continuation, so the precompute can
// look through its end (most helper rules of regexes and schemas have one call site).
struct GrammarInfo {
  std::vector<ByteSet> follow;                 // per rule
  std::vector<uint32_t> rule_of;               // per position
  std::vector<std::vector<uint32_t>> callers;  // per rule: positions that call it
};

GrammarInfo grammar_info(const Grammar& g) {
  const size_t n = g.num_rules();
  std::vector<char> nullable(n, 0);
  std::vector<ByteSet> first(n), follow(n);
  auto alt_end = [&](uint32_t p) {
    while (g.pos(p).kind != Position::Kind::kEnd) ++p;
    return p;
  };
  // FIRST of the suffix starting at p; returns whether it is nullable.
  auto suffix_first = [&](uint32_t p, ByteSet& out) {
    for (;; ++p) {
      const Position& q = g.pos(p);
      if (q.kind == Position::Kind::kEnd) return true;
      if (q.kind == Position::Kind::kBytes) {
        out.merge(g.byteset(q.arg));
        return false;
      }
      out.merge(first[q.arg]);
      if (!nullable[q.arg]) return false;
    }
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n; ++r) {
      for (uint32_t start : g.starts(r)) {
        ByteSet f = first[r];
        const bool nul = suffix_first(start, f);
        if (!(f == first[r])) first[r] = f, changed = true;
        if (nul && !nullable[r]) nullable[r] = 1, changed = true;
      }
    }
  }
  std::vector<uint32_t> rule_of(g.num_positions(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n; ++r) {
      for (uint32_t start : g.starts(r)) {
        const uint32_t end = alt_end(start);
        for (uint32_t p = start; p <= end; ++p) {
          rule_of[p] = r;
          const Position& q = g.pos(p);
          if (q.kind != Position::Kind::kRule) continue;
          ByteSet f = follow[q.arg];
          if (suffix_first(p + 1, f)) f.merge(follow[r]);
          if (!(f == follow[q.arg])) follow[q.arg] = f, changed = true;
        }
      }
    }
  }
  GrammarInfo info;
  info.callers.resize(n);
  for (uint32_t p = 0; p < g.num_positions(); ++p)
    if (g.pos(p).kind == Position::Kind::kRule) info.callers[g.pos(p).arg].push_back(p);
  info.follow = std::move(follow);
  info.rule_of = std::move(rule_of);
  return info;
}

// Classifies every token for one start position: 2 accepted, 1 depends on the stack below.
class Precompute {
 public:
  Precompute(const Grammar& g, const TokenTable& v, std::vector<uint8_t>& flags)
      : runner_(g),
        vocab_(v),
        flags_(flags),
        levels_(v.max_len() + 2),
        g_(g),
        info_(grammar_info(g)) {}

  Status run(uint32_t pos, std::chrono::steady_clock::time_point deadline, int64_t limit_ms) {
    if (runner_.num_nodes() > (1u << 20)) runner_.clear();
    deadline_ = deadline;
    limit_ms_ = limit_ms;
    // The frames below `pos` that every stack with `pos` on top has: walk up through rules
    // with a single call site (a tail call adds no frame).
    frames_.clear();
    uint32_t rule = info_.rule_of[pos];
    for (int hops = 0; hops < 64; ++hops) {
      const auto& callers = info_.callers[rule];
      if (callers.size() != 1 || rule == g_.root()) break;
      const uint32_t site = callers[0];
      const uint32_t next = g_.pos(site).next;
      if (g_.pos(next).kind != Position::Kind::kEnd) frames_.push_back(next);
      rule = info_.rule_of[site];
    }
    follow_now_ = &info_.follow[rule];
    std::reverse(frames_.begin(), frames_.end());
    frames_.push_back(pos);
    runner_.start_stack(frames_, levels_[0]);
    return dfs(0, 0);
  }

 private:
  Status dfs(uint32_t node, size_t d) {
    const auto& trie = vocab_.trie();
    const TokenTable::TrieNode& n = trie[node];
    const StackSet& s = levels_[d];
    const ByteSet fb = runner_.first_bytes(s);
    if ((++visits_ & 4095) == 0 && std::chrono::steady_clock::now() > deadline_)
      return Error{"grammar compilation exceeded the time limit of " + std::to_string(limit_ms_) +
                   " ms"};
    for (uint32_t c = n.child_begin; c < n.child_end; ++c) {
      const TokenTable::TrieNode& ch = trie[c];
      if (s.finished && follow_now_->test(ch.byte))
        for (uint32_t i = ch.lo; i < ch.hi; ++i) flags_[i] = std::max<uint8_t>(flags_[i], 1);
      if (!fb.test(ch.byte)) continue;
      runner_.advance(s, ch.byte, levels_[d + 1]);
      if (!levels_[d + 1].alive()) continue;
      for (uint32_t i = ch.lo; i < ch.end_hi; ++i) flags_[i] = 2;
      if (ch.child_begin < ch.child_end && !levels_[d + 1].tops.empty()) {
        Status st = dfs(c, d + 1);
        if (!st.ok()) return st;
      } else if (levels_[d + 1].finished) {
        for (uint32_t k = ch.child_begin; k < ch.child_end; ++k) {
          if (!follow_now_->test(trie[k].byte)) continue;
          for (uint32_t i = trie[k].lo; i < trie[k].hi; ++i)
            flags_[i] = std::max<uint8_t>(flags_[i], 1);
        }
      }
    }
    return Status::Ok();
  }

  StackRunner runner_;
  const TokenTable& vocab_;
  std::vector<uint8_t>& flags_;
  std::vector<StackSet> levels_;
  const Grammar& g_;
  GrammarInfo info_;
  std::vector<uint32_t> frames_;
  const ByteSet* follow_now_ = nullptr;
  std::chrono::steady_clock::time_point deadline_;
  int64_t limit_ms_ = 0;
  uint64_t visits_ = 0;
};

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::compile(
    std::unique_ptr<Grammar> grammar, std::shared_ptr<const TokenTable> vocab) {
  auto out = std::shared_ptr<CompiledGrammar>(new CompiledGrammar());
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t limit_ms = grammar->limits().max_precompute_ms;
  const auto deadline = t0 + std::chrono::milliseconds(limit_ms);
  const Grammar& g = *grammar;
  const TokenTable& v = *vocab;
  out->table_index_.assign(g.num_positions(), -1);
  std::vector<uint8_t> flags(v.num_sorted(), 0);
  Precompute pre(g, v, flags);
  for (uint32_t p = 0; p < g.num_positions(); ++p) {
    if (g.pos(p).kind != Position::Kind::kBytes) continue;
    std::fill(flags.begin(), flags.end(), 0);
    Status s = pre.run(p, deadline, limit_ms);
    if (!s.ok()) return s.error();
    PosTable t;
    size_t accepted = 0;
    for (uint8_t f : flags) accepted += f == 2;
    if (accepted > kDenseThreshold) t.accepted_bits.assign(mask_words(v.vocab_size()), 0);
    for (uint32_t i = 0; i < flags.size(); ++i) {
      if (flags[i] == 1) t.uncertain.push_back(i);
      if (flags[i] != 2) continue;
      const int32_t id = v.sorted_id(i);
      if (t.accepted_bits.empty()) {
        t.accepted_ids.push_back(id);
      } else {
        t.accepted_bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      }
    }
    out->stats_.uncertain_total += t.uncertain.size();
    out->table_index_[p] = static_cast<int32_t>(out->tables_.size());
    out->tables_.push_back(std::move(t));
  }
  out->stats_.byte_positions = out->tables_.size();
  out->stats_.precompute_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out->grammar_ = std::move(grammar);
  out->vocab_ = std::move(vocab);
  out->compute_remaining();
  return std::shared_ptr<const CompiledGrammar>(std::move(out));
}

void CompiledGrammar::compute_remaining() {
  const Grammar& g = *grammar_;
  constexpr uint32_t kInf = 0x3fffffff;
  std::vector<uint32_t> min_len(g.num_rules(), kInf);
  remaining_.assign(g.num_positions(), kInf);
  // Fixpoint over rules; within an alternative, remaining(p) = cost(p) + remaining(next).
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < g.num_rules(); ++r) {
      for (uint32_t start : g.starts(r)) {
        uint32_t end = start;
        while (g.pos(end).kind != Position::Kind::kEnd) ++end;
        remaining_[end] = 0;
        for (uint32_t p = end; p-- > start;) {
          const Position& q = g.pos(p);
          const uint32_t cost = q.kind == Position::Kind::kBytes ? 1 : min_len[q.arg];
          remaining_[p] = std::min(kInf, cost + remaining_[p + 1]);
        }
        if (remaining_[start] < min_len[r]) {
          min_len[r] = remaining_[start];
          changed = true;
        }
      }
    }
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                               std::vector<int32_t> end_tokens)
    : g_(std::move(grammar)),
      end_tokens_(std::move(end_tokens)),
      runner_(g_->grammar()),
      levels_(g_->vocab().max_len() + 2) {
  reset();
}

void GrammarMatcher::reset() {
  runner_.clear();
  mask_cache_.clear();
  runner_.start_rule(g_->grammar().root(), state_);
  terminated_ = false;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return false;
  levels_[0] = state_;
  size_t k = 0;
  for (char c : bytes) {
    StackSet& next = levels_[(k + 1) & 1];
    runner_.advance(levels_[k & 1], static_cast<uint8_t>(c), next);
    if (!next.alive()) return false;
    ++k;
  }
  state_ = levels_[k & 1];
  return true;
}

bool GrammarMatcher::accept(int32_t token) {
  if (terminated_ || token < 0) return false;
  if (std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end()) {
    if (!state_.finished) return false;
    terminated_ = true;
    return true;
  }
  if (static_cast<size_t>(token) >= g_->vocab().vocab_size()) return false;
  const std::string_view b = g_->vocab().bytes(token);
  if (b.empty()) return false;
  return accept_bytes(b);
}

uint32_t GrammarMatcher::stack_cost(uint32_t node) const {
  uint64_t cost = 0;
  for (uint32_t n = node; n != kNoParent; n = runner_.parent(n))
    cost += g_->remaining(runner_.top_pos(n));
  return static_cast<uint32_t>(std::min<uint64_t>(cost, 0xffffffffu));
}

uint32_t GrammarMatcher::min_remaining() const {
  if (state_.finished || terminated_) return 0;
  uint32_t best = 0xffffffffu;
  for (uint32_t t : state_.tops) best = std::min(best, stack_cost(t));
  return best;
}

ByteSet GrammarMatcher::shortest_completion_bytes() const {
  ByteSet out;
  if (terminated_) return out;
  const uint32_t best = min_remaining();
  for (uint32_t t : state_.tops)
    if (stack_cost(t) == best)
      out.merge(g_->grammar().byteset(g_->grammar().pos(runner_.top_pos(t)).arg));
  return out;
}

bool GrammarMatcher::check(uint32_t sorted_index, size_t& depth_valid) {
  const std::string_view b = g_->vocab().bytes(g_->vocab().sorted_id(sorted_index));
  size_t d = 0;
  const size_t limit = std::min({depth_valid, prev_.size(), b.size()});
  while (d < limit && prev_[d] == b[d]) ++d;
  prev_ = b;
  for (; d < b.size(); ++d) {
    if (levels_[d].tops.empty()) {
      depth_valid = d;
      return false;
    }
    runner_.advance(levels_[d], static_cast<uint8_t>(b[d]), levels_[d + 1]);
  }
  depth_valid = d;
  return levels_[d].alive();
}

std::shared_ptr<const CompiledGrammar::Merged> CompiledGrammar::merged(
    const std::vector<uint32_t>& positions) const {
  std::lock_guard<std::mutex> lock(merged_mu_);
  for (const auto& [key, m] : merged_)
    if (key == positions) return m;
  if (merged_.size() >= kMergedCacheSize) merged_.clear();
  auto m = std::make_shared<Merged>();
  m->accepted.assign(mask_words(vocab_->vocab_size()), 0);
  for (uint32_t p : positions) {
    const PosTable* tbl = table(p);
    if (tbl == nullptr) continue;
    if (!tbl->accepted_bits.empty()) {
      for (size_t w = 0; w < m->accepted.size(); ++w) m->accepted[w] |= tbl->accepted_bits[w];
    } else {
      for (int32_t id : tbl->accepted_ids)
        m->accepted[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    m->uncertain.insert(m->uncertain.end(), tbl->uncertain.begin(), tbl->uncertain.end());
  }
  std::sort(m->uncertain.begin(), m->uncertain.end());
  m->uncertain.erase(std::unique(m->uncertain.begin(), m->uncertain.end()), m->uncertain.end());
  // Tokens accepted by one position need no check for the others.
  std::erase_if(m->uncertain,
                [&](uint32_t u) { return mask_test(m->accepted, vocab_->sorted_id(u)); });
  merged_.emplace_back(positions, m);
  return m;
}

void GrammarMatcher::fill_mask(std::span<uint64_t> mask) {
  auto allow_end = [&] {
    for (int32_t t : end_tokens_)
      if (t >= 0 && static_cast<size_t>(t) < mask.size() * 64)
        mask[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  };
  if (terminated_ || !state_.alive()) {
    std::fill(mask.begin(), mask.end(), 0);
    allow_end();
    return;
  }
  for (CachedMask& c : mask_cache_) {
    if (c.finished == state_.finished && c.tops == state_.tops && c.mask.size() == mask.size()) {
      std::copy(c.mask.begin(), c.mask.end(), mask.begin());
      c.stamp = ++clock_;
      return;
    }
  }
  seen_pos_.clear();
  for (uint32_t t : state_.tops) seen_pos_.push_back(runner_.top_pos(t));
  std::sort(seen_pos_.begin(), seen_pos_.end());
  seen_pos_.erase(std::unique(seen_pos_.begin(), seen_pos_.end()), seen_pos_.end());
  std::span<const uint32_t> uncertain;
  if (seen_pos_.size() == 1) {
    std::fill(mask.begin(), mask.end(), 0);
    const CompiledGrammar::PosTable* tbl = g_->table(seen_pos_[0]);
    if (tbl != nullptr) {
      if (!tbl->accepted_bits.empty()) {
        std::copy(tbl->accepted_bits.begin(), tbl->accepted_bits.end(), mask.begin());
      } else {
        for (int32_t id : tbl->accepted_ids)
          mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
      }
      uncertain = tbl->uncertain;
    }
  } else {
    merged_now_ = g_->merged(seen_pos_);
    std::copy(merged_now_->accepted.begin(), merged_now_->accepted.end(), mask.begin());
    uncertain = merged_now_->uncertain;
  }
  if (state_.finished) allow_end();
  if (!uncertain.empty()) {
    runner_.begin_scratch();
    levels_[0] = state_;
    prev_ = {};
    size_t depth_valid = 0;
    for (uint32_t u : uncertain) {
      const int32_t id = g_->vocab().sorted_id(u);
      if (mask_test(mask, id)) continue;
      if (check(u, depth_valid)) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
    }
    runner_.end_scratch();
  }
  CachedMask* slot = nullptr;
  if (mask_cache_.size() < kMaskCacheSize) {
    slot = &mask_cache_.emplace_back();
  } else {
    slot = &*std::min_element(
        mask_cache_.begin(), mask_cache_.end(),
        [](const CachedMask& a, const CachedMask& b) { return a.stamp < b.stamp; });
  }
  slot->tops = state_.tops;
  slot->finished = state_.finished;
  slot->stamp = ++clock_;
  slot->mask.assign(mask.begin(), mask.end());
}

}  // namespace deepinfer::engine::structured
