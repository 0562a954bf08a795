// From stage-machine segments to typed OutputChunks (encoding spec §4.5): keeps the input chunks
// in a FIFO, merges runs of one action and pops them as whole chunks where they fit, with the
// de-duplication of markers popped in pieces. Buffers are reused: no allocation per byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/output_stage_machine.h"

namespace deepinfer::recipe {

class OutputSink;

class OutputSegmentApplier {
 public:
  OutputSegmentApplier();

  // Appends one input chunk to the FIFO and routes output to `sink` until end(); `text` must
  // stay valid until end() (what is still unpopped then is copied).
  void begin(OutputSink& sink, std::string_view text);
  // Routes output to `sink` without a new chunk (for the stage machine's finish()).
  void begin_final(OutputSink& sink);
  // Merges the batch into the pending run, popping runs whose action ended.
  void apply(const SegmentBatch& batch);
  // Applies the pending run as far as whole chunks fit; keeps the rest for the next chunk.
  void end();

  // True when every queued byte has been popped.
  bool drained() const { return head_ == ends_.size() && stash_.empty(); }
  // Fast path for a drained FIFO: `text` is one whole run of `action` (what begin(), the
  // segment (action, text.size()) and end() would do). `text` must not be empty.
  void apply_whole_run(OutputSink& sink, OutputAction action, std::string_view text);

  bool stop_sequence_matched() const { return stop_matched_; }
  std::string_view stop_sequence() const { return stop_sequence_; }
  bool has_tool_calls() const { return has_tool_calls_; }

 private:
  void apply_whole_chunks();
  void pop(OutputAction action, size_t length);
  void emit(OutputAction action, std::string_view text);

  OutputSink* sink_ = nullptr;

  // The FIFO, as positions in the concatenated input: chunk i ends at ends_[i]; the front chunk
  // is [front_, ends_[head_]). Bytes before view_begin_ live in stash_, the rest in view_.
  std::vector<uint64_t> ends_;
  size_t head_ = 0;
  uint64_t front_ = 0;
  std::string stash_;
  uint64_t stash_begin_ = 0;
  std::string_view view_;
  uint64_t view_begin_ = 0;
  bool has_view_ = false;

  bool has_pending_ = false;  // the merged run not yet popped
  OutputAction pending_action_ = OutputAction::Skip;
  size_t pending_length_ = 0;

  OutputAction last_pop_ = OutputAction::Skip;
  std::string tool_name_;
  std::string escaped_;
  std::string stop_sequence_;
  bool stop_matched_ = false;
  bool has_tool_calls_ = false;
};

}  // namespace deepinfer::recipe
