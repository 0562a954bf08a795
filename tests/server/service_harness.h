// The whole request path without sockets, for tests and fuzzing: the bundled 640-id tokenizer
// (models/default), a scripted model (optionally slowed per step) under a real engine, the
// ApiService and Router, driven through MemoryResponders.
#pragma once

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "memory_responder.h"
#include "scripted_model.h"
#include "server/api_service.h"
#include "server/router.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server::testing {

// A ModelRunner that sleeps before each step of an inner runner (long-running streams).
class SlowModel final : public engine::ModelRunner {
 public:
  SlowModel(engine::ModelRunner& inner, std::chrono::microseconds delay, bool exact_prefix)
      : inner_(inner), delay_(delay), exact_prefix_(exact_prefix) {}
  int32_t vocab_size() const override { return inner_.vocab_size(); }
  int64_t bytes_per_block(int32_t b) const override { return inner_.bytes_per_block(b); }
  int64_t bytes_per_slot() const override { return inner_.bytes_per_slot(); }
  bool exact_prefix_snapshots() const override { return exact_prefix_; }
  Status allocate(const engine::KvCacheConfig& c) override { return inner_.allocate(c); }
  Status execute(std::span<const engine::RunnerSequence> batch, std::span<float> logits) override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    return inner_.execute(batch, logits);
  }

 private:
  engine::ModelRunner& inner_;
  std::chrono::microseconds delay_;
  bool exact_prefix_;
};

struct HarnessOptions {
  std::string api_key;
  int max_concurrent = 64;
  int64_t max_model_len = 512;
  std::chrono::microseconds step_delay{0};
  std::string script = "Thinking it over.</think>Hello there.";
  bool ready = true;
  bool exact_prefix = true;
  int32_t max_num_seqs = 256;
  int32_t num_blocks = 4096;
  int32_t num_state_slots = 256;  // the scripted model's output does not depend on cached state
#ifdef DEEPINFER_SOURCE_DIR
  std::string source_dir = DEEPINFER_SOURCE_DIR;
#else
  std::string source_dir;  // the source tree (models/default/tokenizer.json)
#endif
};

struct Reply {
  int status = 0;
  std::string content_type;
  std::string body;
  Headers headers;
  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
};

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ServiceHarness {
 public:
  static constexpr const char* kModelName = "deepseek-v4-test";

  explicit ServiceHarness(HarnessOptions options = {}) : options_(std::move(options)) {
    auto tok = tokenizer::Tokenizer::from_json(
        read_text_file(options_.source_dir + "/models/default/tokenizer.json"));
    if (!tok.ok()) {
      error_ = "tokenizer: " + tok.error().message;
      return;
    }
    tokenizer_ = std::move(tok).value();
    eos_ = tokenizer_->added_token_id("<｜end▁of▁sentence｜>");
    auto script = tokenizer_->encode(options_.script);
    if (!script.ok() || eos_ < 0) {
      error_ = "cannot encode the script";
      return;
    }
    const auto vocab = static_cast<int32_t>(tokenizer_->vocab_size());
    scripted_ = std::make_unique<ScriptedModel>(vocab, script.value(), eos_);
    model_ = std::make_unique<SlowModel>(*scripted_, options_.step_delay, options_.exact_prefix);
    engine::EngineConfig config;
    config.scheduler.eos_token_ids = {eos_};
    config.scheduler.max_model_len = static_cast<int32_t>(options_.max_model_len);
    config.kv.num_blocks = options_.num_blocks;
    config.kv.num_state_slots = options_.num_state_slots;
    config.scheduler.max_num_seqs = options_.max_num_seqs;
    auto engine = engine::Engine::create(config, *model_);
    if (!engine.ok()) {
      error_ = "engine: " + engine.error().message;
      return;
    }
    engine_ = std::move(engine).value();
    ApiServiceOptions api_options;
    api_options.served_model_name = kModelName;
    api_options.max_model_len = options_.max_model_len;
    api_options.max_concurrent = options_.max_concurrent;
    api_ = std::make_unique<ApiService>(api_options, metrics_);
    router_ = std::make_unique<Router>(options_.api_key, metrics_);
    api_->register_routes(*router_);
    api_->attach(*tokenizer_, *engine_);
    router_->set_ready(options_.ready);
  }
  ~ServiceHarness() {
    if (api_) api_->abort_all();
    engine_.reset();  // joins the engine thread before the sessions' references go away
  }

  const std::string& error() const { return error_; }
  bool ok() const { return error_.empty(); }
  Router& router() { return *router_; }
  ApiService& api() { return *api_; }
  engine::Engine& engine() { return *engine_; }
  Metrics& metrics() { return metrics_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  int32_t eos() const { return eos_; }

  // Starts an exchange; the caller waits on the returned responder.
  std::shared_ptr<MemoryResponder> start(std::string method, std::string path, std::string body,
                                         Headers headers = {}) {
    HttpRequest request;
    request.method = std::move(method);
    request.target = std::move(path);
    request.headers = std::move(headers);
    request.body = std::move(body);
    auto responder = std::make_shared<MemoryResponder>();
    router_->handle(std::move(request), responder);
    return responder;
  }
  // One complete exchange (waits up to 10 s).
  Reply call(std::string method, std::string path, std::string body = {}, Headers headers = {}) {
    auto responder = start(std::move(method), std::move(path), std::move(body), std::move(headers));
    Reply out;
    if (!responder->wait()) {
      out.status = -1;
      return out;
    }
    const HttpResponse r = responder->reply();
    out.status = r.status;
    out.content_type = r.content_type;
    out.body = r.body;
    out.headers = r.headers;
    return out;
  }
  Reply post(std::string path, std::string body, Headers headers = {}) {
    return call("POST", std::move(path), std::move(body), std::move(headers));
  }

 private:
  HarnessOptions options_;
  std::string error_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  int32_t eos_ = -1;
  std::unique_ptr<ScriptedModel> scripted_;
  std::unique_ptr<SlowModel> model_;
  std::unique_ptr<engine::Engine> engine_;
  Metrics metrics_;
  std::unique_ptr<ApiService> api_;
  std::unique_ptr<Router> router_;
};

}  // namespace deepinfer::server::testing
