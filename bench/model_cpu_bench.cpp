// CPU model throughput with its rooflines measured in the same run:
//   decode tok/s  vs a copy-bandwidth probe (weight bytes read per second / copy bytes per second)
//   prefill tok/s vs OpenBLAS sgemm GFLOP/s (2 · active weights FLOP per token / sgemm peak)
// for the tiny HF fixtures and for ONE V4-Flash layer at real dims (CSA + indexer, 8 routed
// experts of which 6 are active, random bf16 weights written to a temporary checkpoint).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "copy_bandwidth.h"
#include "model/model.h"

namespace {

namespace fs = std::filesystem;
using deepinfer::model::Model;
using deepinfer::model::SequenceState;

int threads() {
  static const int n = std::max(1u, std::thread::hardware_concurrency());
  return n;
}

// ---- rooflines --------------------------------------------------------------------------------
void BM_CopyBandwidth(benchmark::State& state) {
  deepinfer::bench::measure_copy_bandwidth(state, threads());
}
BENCHMARK(BM_CopyBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SgemmPeak(benchmark::State& state) {
  const int M = 256, N = 4096, K = 4096;
  std::vector<float> A(size_t{M} * K, 0.01f), B(size_t{N} * K, 0.02f), C(size_t{M} * N);
  openblas_set_num_threads(threads());
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A.data(), K, B.data(), K,
                0.0f, C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  openblas_set_num_threads(1);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SgemmPeak)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- models ----------------------------------------------------------------------------------
// Weights (elements) a decode step reads, and 2·(that) FLOP per prefill token (linears only).
int64_t active_weight_elements(const Model& m) {
  const auto& c = m.config();
  const auto& w = m.weights();
  int64_t n = 0;
  auto add = [&](const deepinfer::cpu::WeightView& v) { n += v.out * v.in; };
  for (int i = 0; i < c.num_layers; ++i) {
    const auto& b = w.blocks[static_cast<size_t>(i)];
    add(b.hc_attn.fn), add(b.hc_ffn.fn), add(b.wq_a), add(b.wq_b), add(b.wkv), add(b.wo_a),
        add(b.wo_b);
    if (b.has_compressor) add(b.compressor.wkv), add(b.compressor.wgate);
    if (b.has_indexer) {
      add(b.indexer.wq_b), add(b.indexer.weights_proj);
      add(b.indexer.compressor.wkv), add(b.indexer.compressor.wgate);
    }
    add(b.gate), add(b.shared.w1), add(b.shared.w2), add(b.shared.w3);
    n += c.experts_per_token * (b.experts[0].w1.out * b.experts[0].w1.in * 3);
  }
  add(w.hc_head.fn);
  n += w.head.out * w.head.in;
  return n;
}

int64_t bytes_per_element(const Model& m) {
  return m.weights().blocks[0].wq_a.format == deepinfer::cpu::WeightFormat::BF16 ? 2 : 4;
}

std::unique_ptr<Model> load_or_die(const std::string& dir) {
  auto m = Model::load(dir, {threads()});
  if (!m) {
    fprintf(stderr, "%s\n", m.error().message.c_str());
    std::abort();
  }
  return std::move(m.value());
}

void run_prefill(benchmark::State& state, Model& m, int tokens) {
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (int i = 0; i < tokens; ++i)
    ids[static_cast<size_t>(i)] = 3 + (i * 7919) % (m.config().vocab_size - 3);
  std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
  const int64_t last = tokens - 1;
  for (auto _ : state) {
    SequenceState st = m.new_state();
    if (!m.forward(st, ids, std::span<const int64_t>(&last, 1), logits.data()).ok()) std::abort();
  }
  const double per_token_flop = 2.0 * static_cast<double>(active_weight_elements(m));
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(tokens) * state.iterations(),
                                               benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(per_token_flop * tokens * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void run_decode(benchmark::State& state, Model& m, int context) {
  std::vector<int32_t> ids(static_cast<size_t>(context));
  for (int i = 0; i < context; ++i)
    ids[static_cast<size_t>(i)] = 3 + (i * 7919) % (m.config().vocab_size - 3);
  std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
  const int64_t zero = 0, last = context - 1;
  SequenceState st = m.new_state();
  if (!m.forward(st, ids, std::span<const int64_t>(&last, 1), logits.data()).ok()) std::abort();
  SequenceState start = st;
  int32_t tok = 5;
  int steps = 0;
  for (auto _ : state) {
    if (++steps % 64 == 0) {
      state.PauseTiming();
      st = start;
      state.ResumeTiming();
    }
    if (!m.forward(st, std::span<const int32_t>(&tok, 1), std::span<const int64_t>(&zero, 1),
                   logits.data())
             .ok()) {
      std::abort();
    }
  }
  const double bytes = static_cast<double>(active_weight_elements(m) * bytes_per_element(m));
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] =
      benchmark::Counter(bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

Model& tiny(const char* name) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto& m = models[name];
  if (!m) m = load_or_die(std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/" + name);
  return *m;
}

void BM_TinyPrefill(benchmark::State& state, const char* name) {
  run_prefill(state, tiny(name), 512);
}
void BM_TinyDecode(benchmark::State& state, const char* name) {
  run_decode(state, tiny(name), 256);
}
BENCHMARK_CAPTURE(BM_TinyPrefill, hf_v4_a, "hf_v4_a")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_TinyPrefill, hf_v4_b, "hf_v4_b")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_TinyDecode, hf_v4_a, "hf_v4_a")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_TinyDecode, hf_v4_b, "hf_v4_b")->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- one V4-Flash layer at real dims ------------------------------------------------------------
struct TempCheckpoint {
  std::string dir;
  ~TempCheckpoint() {
    if (!dir.empty()) fs::remove_all(dir);
  }
};

void write_real_layer(const std::string& dir) {
  const int d = 4096, H = 64, D = 512, ql = 1024, G = 8, olr = 1024, E = 8, inter = 2048, V = 1024;
  const int hc = 4, mix = (2 + hc) * hc, ih = 64, ihd = 128;
  struct T {
    std::string name, dtype;
    std::vector<int64_t> shape;
  };
  std::vector<T> ts = {{"embed.weight", "BF16", {V, d}}, {"head.weight", "BF16", {V, d}},
                       {"norm.weight", "BF16", {d}},     {"hc_head_fn", "F32", {hc, hc * d}},
                       {"hc_head_base", "F32", {hc}},    {"hc_head_scale", "F32", {1}}};
  const std::string p = "layers.0.";
  for (const char* s : {"hc_attn", "hc_ffn"}) {
    ts.push_back({p + s + "_fn", "F32", {mix, hc * d}});
    ts.push_back({p + s + "_base", "F32", {mix}});
    ts.push_back({p + s + "_scale", "F32", {3}});
  }
  std::vector<T> more = {{p + "attn_norm.weight", "BF16", {d}},
                         {p + "ffn_norm.weight", "BF16", {d}},
                         {p + "attn.attn_sink", "F32", {H}},
                         {p + "attn.wq_a.weight", "BF16", {ql, d}},
                         {p + "attn.q_norm.weight", "BF16", {ql}},
                         {p + "attn.wq_b.weight", "BF16", {H * D, ql}},
                         {p + "attn.wkv.weight", "BF16", {D, d}},
                         {p + "attn.kv_norm.weight", "BF16", {D}},
                         {p + "attn.wo_a.weight", "BF16", {G * olr, H * D / G}},
                         {p + "attn.wo_b.weight", "BF16", {d, G * olr}},
                         {p + "attn.compressor.wkv.weight", "BF16", {2 * D, d}},
                         {p + "attn.compressor.wgate.weight", "BF16", {2 * D, d}},
                         {p + "attn.compressor.ape", "F32", {4, 2 * D}},
                         {p + "attn.compressor.norm.weight", "BF16", {D}},
                         {p + "attn.indexer.wq_b.weight", "BF16", {ih * ihd, ql}},
                         {p + "attn.indexer.weights_proj.weight", "BF16", {ih, d}},
                         {p + "attn.indexer.compressor.wkv.weight", "BF16", {2 * ihd, d}},
                         {p + "attn.indexer.compressor.wgate.weight", "BF16", {2 * ihd, d}},
                         {p + "attn.indexer.compressor.ape", "F32", {4, 2 * ihd}},
                         {p + "attn.indexer.compressor.norm.weight", "BF16", {ihd}},
                         {p + "ffn.gate.weight", "BF16", {E, d}},
                         {p + "ffn.gate.bias", "F32", {E}},
                         {p + "ffn.shared_experts.w1.weight", "BF16", {inter, d}},
                         {p + "ffn.shared_experts.w2.weight", "BF16", {d, inter}},
                         {p + "ffn.shared_experts.w3.weight", "BF16", {inter, d}}};
  ts.insert(ts.end(), more.begin(), more.end());
  for (int e = 0; e < E; ++e) {
    const std::string x = p + "ffn.experts." + std::to_string(e) + ".";
    ts.push_back({x + "w1.weight", "BF16", {inter, d}});
    ts.push_back({x + "w2.weight", "BF16", {d, inter}});
    ts.push_back({x + "w3.weight", "BF16", {inter, d}});
  }
  std::string header = "{";
  uint64_t off = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    int64_t n = 1;
    for (int64_t s : ts[i].shape) n *= s;
    const uint64_t bytes = static_cast<uint64_t>(n) * (ts[i].dtype == "F32" ? 4 : 2);
    header += (i ? ",\"" : "\"") + ts[i].name + "\":{\"dtype\":\"" + ts[i].dtype + "\",\"shape\":[";
    for (size_t k = 0; k < ts[i].shape.size(); ++k)
      header += (k ? "," : "") + std::to_string(ts[i].shape[k]);
    header +=
        "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + bytes) + "]}";
    off += bytes;
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::ofstream f(dir + "/model.safetensors", std::ios::binary);
  const uint64_t hl = header.size();
  f.write(reinterpret_cast<const char*>(&hl), 8);
  f << header;
  std::mt19937 rng(7);
  std::vector<char> buf;
  for (const auto& t : ts) {
    int64_t n = 1;
    for (int64_t s : t.shape) n *= s;
    const bool norm = t.name.find("norm") != std::string::npos;
    if (t.dtype == "F32") {
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& x : v)
        x = t.name.find("scale") != std::string::npos ? 1.0f : ((rng() % 2001) - 1000) * 2e-5f;
      f.write(reinterpret_cast<const char*>(v.data()), n * 4);
    } else {
      std::vector<uint16_t> v(static_cast<size_t>(n));
      for (auto& x : v) {
        const float val = norm ? 1.0f : ((rng() % 2001) - 1000) * 2e-5f;
        uint32_t u;
        std::memcpy(&u, &val, 4);
        x = static_cast<uint16_t>(u >> 16);
      }
      f.write(reinterpret_cast<const char*>(v.data()), n * 2);
    }
  }
  std::ofstream(dir + "/config.json")
      << "{\"vocab_size\":" << V << ",\"hidden_size\":" << d
      << ",\"num_hidden_layers\":1,\"num_nextn_predict_layers\":0,\"num_attention_heads\":" << H
      << ",\"head_dim\":" << D << ",\"qk_rope_head_dim\":64,\"q_lora_rank\":" << ql
      << ",\"o_lora_rank\":" << olr << ",\"o_groups\":" << G
      << ",\"sliding_window\":128,\"compress_ratios\":[4,0],\"compress_rope_theta\":160000,"
         "\"rope_theta\":10000,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":16,"
         "\"original_max_position_embeddings\":65536,\"beta_fast\":32,\"beta_slow\":1},"
         "\"index_n_heads\":64,\"index_head_dim\":128,\"index_topk\":512,\"n_routed_experts\":"
      << E
      << ",\"n_shared_experts\":1,\"num_experts_per_tok\":6,\"moe_intermediate_size\":" << inter
      << ",\"scoring_func\":\"sqrtsoftplus\",\"routed_scaling_factor\":1.5,\"swiglu_limit\":10.0,"
         "\"num_hash_layers\":0,\"hc_mult\":4,\"hc_sinkhorn_iters\":20,\"hc_eps\":1e-6,"
         "\"rms_norm_eps\":1e-6,\"bos_token_id\":0,\"eos_token_id\":1}";
}

Model& real_layer() {
  static TempCheckpoint tmp;
  static std::unique_ptr<Model> m;
  if (!m) {
    tmp.dir =
        (fs::temp_directory_path() / ("deepinfer_v4_layer_" + std::to_string(::getpid()))).string();
    fs::create_directories(tmp.dir);
    write_real_layer(tmp.dir);
    m = load_or_die(tmp.dir);
  }
  return *m;
}

void BM_V4LayerPrefill(benchmark::State& state) { run_prefill(state, real_layer(), 256); }
void BM_V4LayerDecode(benchmark::State& state) { run_decode(state, real_layer(), 256); }
BENCHMARK(BM_V4LayerPrefill)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_V4LayerDecode)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
