// score / generate for V4.1 folders (see model_v41_cli.h).
#include "cli/model_v41_cli.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <vector>

#include "cli/command.h"
#include "common/io.h"
#include "model/v41_config.h"
#include "model/v41_model.h"
#include "tokenizer/tokenizer.h"
#ifdef DEEPINFER_HAVE_CUDA
#include "backend/cuda/cuda_v41_model.h"
#endif

namespace deepinfer::cli {
namespace {

using model::v41::V41Model;

[[noreturn]] void fail(const std::string& type, const std::string& message) {
  JsonObject err;
  err["type"] = type;
  err["message"] = message;
  JsonObject o;
  o["error"] = std::move(err);
  std::cout << to_json(o) << "\n";
  std::cerr << "deepinfer: " << message << "\n";
  throw CliExit{1};
}

std::vector<int32_t> read_ids(const Json& v, const char* what) {
  if (!v.is_array())
    fail("invalid_request_error", std::string("\"") + what + "\" must be an array");
  std::vector<int32_t> out;
  for (const auto& x : v.as_array()) {
    if (!x.is_int64() || x.as_int64() < 0 || x.as_int64() > INT32_MAX)
      fail("invalid_request_error",
           std::string("\"") + what + "\" must hold non-negative integers");
    out.push_back(static_cast<int32_t>(x.as_int64()));
  }
  return out;
}

std::unique_ptr<V41Model> load(const std::string& dir, int threads) {
  auto m = V41Model::load(dir, {threads});
  if (!m) fail("model_error", m.error().message);
  for (const std::string& note : m.value()->notes())
    std::cerr << "deepinfer: note: " << note << "\n";
  return std::move(m.value());
}

void append_float(std::string& out, float v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// The forward on the chosen device: the CPU model's state, or slot 0 of a CudaV41Model built
// from the CPU model's weights (sized for max_context positions).
struct V41Forward {
  V41Model* cpu = nullptr;
  model::v41::V41State state;
#ifdef DEEPINFER_HAVE_CUDA
  std::unique_ptr<cuda::CudaV41Model> gpu;
#endif
  Status run(std::span<const int32_t> ids, std::span<const int64_t> rows, float* out) {
#ifdef DEEPINFER_HAVE_CUDA
    if (gpu) return gpu->prefill(0, ids, rows, out);
#endif
    return cpu->forward(state, ids, rows, out);
  }
};

V41Forward make_forward(V41Model& m, const std::string& device,
                        [[maybe_unused]] int64_t max_context) {
  V41Forward f;
  f.cpu = &m;
#ifdef DEEPINFER_HAVE_CUDA
  const char* env = std::getenv("DEEPINFER_CUDA_EMULATE");
  const bool emulate = env && std::string(env) == "1";
  if (device == "cuda" || (device.empty() && (emulate || cuda::device_available()))) {
    cuda::CudaModelOptions o;
    o.emulate = emulate;
    o.max_context = std::max<int64_t>(max_context, 1);
    auto g = cuda::CudaV41Model::from_model(m, o);
    if (!g) fail("model_error", g.error().message);
    f.gpu = std::move(g.value());
    return f;
  }
#else
  if (device == "cuda") fail("invalid_request_error", "this build has no CUDA backend");
#endif
  f.state = m.new_state();
  return f;
}

double number_or(const JsonObject& o, const char* key, double fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) return fallback;
  if (it->value().is_int64()) return static_cast<double>(it->value().as_int64());
  if (it->value().is_uint64()) return static_cast<double>(it->value().as_uint64());
  if (it->value().is_double()) return it->value().as_double();
  fail("invalid_request_error", std::string("\"") + key + "\" must be a number");
}

bool adds_bos(const std::string& dir) {
  auto text = read_file(dir + "/tokenizer_config.json");
  if (!text) return false;
  auto json = parse_json(text.value());
  if (!json || !json.value().is_object()) return false;
  auto it = json.value().as_object().find("add_bos_token");
  return it != json.value().as_object().end() && it->value().is_bool() && it->value().as_bool();
}

int sample(const float* logits, int V, double temperature, std::mt19937_64& rng) {
  int best = 0;
  for (int i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;
  if (temperature <= 0) return best;
  std::vector<double> p(static_cast<size_t>(V));
  double sum = 0;
  for (int i = 0; i < V; ++i) sum += (p[i] = std::exp((logits[i] - logits[best]) / temperature));
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (int i = 0; i < V; ++i)
    if ((u -= p[i]) <= 0) return i;
  return best;
}

}  // namespace

bool is_v41_model_dir(const std::string& dir) {
  auto text = read_file(dir + "/config.json");
  if (!text) return false;
  auto json = parse_json(text.value());
  return json && model::v41::is_v41_config(json.value());
}

void run_v41_score(const std::string& dir, int threads, const std::string& device,
                   std::span<const int32_t> ids, std::span<const int64_t> rows) {
  auto m = load(dir, threads);
  const int V = m->config().vocab_size;
  std::vector<float> logits(rows.size() * static_cast<size_t>(V));
  V41Forward fwd = make_forward(*m, device, static_cast<int64_t>(ids.size()));
  if (auto s = fwd.run(ids, rows, logits.data()); !s)
    fail("invalid_request_error", s.error().message);
  std::string out = "{\"logits\":[";
  out.reserve(rows.size() * static_cast<size_t>(V) * 12 + 16);
  for (size_t r = 0; r < rows.size(); ++r) {
    out += r ? ",[" : "[";
    for (int v = 0; v < V; ++v) {
      if (v) out += ',';
      append_float(out, logits[r * static_cast<size_t>(V) + static_cast<size_t>(v)]);
    }
    out += ']';
  }
  out += "]}\n";
  std::cout << out;
}

void run_v41_generate(const std::string& dir, int threads, const std::string& device,
                      const JsonObject& req) {
  std::vector<int32_t> ids;
  bool bos = false;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::error_code ec;
  if (std::filesystem::exists(dir + "/tokenizer.json", ec)) {
    auto t = tokenizer::Tokenizer::from_path(dir + "/tokenizer.json");
    if (!t) fail("model_error", "tokenizer.json: " + t.error().message);
    tok = std::move(t.value());
  }
  if (auto it = req.find("ids"); it != req.end()) {
    ids = read_ids(it->value(), "ids");
  } else if (auto p = req.find("prompt"); p != req.end()) {
    if (!p->value().is_string()) fail("invalid_request_error", "\"prompt\" must be a string");
    if (!tok) fail("invalid_request_error", "\"prompt\" needs " + dir + "/tokenizer.json");
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
  bool ignore_eos = false;
  if (auto it = req.find("ignore_eos"); it != req.end() && it->value().is_bool())
    ignore_eos = it->value().as_bool();
  if (max_tokens < 0 || max_tokens > 1e7) fail("invalid_request_error", "bad \"max_tokens\"");
  auto m = load(dir, threads);
  const auto& cfg = m->config();
  if (bos) ids.insert(ids.begin(), cfg.bos_token_id);
  if (ids.empty()) fail("invalid_request_error", "the prompt is empty");
  const int V = cfg.vocab_size;
  std::vector<float> logits(static_cast<size_t>(V));
  V41Forward fwd = make_forward(
      *m, device, static_cast<int64_t>(ids.size() + static_cast<size_t>(max_tokens)) + 1);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<int32_t> out;
  const int64_t last = static_cast<int64_t>(ids.size()) - 1;
  if (max_tokens >= 1) {
    if (auto s = fwd.run(ids, std::span<const int64_t>(&last, 1), logits.data()); !s)
      fail("invalid_request_error", s.error().message);
  }
  for (int64_t i = 0; i < static_cast<int64_t>(max_tokens); ++i) {
    const int32_t next = sample(logits.data(), V, temperature, rng);
    out.push_back(next);
    bool eos = false;
    for (int e : cfg.eos_token_ids) eos |= next == e;
    if ((eos && !ignore_eos) || i + 1 == static_cast<int64_t>(max_tokens)) break;
    const int64_t zero = 0;
    if (auto s = fwd.run(std::span<const int32_t>(&out.back(), 1),
                         std::span<const int64_t>(&zero, 1), logits.data());
        !s)
      fail("invalid_request_error", s.error().message);
  }
  JsonObject o;
  JsonArray arr;
  for (int32_t t : out) arr.push_back(t);
  o["ids"] = std::move(arr);
  if (tok) {
    auto text = tok->decode(out);
    if (text) o["text"] = text.value();
  }
  std::cout << to_json(o) << "\n";
}

}  // namespace deepinfer::cli
