// Messages: events → the message object (api spec §9). A tool_use block's input is the parse of
// its concatenated partial JSON at block stop, `{}` when that is not valid JSON.
#include "recipe/complete_response.h"

namespace deepinfer::recipe {
namespace {

std::string_view string_field(const JsonObject& object, std::string_view key) {
  const Json* value = object.if_contains(key);
  return value != nullptr && value->is_string() ? std::string_view(value->get_string())
                                                : std::string_view();
}

void append_string(JsonObject& object, std::string_view key, std::string_view delta) {
  Json& value = object[key];
  if (!value.is_string()) value = "";
  value.get_string().append(delta);
}

}  // namespace

MessagesResponseAccumulator::MessagesResponseAccumulator(std::string id, std::string model) {
  JsonObject usage;
  usage["input_tokens"] = 0;
  usage["cache_creation_input_tokens"] = 0;
  usage["cache_read_input_tokens"] = 0;
  usage["output_tokens"] = 0;
  usage["service_tier"] = "standard";
  JsonObject m;
  m["id"] = id;
  m["type"] = "message";
  m["role"] = "assistant";
  m["model"] = model;
  m["content"] = JsonArray{};
  m["stop_reason"] = nullptr;
  m["stop_sequence"] = nullptr;
  m["usage"] = std::move(usage);
  message_ = std::move(m);
}

void MessagesResponseAccumulator::on_event(std::string_view, std::string_view data) {
  auto parsed = parse_json(data);
  if (!parsed.ok() || !parsed.value().is_object()) return;
  const JsonObject& event = parsed.value().get_object();
  const std::string_view type = string_field(event, "type");
  if (type == "message_start") {
    const Json* m = event.if_contains("message");
    if (m == nullptr || !m->is_object()) return;
    message_ = *m;
    partial_inputs_.clear();
    return;
  }
  if (type == "message_delta") {
    JsonObject& m = message_.get_object();
    if (const Json* d = event.if_contains("delta"); d && d->is_object()) {
      const JsonObject& delta = d->get_object();
      if (const Json* v = delta.if_contains("stop_reason")) m["stop_reason"] = *v;
      if (const Json* v = delta.if_contains("stop_sequence")) m["stop_sequence"] = *v;
    }
    if (const Json* u = event.if_contains("usage")) m["usage"] = *u;
    return;
  }
  Json* content_value = message_.get_object().if_contains("content");
  if (content_value == nullptr || !content_value->is_array()) return;
  JsonArray& content = content_value->get_array();
  const Json* index_value = event.if_contains("index");
  if (index_value == nullptr || !index_value->is_int64()) return;
  const int64_t index = index_value->get_int64();
  if (type == "content_block_start") {
    const Json* block = event.if_contains("content_block");
    if (block && block->is_object() && index == static_cast<int64_t>(content.size())) {
      content.push_back(*block);
    }
    return;
  }
  if (index < 0 || static_cast<size_t>(index) >= content.size()) return;
  Json& block_value = content[static_cast<size_t>(index)];
  if (!block_value.is_object()) return;
  JsonObject& block = block_value.get_object();
  const std::string_view block_type = string_field(block, "type");
  if (type == "content_block_delta") {
    const Json* d = event.if_contains("delta");
    if (d == nullptr || !d->is_object()) return;
    const JsonObject& delta = d->get_object();
    const std::string_view delta_type = string_field(delta, "type");
    if (delta_type == "text_delta" && block_type == "text") {
      append_string(block, "text", string_field(delta, "text"));
    } else if (delta_type == "thinking_delta" && block_type == "thinking") {
      append_string(block, "thinking", string_field(delta, "thinking"));
    } else if (delta_type == "signature_delta" && block_type == "thinking") {
      append_string(block, "signature", string_field(delta, "signature"));
    } else if (delta_type == "input_json_delta" && block_type == "tool_use") {
      partial_inputs_[index] += string_field(delta, "partial_json");
    }
  } else if (type == "content_block_stop") {
    const auto it = partial_inputs_.find(index);
    if (it == partial_inputs_.end()) return;
    if (block_type == "tool_use") {
      auto input = parse_json(it->second);
      block["input"] = input.ok() ? std::move(input.value()) : Json(JsonObject{});
    }
    partial_inputs_.erase(it);
  }
}

}  // namespace deepinfer::recipe
