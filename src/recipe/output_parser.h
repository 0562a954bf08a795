// The incremental output parser (encoding spec §4) and the StreamProcessor that turns backend
// InferenceChunks into typed OutputChunks (api spec §6). Results are identical for every split
// of the output into chunks; no allocation per byte.
#pragma once

#include "recipe/conversation.h"
#include "recipe/output_chunk.h"

namespace deepinfer::recipe {

class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // chunk.text (and other views) are valid only during this call.
  virtual void on_output(const OutputChunk& chunk) = 0;
};

// (Implemented in output_parser.cpp; the class layout below is the contract, the private
// state is the implementer's.)
class StreamProcessor;

}  // namespace deepinfer::recipe
