// Chat Completions: chunks → `chat.completion` (api spec §7).
#include "recipe/complete_response.h"
#include "recipe/json_writer.h"

namespace deepinfer::recipe {
namespace {

void append_optional(std::optional<std::string>& target, const Json* value) {
  if (value == nullptr || !value->is_string()) return;
  const auto& text = value->get_string();
  if (target) {
    target->append(text.data(), text.size());
  } else {
    target.emplace(text.data(), text.size());
  }
}

std::string string_field(const JsonObject& object, std::string_view key) {
  const Json* value = object.if_contains(key);
  if (value == nullptr || !value->is_string()) return {};
  return std::string(value->get_string());
}

}  // namespace

std::string ResponseAccumulator::response_text() const { return json_value_text(response()); }

ChatResponseAccumulator::ChatResponseAccumulator(std::string id, std::string model, int64_t created)
    : id_(std::move(id)), model_(std::move(model)), created_(created) {}

ChatResponseAccumulator::Choice& ChatResponseAccumulator::choice(int64_t index) {
  for (auto& c : choices_)
    if (c.index == index) return c;
  choices_.emplace_back().index = index;
  return choices_.back();
}

void ChatResponseAccumulator::on_event(std::string_view, std::string_view data) {
  auto parsed = parse_json(data);
  if (!parsed.ok() || !parsed.value().is_object()) return;
  const JsonObject& chunk = parsed.value().get_object();
  if (const Json* usage = chunk.if_contains("usage"); usage != nullptr && !usage->is_null()) {
    usage_ = *usage;
  }
  if (system_fingerprint_.is_null()) {
    if (const Json* fp = chunk.if_contains("system_fingerprint")) system_fingerprint_ = *fp;
  }
  const Json* choices = chunk.if_contains("choices");
  if (choices == nullptr || !choices->is_array()) return;
  for (const Json& entry : choices->get_array()) {
    if (!entry.is_object()) continue;
    const JsonObject& chunk_choice = entry.get_object();
    const Json* index = chunk_choice.if_contains("index");
    Choice& c = choice(index != nullptr && index->is_int64() ? index->get_int64() : 0);
    if (const Json* delta = chunk_choice.if_contains("delta"); delta && delta->is_object()) {
      const JsonObject& d = delta->get_object();
      append_optional(c.content, d.if_contains("content"));
      append_optional(c.reasoning_content, d.if_contains("reasoning_content"));
      const Json* calls = d.if_contains("tool_calls");
      const std::size_t n_calls = calls && calls->is_array() ? calls->get_array().size() : 0;
      for (std::size_t i = 0; i < n_calls; ++i) {
        const Json& call = calls->get_array()[i];
        if (!call.is_object()) continue;
        const JsonObject& tc = call.get_object();
        const Json* function = tc.if_contains("function");
        const JsonObject empty;
        const JsonObject& fn = function && function->is_object() ? function->get_object() : empty;
        if (tc.contains("id")) {
          c.tool_calls.push_back({string_field(tc, "id"), string_field(tc, "type"),
                                  string_field(fn, "name"), string_field(fn, "arguments")});
        } else if (const Json* k = tc.if_contains("index"); k && k->is_int64()) {
          if (k->get_int64() >= 0 && static_cast<size_t>(k->get_int64()) < c.tool_calls.size()) {
            c.tool_calls[static_cast<size_t>(k->get_int64())].arguments +=
                string_field(fn, "arguments");
          }
        }
      }
    }
    if (const Json* fr = chunk_choice.if_contains("finish_reason"); fr && !fr->is_null()) {
      c.finish_reason = *fr;
    }
  }
}

Json ChatResponseAccumulator::response() const {
  JsonObject out;
  out["id"] = id_;
  out["object"] = "chat.completion";
  out["created"] = created_;
  out["model"] = model_;
  out["system_fingerprint"] = system_fingerprint_;
  JsonArray choices;
  for (const Choice& c : choices_) {
    JsonObject message;
    message["role"] = "assistant";
    message["content"] = c.content ? Json(*c.content) : Json(nullptr);
    if (c.reasoning_content) message["reasoning_content"] = *c.reasoning_content;
    if (!c.tool_calls.empty()) {
      JsonArray calls;
      for (const ToolCall& tc : c.tool_calls) {
        JsonObject function;
        function["name"] = tc.name;
        function["arguments"] = tc.arguments;
        JsonObject call;
        call["id"] = tc.id;
        call["type"] = tc.type;
        call["function"] = std::move(function);
        calls.push_back(std::move(call));
      }
      message["tool_calls"] = std::move(calls);
    }
    JsonObject choice;
    choice["index"] = c.index;
    choice["message"] = std::move(message);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = c.finish_reason;
    choices.push_back(std::move(choice));
  }
  out["choices"] = std::move(choices);
  if (usage_) out["usage"] = *usage_;
  return out;
}

std::unique_ptr<ResponseAccumulator> make_response_accumulator(Protocol protocol, std::string id,
                                                               std::string model, int64_t created) {
  switch (protocol) {
    case Protocol::Responses:
      return std::make_unique<ResponsesResponseAccumulator>(std::move(id), std::move(model),
                                                            created);
    case Protocol::Messages:
      return std::make_unique<MessagesResponseAccumulator>(std::move(id), std::move(model));
    case Protocol::ChatCompletions:
      break;
  }
  return std::make_unique<ChatResponseAccumulator>(std::move(id), std::move(model), created);
}

}  // namespace deepinfer::recipe
