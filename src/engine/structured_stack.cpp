// Persistent stacks and byte advance of the structured-output pushdown automaton.
#include "engine/structured_stack.h"

namespace deepinfer::engine::structured {

uint32_t StackRunner::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
  auto [it, inserted] = index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    nodes_.push_back({pos, parent});
    stamp_.push_back(0);
  }
  return it->second;
}

void StackRunner::end_scratch() {
  for (size_t i = scratch_base_; i < nodes_.size(); ++i)
    index_.erase((static_cast<uint64_t>(nodes_[i].pos) << 32) | nodes_[i].parent);
  nodes_.resize(scratch_base_);
  stamp_.resize(scratch_base_);
  scratch_ = false;
}

void StackRunner::clear() {
  nodes_.clear();
  index_.clear();
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
