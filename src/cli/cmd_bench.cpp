// `deepinfer bench`: prefill and decode throughput of one model on the CPU or the GPU, with the
// roofline fraction of each number. --slice synthesizes a random-weight checkpoint with the
// V4-Flash dims (or toy dims) first. Prints a markdown table; --json writes every number with the
// machine and the commit.
//   decode B:    B sequences filled to --context, then one token each per step; per-step latency
//                (device synchronised) median over --steps after --warmup steps (measured first)
//   prefill BxL: B fresh sequences of L tokens (CUDA: packed into launches of --chunk-tokens
//                rows; CPU: one after another); tokens/s = B·L / median time
//   roofline:    decode bytes read per step / HBM bandwidth; prefill FLOPs / dense peak
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/bench_backend.h"
#include "cli/bench_cost.h"
#include "cli/command.h"
#include "cli/engine_device.h"
#include "common/io.h"
#include "common/json.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/synthetic_checkpoint.h"

#ifdef DEEPINFER_HAVE_CUDA
#include "backend/cuda/cuda_model.h"
#endif

namespace {

namespace fs = std::filesystem;
using deepinfer::Json;
using deepinfer::JsonArray;
using deepinfer::JsonObject;
using deepinfer::cli::CliExit;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void fail(const std::string& message, int code = 1) {
  std::cerr << "deepinfer bench: " << message << "\n";
  throw CliExit{code};
}

struct Options {
  std::string device;
  bool batch_invariant = false;
  std::string model_dir;
  std::string slice;
  int layers = 4;
  std::string format = "bf16";
  std::string slice_dir;
  bool keep_slice = false;
  uint64_t seed = 1;
  std::string prefill = "1x8192,64x512";
  std::string decode_batch = "1,16,64,256";
  int64_t context = 4096;
  int64_t chunk_tokens = 8192;  // one launch per 8,192 prompt tokens, as HF runs a whole prompt
  int warmup = 1;
  int reps = 3;
  int steps = 8;
  double time_budget = 0;  // seconds for all measurements (0: no limit)
  int threads = 0;
  std::string json_path;
  std::string commit;
  double hbm_gbps = 0;  // 0: the card's (H100 3,350, else the H200's 4,800)
  double peak_tflops = 989;
  std::string peak_note = "H100 / H200 dense bf16 tensor-core peak (spec sheet)";
};

struct Shape {
  int batch;
  int64_t len;
};

int64_t parse_positive(const std::string& text, const std::string& what) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || text.empty() || v <= 0) {
    fail(what + ": \"" + text + "\" is not a positive integer", 2);
  }
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> out;
  if (text.empty() || text == "none") return out;
  for (const auto& item : split(text, ',')) {
    const size_t x = item.find('x');
    if (x == std::string::npos) fail("--prefill: \"" + item + "\" is not BATCHxLENGTH", 2);
    out.push_back({static_cast<int>(parse_positive(item.substr(0, x), "--prefill batch")),
                   parse_positive(item.substr(x + 1), "--prefill length")});
  }
  return out;
}

std::vector<int> parse_batches(const std::string& text) {
  std::vector<int> out;
  if (text.empty() || text == "none") return out;
  for (const auto& item : split(text, ',')) {
    out.push_back(static_cast<int>(parse_positive(item, "--decode-batch")));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int32_t token_at(int64_t i, int vocab) {  // ids in [3, vocab): no BOS/EOS/pad
  return static_cast<int32_t>(3 + (i * 7919) % (vocab - 3));
}

std::string first_line_of(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    if (std::fgets(buf, sizeof buf, p)) out = buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

JsonObject machine_info(const std::string& device) {
  JsonObject m;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line)) {
    if (line.rfind("model name", 0) == 0) {
      m["cpu"] = line.substr(line.find(':') + 2);
      break;
    }
  }
  m["cpu_threads"] = static_cast<int64_t>(std::thread::hardware_concurrency());
  std::ifstream mem("/proc/meminfo");
  while (std::getline(mem, line)) {
    if (line.rfind("MemTotal:", 0) == 0) {
      m["memory_bytes"] = std::stoll(line.substr(9)) * 1024;
      break;
    }
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) m["host"] = host;
  m["device"] = device;
  return m;
}

std::string fmt(double v, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt(b / 1e9, 2) + " GB";
  if (b >= 1e6) return fmt(b / 1e6, 1) + " MB";
  return fmt(b / 1e3, 1) + " kB";
}

std::string human_flops(double f) {  // per second
  if (f >= 1e12) return fmt(f / 1e12, 1) + " TFLOP/s";
  return fmt(f / 1e9, 1) + " GFLOP/s";
}

std::string percent(double fraction) {
  const double p = 100 * fraction;
  return fmt(p, p >= 1 ? 1 : (p >= 0.01 ? 3 : 5)) + " %";
}

std::string human_rate(double tokens_per_s) {
  if (tokens_per_s >= 1e4) return fmt(tokens_per_s / 1e3, 1) + "k";
  return fmt(tokens_per_s, tokens_per_s < 10 ? 2 : 1);
}

std::string default_device() {
#ifdef DEEPINFER_HAVE_CUDA
  if (deepinfer::cuda::device_available()) return "cuda";
#endif
  return "cpu";
}

// ---- the run
// --------------------------------------------------------------------------------------
void run(Options o) {
  if (o.device.empty()) o.device = default_device();
  if (o.device != "cpu" && o.device != "cuda") {
    fail("--device must be cpu or cuda, not \"" + o.device + "\"", 2);
  }
  deepinfer::cli::apply_batch_invariant(o.batch_invariant && o.device == "cuda");
  if (o.model_dir.empty() == o.slice.empty()) fail("give exactly one of --model and --slice", 2);
  if (!o.slice.empty() && o.slice != "v4-flash" && o.slice != "tiny") {
    fail("--slice must be v4-flash or tiny, not \"" + o.slice + "\"", 2);
  }
  auto format = deepinfer::model::parse_synthetic_format(o.format);
  if (!format) fail("--format: " + format.error().message, 2);
  if (o.layers <= 0 || o.layers > 43) fail("--layers must lie in [1, 43]", 2);
  if (o.context <= 0) fail("--context must be positive", 2);
  if (o.chunk_tokens <= 0) fail("--chunk-tokens must be positive", 2);
  if (o.reps <= 0 || o.steps <= 0 || o.warmup < 0) {
    fail("--reps and --steps must be positive, --warmup not negative", 2);
  }
  const std::vector<Shape> shapes = parse_shapes(o.prefill);
  const std::vector<int> batches = parse_batches(o.decode_batch);
  if (o.threads <= 0)
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  JsonObject out;
  out["tool"] = "deepinfer bench";
  if (o.commit.empty()) {
    o.commit = first_line_of("git -C '" + std::string(DEEPINFER_SOURCE_DIR) +
                             "' rev-parse --short HEAD 2>/dev/null");
  }
  out["commit"] = o.commit.empty() ? "unknown" : o.commit;

  // 1. the checkpoint
  std::string dir = o.model_dir;
  double synth_s = 0;
  struct Cleanup {  // a temporary slice goes away however the run ends
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup;
  if (!o.slice.empty()) {
    const Json config = o.slice == "tiny"
                            ? deepinfer::model::tiny_slice_config(o.layers, format.value())
                            : deepinfer::model::v4_flash_slice_config(o.layers, format.value());
    dir = o.slice_dir;
    if (dir.empty()) {
      std::error_code ec;
      const fs::path tmp = fs::temp_directory_path(ec);
      dir = (tmp / ("deepinfer-bench-" + std::to_string(::getpid()))).string();
      if (!o.keep_slice) cleanup.dir = dir;
    }
    std::cerr << "synthesizing " << o.slice << " slice (" << o.layers << " layers, " << o.format
              << ") in " << dir << " ...\n";
    const auto t0 = Clock::now();
    auto w = deepinfer::model::write_synthetic_checkpoint(config, dir, format.value(),
                                                          {o.seed, o.threads});
    if (!w) fail(w.error().message);
    synth_s = seconds_since(t0);
    std::cerr << "  " << w.value().tensors << " tensors, " << fmt(w.value().bytes / 1e9, 2)
              << " GB in " << fmt(synth_s, 1) << " s\n";
  }
  auto config = deepinfer::model::load_model_config(dir);
  if (!config) fail(config.error().message);
  const auto& cfg = config.value();
  auto ckpt = deepinfer::model::Checkpoint::open(dir);
  if (!ckpt) fail(ckpt.error().message);
  auto cost = deepinfer::cli::bench_cost(cfg, ckpt.value());
  if (!cost) fail(cost.error().message);
  int64_t checkpoint_bytes = 0;
  for (const auto& [name, t] : ckpt.value().tensors()) checkpoint_bytes += t.nbytes;

  // 2. the backend
  int64_t max_context = o.context + o.warmup + o.steps + 1;
  for (const auto& s : shapes) max_context = std::max(max_context, s.len);
  int max_batch = batches.empty() ? 1 : batches.back();
  for (const auto& s : shapes) max_batch = std::max(max_batch, s.batch);  // batched prefills
  deepinfer::cli::BenchBackendOptions bo{o.threads, max_batch, max_context, o.chunk_tokens};
  const auto t_load = Clock::now();
  auto backend = o.device == "cuda" ? deepinfer::cli::make_cuda_backend(dir, bo)
                                    : deepinfer::cli::make_cpu_backend(dir, bo);
  if (!backend) fail(backend.error().message);
  auto& be = *backend.value();
  const double load_s = seconds_since(t_load);
  const int vocab = cfg.vocab_size;
  std::cerr << "loaded on " << be.device_name() << " in " << fmt(load_s, 1) << " s\n";
  // The decode roofline of the card the run is on (an H100's HBM3 is 3.35 TB/s, an H200's HBM3e
  // 4.8), so that fractions from either compare.
  if (o.hbm_gbps <= 0)
    o.hbm_gbps = be.device_name().find("H100") != std::string::npos ? 3350 : 4800;

  // the JSON: written now and after every measurement, so a cut-short run still reports
  JsonObject model;
  model["dir"] = o.slice.empty() ? o.model_dir : "";
  model["slice"] = o.slice;
  model["format"] = o.slice.empty()
                        ? (cfg.numerics == deepinfer::model::Numerics::Official ? "fp8" : "bf16")
                        : o.format;
  model["layers"] = cfg.num_layers;
  model["hidden"] = cfg.hidden_size;
  model["experts"] = cfg.n_routed_experts;
  model["top_k"] = cfg.experts_per_token;
  JsonArray ratios;
  for (int r : cfg.compress_ratios) ratios.push_back(r);
  model["compress_ratios"] = std::move(ratios);
  model["dense_bytes"] = cost.value().dense_bytes;
  model["expert_bytes"] = cost.value().expert_bytes.empty() ? 0 : cost.value().expert_bytes[0];

  JsonObject roof;
  roof["hbm_gbps"] = o.hbm_gbps;
  roof["peak_tflops"] = o.peak_tflops;
  roof["peak_note"] = o.peak_note;
  roof["decode"] = "(weight bytes touched + KV rows read) per step / HBM bandwidth";
  roof["prefill"] = "(linear + attention FLOPs) / peak; roofline_fraction_linear: linear only";

  out["machine"] = machine_info(be.device_name());
  out["device"] = o.device;
  out["model"] = std::move(model);
  out["synthesize_s"] = synth_s;
  out["load_s"] = load_s;
  out["roofline"] = std::move(roof);
  out["settings"] = JsonObject{{"warmup", o.warmup},
                               {"reps", o.reps},
                               {"steps", o.steps},
                               {"chunk_tokens", o.chunk_tokens},
                               {"threads", o.threads},
                               {"seed", static_cast<int64_t>(o.seed)},
                               {"batch_invariant", o.batch_invariant}};
  out["prefill"] = JsonArray{};
  out["decode"] = JsonArray{};
  auto write_json = [&] {
    JsonObject mem;
    mem["checkpoint_bytes"] = checkpoint_bytes;
    mem["weight_bytes"] = be.weight_bytes();
    mem["state_bytes"] = be.state_bytes();
    mem["total_bytes"] = be.total_bytes();
    mem["total_is"] = o.device == "cuda" ? "device memory in use" : "peak resident set";
    out["memory"] = std::move(mem);
    if (o.json_path.empty()) return;
    std::ofstream f(o.json_path, std::ios::trunc);
    f << deepinfer::to_json(out) << "\n";
    f.close();
    if (!f) fail("cannot write " + o.json_path);
  };
  write_json();

  const double peak = o.peak_tflops * 1e12, hbm = o.hbm_gbps * 1e9;
  std::vector<std::string> rows, failures;

  // Past --time-budget (counted from here) the remaining measurements are recorded as skipped.
  const auto t_start = Clock::now();
  auto over_budget = [&] { return o.time_budget > 0 && seconds_since(t_start) > o.time_budget; };
  auto skip = [&](const char* phase, JsonObject j, const std::string& shape,
                  const std::string& why) {
    std::cerr << phase << " " << shape << " skipped: " << why << "\n";
    j["skipped"] = why;
    out[phase].as_array().push_back(std::move(j));
    write_json();
    rows.push_back(std::string("| ") + phase + " | " + shape + " | skipped | | " + why + " | |");
  };
  auto failed = [&](const char* phase, JsonObject j, const std::string& shape,
                    const std::string& why) {
    failures.push_back(std::string(phase) + " " + shape + ": " + why);
    std::cerr << failures.back() << "\n";
    j["error"] = why;
    out[phase].as_array().push_back(std::move(j));
    write_json();
    rows.push_back(std::string("| ") + phase + " | " + shape + " | failed | | " + why + " | |");
  };
  const std::string budget_note = "--time-budget " + fmt(o.time_budget, 0) + " s spent";

  // 3. decode (first: its batch-1 number is the one the roofline goal is about)
  std::vector<int32_t> prompt(static_cast<size_t>(o.context));
  for (int64_t i = 0; i < o.context; ++i) prompt[static_cast<size_t>(i)] = token_at(i, vocab);
  for (int B : batches) {
    const std::string shape = "batch " + std::to_string(B);
    JsonObject j{{"batch", B}, {"context", o.context}};
    if (over_budget()) {
      skip("decode", std::move(j), shape, budget_note);
      continue;
    }
    std::cerr << "decode batch " << B << " at context " << o.context << " ...\n";
    const auto t0 = Clock::now();
    deepinfer::Status st = be.fill(B, prompt);
    if (st) j["fill_s"] = seconds_since(t0);
    std::vector<int32_t> tokens(static_cast<size_t>(B));
    auto next_tokens = [&](int step) {
      for (int b = 0; b < B; ++b) {
        tokens[static_cast<size_t>(b)] = token_at(o.context + step + 977 * b, vocab);
      }
    };
    for (int w = 0; w < o.warmup && st; ++w) {
      next_tokens(-1 - w);
      st = be.step(tokens);
    }
    std::vector<double> times;
    for (int s = 0; s < o.steps && st && (s < 2 || !over_budget()); ++s) {
      next_tokens(s);
      const auto ts = Clock::now();
      st = be.step(tokens);
      times.push_back(seconds_since(ts));
    }
    if (!st) {
      failed("decode", std::move(j), shape, st.error().message);
      continue;
    }
    next_tokens(0);
    const auto dc = deepinfer::cli::decode_cost(cost.value(), cfg, tokens, o.context, be.kv_rows());
    const double t = median(times);
    const double bytes = dc.weight_bytes + dc.kv_bytes;
    j["step_ms_median"] = t * 1e3;
    JsonArray ms;
    for (double x : times) ms.push_back(x * 1e3);
    j["step_ms"] = std::move(ms);
    j["tokens_per_s"] = B / t;
    j["weight_bytes_per_step"] = dc.weight_bytes;
    j["kv_bytes_per_step"] = dc.kv_bytes;
    j["experts_touched_per_layer"] = dc.experts_touched;
    j["experts_touched_estimated"] = dc.experts_estimated;
    j["bytes_per_s"] = bytes / t;
    j["roofline_fraction"] = bytes / t / hbm;
    j["roofline_fraction_weights"] = dc.weight_bytes / t / hbm;
    out["decode"].as_array().push_back(std::move(j));
    write_json();
    rows.push_back("| decode | " + shape + " | " + human_rate(B / t) + " | " + fmt(t * 1e3, 2) +
                   " ms/step | " + human_bytes(bytes) + "/step (" + fmt(dc.experts_touched, 0) +
                   " experts/layer), " + human_bytes(bytes / t) + "/s | " +
                   percent(bytes / t / hbm) + " |");
  }

  // 4. prefill
  for (const auto& s : shapes) {
    const std::string shape = std::to_string(s.batch) + "x" + std::to_string(s.len);
    JsonObject j{{"batch", s.batch}, {"length", s.len}};
    if (over_budget()) {
      skip("prefill", std::move(j), shape, budget_note);
      continue;
    }
    std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(s.batch));
    for (int b = 0; b < s.batch; ++b) {
      auto& ids = seqs[static_cast<size_t>(b)];
      ids.resize(static_cast<size_t>(s.len));
      for (int64_t i = 0; i < s.len; ++i) {
        ids[static_cast<size_t>(i)] = token_at(i + 131 * b, vocab);
      }
    }
    std::cerr << "prefill " << shape << " ...\n";
    deepinfer::Status st;
    for (int w = 0; w < o.warmup && st; ++w) st = be.prefill(seqs[0]);
    std::vector<double> times;
    for (int r = 0; r < o.reps && st && (r == 0 || !over_budget()); ++r) {
      const auto t0 = Clock::now();
      st = be.prefill_batch(seqs);
      times.push_back(seconds_since(t0));
    }
    if (!st) {
      failed("prefill", std::move(j), shape, st.error().message);
      continue;
    }
    const double t = median(times);
    const auto fl = deepinfer::cli::prefill_flops(cost.value(), cfg, s.len);
    const double tokens = static_cast<double>(s.batch) * static_cast<double>(s.len);
    const double lin = fl.linear * s.batch / t, all = (fl.linear + fl.attention) * s.batch / t;
    j["seconds_median"] = t;
    JsonArray ts;
    for (double x : times) ts.push_back(x);
    j["seconds"] = std::move(ts);
    j["tokens_per_s"] = tokens / t;
    j["linear_flops"] = fl.linear * s.batch;
    j["attention_flops"] = fl.attention * s.batch;
    j["linear_tflops"] = lin / 1e12;
    j["total_tflops"] = all / 1e12;
    j["roofline_fraction"] = all / peak;
    j["roofline_fraction_linear"] = lin / peak;
    out["prefill"].as_array().push_back(std::move(j));
    write_json();
    rows.push_back("| prefill | " + shape + " | " + human_rate(tokens / t) + " | " +
                   fmt(t * 1e3, 1) + " ms total | " + human_flops(all) + " (linear " +
                   human_flops(lin) + ") | " + percent(all / peak) + " |");
  }

  std::cout << "deepinfer bench — " << be.device_name() << ", commit "
            << std::string(out["commit"].as_string()) << "\n"
            << "model: " << (o.slice.empty() ? o.model_dir : o.slice + " slice") << ", "
            << cfg.num_layers << " layers, "
            << std::string(out["model"].as_object()["format"].as_string()) << ", checkpoint "
            << human_bytes(static_cast<double>(checkpoint_bytes)) << "; memory "
            << human_bytes(static_cast<double>(be.total_bytes())) << " ("
            << (o.device == "cuda" ? "device memory in use" : "peak resident set") << "), state "
            << human_bytes(static_cast<double>(be.state_bytes())) << "\n"
            << "roofline: decode vs " << fmt(o.hbm_gbps, 0) << " GB/s, prefill vs "
            << fmt(o.peak_tflops, 0) << " TFLOP/s (" << o.peak_note << ")\n\n"
            << "| phase | shape | tokens/s | time | work | roofline |\n"
            << "|---|---|---|---|---|---|\n";
  for (const auto& r : rows) std::cout << r << "\n";
  write_json();
  if (!failures.empty()) fail(std::to_string(failures.size()) + " measurement(s) failed");
}

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Measure prefill/decode throughput and the roofline fraction (CPU or CUDA)");
  auto o = std::make_shared<Options>();
  cmd->add_option("--device", o->device, "cpu or cuda (default: cuda when a GPU answers)");
  cmd->add_flag("--batch-invariant", o->batch_invariant, deepinfer::cli::kBatchInvariantHelp);
  cmd->add_option("--model", o->model_dir, "model folder (config.json + safetensors)");
  cmd->add_option("--slice", o->slice, "synthesize a random checkpoint: v4-flash or tiny");
  cmd->add_option("--layers", o->layers, "slice: decoder blocks of the release pattern (4)");
  cmd->add_option("--format", o->format, "slice: bf16, or fp8 (FP8 linears + FP4 experts)");
  cmd->add_option("--slice-dir", o->slice_dir, "slice: write it here and keep it");
  cmd->add_flag("--keep-slice", o->keep_slice, "slice: keep the temporary folder");
  cmd->add_option("--seed", o->seed, "slice: random seed (1)");
  cmd->add_option("--prefill", o->prefill, "prefill shapes BxL,... or none (1x8192,64x512)");
  cmd->add_option("--decode-batch", o->decode_batch, "decode batch sizes or none (1,16,64,256)");
  cmd->add_option("--context", o->context, "decode context length (4096)");
  cmd->add_option(
      "--chunk-tokens", o->chunk_tokens,
      "cuda: rows per prefill launch (8192; the model's own default, used by serve, is 512)");
  cmd->add_option("--warmup", o->warmup, "untimed runs before each measurement (1)");
  cmd->add_option("--reps", o->reps, "timed repetitions per prefill shape (3)");
  cmd->add_option("--steps", o->steps, "timed decode steps per batch size (8)");
  cmd->add_option("--time-budget", o->time_budget,
                  "seconds for all measurements; later ones are skipped (0: no limit)");
  cmd->add_option("--threads", o->threads, "CPU threads (default: all)");
  cmd->add_option("--json", o->json_path, "write every number as JSON here");
  cmd->add_option("--commit", o->commit, "commit recorded in the JSON (default: git)");
  cmd->add_option("--hbm-gbps", o->hbm_gbps,
                  "decode roofline bandwidth, GB/s (default: H100 3350, else 4800)");
  cmd->add_option("--peak-tflops", o->peak_tflops, "prefill roofline peak, TFLOP/s (989)");
  cmd->add_option("--peak-note", o->peak_note, "what the peak is (printed and recorded)");
  cmd->callback([o] { run(*o); });
}

DEEPINFER_COMMAND(setup);

}  // namespace
