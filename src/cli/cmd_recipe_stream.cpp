// `deepinfer recipe stream` / `deepinfer recipe complete`: backend chunks → API events / the
// complete API response, through the same StreamProcessor and event generators as the server.
//
// stdin:  {"protocol": "chat_completions"|"responses"|"messages", "encoding": "v4"|"v41"
//          (default "v41"), "request": <API request body>, "chunks": [<chunk>, ...],
//          "id"?: string, "model"?: string (default: the request's model),
//          "created"?: unix seconds (default: now; also Responses completed_at)}
//         <chunk> = {"kind":"ready","system_fingerprint"?:s|null,"prompt_tokens"?:n,
//                    "prompt_cache_hit_tokens"?:n}
//                 | {"kind":"text","content":s,"content_tokens"?:n}
//                 | {"kind":"finish","finish_reason":"stop"|"length"|"content_filter"}
// stdout: stream   → {"events":[<the JSON object of each SSE data line>, ...]}
//                    (Chat Completions: the chunk objects, without the [DONE] sentinel)
//         complete → {"response":{...}}
// Errors: stdout {"error":{"type":"invalid_request_error"|"internal_error","message":"..."}},
//         exit 1.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include "cli/command.h"
#include "cli/recipe_io.h"
#include "recipe/complete_response.h"
#include "recipe/output_parser.h"
#include "recipe/stream_events.h"

namespace deepinfer::cli {
namespace {

// Collects the data lines of a stream as one JSON array body.
struct JoinedEvents final : recipe::EventSink {
  std::string text;
  bool first = true;
  void on_event(std::string_view, std::string_view data) override {
    if (!first) text.push_back(',');
    first = false;
    text.append(data);
  }
};

struct ChunkInput {
  std::vector<recipe::InferenceChunk> chunks;
  std::vector<std::string> texts;  // storage behind the Text chunks' views
};

Result<int64_t, RecipeError> int_field(const JsonObject& object, std::string_view key,
                                       const std::string& where) {
  const Json* value = object.if_contains(key);
  if (value == nullptr || value->is_null()) return int64_t{0};
  if (value->is_int64() && value->get_int64() >= 0) return value->get_int64();
  return invalid_request(where + ": field `" + std::string(key) +
                         "` must be a non-negative integer");
}

Result<ChunkInput, RecipeError> parse_chunks(const JsonObject& body) {
  const Json* list = body.if_contains("chunks");
  if (list == nullptr) return invalid_request("missing field `chunks`");
  if (!list->is_array()) return invalid_request("field `chunks` must be an array");
  ChunkInput input;
  input.texts.reserve(list->get_array().size());
  for (size_t i = 0; i < list->get_array().size(); ++i) {
    const std::string where = "chunks[" + std::to_string(i) + "]";
    const Json& item = list->get_array()[i];
    if (!item.is_object()) return invalid_request(where + " must be an object");
    const JsonObject& spec = item.get_object();
    const Json* kind = spec.if_contains("kind");
    if (kind == nullptr || !kind->is_string()) {
      return invalid_request(where + ": missing string field `kind`");
    }
    recipe::InferenceChunk chunk;
    if (kind->get_string() == "ready") {
      chunk.kind = recipe::InferenceChunk::Kind::Ready;
      if (const Json* fp = spec.if_contains("system_fingerprint"); fp && !fp->is_null()) {
        if (!fp->is_string()) {
          return invalid_request(where + ": field `system_fingerprint` must be a string");
        }
        chunk.system_fingerprint = std::string(fp->get_string());
      }
      auto prompt = int_field(spec, "prompt_tokens", where);
      if (!prompt.ok()) return prompt.error();
      auto hit = int_field(spec, "prompt_cache_hit_tokens", where);
      if (!hit.ok()) return hit.error();
      chunk.prompt_tokens = prompt.value();
      chunk.prompt_cache_hit_tokens = hit.value();
    } else if (kind->get_string() == "text") {
      chunk.kind = recipe::InferenceChunk::Kind::Text;
      const Json* content = spec.if_contains("content");
      if (content == nullptr || !content->is_string()) {
        return invalid_request(where + ": missing string field `content`");
      }
      input.texts.emplace_back(content->get_string());
      chunk.content = input.texts.back();
      auto tokens = int_field(spec, "content_tokens", where);
      if (!tokens.ok()) return tokens.error();
      chunk.content_tokens = tokens.value();
    } else if (kind->get_string() == "finish") {
      chunk.kind = recipe::InferenceChunk::Kind::Finish;
      const Json* reason = spec.if_contains("finish_reason");
      const std::string_view name =
          reason != nullptr && reason->is_string() ? std::string_view(reason->get_string()) : "";
      if (name == "stop") {
        chunk.finish = recipe::BackendFinish::Stop;
      } else if (name == "length") {
        chunk.finish = recipe::BackendFinish::Length;
      } else if (name == "content_filter") {
        chunk.finish = recipe::BackendFinish::ContentFilter;
      } else {
        return invalid_request(where +
                               ": field `finish_reason` must be \"stop\", \"length\" or "
                               "\"content_filter\"");
      }
    } else {
      return invalid_request(where + ": unknown kind `" + std::string(kind->get_string()) +
                             "` (expected ready, text or finish)");
    }
    input.chunks.push_back(std::move(chunk));
  }
  return input;
}

std::string random_id(recipe::Protocol protocol) {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device());
  char hex[25];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  switch (protocol) {
    case recipe::Protocol::Responses:
      return std::string("resp_") + hex;
    case recipe::Protocol::Messages:
      return std::string("msg_") + hex;
    case recipe::Protocol::ChatCompletions:
      break;
  }
  return std::string("chatcmpl-") + hex;
}

void run(bool complete) {
  auto envelope = read_recipe_envelope(std::cin);
  if (!envelope.ok()) fail_recipe(envelope.error());
  const JsonObject& body = envelope.value().body;
  const recipe::Protocol protocol = envelope.value().protocol;

  auto request = convert_envelope(envelope.value());
  if (!request.ok()) fail_recipe(request.error());
  auto input = parse_chunks(body);
  if (!input.ok()) fail_recipe(input.error());

  recipe::EventOptions options;
  if (const Json* id = body.if_contains("id"); id && !id->is_null()) {
    if (!id->is_string()) fail_recipe(invalid_request("field `id` must be a string"));
    options.id = std::string(id->get_string());
  } else {
    options.id = random_id(protocol);
  }
  options.model = request.value().model;
  if (const Json* model = body.if_contains("model"); model && !model->is_null()) {
    if (!model->is_string()) fail_recipe(invalid_request("field `model` must be a string"));
    options.model = std::string(model->get_string());
  }
  if (const Json* created = body.if_contains("created"); created && !created->is_null()) {
    if (!created->is_int64()) fail_recipe(invalid_request("field `created` must be an integer"));
    options.created = created->get_int64();
    options.completed_at = options.created;
  } else {
    options.created = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  }
  options.thinking_mode = request.value().conversation.thinking_mode;
  options.include_usage = complete || request.value().include_usage;
  options.custom_tool_names = request.value().custom_tool_names;

  JoinedEvents joined;
  std::unique_ptr<recipe::ResponseAccumulator> accumulator;
  recipe::EventSink* sink = &joined;
  if (complete) {
    accumulator =
        recipe::make_response_accumulator(protocol, options.id, options.model, options.created);
    sink = accumulator.get();
  }
  auto generator = recipe::make_event_generator(protocol, std::move(options), *sink);
  recipe::StreamProcessor processor(request.value().parsing_options);
  for (const auto& chunk : input.value().chunks) {
    if (!processor.process(chunk, *generator)) break;
  }
  processor.end_of_stream(*generator);

  if (complete) {
    std::cout << "{\"response\":" << accumulator->response_text() << "}\n";
  } else {
    std::cout << "{\"events\":[" << joined.text << "]}\n";
  }
  std::cout.flush();
}

void setup(CLI::App& app) {
  recipe_command(app)
      .add_subcommand("stream", "Backend chunks (JSON envelope on stdin) -> API stream events")
      ->callback([] { run(false); });
  recipe_command(app)
      .add_subcommand("complete", "Backend chunks (JSON envelope on stdin) -> complete response")
      ->callback([] { run(true); });
}

DEEPINFER_COMMAND(setup);

}  // namespace
}  // namespace deepinfer::cli
