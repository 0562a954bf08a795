// `deepinfer serve`: the OpenAI (Chat Completions, Responses, Completions) and Anthropic
// (Messages) HTTP API over one model. The socket is open (503) while the model loads; SIGTERM or
// SIGINT answers new requests 503, aborts in-flight requests (streams end with their final
// events) and exits once the answers are written.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/command.h"
#include "cli/engine_device.h"
#include "common/byte_size.h"
#include "engine/engine.h"
#include "engine/v41_engine_model.h"
#include "server/api_service.h"
#include "server/http_server.h"
#include "server/router.h"
#include "tokenizer/cache_dir.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

struct ServeFlags {
  std::string model;
  std::string tokenizer;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string served_model_name;
  std::string encoding = "auto";
  std::string device = "auto";
  int64_t max_model_len = 0;  // 0: the model's limit, at most 65536
  std::string kv_cache_memory = "2G";
  int block_size = 16;
  int max_num_seqs = 64;
  int max_batched_tokens = 2048;
  int max_concurrent = 512;
  int threads = 0;
  int io_threads = 0;  // 0: auto (io_threads_for)
  int handler_threads = 2;
  std::string max_body = "32M";
  bool no_prefix_cache = false;
  bool batch_invariant = false;
};

// The automatic I/O thread count: half the cores, 1 to 8. At 1,000 streams on 16 cores the server's
// own p99 per-token delay is ≤ 2 ms with 8–12 I/O threads and 3–4 ms with 4
// (bench/results/server.md); the other half of the cores is left to the engine and sampling.
int io_threads_for(unsigned cores) { return static_cast<int>(std::clamp(cores / 2, 1u, 8u)); }

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "deepinfer serve: " << message << "\n";
  throw CliExit{1};
}

// The bundled model: $DEEPINFER_MODEL, else models/default of the source tree.
std::string default_model_dir() {
  if (const char* env = std::getenv("DEEPINFER_MODEL")) return env;
  return std::string(DEEPINFER_SOURCE_DIR) + "/models/default";
}

std::unique_ptr<tokenizer::Tokenizer> load_tokenizer(const ServeFlags& f,
                                                     const std::string& model_dir, bool v41) {
  std::string path = f.tokenizer;
  std::error_code ec;
  if (path.empty())
    path = std::filesystem::exists(model_dir + "/tokenizer.json", ec)
               ? model_dir
               : tokenizer::deepseek_tokenizer_dir(v41);
  auto tok = tokenizer::Tokenizer::from_path(path);
  if (!tok.ok()) fail("tokenizer (" + path + "): " + tok.error().message);
  return std::move(tok).value();
}

void run(const ServeFlags& f) {
  auto cuda = engine_uses_cuda(f.device, "deepinfer serve");
  if (!cuda.ok()) fail(cuda.error().message);
  apply_batch_invariant(f.batch_invariant);
  if (f.port < 0 || f.port > 65535) fail("--port must be in [0, 65535]");
  const std::string model_dir = f.model.empty() ? default_model_dir() : f.model;
  std::error_code ec;
  if (!std::filesystem::exists(model_dir + "/config.json", ec))
    fail("no model at '" + model_dir + "' (config.json missing); pass --model DIR");
  auto max_body = parse_byte_size(f.max_body, "--max-body-bytes");
  if (!max_body.ok()) fail(max_body.error().message);
  auto kv_bytes = parse_byte_size(f.kv_cache_memory, "--kv-cache-memory");
  if (!kv_bytes.ok()) fail(kv_bytes.error().message);

  // Block SIGINT/SIGTERM in every thread; the main thread waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::Metrics metrics;
  server::ApiServiceOptions api_options;
  api_options.served_model_name = f.served_model_name.empty()
                                      ? std::filesystem::path(model_dir).filename().string()
                                      : f.served_model_name;
  for (char c : api_options.served_model_name)
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20)
      fail("--served-model-name must not contain quotes, backslashes or control characters");
  api_options.max_concurrent = f.max_concurrent;
  server::ApiService api(api_options, metrics);
  const char* env_key = std::getenv("DEEPINFER_API_KEY");
  server::Router router(!f.api_key.empty() ? f.api_key : env_key ? env_key : "", metrics);
  api.register_routes(router);
  server::HttpServerOptions http_options;
  http_options.host = f.host;
  http_options.port = static_cast<uint16_t>(f.port);
  http_options.io_threads =
      f.io_threads > 0 ? f.io_threads : io_threads_for(std::thread::hardware_concurrency());
  http_options.handler_threads = f.handler_threads;
  http_options.max_body_bytes = static_cast<size_t>(max_body.value());
  http_options.on_token_delay = [&metrics](const server::TokenDelay& d) {
    metrics.observe_token_delay(d);
  };
  server::HttpServer http(http_options, [&router](server::HttpRequest q, server::ResponderPtr r) {
    router.handle(std::move(q), std::move(r));
  });
  if (auto s = http.start(); !s.ok()) fail(s.error().message);
  std::cerr << "deepinfer serve: listening on http://" << f.host << ":" << http.port()
            << " (503 until the model is loaded)\n";

  const auto t0 = std::chrono::steady_clock::now();
  const int threads =
      f.threads > 0 ? f.threads : static_cast<int>(std::thread::hardware_concurrency());
  std::cerr << "deepinfer serve: loading " << model_dir << " ...\n";
  // V4 or V4.1 from config.json; either runs through the engine.
  auto loaded = engine::load_engine_model(model_dir, threads, false);
  if (!loaded.ok()) fail(loaded.error().message);
  engine::EngineModel& model = loaded.value();
  for (const std::string& note : model.notes)
    std::cerr << "deepinfer serve: note: " << note << "\n";
  bool v41 = false;
  if (f.encoding == "v41")
    v41 = true;
  else if (f.encoding == "auto")
    v41 = model.is_v41();
  else if (f.encoding != "v4")
    fail("--encoding must be v4, v41 or auto");
  api.options().encoding = v41 ? recipe::EncodingVersion::V41 : recipe::EncodingVersion::V4;
  auto tok = load_tokenizer(f, model_dir, v41);
  if (static_cast<int64_t>(tok->vocab_size()) > model.vocab_size)
    fail("the tokenizer has " + std::to_string(tok->vocab_size()) + " ids but the model only " +
         std::to_string(model.vocab_size) + "; pass the model's own --tokenizer");

  engine::EngineConfig engine_config;
  engine_config.kv.block_size = f.block_size;
  engine_config.kv.prefix_caching = !f.no_prefix_cache;
  engine_config.kv_cache_memory = kv_bytes.value();
  engine_config.scheduler.max_num_seqs = f.max_num_seqs;
  engine_config.scheduler.max_num_batched_tokens = f.max_batched_tokens;
  engine_config.scheduler.max_model_len =
      static_cast<int32_t>(f.max_model_len > 0 ? f.max_model_len : 65536);
  for (int id : model.eos_token_ids) engine_config.scheduler.eos_token_ids.push_back(id);
  std::string runner_note;
  std::unique_ptr<engine::ModelRunner> runner = std::move(model.runner);  // V4.1 on the CPU
  if (model.is_v41()) {
    if (cuda.value()) {
      auto r = make_cuda_v41_runner(*model.v41, engine_config.kv_cache_memory, engine_config,
                                    runner_note);
      if (!r.ok()) fail(r.error().message);
      runner = std::move(r.value());
    }
  } else {
    auto r = make_engine_runner(*model.v4, cuda.value(), engine_config.kv_cache_memory,
                                engine_config, runner_note);
    if (!r.ok()) fail(r.error().message);
    runner = std::move(r.value());
  }
  if (!runner_note.empty()) std::cerr << "deepinfer serve: " << runner_note << "\n";
  auto eng = engine::Engine::create(engine_config, *runner);
  if (!eng.ok()) fail(eng.error().message);
  api.options().max_model_len = eng.value()->max_model_len();
  api.attach(*tok, *eng.value());
  router.set_ready(true);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "deepinfer serve: model '" << api.options().served_model_name << "' ready in "
            << seconds << " s (" << model.num_layers << " layers, vocab " << model.vocab_size
            << ", max_model_len " << api.options().max_model_len << ", encoding "
            << (v41 ? "v41" : "v4") << ")\n";

  int signal = 0;
  sigwait(&signals, &signal);
  std::cerr << "deepinfer serve: signal " << signal << ", shutting down\n";
  router.set_ready(false);  // new requests: 503
  api.abort_all();          // in-flight streams end with their final events and [DONE]
  http.stop(5000);          // stop accepting; answered exchanges drain within the grace period
  http.wait();
}

void setup(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand("serve", "Serve the OpenAI and Anthropic HTTP APIs over a model");
  cmd->add_option("--model", flags->model, "Model folder (default: the bundled model)");
  cmd->add_option(
      "--tokenizer", flags->tokenizer,
      "tokenizer.json or its folder (default: the model's, else the cached DeepSeek one)");
  cmd->add_option("--host", flags->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", flags->port, "Port (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", flags->api_key, "Required API key (also env DEEPINFER_API_KEY)");
  cmd->add_option("--served-model-name", flags->served_model_name,
                  "Model name clients use (default: the model folder's name)");
  cmd->add_option("--encoding", flags->encoding, "Prompt encoding: v4, v41 or auto")
      ->capture_default_str();
  cmd->add_option("--device", flags->device, "cpu, cuda or auto")->capture_default_str();
  cmd->add_flag("--batch-invariant", flags->batch_invariant, kBatchInvariantHelp);
  cmd->add_option("--max-model-len", flags->max_model_len, "Prompt + output tokens per request");
  cmd->add_option("--kv-cache-memory", flags->kv_cache_memory, "KV cache budget (e.g. 2G)")
      ->capture_default_str();
  cmd->add_option("--block-size", flags->block_size, "KV block size in tokens")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", flags->max_num_seqs, "Requests in one batch")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", flags->max_batched_tokens, "Tokens per engine step")
      ->capture_default_str();
  cmd->add_option("--max-concurrent-requests", flags->max_concurrent,
                  "Running + queued requests before 429")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "Model threads (default: all cores)");
  cmd->add_option("--io-threads", flags->io_threads, "HTTP I/O threads (0: half the cores, 1 to 8)")
      ->capture_default_str();
  cmd->add_option("--handler-threads", flags->handler_threads,
                  "threads that parse, render and tokenize new requests (0: the I/O threads)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", flags->max_body, "Largest request body")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-cache", flags->no_prefix_cache, "Disable prefix caching");
  cmd->callback([flags] { run(*flags); });
}

DEEPINFER_COMMAND(setup);

}  // namespace
}  // namespace deepinfer::cli
