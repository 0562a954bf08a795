// Persistent stacks and byte advance of the structured-output pushdown automaton.
#include "engine/structured_stack.h"

#include <algorithm>

namespace deepinfer::engine::structured {

namespace {
constexpr uint64_t kEmptyKey = ~uint64_t{0};
inline size_t slot_of(uint64_t key, size_t mask) {
  return static_cast<size_t>((key * 0x9e3779b97f4a7c15ull) >> 20) & mask;
}
}  // namespace

uint32_t NodeIndex::find(uint64_t key) const {
  if (keys_.empty()) return kMissing;
  const size_t mask = keys_.size() - 1;
  for (size_t i = slot_of(key, mask);; i = (i + 1) & mask) {
    if (keys_[i] == key) return values_[i];
    if (keys_[i] == kEmptyKey) return kMissing;
  }
}

void NodeIndex::grow() {
  std::vector<uint64_t> keys = std::move(keys_);
  std::vector<uint32_t> values = std::move(values_);
  const size_t cap = keys.empty() ? 1024 : keys.size() * 2;
  keys_.assign(cap, kEmptyKey);
  values_.assign(cap, 0);
  touched_.clear();
  size_ = 0;
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] != kEmptyKey) insert(keys[i], values[i]);
}

void NodeIndex::insert(uint64_t key, uint32_t value) {
  if ((size_ + 1) * 2 > keys_.size()) grow();
  const size_t mask = keys_.size() - 1;
  size_t i = slot_of(key, mask);
  while (keys_[i] != kEmptyKey) i = (i + 1) & mask;
  keys_[i] = key;
  values_[i] = value;
  touched_.push_back(static_cast<uint32_t>(i));
  ++size_;
}

void NodeIndex::clear() {
  for (uint32_t i : touched_) keys_[i] = kEmptyKey;
  touched_.clear();
  size_ = 0;
}

uint32_t StackRunner::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
  uint32_t id = index_.find(key);
  if (id != NodeIndex::kMissing) return id;
  NodeIndex& into = scratch_ ? scratch_index_ : index_;
  if (scratch_) {
    id = scratch_index_.find(key);
    if (id != NodeIndex::kMissing) return id;
  }
  id = static_cast<uint32_t>(nodes_.size());
  into.insert(key, id);
  nodes_.push_back({pos, parent});
  stamp_.push_back(0);
  return id;
}

void StackRunner::end_scratch() {
  scratch_index_.clear();
  nodes_.resize(scratch_base_);
  stamp_.resize(scratch_base_);
  scratch_ = false;
}

void StackRunner::clear() {
  nodes_.clear();
  index_.clear();
  scratch_index_.clear();
  stamp_.clear();
  scratch_ = false;
}

void StackRunner::closure(uint32_t node, StackSet& out) {
  work_.clear();
  work_.push_back(node);
  while (!work_.empty()) {
    const uint32_t n = work_.back();
    work_.pop_back();
    if (stamp_[n] == epoch_) continue;
    stamp_[n] = epoch_;
    const Node frame = nodes_[n];
    const Position& p = g_->pos(frame.pos);
    switch (p.kind) {
      case Position::Kind::kBytes:
        out.tops.push_back(n);
        break;
      case Position::Kind::kEnd:
        if (frame.parent == kNoParent) {
          out.finished = true;
        } else {
          work_.push_back(frame.parent);
        }
        break;
      case Position::Kind::kRule: {
        // Tail call: when nothing follows in this alternative, the callee returns straight
        // to our parent.
        const uint32_t cont = g_->pos(p.next).kind == Position::Kind::kEnd
                                  ? frame.parent
                                  : intern(p.next, frame.parent);
        for (uint32_t s : g_->starts(p.arg)) work_.push_back(intern(s, cont));
        break;
      }
    }
  }
}

void StackRunner::start_rule(uint32_t rule, StackSet& out) {
  out.clear();
  if (++epoch_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  for (uint32_t s : g_->starts(rule)) closure(intern(s, kNoParent), out);
}

void StackRunner::start_at(uint32_t pos, StackSet& out) {
  out.clear();
  if (++epoch_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  closure(intern(pos, kNoParent), out);
}

void StackRunner::start_stack(const std::vector<uint32_t>& positions, StackSet& out) {
  out.clear();
  if (++epoch_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  uint32_t node = kNoParent;
  for (uint32_t p : positions) node = intern(p, node);
  closure(node, out);
}

void StackRunner::advance(const StackSet& in, uint8_t b, StackSet& out) {
  out.clear();
  if (++epoch_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  for (uint32_t t : in.tops) {
    const Node frame = nodes_[t];
    const Position& p = g_->pos(frame.pos);
    if (!g_->byteset(p.arg).test(b)) continue;
    closure(intern(p.next, frame.parent), out);
  }
}

ByteSet StackRunner::first_bytes(const StackSet& s) const {
  ByteSet u;
  for (uint32_t t : s.tops) u.merge(g_->byteset(g_->pos(nodes_[t].pos).arg));
  return u;
}

}  // namespace deepinfer::engine::structured
