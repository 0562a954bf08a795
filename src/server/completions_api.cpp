#include "server/completions_api.h"

#include "recipe/json_writer.h"

namespace deepinfer::server {

std::string_view completion_finish_reason(recipe::FinishReason reason) {
  return reason == recipe::FinishReason::Length ? "length" : "stop";
}

void write_completion_usage(recipe::JsonWriter& w, const recipe::Usage& usage) {
  w.raw("\"usage\":{\"prompt_tokens\":").num(usage.prompt_tokens);
  w.raw(",\"completion_tokens\":").num(usage.completion_tokens);
  w.raw(",\"total_tokens\":").num(usage.prompt_tokens + usage.completion_tokens).raw("}");
}

CompletionEventGenerator::CompletionEventGenerator(recipe::EventOptions options, bool stream,
                                                   recipe::EventSink& sink)
    : options_(std::move(options)), stream_(stream), sink_(sink) {
  recipe::JsonWriter w(prefix_);
  w.raw("{\"id\":").str(options_.id).raw(",\"object\":\"text_completion\",\"created\":");
  w.num(options_.created).raw(",\"model\":").str(options_.model).raw(",\"choices\":[{\"text\":");
}

void CompletionEventGenerator::write_chunk(std::string_view text, std::string_view finish_reason,
                                           const recipe::Usage* usage) {
  buf_.assign(prefix_);
  recipe::JsonWriter w(buf_);
  w.str(text).raw(",\"index\":").num(options_.choice_index).raw(",\"logprobs\":");
  const std::string_view logprobs =
      options_.chunk_logprobs != nullptr ? options_.chunk_logprobs->next_chunk_logprobs() : "";
  w.raw(logprobs.empty() ? std::string_view("null") : logprobs).raw(",\"finish_reason\":");
  if (finish_reason.empty())
    w.raw("null");
  else
    w.str(finish_reason);
  w.raw("}]");
  if (usage && options_.usage_on_finish) {
    w.raw(",");
    write_completion_usage(w, *usage);
  }
  w.raw("}");
  sink_.on_event("", buf_);
}

void CompletionEventGenerator::on_output(const recipe::OutputChunk& chunk) {
  using Kind = recipe::OutputChunk::Kind;
  switch (chunk.kind) {
    case Kind::Raw:
    case Kind::Reasoning:
      if (stream_)
        write_chunk(chunk.text, {}, nullptr);
      else
        text_ += chunk.text;
      break;
    case Kind::Finish:
      write_chunk(stream_ ? std::string_view{} : std::string_view(text_),
                  completion_finish_reason(chunk.finish_reason),
                  stream_ && !options_.include_usage ? nullptr : &chunk.usage);
      break;
    default:
      break;
  }
}

}  // namespace deepinfer::server
