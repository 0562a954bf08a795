// The incremental output parser (encoding spec §4) and the StreamProcessor that turns backend
// InferenceChunks into typed OutputChunks (api spec §6). Results are identical for every split
// of the output into chunks; no allocation per byte.
#pragma once

#include <optional>
#include <string>

#include "recipe/conversation.h"
#include "recipe/output_chunk.h"
#include "recipe/output_segments.h"
#include "recipe/output_stage_machine.h"

namespace deepinfer::recipe {

class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // chunk.text (and other views) are valid only during this call.
  virtual void on_output(const OutputChunk& chunk) = 0;
};

// One per response. Emits Start (on the first Ready, or with zero usage when text comes first),
// the parsed chunks, and one Finish whose usage holds the prompt side and Σ content_tokens.
class StreamProcessor {
 public:
  explicit StreamProcessor(const ParsingOptions& options);

  // Processes one backend chunk, emitting OutputChunks to sink. Returns false once the stream
  // is finished (Finish processed or a stop sequence matched); later chunks are ignored.
  bool process(const InferenceChunk& chunk, OutputSink& sink);
  // The source ended: emits Finish(EndOfStream) unless already finished.
  void end_of_stream(OutputSink& sink);
  bool finished() const { return done_; }

 private:
  void start(OutputSink& sink);
  bool process_text(const InferenceChunk& chunk, OutputSink& sink);
  void finish(OutputSink& sink, std::optional<BackendFinish> backend);

  OutputStageMachine machine_;
  OutputSegmentApplier applier_;
  SegmentBatch segments_;
  std::optional<std::string> system_fingerprint_;
  Usage usage_;
  bool started_ = false;
  bool done_ = false;
};

}  // namespace deepinfer::recipe
