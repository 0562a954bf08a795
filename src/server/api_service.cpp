#include "server/api_service.h"

#include <chrono>
#include <cmath>
#include <random>

#include "common/json.h"
#include "recipe/convert.h"
#include "recipe/json_writer.h"
#include "server/api_errors.h"
#include "server/completions_api.h"
#include "server/generation_session.h"
#include "server/multi_choice.h"
#include "server/request_params.h"

namespace deepinfer::server {
namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string random_hex(size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string s(n, '0');
  for (auto& c : s) c = kHex[rng() & 15];
  return s;
}

std::string response_id(recipe::Protocol protocol) {
  switch (protocol) {
    case recipe::Protocol::ChatCompletions:
      return "chatcmpl-" + random_hex(24);
    case recipe::Protocol::Responses:
      return "resp_" + random_hex(24);
    case recipe::Protocol::Messages:
      return "msg_" + random_hex(24);
  }
  return random_hex(24);
}

// A request body that parses as JSON and is an object; the error is the 400 message.
Result<Json> parse_body_object(const std::string& text) {
  auto parsed = parse_json(text);
  if (!parsed.ok()) return Error{"Invalid JSON body: " + parsed.error().message};
  if (!parsed.value().is_object()) return Error{"The request body must be a JSON object"};
  return parsed;
}

}  // namespace

std::optional<std::string> ApiService::unknown_model_error(const std::string& model) const {
  if (model.empty() || model == options_.served_model_name) return std::nullopt;
  return "The model '" + model + "' does not exist";
}

ApiService::ApiService(ApiServiceOptions options, Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics), started_at_(unix_now()) {}

void ApiService::attach(const tokenizer::Tokenizer& tokenizer, engine::Engine& engine) {
  tokenizer_ = &tokenizer;
  engine_ = &engine;
  engine.set_after_deliver([batcher = batcher_] { batcher->flush(); });
  grammars_ = make_grammar_cache(tokenizer);
  structured_ = {grammars_.get(), options_.encoding, tokenizer.added_token_id("</think>")};
  metrics_.set_gauge_source([this, &engine] {
    const auto m = engine.metrics();
    const double total = m.kv_blocks_total > 0 ? double(m.kv_blocks_total) : 1.0;
    return std::vector<Gauge>{
        {"deepinfer_requests_in_flight", "Requests admitted (running + queued).",
         double(in_flight_.load())},
        {"deepinfer_engine_requests_running", "Requests in the engine's running batch.",
         double(m.num_running)},
        {"deepinfer_requests_waiting", "Requests queued in the engine (queue length).",
         double(m.num_waiting)},
        {"deepinfer_kv_blocks_total", "KV cache blocks.", double(m.kv_blocks_total)},
        {"deepinfer_kv_blocks_used", "KV cache blocks in use.", double(m.kv_blocks_used)},
        {"deepinfer_kv_blocks_free", "KV cache blocks free.", double(m.kv_blocks_free)},
        {"deepinfer_kv_cache_usage_ratio", "Fraction of KV cache blocks in use.",
         double(m.kv_blocks_used) / total},
        {"deepinfer_prefix_cache_hit_rate", "Prompt tokens served from the prefix cache.",
         m.prefix_hit_rate},
    };
  });
}

void ApiService::launch(SessionSetup setup, ResponderPtr responder, engine::EngineRequest request) {
  const uint64_t key = next_id_.fetch_add(1);
  auto done = std::move(setup.on_done);
  setup.on_done = [this, key, done = std::move(done)] {
    {
      std::lock_guard lock(sessions_mu_);
      sessions_.erase(key);
    }
    if (done) done();
  };
  setup.batcher = batcher_;
  auto session = std::make_shared<GenerationSession>(std::move(setup), *tokenizer_, *engine_,
                                                     std::move(responder), metrics_);
  {
    std::lock_guard lock(sessions_mu_);
    sessions_.emplace(key, session);
  }
  session->start(std::move(request));
}

void ApiService::abort_all() {
  std::vector<std::shared_ptr<GenerationSession>> live;
  {
    std::lock_guard lock(sessions_mu_);
    for (auto& [key, weak] : sessions_)
      if (auto s = weak.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) s->abort();
}

void ApiService::register_routes(Router& router) {
  using recipe::Protocol;
  for (auto [path, protocol] : {std::pair{"/v1/chat/completions", Protocol::ChatCompletions},
                                std::pair{"/v1/responses", Protocol::Responses},
                                std::pair{"/v1/messages", Protocol::Messages}}) {
    router.add("POST", path, [this, protocol](HttpRequest q, ResponderPtr r) {
      handle_generation(protocol, std::move(q), std::move(r));
    });
  }
  router.add("POST", "/v1/completions", [this](HttpRequest q, ResponderPtr r) {
    handle_completions(std::move(q), std::move(r));
  });
  router.add("GET", "/v1/models",
             [this](HttpRequest, ResponderPtr r) { handle_models(std::move(r)); });
  router.add(
      "GET", "/health",
      [](HttpRequest, ResponderPtr r) {
        r->send(HttpResponse{200, "application/json", "{\"status\":\"ok\"}", {}});
      },
      /*authenticated=*/false);
  router.add(
      "GET", "/metrics",
      [this](HttpRequest, ResponderPtr r) {
        r->send(HttpResponse{200, "text/plain; version=0.0.4", metrics_.render(), {}});
      },
      /*authenticated=*/false);
}

void ApiService::handle_models(ResponderPtr responder) const {
  std::string body = R"({"object":"list","data":[{"id":")";
  body += options_.served_model_name;  // validated at startup: no characters needing escapes
  body += R"(","object":"model","created":)" + std::to_string(started_at_) +
          R"(,"owned_by":"deepinfer","max_model_len":)" + std::to_string(options_.max_model_len) +
          "}]}";
  responder->send(HttpResponse{200, "application/json", std::move(body), {}});
}

bool ApiService::admit(recipe::Protocol protocol, const ResponderPtr& responder) {
  if (in_flight_.fetch_add(1) >= options_.max_concurrent) {
    in_flight_.fetch_sub(1);
    ++metrics_.requests_rejected;
    auto r = api_error(flavor_for(protocol), 429, "Too many concurrent requests; retry later");
    r.headers.emplace_back("Retry-After", "1");
    responder->send(std::move(r));
    return false;
  }
  return true;
}

void ApiService::handle_generation(recipe::Protocol protocol, HttpRequest request,
                                   ResponderPtr responder) {
  const ApiFlavor flavor = flavor_for(protocol);
  auto fail = [&](int status, std::string_view message) {
    ++metrics_.requests_failed;
    responder->send(api_error(flavor, status, message));
  };
  auto parsed = parse_body_object(request.body);
  if (!parsed.ok()) return fail(400, parsed.error().message);
  JsonObject& body = parsed.value().as_object();
  // `n` is served here (several engine requests); the recipe only knows n = 1.
  int n = 1;
  if (auto it = body.find("n"); it != body.end() && protocol == recipe::Protocol::ChatCompletions) {
    if (!it->value().is_int64() || it->value().get_int64() < 1 || it->value().get_int64() > 16)
      return fail(400, "n must be an integer in [1, 16]");
    n = static_cast<int>(it->value().get_int64());
    body.erase(it);
  }
  auto converted = recipe::convert_request(protocol, parsed.value());
  if (!converted.ok()) {
    const auto& e = converted.error();
    return fail(e.kind == recipe::ConversionError::Kind::Internal ? 500 : 400, e.detail);
  }
  recipe::ConversationRequest& conv = converted.value();
  if (auto unknown = unknown_model_error(conv.model)) return fail(404, *unknown);

  const recipe::RenderedPrompt rendered =
      recipe::render_prompt(conv.conversation, options_.encoding);
  std::vector<tokenizer::TextSpan> spans;
  spans.reserve(rendered.special_spans.size());
  for (const auto& s : rendered.special_spans) spans.push_back({s.begin, s.end});
  auto ids = tokenizer_->encode_segments(rendered.prompt, spans, options_.tokenizer_threads);
  if (!ids.ok()) return fail(400, ids.error().message);
  const int64_t prompt_tokens = static_cast<int64_t>(ids.value().size());
  if (prompt_tokens >= options_.max_model_len)
    return fail(400, "This model's maximum context length is " +
                         std::to_string(options_.max_model_len) + " tokens; the prompt has " +
                         std::to_string(prompt_tokens) + " tokens");

  RequestLimits limits{options_.max_model_len, static_cast<int32_t>(tokenizer_->vocab_size())};
  limits.structured = &structured_;
  auto sampling = sampling_from_request(body, conv, protocol, prompt_tokens, limits);
  if (!sampling.ok()) return fail(400, sampling.error().message);
  if (!admit(protocol, responder)) return;
  metrics_.prompt_tokens_total += static_cast<uint64_t>(prompt_tokens);

  SessionSetup setup;
  setup.protocol = protocol;
  setup.parsing = conv.parsing_options;
  setup.stream = conv.stream;
  setup.prompt_tokens = prompt_tokens;
  setup.events.id = response_id(protocol);
  setup.events.model = conv.model.empty() ? options_.served_model_name : conv.model;
  setup.events.created = unix_now();
  setup.events.thinking_mode = conv.conversation.thinking_mode;
  setup.events.include_usage = conv.stream ? conv.include_usage : true;
  setup.events.custom_tool_names = conv.custom_tool_names;
  if (sampling.value().params.logprobs) setup.logprobs = sampling.value().params.top_logprobs;
  setup.on_done = [this] { in_flight_.fetch_sub(1); };
  engine::EngineRequest engine_request{std::move(ids).value(), sampling.value().params};
  std::function<std::string(const recipe::Usage&)> usage_chunk;
  if (conv.stream && conv.include_usage) {
    usage_chunk = [events = setup.events](const recipe::Usage& total) {
      std::string out;
      recipe::JsonWriter w(out);
      w.raw("{\"id\":").str(events.id).raw(",\"object\":\"chat.completion.chunk\",\"created\":");
      w.num(events.created).raw(",\"model\":").str(events.model);
      w.raw(",\"system_fingerprint\":null,\"choices\":[],\"usage\":");
      recipe::append_chat_usage(out, total);
      w.raw("}");
      return out;
    };
  }
  launch_choices(n, std::move(setup), std::move(responder), std::move(engine_request),
                 std::move(usage_chunk));
}

void ApiService::launch_choices(int n, SessionSetup setup, ResponderPtr responder,
                                engine::EngineRequest request,
                                std::function<std::string(const recipe::Usage&)> usage_chunk) {
  if (n == 1) return launch(std::move(setup), std::move(responder), std::move(request));
  // n > 1: n independent requests (seeds seed, seed + 1, ...) behind one exchange; the
  // admission slot is given back when the last one is done.
  auto remaining = std::make_shared<std::atomic<int>>(n);
  auto done = std::make_shared<std::function<void()>>(std::move(setup.on_done));
  setup.on_done = [remaining, done] {
    if (remaining->fetch_sub(1) == 1 && *done) (*done)();
  };
  auto start_one = [&](int index, ResponderPtr choice_responder, UsageCallback on_usage) {
    SessionSetup one = setup;
    if (one.stream) {
      one.events.choice_index = index;
      one.events.usage_on_finish = false;
      one.write_done = false;
      one.on_usage = std::move(on_usage);
    }
    engine::EngineRequest r = request;
    if (r.params.seed) *r.params.seed += static_cast<uint64_t>(index);
    launch(std::move(one), std::move(choice_responder), std::move(r));
  };
  if (setup.stream) {
    run_multi_choice_stream(n, std::move(responder), std::move(usage_chunk), start_one);
  } else {
    run_multi_choice(n, std::move(responder),
                     [&](int index, ResponderPtr r) { start_one(index, std::move(r), {}); });
  }
}

}  // namespace deepinfer::server

namespace deepinfer::server {
namespace {

// The recipe-shaped options of a legacy Completions body (validated like Chat's).
Result<recipe::ConversationRequest> legacy_request(const JsonObject& body) {
  recipe::ConversationRequest r;
  r.conversation.thinking_mode = false;
  r.parsing_options.parse_tool_calls = false;
  if (auto* m = body.if_contains("model"); m && m->is_string())
    r.model = std::string(m->get_string());
  if (auto* s = body.if_contains("stream"); s && !s->is_null()) {
    if (!s->is_bool()) return Error{"stream must be a boolean"};
    r.stream = s->get_bool();
  }
  if (auto* so = body.if_contains("stream_options"); so && so->is_object())
    if (auto* iu = so->as_object().if_contains("include_usage"); iu && iu->is_bool())
      r.include_usage = iu->get_bool();
  auto num = [&](const char* key) { return optional_number(body, key); };
  if (auto t = num("temperature")) {
    if (!(*t >= 0 && *t <= 2)) return Error{"temperature must be in [0, 2]"};
    r.inference_options.temperature = static_cast<float>(*t);
  }
  if (auto t = num("top_p")) {
    if (!(*t > 0 && *t <= 1)) return Error{"top_p must be in (0, 1]"};
    r.inference_options.top_p = static_cast<float>(*t);
  }
  if (auto t = num("max_tokens")) {
    if (!(*t >= 1 && *t < 1e9) || *t != std::floor(*t))
      return Error{"max_tokens must be greater than zero"};
    r.inference_options.max_tokens = static_cast<int64_t>(*t);
  } else {
    r.inference_options.max_tokens = 16;  // the OpenAI default of this API
  }
  if (auto* stop = body.if_contains("stop"); stop && !stop->is_null()) {
    if (stop->is_string()) {
      if (!stop->get_string().empty())
        r.parsing_options.stop_sequences.emplace_back(stop->get_string());
    } else if (stop->is_array()) {
      if (stop->as_array().size() > 16) return Error{"stop must have at most 16 strings"};
      for (const auto& s : stop->as_array()) {
        if (!s.is_string()) return Error{"stop must be a string or an array of strings"};
        if (!s.get_string().empty()) r.parsing_options.stop_sequences.emplace_back(s.get_string());
      }
    } else {
      return Error{"stop must be a string or an array of strings"};
    }
  }
  return r;
}

}  // namespace

void ApiService::handle_completions(HttpRequest request, ResponderPtr responder) {
  auto fail = [&](int status, std::string_view message) {
    ++metrics_.requests_failed;
    responder->send(api_error(ApiFlavor::OpenAI, status, message));
  };
  auto parsed = parse_body_object(request.body);
  if (!parsed.ok()) return fail(400, parsed.error().message);
  JsonObject& body = parsed.value().as_object();
  // `logprobs: N` (an integer here, unlike Chat's boolean) is read here, not by the Chat rules.
  int logprobs = -1;
  if (auto it = body.find("logprobs"); it != body.end()) {
    const Json& v = it->value();
    if (!v.is_null()) {
      if (!v.is_int64() || v.get_int64() < 0 || v.get_int64() > engine::kMaxTopLogprobs)
        return fail(400, "logprobs must be an integer in [0, 20]");
      logprobs = static_cast<int>(v.get_int64());
    }
    body.erase(it);
  }
  auto conv = legacy_request(body);
  if (!conv.ok()) return fail(400, conv.error().message);
  if (auto unknown = unknown_model_error(conv->model)) return fail(404, *unknown);
  if (body.contains("suffix") && !body.at("suffix").is_null())
    return fail(400, "suffix is not supported");

  // prompt: a string, a list of token ids, or a list with one string.
  std::vector<int32_t> ids;
  const Json* prompt = body.if_contains("prompt");
  if (!prompt) return fail(400, "prompt is required");
  const Json* text = prompt;
  if (prompt->is_array() && prompt->as_array().size() == 1 && prompt->as_array()[0].is_string())
    text = &prompt->as_array()[0];
  if (text->is_string()) {
    auto encoded = tokenizer_->encode(text->get_string(), options_.tokenizer_threads);
    if (!encoded.ok()) return fail(400, encoded.error().message);
    ids = std::move(encoded).value();
  } else if (prompt->is_array() && !prompt->as_array().empty()) {
    for (const auto& v : prompt->as_array()) {
      if (!v.is_int64() || v.get_int64() < 0 ||
          v.get_int64() >= static_cast<int64_t>(tokenizer_->vocab_size()))
        return fail(400, "prompt must be a string, or an array of token ids within the vocabulary");
      ids.push_back(static_cast<int32_t>(v.get_int64()));
    }
  } else {
    return fail(400, "prompt must be a non-empty string or array of token ids");
  }
  if (ids.empty()) return fail(400, "prompt must not be empty");
  const int64_t prompt_tokens = static_cast<int64_t>(ids.size());
  RequestLimits limits{options_.max_model_len, static_cast<int32_t>(tokenizer_->vocab_size())};
  limits.structured = &structured_;
  auto sampling = sampling_from_request(body, conv.value(), recipe::Protocol::ChatCompletions,
                                        prompt_tokens, limits);
  if (!sampling.ok()) return fail(400, sampling.error().message);
  if (!admit(recipe::Protocol::ChatCompletions, responder)) return;
  metrics_.prompt_tokens_total += static_cast<uint64_t>(prompt_tokens);

  SessionSetup setup;
  setup.protocol = recipe::Protocol::ChatCompletions;  // SSE framing and [DONE] of OpenAI
  setup.parsing = conv->parsing_options;
  setup.stream = conv->stream;
  setup.prompt_tokens = prompt_tokens;
  setup.events.id = "cmpl-" + random_hex(24);
  setup.events.model = conv->model.empty() ? options_.served_model_name : conv->model;
  setup.events.created = unix_now();
  setup.events.include_usage = conv->include_usage;
  if (logprobs >= 0) {
    sampling.value().params.logprobs = true;
    sampling.value().params.top_logprobs = logprobs;
    setup.logprobs = logprobs;
    setup.logprobs_format = LogprobsFormat::Completions;
  }
  const bool stream = conv->stream;
  setup.make_generator = [stream](const recipe::EventOptions& events, recipe::EventSink& sink) {
    return std::make_unique<CompletionEventGenerator>(events, stream, sink);
  };
  setup.on_done = [this] { in_flight_.fetch_sub(1); };
  std::function<std::string(const recipe::Usage&)> usage_chunk;
  if (stream && conv->include_usage) {
    usage_chunk = [events = setup.events](const recipe::Usage& total) {
      std::string out;
      recipe::JsonWriter w(out);
      w.raw("{\"id\":").str(events.id).raw(",\"object\":\"text_completion\",\"created\":");
      w.num(events.created).raw(",\"model\":").str(events.model).raw(",\"choices\":[],");
      write_completion_usage(w, total);
      w.raw("}");
      return out;
    };
  }
  launch_choices(sampling.value().n, std::move(setup), std::move(responder),
                 engine::EngineRequest{std::move(ids), sampling.value().params},
                 std::move(usage_chunk));
}

}  // namespace deepinfer::server
