// The pushdown automaton over a lowered Grammar: hash-consed persistent stacks (a frame is a
// grammar position plus its parent frame), epsilon closure with tail calls, and one-byte
// advance of a set of stacks. Speculative work (mask checks) runs in a scratch region that is
// dropped afterwards, so memory grows only with accepted bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/structured_grammar.h"

namespace deepinfer::engine::structured {

inline constexpr uint32_t kNoParent = 0xffffffffu;

// A set of stacks whose top frames sit on byte positions, plus whether the root rule can end
// here (`finished`). With a bottom frame other than the root, `finished` means "popped out".
struct StackSet {
  std::vector<uint32_t> tops;
  bool finished = false;
  void clear() {
    tops.clear();
    finished = false;
  }
  bool alive() const { return finished || !tops.empty(); }
};

// Open-addressing map from 64-bit keys to node ids (no erase; clear() forgets the touched
// slots only).
class NodeIndex {
 public:
  static constexpr uint32_t kMissing = 0xffffffffu;
  uint32_t find(uint64_t key) const;
  void insert(uint64_t key, uint32_t value);
  void clear();
  size_t size() const { return size_; }

 private:
  void grow();
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> values_;
  std::vector<uint32_t> touched_;
  size_t size_ = 0;
};

class StackRunner {
 public:
  explicit StackRunner(const Grammar& g) : g_(&g) {}

  // Stacks at the start of `rule` (bottom frame has no parent).
  void start_rule(uint32_t rule, StackSet& out);
  // Stacks for one frame at byte position `pos` with no parent.
  void start_at(uint32_t pos, StackSet& out);
  // Stacks for the frames `positions` (bottom first; the last one is the top).
  void start_stack(const std::vector<uint32_t>& positions, StackSet& out);
  // Consumes byte `b`; `out` must differ from `in`.
  void advance(const StackSet& in, uint8_t b, StackSet& out);
  // Union of the bytes the tops accept.
  ByteSet first_bytes(const StackSet& s) const;
  uint32_t top_pos(uint32_t node) const { return nodes_[node].pos; }
  uint32_t parent(uint32_t node) const { return nodes_[node].parent; }

  // Scratch region: nodes interned between begin and end are discarded at end.
  void begin_scratch() {
    scratch_base_ = nodes_.size();
    scratch_ = true;
  }
  void end_scratch();
  void clear();
  size_t num_nodes() const { return nodes_.size(); }

 private:
  struct Node {
    uint32_t pos;
    uint32_t parent;
  };
  uint32_t intern(uint32_t pos, uint32_t parent);
  void closure(uint32_t node, StackSet& out);

  const Grammar* g_;
  std::vector<Node> nodes_;
  NodeIndex index_, scratch_index_;
  std::vector<uint32_t> stamp_;
  std::vector<uint32_t> work_;
  uint32_t epoch_ = 0;
  bool scratch_ = false;
  size_t scratch_base_ = 0;
};

}  // namespace deepinfer::engine::structured
