// Anthropic Messages events (api spec §9).
#include "recipe/json_writer.h"
#include "recipe/stream_events.h"

namespace deepinfer::recipe {

std::string_view messages_stop_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::Length:
      return "max_tokens";
    case FinishReason::StopSequence:
      return "stop_sequence";
    case FinishReason::ToolCalls:
      return "tool_use";
    case FinishReason::ContentFilter:
      return "refusal";
    case FinishReason::Stop:
    case FinishReason::EndOfStream:
      break;
  }
  return "end_turn";
}

MessagesEventGenerator::MessagesEventGenerator(EventOptions options, EventSink& sink)
    : options_(std::move(options)), sink_(sink) {
  if (!options_.signature) options_.signature = options_.id;
}

void MessagesEventGenerator::emit(std::string_view type) { sink_.on_event(type, buf_); }

void MessagesEventGenerator::write_usage(const Usage& prompt, int64_t completion_tokens) {
  const int64_t p = prompt.prompt_tokens;
  const int64_t h = prompt.prompt_cache_hit_tokens;
  JsonWriter w(buf_);
  w.raw("{\"input_tokens\":").num(p > h ? p - h : 0);
  w.raw(",\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":").num(h);
  w.raw(",\"output_tokens\":").num(completion_tokens).raw(",\"service_tier\":\"standard\"}");
}

void MessagesEventGenerator::delta(std::string_view type, std::string_view field,
                                   std::string_view text) {
  buf_.clear();
  JsonWriter w(buf_);
  w.raw("{\"type\":\"content_block_delta\",\"index\":").num(index_);
  w.raw(",\"delta\":{\"type\":\"").raw(type).raw("\",\"").raw(field).raw("\":").str(text);
  w.raw("}}");
  emit("content_block_delta");
}

void MessagesEventGenerator::close_block() {
  if (active_ == Block::None) return;
  if (active_ == Block::Thinking) delta("signature_delta", "signature", *options_.signature);
  active_ = Block::None;
  buf_.clear();
  JsonWriter(buf_).raw("{\"type\":\"content_block_stop\",\"index\":").num(index_).raw("}");
  emit("content_block_stop");
  ++index_;
}

void MessagesEventGenerator::open_block(Block kind, std::string_view tool_name) {
  close_block();
  buf_.clear();
  JsonWriter w(buf_);
  w.raw("{\"type\":\"content_block_start\",\"index\":").num(index_).raw(",\"content_block\":");
  switch (kind) {
    case Block::Thinking:
      w.raw(R"({"type":"thinking","thinking":"","signature":""}})");
      break;
    case Block::Text:
      w.raw(R"({"type":"text","text":""}})");
      break;
    case Block::ToolUse: {
      const int64_t k = tool_calls_++;
      w.raw(R"({"type":"tool_use","id":"toolu_)");
      append_json_escaped(buf_, options_.id);
      w.raw("_").num(k).raw("\",\"name\":").str(tool_name).raw(R"(,"input":{}}})");
      break;
    }
    case Block::None:
      return;
  }
  emit("content_block_start");
  if (index_ == 0) {
    buf_.assign(R"({"type":"ping"})");
    emit("ping");
  }
  active_ = kind;
}

void MessagesEventGenerator::on_output(const OutputChunk& chunk) {
  if (finished_) return;
  switch (chunk.kind) {
    case OutputChunk::Kind::Start: {
      if (started_) return;
      started_ = true;
      prompt_usage_ = chunk.usage;
      buf_.clear();
      JsonWriter w(buf_);
      w.raw(R"({"type":"message_start","message":{"id":)").str(options_.id);
      w.raw(R"(,"type":"message","role":"assistant","model":)").str(options_.model);
      w.raw(R"(,"content":[],"stop_reason":null,"stop_sequence":null,"usage":)");
      write_usage(prompt_usage_, 0);
      w.raw("}}");
      emit("message_start");
      if (options_.thinking_mode) open_block(Block::Thinking, {});
      return;
    }
    case OutputChunk::Kind::Raw:
      if (active_ != Block::Text) open_block(Block::Text, {});
      delta("text_delta", "text", chunk.text);
      return;
    case OutputChunk::Kind::Reasoning:
      if (active_ != Block::Thinking) open_block(Block::Thinking, {});
      delta("thinking_delta", "thinking", chunk.text);
      return;
    case OutputChunk::Kind::ToolCallBegin:
      return;
    case OutputChunk::Kind::ToolCall:
      open_block(Block::ToolUse, chunk.text);
      return;
    case OutputChunk::Kind::ToolArgumentsDelta:
      if (active_ == Block::ToolUse) delta("input_json_delta", "partial_json", chunk.text);
      return;
    case OutputChunk::Kind::Finish: {
      close_block();
      buf_.clear();
      JsonWriter w(buf_);
      w.raw(R"({"type":"message_delta","delta":{"stop_reason":)");
      w.str(messages_stop_reason(chunk.finish_reason)).raw(",\"stop_sequence\":");
      if (chunk.finish_reason == FinishReason::StopSequence) {
        w.str(chunk.stop_sequence);
      } else {
        w.raw("null");
      }
      w.raw("},\"usage\":");
      write_usage(prompt_usage_, chunk.usage.completion_tokens);
      w.raw("}");
      emit("message_delta");
      buf_.assign(R"({"type":"message_stop"})");
      emit("message_stop");
      finished_ = true;
      return;
    }
  }
}

}  // namespace deepinfer::recipe
