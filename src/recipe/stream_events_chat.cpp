// Chat Completions chunks (api spec §7).
#include "recipe/json_writer.h"
#include "recipe/stream_events.h"

namespace deepinfer::recipe {

std::string_view chat_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::ToolCalls:
      return "tool_calls";
    case FinishReason::Length:
      return "length";
    case FinishReason::ContentFilter:
      return "content_filter";
    case FinishReason::Stop:
    case FinishReason::EndOfStream:
    case FinishReason::StopSequence:
      break;
  }
  return "stop";
}

void append_chat_usage(std::string& out, const Usage& usage) {
  JsonWriter w(out);
  const int64_t p = usage.prompt_tokens;
  const int64_t h = usage.prompt_cache_hit_tokens;
  const int64_t c = usage.completion_tokens;
  w.raw("{\"prompt_tokens\":").num(p).raw(",\"completion_tokens\":").num(c);
  w.raw(",\"total_tokens\":").num(p + c).raw(",\"prompt_tokens_details\":{\"cached_tokens\":");
  w.num(h).raw("},\"prompt_cache_hit_tokens\":").num(h);
  w.raw(",\"prompt_cache_miss_tokens\":").num(p > h ? p - h : 0).raw("}");
}

ChatEventGenerator::ChatEventGenerator(EventOptions options, EventSink& sink)
    : options_(std::move(options)), sink_(sink) {
  render_prefix(nullptr);
}

void ChatEventGenerator::render_prefix(const std::optional<std::string>* fingerprint) {
  prefix_.clear();
  JsonWriter w(prefix_);
  w.raw("{\"id\":").str(options_.id).raw(",\"object\":\"chat.completion.chunk\",\"created\":");
  w.num(options_.created).raw(",\"model\":").str(options_.model);
  w.raw(",\"system_fingerprint\":").str_or_null(fingerprint);
  w.raw(",\"choices\":[{\"index\":").num(options_.choice_index).raw(",\"delta\":");
}

void ChatEventGenerator::emit(std::string_view delta, std::string_view finish_reason,
                              const Usage* usage) {
  buf_.assign(prefix_);
  JsonWriter w(buf_);
  w.raw(delta).raw(",\"logprobs\":");
  const std::string_view logprobs =
      options_.chunk_logprobs != nullptr ? options_.chunk_logprobs->next_chunk_logprobs() : "";
  w.raw(logprobs.empty() ? std::string_view("null") : logprobs).raw(",\"finish_reason\":");
  if (finish_reason.empty()) {
    w.raw("null");
  } else {
    w.str(finish_reason);
  }
  w.raw("}]");
  if (usage != nullptr && options_.usage_on_finish) {
    Usage all = prompt_usage_;
    all.completion_tokens = usage->completion_tokens;
    w.raw(",\"usage\":");
    append_chat_usage(buf_, all);
  } else if (options_.include_usage) {
    w.raw(",\"usage\":null");
  }
  w.raw("}");
  sink_.on_event("", buf_);
}

void ChatEventGenerator::on_output(const OutputChunk& chunk) {
  const bool thinking = options_.thinking_mode;
  delta_.clear();
  JsonWriter d(delta_);
  switch (chunk.kind) {
    case OutputChunk::Kind::Start:
      prompt_usage_ = chunk.usage;
      render_prefix(chunk.system_fingerprint);
      emit(thinking ? R"({"role":"assistant","content":null,"reasoning_content":""})"
                    : R"({"role":"assistant","content":""})",
           {}, nullptr);
      return;
    case OutputChunk::Kind::Reasoning:
      d.raw(R"({"content":null,"reasoning_content":)").str(chunk.text).raw("}");
      break;
    case OutputChunk::Kind::Raw:
      d.raw(R"({"content":)").str(chunk.text);
      d.raw(thinking ? R"(,"reasoning_content":null})" : "}");
      break;
    case OutputChunk::Kind::ToolCallBegin:
      return;
    case OutputChunk::Kind::ToolCall: {
      const int64_t k = tool_calls_++;
      d.raw(R"({"tool_calls":[{"index":)").num(k).raw(R"(,"id":"call_)");
      append_json_escaped(delta_, options_.id);
      d.raw("_").num(k).raw(R"(","type":"function","function":{"name":)").str(chunk.text);
      d.raw(R"(,"arguments":""}}]})");
      break;
    }
    case OutputChunk::Kind::ToolArgumentsDelta:
      d.raw(R"({"tool_calls":[{"index":)").num(tool_calls_ > 0 ? tool_calls_ - 1 : 0);
      d.raw(R"(,"function":{"arguments":)").str(chunk.text).raw("}}]}");
      break;
    case OutputChunk::Kind::Finish:
      emit(thinking ? R"({"content":"","reasoning_content":null})" : R"({"content":""})",
           chat_finish_reason(chunk.finish_reason), &chunk.usage);
      return;
  }
  emit(delta_, {}, nullptr);
}

}  // namespace deepinfer::recipe
