// Responses: events → the response object (api spec §8). Full-response events replace the
// state; item, part and delta events update the item they name (mismatched ids are ignored).
#include "recipe/complete_response.h"

namespace deepinfer::recipe {
namespace {

int64_t int_field(const JsonObject& object, std::string_view key) {
  const Json* value = object.if_contains(key);
  return value != nullptr && value->is_int64() ? value->get_int64() : -1;
}

std::string_view string_field(const JsonObject& object, std::string_view key) {
  const Json* value = object.if_contains(key);
  return value != nullptr && value->is_string() ? std::string_view(value->get_string())
                                                : std::string_view();
}

JsonArray* array_field(JsonObject& object, std::string_view key) {
  Json* value = object.if_contains(key);
  return value != nullptr && value->is_array() ? &value->get_array() : nullptr;
}

void append_string(JsonObject& object, std::string_view key, std::string_view delta) {
  Json& value = object[key];
  if (!value.is_string()) value = "";
  value.get_string().append(delta);
}

}  // namespace

ResponsesResponseAccumulator::ResponsesResponseAccumulator(std::string id, std::string model,
                                                           int64_t created) {
  JsonObject r;
  r["id"] = id;
  r["object"] = "response";
  r["created_at"] = created;
  r["model"] = model;
  r["status"] = "in_progress";
  r["completed_at"] = nullptr;
  r["error"] = nullptr;
  r["incomplete_details"] = nullptr;
  r["output"] = JsonArray{};
  r["usage"] = nullptr;
  response_ = std::move(r);
}

JsonObject* ResponsesResponseAccumulator::item(const JsonObject& event) {
  JsonArray* output = array_field(response_.get_object(), "output");
  const int64_t index = int_field(event, "output_index");
  if (output == nullptr || index < 0 || static_cast<size_t>(index) >= output->size()) {
    return nullptr;
  }
  Json& entry = (*output)[static_cast<size_t>(index)];
  if (!entry.is_object() ||
      string_field(entry.get_object(), "id") != string_field(event, "item_id"))
    return nullptr;
  return &entry.get_object();
}

JsonObject* ResponsesResponseAccumulator::part(const JsonObject& event,
                                               std::string_view part_type) {
  JsonObject* target = item(event);
  if (target == nullptr) return nullptr;
  const std::string_view item_type = string_field(*target, "type");
  if ((part_type == "output_text" && item_type != "message") ||
      (part_type == "reasoning_text" && item_type != "reasoning")) {
    return nullptr;
  }
  JsonArray* content = array_field(*target, "content");
  const int64_t index = int_field(event, "content_index");
  if (content == nullptr || index < 0 || static_cast<size_t>(index) >= content->size()) {
    return nullptr;
  }
  Json& entry = (*content)[static_cast<size_t>(index)];
  if (!entry.is_object() || string_field(entry.get_object(), "type") != part_type) return nullptr;
  return &entry.get_object();
}

void ResponsesResponseAccumulator::on_event(std::string_view, std::string_view data) {
  auto parsed = parse_json(data);
  if (!parsed.ok() || !parsed.value().is_object()) return;
  const JsonObject& event = parsed.value().get_object();
  const std::string_view type = string_field(event, "type");
  if (type == "response.created" || type == "response.in_progress" ||
      type == "response.completed" || type == "response.incomplete") {
    if (const Json* r = event.if_contains("response"); r && r->is_object()) response_ = *r;
    return;
  }
  JsonArray* output = array_field(response_.get_object(), "output");
  if (output == nullptr) return;
  const Json* event_item = event.if_contains("item");
  const int64_t index = int_field(event, "output_index");
  if (type == "response.output_item.added") {
    if (event_item && event_item->is_object() && index == static_cast<int64_t>(output->size())) {
      output->push_back(*event_item);
    }
  } else if (type == "response.output_item.done") {
    if (!event_item || !event_item->is_object() || index < 0 ||
        static_cast<size_t>(index) >= output->size()) {
      return;
    }
    Json& current = (*output)[static_cast<size_t>(index)];
    const JsonObject& next = event_item->get_object();
    if (current.is_object() &&
        string_field(current.get_object(), "id") == string_field(next, "id") &&
        string_field(current.get_object(), "type") == string_field(next, "type")) {
      current = *event_item;
    }
  } else if (type == "response.content_part.added" || type == "response.content_part.done") {
    const Json* p = event.if_contains("part");
    if (p == nullptr || !p->is_object()) return;
    const std::string_view part_type = string_field(p->get_object(), "type");
    if (type == "response.content_part.done") {
      if (JsonObject* current = part(event, part_type)) *current = p->get_object();
      return;
    }
    JsonObject* target = item(event);
    if (target == nullptr) return;
    const std::string_view item_type = string_field(*target, "type");
    if (!((part_type == "output_text" && item_type == "message") ||
          (part_type == "reasoning_text" && item_type == "reasoning"))) {
      return;
    }
    JsonArray* content = array_field(*target, "content");
    if (content && int_field(event, "content_index") == static_cast<int64_t>(content->size())) {
      content->push_back(*p);
    }
  } else if (type == "response.output_text.delta" || type == "response.reasoning_text.delta") {
    const bool reasoning = type == "response.reasoning_text.delta";
    if (JsonObject* p = part(event, reasoning ? "reasoning_text" : "output_text")) {
      append_string(*p, "text", string_field(event, "delta"));
    }
  } else if (type == "response.output_text.done" || type == "response.reasoning_text.done") {
    const bool reasoning = type == "response.reasoning_text.done";
    if (JsonObject* p = part(event, reasoning ? "reasoning_text" : "output_text")) {
      (*p)["text"] = string_field(event, "text");
      if (!reasoning) {
        if (const Json* lp = event.if_contains("logprobs")) (*p)["logprobs"] = *lp;
      }
    }
  } else if (type == "response.function_call_arguments.delta" ||
             type == "response.function_call_arguments.done" ||
             type == "response.custom_tool_call_input.delta" ||
             type == "response.custom_tool_call_input.done") {
    const bool custom = type.starts_with("response.custom_tool_call_input");
    const bool done = type.ends_with(".done");
    JsonObject* target = item(event);
    if (target == nullptr ||
        string_field(*target, "type") != (custom ? "custom_tool_call" : "function_call")) {
      return;
    }
    const std::string_view key = custom ? "input" : "arguments";
    if (done) {
      (*target)[key] = string_field(event, key);
    } else {
      append_string(*target, key, string_field(event, "delta"));
    }
  }
}

}  // namespace deepinfer::recipe
