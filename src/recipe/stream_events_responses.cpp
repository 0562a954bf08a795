// OpenAI Responses events (api spec §8).
#include <algorithm>
#include <chrono>

#include "recipe/json_writer.h"
#include "recipe/stream_events.h"

namespace deepinfer::recipe {
namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void append_id(std::string& out, std::string_view prefix, std::string_view id, int64_t n) {
  out.assign(prefix);
  out += id;
  out.push_back('_');
  out += std::to_string(n);
}

}  // namespace

ResponsesEventGenerator::ResponsesEventGenerator(EventOptions options, EventSink& sink)
    : options_(std::move(options)), sink_(sink) {}

void ResponsesEventGenerator::begin_event(std::string_view type) {
  event_type_ = type;
  buf_.clear();
  JsonWriter(buf_).raw("{\"type\":\"").raw(type).raw("\",");
}

void ResponsesEventGenerator::end_event() {
  JsonWriter(buf_).raw(",\"sequence_number\":").num(sequence_++).raw("}");
  sink_.on_event(event_type_, buf_);
}

void ResponsesEventGenerator::write_index_fields(const Item& item, size_t index) {
  JsonWriter(buf_)
      .raw("\"item_id\":")
      .str(item.id)
      .raw(",\"output_index\":")
      .num(static_cast<int64_t>(index));
}

void ResponsesEventGenerator::write_part(const Item& item) {
  JsonWriter w(buf_);
  if (item.kind == ItemKind::Reasoning) {
    w.raw(R"({"type":"reasoning_text","text":)").str(item.text).raw("}");
  } else {
    w.raw(R"({"type":"output_text","annotations":[],"logprobs":[)").raw(item.logprobs);
    w.raw("],\"text\":").str(item.text).raw("}");
  }
}

void ResponsesEventGenerator::write_item(const Item& item, bool with_content) {
  JsonWriter w(buf_);
  switch (item.kind) {
    case ItemKind::Reasoning:
      w.raw(R"({"type":"reasoning","id":)").str(item.id).raw(",\"status\":").str(item.status);
      w.raw(",\"content\":[");
      if (with_content) write_part(item);
      w.raw("],\"summary\":[]}");
      break;
    case ItemKind::Message:
      w.raw(R"({"type":"message","id":)").str(item.id).raw(",\"status\":").str(item.status);
      w.raw(R"(,"role":"assistant","phase":)");
      w.raw(item.commentary ? "\"commentary\"" : "\"final_answer\"").raw(",\"content\":[");
      if (with_content) write_part(item);
      w.raw("]}");
      break;
    case ItemKind::FunctionCall:
      w.raw(R"({"type":"function_call","id":)").str(item.id).raw(",\"status\":").str(item.status);
      w.raw(",\"call_id\":").str(item.call_id).raw(",\"name\":").str(item.name);
      if (item.has_namespace) w.raw(",\"namespace\":").str(item.ns);
      w.raw(",\"arguments\":").str(item.text).raw("}");
      break;
    case ItemKind::CustomToolCall:
      w.raw(R"({"type":"custom_tool_call","id":)").str(item.id);
      w.raw(",\"status\":").str(item.status).raw(",\"call_id\":").str(item.call_id);
      w.raw(",\"name\":").str(item.name).raw(",\"input\":").str(item.text).raw("}");
      break;
  }
}

void ResponsesEventGenerator::write_response() {
  JsonWriter w(buf_);
  w.raw("{\"id\":").str(options_.id).raw(",\"object\":\"response\",\"created_at\":");
  w.num(options_.created).raw(",\"model\":").str(options_.model).raw(",\"status\":");
  w.str(status_).raw(",\"completed_at\":");
  if (completed_at_) {
    w.num(*completed_at_);
  } else {
    w.raw("null");
  }
  w.raw(",\"error\":null,\"incomplete_details\":");
  if (incomplete_reason_.empty()) {
    w.raw("null");
  } else {
    w.raw("{\"reason\":").str(incomplete_reason_).raw("}");
  }
  w.raw(",\"output\":[");
  for (size_t i = 0; i < output_.size(); ++i) {
    if (i > 0) w.raw(",");
    write_item(output_[i], true);
  }
  w.raw("],\"usage\":");
  if (!finished_) {
    w.raw("null}");
    return;
  }
  const int64_t p = prompt_usage_.prompt_tokens;
  const int64_t c = final_usage_.completion_tokens;
  w.raw("{\"input_tokens\":").num(p).raw(",\"input_tokens_details\":{\"cached_tokens\":");
  w.num(prompt_usage_.prompt_cache_hit_tokens).raw("},\"output_tokens\":").num(c);
  w.raw(",\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":").num(p + c);
  w.raw("}}");
}

void ResponsesEventGenerator::open_item(Item item) {
  const size_t index = output_.size();
  output_.push_back(std::move(item));
  active_ = index;
  const Item& added = output_.back();
  begin_event("response.output_item.added");
  buf_ += "\"item\":";
  write_item(added, false);
  JsonWriter(buf_).raw(",\"output_index\":").num(static_cast<int64_t>(index));
  end_event();
  if (added.kind == ItemKind::Reasoning || added.kind == ItemKind::Message) {
    begin_event("response.content_part.added");
    buf_ += "\"content_index\":0,";
    write_index_fields(added, index);
    buf_ += ",\"part\":";
    write_part(added);
    end_event();
  }
}

void ResponsesEventGenerator::append_custom_input(size_t index, std::string_view delta) {
  if (delta.empty()) return;
  Item& item = output_[index];
  item.text += delta;
  begin_event("response.custom_tool_call_input.delta");
  JsonWriter(buf_).raw("\"delta\":").str(delta).raw(",");
  write_index_fields(item, index);
  end_event();
}

void ResponsesEventGenerator::close_item(std::string_view status) {
  if (!active_) return;
  const size_t index = *active_;
  active_.reset();
  if (custom_active_) {
    custom_active_ = false;
    decoded_.clear();
    custom_input_.finish(decoded_);
    append_custom_input(index, decoded_);
  }
  Item& item = output_[index];
  item.status = status;
  switch (item.kind) {
    case ItemKind::Reasoning:
    case ItemKind::Message: {
      const bool reasoning = item.kind == ItemKind::Reasoning;
      begin_event(reasoning ? "response.reasoning_text.done" : "response.output_text.done");
      // Fields in name order: logprobs before output_index, sequence_number before text.
      JsonWriter w(buf_);
      w.raw("\"content_index\":0,\"item_id\":").str(item.id);
      if (!reasoning) w.raw(",\"logprobs\":[").raw(item.logprobs).raw("]");
      w.raw(",\"output_index\":").num(static_cast<int64_t>(index));
      w.raw(",\"sequence_number\":").num(sequence_++).raw(",\"text\":").str(item.text).raw("}");
      sink_.on_event(event_type_, buf_);
      begin_event("response.content_part.done");
      buf_ += "\"content_index\":0,";
      write_index_fields(item, index);
      buf_ += ",\"part\":";
      write_part(item);
      end_event();
      break;
    }
    case ItemKind::FunctionCall:
      begin_event("response.function_call_arguments.done");
      JsonWriter(buf_).raw("\"arguments\":").str(item.text).raw(",");
      write_index_fields(item, index);
      end_event();
      break;
    case ItemKind::CustomToolCall:
      begin_event("response.custom_tool_call_input.done");
      JsonWriter(buf_).raw("\"input\":").str(item.text).raw(",");
      write_index_fields(item, index);
      end_event();
      break;
  }
  begin_event("response.output_item.done");
  buf_ += "\"item\":";
  write_item(item, true);
  JsonWriter(buf_).raw(",\"output_index\":").num(static_cast<int64_t>(index));
  end_event();
}

void ResponsesEventGenerator::append_text(std::string_view delta, bool reasoning) {
  const ItemKind kind = reasoning ? ItemKind::Reasoning : ItemKind::Message;
  if (!active_ || output_[*active_].kind != kind) {
    close_item("completed");
    Item item;
    item.kind = kind;
    append_id(item.id, reasoning ? "rs_" : "msg_", options_.id,
              static_cast<int64_t>(output_.size()));
    open_item(std::move(item));
  }
  const size_t index = *active_;
  Item& item = output_[index];
  item.text += delta;
  // The delta's own entries; the part (and the done event) carries them all.
  std::string_view logprobs;
  if (!reasoning && options_.text_logprobs != nullptr) {
    logprobs = options_.text_logprobs->output_text_logprobs(delta);
    if (!logprobs.empty()) {
      if (!item.logprobs.empty()) item.logprobs += ',';
      item.logprobs += logprobs;
    }
  }
  begin_event(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta");
  JsonWriter w(buf_);
  w.raw("\"content_index\":0,\"delta\":").str(delta).raw(",\"item_id\":").str(item.id);
  if (!reasoning) w.raw(",\"logprobs\":[").raw(logprobs).raw("]");
  w.raw(",\"output_index\":").num(static_cast<int64_t>(index));
  end_event();
}

void ResponsesEventGenerator::start_tool_call(std::string_view name) {
  if (active_ && output_[*active_].kind == ItemKind::Message) output_[*active_].commentary = true;
  close_item("completed");
  const auto index = static_cast<int64_t>(output_.size());
  Item item;
  append_id(item.call_id, "call_", options_.id, tool_calls_++);
  const auto& custom = options_.custom_tool_names;
  if (std::find(custom.begin(), custom.end(), name) != custom.end()) {
    item.kind = ItemKind::CustomToolCall;
    append_id(item.id, "ctc_", options_.id, index);
    item.name = name;
    custom_input_.reset();
    custom_active_ = true;
  } else {
    item.kind = ItemKind::FunctionCall;
    append_id(item.id, "fc_", options_.id, index);
    const size_t sep = name.find("::");
    if (sep != std::string_view::npos) {
      item.has_namespace = true;
      item.ns = name.substr(0, sep);
      item.name = name.substr(sep + 2);
    } else {
      item.name = name;
    }
  }
  open_item(std::move(item));
}

void ResponsesEventGenerator::append_arguments(std::string_view delta) {
  if (!active_) return;
  const size_t index = *active_;
  Item& item = output_[index];
  if (item.kind == ItemKind::FunctionCall) {
    item.text += delta;
    begin_event("response.function_call_arguments.delta");
    JsonWriter(buf_).raw("\"delta\":").str(delta).raw(",");
    write_index_fields(item, index);
    end_event();
  } else if (item.kind == ItemKind::CustomToolCall && custom_active_) {
    decoded_.clear();
    custom_input_.feed(delta, decoded_);
    append_custom_input(index, decoded_);
  }
}

void ResponsesEventGenerator::finish(const OutputChunk& chunk) {
  if (chunk.finish_reason == FinishReason::Length) {
    incomplete_reason_ = "max_output_tokens";
  } else if (chunk.finish_reason == FinishReason::ContentFilter) {
    incomplete_reason_ = "content_filter";
  }
  status_ = incomplete_reason_.empty() ? "completed" : "incomplete";
  final_usage_ = chunk.usage;
  completed_at_ = options_.completed_at ? *options_.completed_at : unix_now();
  close_item(status_);
  finished_ = true;
  begin_event(status_ == "incomplete" ? "response.incomplete" : "response.completed");
  buf_ += "\"response\":";
  write_response();
  end_event();
}

void ResponsesEventGenerator::on_output(const OutputChunk& chunk) {
  if (finished_) return;
  if (chunk.kind != OutputChunk::Kind::Start && !started_) return;
  switch (chunk.kind) {
    case OutputChunk::Kind::Start:
      if (started_) return;
      started_ = true;
      prompt_usage_ = chunk.usage;
      for (std::string_view type : {"response.created", "response.in_progress"}) {
        begin_event(type);
        buf_ += "\"response\":";
        write_response();
        end_event();
      }
      return;
    case OutputChunk::Kind::Raw:
      append_text(chunk.text, false);
      return;
    case OutputChunk::Kind::Reasoning:
      append_text(chunk.text, true);
      return;
    case OutputChunk::Kind::ToolCallBegin:
      return;
    case OutputChunk::Kind::ToolCall:
      start_tool_call(chunk.text);
      return;
    case OutputChunk::Kind::ToolArgumentsDelta:
      append_arguments(chunk.text);
      return;
    case OutputChunk::Kind::Finish:
      finish(chunk);
      return;
  }
}

}  // namespace deepinfer::recipe
