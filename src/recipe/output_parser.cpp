// StreamProcessor (api spec §6): Start/Finish, usage and finish-reason resolution around the
// stage machine (output_stage_machine.h) and the segment applier (output_segments.h).
#include "recipe/output_parser.h"

namespace deepinfer::recipe {

StreamProcessor::StreamProcessor(const ParsingOptions& options) : machine_(options) {}

bool StreamProcessor::process(const InferenceChunk& chunk, OutputSink& sink) {
  if (done_) return false;
  switch (chunk.kind) {
    case InferenceChunk::Kind::Ready:
      if (!started_) {
        system_fingerprint_ = chunk.system_fingerprint;
        usage_.prompt_tokens = chunk.prompt_tokens;
        usage_.prompt_cache_hit_tokens = chunk.prompt_cache_hit_tokens;
        start(sink);
      }
      return true;
    case InferenceChunk::Kind::Text:
      return process_text(chunk, sink);
    case InferenceChunk::Kind::Finish:
      finish(sink, chunk.finish);
      return false;
  }
  return true;
}

bool StreamProcessor::process_text(const InferenceChunk& chunk, OutputSink& sink) {
  if (!started_) start(sink);
  usage_.completion_tokens += chunk.content_tokens;
  const bool drained = applier_.drained();
  OutputAction action;
  if (drained && !chunk.content.empty() && machine_.feed_unmarked(chunk.content, &action)) {
    applier_.apply_whole_run(sink, action, chunk.content);  // no byte that could begin a marker
    return true;
  }
  std::string_view rest = chunk.content;
  segments_.clear();
  rest.remove_prefix(machine_.feed(rest, segments_));
  if (drained && rest.empty() && segments_.size == 1 &&
      segments_.items[0].length == chunk.content.size()) {
    // Nothing queued before and the whole chunk is one run.
    applier_.apply_whole_run(sink, segments_.items[0].action, chunk.content);
  } else {
    applier_.begin(sink, chunk.content);
    applier_.apply(segments_);
    while (!rest.empty()) {
      segments_.clear();
      rest.remove_prefix(machine_.feed(rest, segments_));
      applier_.apply(segments_);
    }
    applier_.end();
  }
  if (applier_.stop_sequence_matched()) {
    finish(sink, std::nullopt);
    return false;
  }
  return true;
}

void StreamProcessor::end_of_stream(OutputSink& sink) {
  if (!done_) finish(sink, std::nullopt);
}

void StreamProcessor::start(OutputSink& sink) {
  started_ = true;
  OutputChunk chunk;
  chunk.kind = OutputChunk::Kind::Start;
  chunk.system_fingerprint = &system_fingerprint_;
  chunk.usage = usage_;
  sink.on_output(chunk);
}

void StreamProcessor::finish(OutputSink& sink, std::optional<BackendFinish> backend) {
  done_ = true;
  if (!started_) start(sink);
  applier_.begin_final(sink);
  segments_.clear();
  machine_.finish(segments_);
  applier_.apply(segments_);
  applier_.end();

  OutputChunk chunk;
  chunk.kind = OutputChunk::Kind::Finish;
  chunk.system_fingerprint = &system_fingerprint_;
  chunk.usage = usage_;
  if (applier_.stop_sequence_matched()) {
    chunk.finish_reason = FinishReason::StopSequence;
    chunk.stop_sequence = applier_.stop_sequence();
  } else if (!backend) {
    chunk.finish_reason = FinishReason::EndOfStream;
  } else {
    switch (*backend) {
      case BackendFinish::Stop:
        chunk.finish_reason =
            applier_.has_tool_calls() ? FinishReason::ToolCalls : FinishReason::Stop;
        break;
      case BackendFinish::Length:
        chunk.finish_reason = FinishReason::Length;
        break;
      case BackendFinish::ContentFilter:
        chunk.finish_reason = FinishReason::ContentFilter;
        break;
    }
  }
  sink.on_output(chunk);
}

}  // namespace deepinfer::recipe
