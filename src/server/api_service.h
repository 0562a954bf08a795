// The HTTP API over one engine: Chat Completions, Responses, Messages (recipe conversion,
// V4/V4.1 rendering, segment tokenization, streamed parsing), legacy Completions, models,
// health and metrics. Registers its routes on a Router; owns the admission limits (429).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "engine/engine.h"
#include "recipe/render.h"
#include "server/generation_session.h"
#include "server/metrics.h"
#include "server/router.h"
#include "server/structured_params.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

struct ApiServiceOptions {
  std::string served_model_name = "deepseek-v4";
  recipe::EncodingVersion encoding = recipe::EncodingVersion::V41;
  int64_t max_model_len = 4096;
  int max_concurrent = 256;  // running + queued requests; beyond → 429
  int tokenizer_threads = 1;
};

class ApiService {
 public:
  ApiService(ApiServiceOptions options, Metrics& metrics);
  // The routes can be served (503 until the router is made ready) before the model is loaded.
  void register_routes(Router& router);
  // Binds the loaded tokenizer and engine; call before Router::set_ready(true).
  void attach(const tokenizer::Tokenizer& tokenizer, engine::Engine& engine);
  ApiServiceOptions& options() { return options_; }
  // Aborts every request in flight (shutdown): streams end with their final events, complete
  // requests answer with what was generated so far.
  void abort_all();
  int in_flight() const { return in_flight_.load(); }

 private:
  void handle_generation(recipe::Protocol protocol, HttpRequest request, ResponderPtr responder);
  void handle_completions(HttpRequest request, ResponderPtr responder);
  void handle_models(ResponderPtr responder) const;
  bool admit(recipe::Protocol protocol, const ResponderPtr& responder);
  // 404 message when `model` names a model this server does not serve ("" = the served one).
  std::optional<std::string> unknown_model_error(const std::string& model) const;
  // Creates, registers and starts one generation session.
  void launch(SessionSetup setup, ResponderPtr responder, engine::EngineRequest request);
  // `n` choices of one request (n > 1: merged reply, or one shared stream ending with
  // `usage_chunk(total)` when that is set).
  void launch_choices(int n, SessionSetup setup, ResponderPtr responder,
                      engine::EngineRequest request,
                      std::function<std::string(const recipe::Usage&)> usage_chunk);

  ApiServiceOptions options_;
  const tokenizer::Tokenizer* tokenizer_ = nullptr;
  engine::Engine* engine_ = nullptr;
  Metrics& metrics_;
  std::unique_ptr<engine::structured::GrammarCache> grammars_;  // structured output
  StructuredContext structured_;
  std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> next_id_{1};
  int64_t started_at_ = 0;
  std::mutex sessions_mu_;
  std::unordered_map<uint64_t, std::weak_ptr<GenerationSession>> sessions_;
  std::shared_ptr<StepBatcher> batcher_ = std::make_shared<StepBatcher>();
};

}  // namespace deepinfer::server
