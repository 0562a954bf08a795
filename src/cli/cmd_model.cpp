// `deepinfer score` and `deepinfer generate`: the V4 model on the CPU over JSON on stdin.
//   score:    {"ids":[...], "rows":[...]}  → {"logits":[[...], ...]}  (one forward; full vocab)
//   generate: {"ids":[...] | "prompt":"text", "max_tokens":N, "temperature":T, "seed":S}
//             → {"ids":[new ids], "text":"..."}  (greedy at T = 0; incremental decoding)
// Errors print {"error":{"type","message"}} on stdout and exit with status 1.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli/cmd_engine.h"
#include "cli/command.h"
#include "cli/engine_device.h"
#include "cli/model_v41_cli.h"
#include "common/io.h"
#include "common/json.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#ifdef DEEPINFER_HAVE_CUDA
#include "backend/cuda/cuda_model.h"
#endif

namespace {

using deepinfer::Json;
using deepinfer::JsonObject;
using deepinfer::cli::CliExit;

[[noreturn]] void fail(const std::string& type, const std::string& message) {
  JsonObject err;
  err["type"] = type;
  err["message"] = message;
  JsonObject o;
  o["error"] = std::move(err);
  std::cout << deepinfer::to_json(o) << "\n";
  std::cerr << "deepinfer: " << message << "\n";
  throw CliExit{1};
}

JsonObject read_request() {
  auto json = deepinfer::parse_json(deepinfer::read_all(std::cin));
  if (!json) fail("invalid_request_error", "stdin: " + json.error().message);
  if (!json.value().is_object()) fail("invalid_request_error", "stdin must hold one JSON object");
  return std::move(json.value().as_object());
}

std::vector<int32_t> read_ids(const Json& v, const char* what) {
  if (!v.is_array())
    fail("invalid_request_error", std::string("\"") + what + "\" must be an array");
  std::vector<int32_t> out;
  for (const auto& x : v.as_array()) {
    if (!x.is_int64() || x.as_int64() < 0 || x.as_int64() > INT32_MAX) {
      fail("invalid_request_error",
           std::string("\"") + what + "\" must hold non-negative integers");
    }
    out.push_back(static_cast<int32_t>(x.as_int64()));
  }
  return out;
}

std::unique_ptr<deepinfer::model::Model> load_model(const std::string& dir, int threads) {
  auto m = deepinfer::model::Model::load(dir, {threads});
  if (!m) fail("model_error", m.error().message);
  return std::move(m.value());
}

// The forward on the chosen device (--device cpu|cuda; default cuda when the build has CUDA and a
// GPU answers): the CPU model's state, or slot 0 of the CUDA model built from its weights.
bool cuda_selected(const std::string& device) {
#ifdef DEEPINFER_HAVE_CUDA
  if (device == "cuda") return true;
  return device.empty() && deepinfer::cuda::device_available();
#else
  if (device == "cuda") fail("invalid_request_error", "this build has no CUDA backend");
  return false;
#endif
}

struct DeviceForward {
  deepinfer::model::Model* cpu = nullptr;
  deepinfer::model::SequenceState state;
#ifdef DEEPINFER_HAVE_CUDA
  std::unique_ptr<deepinfer::cuda::CudaModel> gpu;
#endif
  deepinfer::Status run(std::span<const int32_t> ids, std::span<const int64_t> rows, float* out) {
#ifdef DEEPINFER_HAVE_CUDA
    if (gpu) return gpu->prefill(0, ids, rows, out);
#endif
    return cpu->forward(state, ids, rows, out);
  }
};

DeviceForward make_forward(deepinfer::model::Model& m, const std::string& device,
                           [[maybe_unused]] int64_t max_context) {
  DeviceForward f;
  f.cpu = &m;
  if (!cuda_selected(device)) {
    f.state = m.new_state();
    return f;
  }
#ifdef DEEPINFER_HAVE_CUDA
  deepinfer::cuda::CudaModelOptions o;
  o.max_context = std::max<int64_t>(max_context, 1);
  auto g = deepinfer::cuda::CudaModel::from_model(m, o);
  if (!g) fail("model_error", g.error().message);
  f.gpu = std::move(g.value());
#endif
  return f;
}

// Shortest text that reads back as the same float.
void append_float(std::string& out, float v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void run_score(const std::string& dir, int threads, const std::string& device) {
  JsonObject req = read_request();
  auto it = req.find("ids");
  if (it == req.end()) fail("invalid_request_error", "score needs \"ids\"");
  const std::vector<int32_t> ids = read_ids(it->value(), "ids");
  if (ids.empty()) fail("invalid_request_error", "\"ids\" is empty");
  std::vector<int64_t> rows;
  if (auto r = req.find("rows"); r != req.end()) {
    if (!r->value().is_array()) fail("invalid_request_error", "\"rows\" must be an array");
    for (const auto& x : r->value().as_array()) {
      if (!x.is_int64()) fail("invalid_request_error", "\"rows\" must hold integers");
      int64_t v = x.as_int64();
      if (v < 0) v += static_cast<int64_t>(ids.size());  // -1: the last position
      if (v < 0 || v >= static_cast<int64_t>(ids.size())) {
        fail("invalid_request_error", "row " + std::to_string(x.as_int64()) + " is outside the " +
                                          std::to_string(ids.size()) + " ids");
      }
      rows.push_back(v);
    }
  } else {
    for (size_t i = 0; i < ids.size(); ++i) rows.push_back(static_cast<int64_t>(i));
  }
  if (deepinfer::cli::is_v41_model_dir(dir))
    return deepinfer::cli::run_v41_score(dir, threads, device, ids, rows);
  auto model = load_model(dir, threads);
  const int V = model->config().vocab_size;
  std::vector<float> logits(rows.size() * static_cast<size_t>(V));
  DeviceForward fwd = make_forward(*model, device, static_cast<int64_t>(ids.size()));
  if (auto s = fwd.run(ids, rows, logits.data()); !s) {
    fail("invalid_request_error", s.error().message);
  }
  std::string out = "{\"logits\":[";
  out.reserve(rows.size() * V * 12 + 16);
  for (size_t r = 0; r < rows.size(); ++r) {
    out += r ? ",[" : "[";
    for (int v = 0; v < V; ++v) {
      if (v) out += ',';
      append_float(out, logits[r * V + v]);
    }
    out += ']';
  }
  out += "]}\n";
  std::cout << out;
}

double number_or(const JsonObject& o, const char* key, double fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) return fallback;
  if (it->value().is_int64()) return static_cast<double>(it->value().as_int64());
  if (it->value().is_uint64()) return static_cast<double>(it->value().as_uint64());
  if (it->value().is_double()) return it->value().as_double();
  fail("invalid_request_error", std::string("\"") + key + "\" must be a number");
}

std::unique_ptr<deepinfer::tokenizer::Tokenizer> load_tokenizer(const std::string& dir,
                                                                bool required) {
  std::error_code ec;
  if (!std::filesystem::exists(dir + "/tokenizer.json", ec)) {
    if (required) fail("invalid_request_error", "\"prompt\" needs " + dir + "/tokenizer.json");
    return nullptr;
  }
  auto t = deepinfer::tokenizer::Tokenizer::from_path(dir + "/tokenizer.json");
  if (!t) fail("model_error", "tokenizer.json: " + t.error().message);
  return std::move(t.value());
}

// tokenizer_config.json's add_bos_token (HF adds BOS when encoding a prompt).
bool adds_bos(const std::string& dir) {
  auto text = deepinfer::read_file(dir + "/tokenizer_config.json");
  if (!text) return false;
  auto json = deepinfer::parse_json(text.value());
  if (!json || !json.value().is_object()) return false;
  auto it = json.value().as_object().find("add_bos_token");
  return it != json.value().as_object().end() && it->value().is_bool() && it->value().as_bool();
}

int sample(const float* logits, int V, double temperature, std::mt19937_64& rng) {
  int best = 0;
  for (int i = 1; i < V; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  if (temperature <= 0) return best;
  std::vector<double> p(static_cast<size_t>(V));
  double sum = 0;
  for (int i = 0; i < V; ++i) sum += (p[i] = std::exp((logits[i] - logits[best]) / temperature));
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (int i = 0; i < V; ++i) {
    if ((u -= p[i]) <= 0) return i;
  }
  return best;
}

void run_generate(const std::string& dir, int threads, const std::string& device) {
  JsonObject req = read_request();
  if (deepinfer::cli::is_v41_model_dir(dir))
    return deepinfer::cli::run_v41_generate(dir, threads, device, req);
  std::vector<int32_t> ids;
  bool bos = false;  // prompt text: prepend BOS when tokenizer_config.json says so
  auto tok = load_tokenizer(dir, false);
  if (auto it = req.find("ids"); it != req.end()) {
    ids = read_ids(it->value(), "ids");
  } else if (auto p = req.find("prompt"); p != req.end()) {
    if (!p->value().is_string()) fail("invalid_request_error", "\"prompt\" must be a string");
    if (!tok) load_tokenizer(dir, true);
    auto enc = tok->encode(std::string(p->value().as_string()));
    if (!enc) fail("invalid_request_error", "prompt: " + enc.error().message);
    bos = adds_bos(dir);
    ids.insert(ids.end(), enc.value().begin(), enc.value().end());
  } else {
    fail("invalid_request_error", "generate needs \"ids\" or \"prompt\"");
  }
  const double max_tokens = number_or(req, "max_tokens", 16);
  const double temperature = number_or(req, "temperature", 0);
  const double seed = number_or(req, "seed", 0);
  if (max_tokens < 0 || max_tokens > 1e7) fail("invalid_request_error", "bad \"max_tokens\"");
  auto model = load_model(dir, threads);
  const auto& cfg = model->config();
  if (bos) ids.insert(ids.begin(), cfg.bos_token_id);
  if (ids.empty()) fail("invalid_request_error", "the prompt is empty");
  const int V = cfg.vocab_size;
  std::vector<float> logits(static_cast<size_t>(V));
  DeviceForward fwd =
      make_forward(*model, device, static_cast<int64_t>(ids.size() + max_tokens) + 1);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<int32_t> out;
  const int64_t last = static_cast<int64_t>(ids.size()) - 1;
  if (max_tokens >= 1) {
    if (auto s = fwd.run(ids, std::span<const int64_t>(&last, 1), logits.data()); !s) {
      fail("invalid_request_error", s.error().message);
    }
  }
  for (int64_t i = 0; i < static_cast<int64_t>(max_tokens); ++i) {
    const int32_t next = sample(logits.data(), V, temperature, rng);
    out.push_back(next);
    bool eos = false;
    for (int e : cfg.eos_token_ids) eos |= next == e;
    if (eos || i + 1 == static_cast<int64_t>(max_tokens)) break;
    const int64_t zero = 0;
    if (auto s = fwd.run(std::span<const int32_t>(&out.back(), 1),
                         std::span<const int64_t>(&zero, 1), logits.data());
        !s) {
      fail("invalid_request_error", s.error().message);
    }
  }
  JsonObject o;
  deepinfer::JsonArray arr;
  for (int32_t t : out) arr.push_back(t);
  o["ids"] = std::move(arr);
  if (tok) {
    auto text = tok->decode(out);
    if (text) o["text"] = text.value();
  }
  std::cout << deepinfer::to_json(o) << "\n";
}

void setup(CLI::App& app) {
  for (const char* name : {"score", "generate"}) {
    const bool score = std::string(name) == "score";
    auto* cmd = app.add_subcommand(
        name, score ? "Full-vocabulary logits of one forward at the requested rows (JSON on stdin)"
                    : "Generate tokens with the CPU model (JSON on stdin)");
    auto dir = std::make_shared<std::string>();
    auto threads = std::make_shared<int>(0);
    cmd->add_option("--model", *dir, "Model folder (config.json + safetensors)")->required();
    cmd->add_option("--threads", *threads, "CPU threads (default: all cores)");
    auto device = std::make_shared<std::string>();
    cmd->add_option("--device", *device, "cpu or cuda (default: cuda when a GPU is present)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
    auto invariant = std::make_shared<bool>(false);
    cmd->add_flag("--batch-invariant", *invariant, deepinfer::cli::kBatchInvariantHelp);
    auto batch = std::make_shared<deepinfer::cli::BatchFlags>();
    if (!score) deepinfer::cli::add_batch_options(*cmd, *batch);
    cmd->callback([dir, threads, score, batch, device, invariant] {
      int n = *threads > 0 ? *threads : static_cast<int>(std::thread::hardware_concurrency());
      if (n < 1) n = 1;
      deepinfer::cli::apply_batch_invariant(*invariant && *device != "cpu");
      if (score) {
        run_score(*dir, n, *device);
      } else if (!batch->batch_file.empty()) {
        deepinfer::cli::run_generate_batch(*dir, n, *batch, *device);
      } else {
        run_generate(*dir, n, *device);
      }
    });
  }
}

DEEPINFER_COMMAND(setup);

}  // namespace
