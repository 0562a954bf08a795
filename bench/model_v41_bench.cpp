// One V4.1-Flash-shaped layer on the CPU at real dims (hidden 5120, 64 heads × 512 with RoPE 64,
// q_lora 1280, o_lora 1024 × 8 groups, window 128, ratio-2 kv + index source with 32 × 128 index
// heads and top-512, 384 routed experts top-6 × 2304 + 1 shared), FP8 32×32 attention/shared
// weights and FP4 experts with random codes: the attention and MoE sublayers for one decode token
// after a 1024-token prefill, and the weight bytes that token reads (its roofline).
// The 384 expert views share 6 distinct buffers (the routing is real; 6 experts are active).
// Decode batches: B sequences after prefills of different lengths, one decode token each, as B
// one-sequence steps (per sequence, the runner's old path) or one step of B segments (batched:
// the weight products run once per GEMV run of at most 11 rows).
#include <benchmark/benchmark.h>

#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/quant_linear.h"
#include "backend/cpu/thread_pool.h"
#include "copy_bandwidth.h"
#include "model/v41_config.h"
#include "model/v41_forward.h"
#include "v41_slice.h"

namespace {

using namespace deepinfer;
using namespace deepinfer::model::v41;

struct Slice {
  V41Config cfg;
  V41BlockWeights w;
  model::RopeTable main_rope, compress_rope;
  std::unique_ptr<cpu::ThreadPool> pool;
  V41Workspace ws;
  std::deque<V41State> st;  // one per sequence
  std::vector<V41Segment> segs;
  std::vector<int64_t> seg_rows, row_pos;
  std::vector<int32_t> row_seg;
  bench::RandomWeights rw;
  double bytes_per_token = 0;

  cpu::WeightView fp8(int64_t out, int64_t in) { return rw.fp8(out, in); }
  cpu::WeightView fp4(int64_t out, int64_t in) { return rw.fp4(out, in); }
  cpu::WeightView dense(int64_t out, int64_t in, float scale) { return rw.dense(out, in, scale); }
  static std::vector<float> vec(int64_t n, float value) {
    return bench::RandomWeights::vec(n, value);
  }

  Slice() : cfg(bench::v41_slice_config(bench::kV41FlashDims)) {
    cpu::register_quant_kernels(cpu::QuantActivations::Official);
    const int64_t d = 5120, H = 64, D = 512, q = 1280, G = 8, orank = 1024, inter = 2304;
    w.attn_sink = vec(H, 0.0f);
    w.wq_a = fp8(q, d);
    w.q_norm = vec(q, 1.0f);
    w.wq_b = fp8(H * D, q);
    w.wkv = fp8(D, d);
    w.kv_norm = vec(D, 1.0f);
    w.wo_a = std::vector<float>(static_cast<size_t>(G * orank * (H * D / G)), 0.001f);
    w.wo_b = fp8(d, G * orank);
    w.comp_wkv = dense(D, d, 0.01f);
    w.comp_wgate = dense(D, d, 0.01f);
    w.comp_norm = vec(D, 1.0f);
    w.idx_wq_b = fp8(32 * 128, q);
    w.idx_weights_proj = dense(32, d, 0.01f);
    w.idx_wk = dense(128, D, 0.03f);
    w.idx_k_norm = vec(128, 1.0f);
    w.gate = dense(384, d, 0.01f);
    w.gate_bias = vec(384, 0.0f);
    std::vector<V41Expert> distinct;
    for (int e = 0; e < 6; ++e) distinct.push_back({fp4(inter, d), fp4(d, inter), fp4(inter, d)});
    for (int e = 0; e < 384; ++e) w.experts.push_back(distinct[static_cast<size_t>(e % 6)]);
    w.shared = {fp8(inter, d), fp8(d, inter), fp8(inter, d)};
    main_rope = model::make_rope_table(cfg.main_rope, 64);
    compress_rope = model::make_rope_table(cfg.compress_rope, 64);
    pool = std::make_unique<cpu::ThreadPool>(
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    // Bytes one decode token reads: FP8 attention + indexer q + shared (1 B per weight + scales),
    // wo_a as fp32 values, fp32 compressor / indexer / gate stand-ins, 6 FP4 experts (0.5 B).
    bytes_per_token =
        (q * d + H * D * q + D * d + d * G * orank + 32 * 128 * q + 3 * inter * d) * 1.0 +
        G * orank * (H * D / G) * 4.0 + (2 * D * d + 32 * d + 128 * D + 384 * d) * 4.0 +
        6 * 3 * inter * d * 0.5;
  }

  void reset(size_t n_seqs) {
    st.clear();
    for (size_t i = 0; i < n_seqs; ++i) st.emplace_back().layers.resize(1);
  }
  // One step: n[i] rows of sequence first + i (from its position), stacked.
  void run(size_t first, std::span<const int64_t> n, const float* x, float* y) {
    segs.clear();
    seg_rows.clear();
    row_pos.clear();
    row_seg.clear();
    int64_t rows = 0;
    for (size_t i = 0; i < n.size(); ++i) {
      V41State& s = st[first + i];
      segs.push_back({&s, rows, n[i], s.position});
      seg_rows.push_back(n[i]);
      for (int64_t t = 0; t < n[i]; ++t) {
        row_pos.push_back(s.position + t);
        row_seg.push_back(static_cast<int32_t>(i));
      }
      rows += n[i];
    }
    V41Chunk ch{cfg,  pool.get(), ws,       main_rope,      compress_rope,
                rows, segs,       seg_rows, row_seg.data(), row_pos.data()};
    v41_attention(ch, 0, w, x, y);
    v41_moe(ch, w, x, y);
    for (size_t i = 0; i < n.size(); ++i) st[first + i].position += n[i];
  }
};

// Copy bandwidth (read + write) on the same pool: the decode roofline.
void BM_CopyBandwidth(benchmark::State& state) {
  deepinfer::bench::measure_copy_bandwidth(
      state, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}
BENCHMARK(BM_CopyBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(4);

void BM_V41FlashSliceDecode(benchmark::State& state) {
  static Slice s;
  const int64_t ctx = state.range(0), d = 5120;
  std::vector<float> x(static_cast<size_t>(ctx * d)), y(static_cast<size_t>(ctx * d));
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& v : x) v = n(s.rw.rng);
  s.reset(1);
  const int64_t one = 1;
  s.run(0, std::span(&ctx, 1), x.data(), y.data());  // prefill: window, compressed entries, keys
  for (auto _ : state) {
    s.run(0, std::span(&one, 1), x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] =
      benchmark::Counter(s.bytes_per_token * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_V41FlashSliceDecode)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(8);

// B sequences after prefills of 128 + 5·(i mod 8) tokens; one decode token each per iteration, per
// sequence (range(1) = 0) or batched (1).
void BM_V41FlashSliceDecodeBatch(benchmark::State& state) {
  static Slice s;
  const auto B = static_cast<size_t>(state.range(0));
  const bool batched = state.range(1) != 0;
  const int64_t d = 5120;
  std::vector<float> x(static_cast<size_t>(192 * d)), y(static_cast<size_t>(192 * d));
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& v : x) v = n(s.rw.rng);
  s.reset(B);
  for (size_t i = 0; i < B; ++i) {
    const int64_t ctx = 128 + 5 * static_cast<int64_t>(i % 8);
    s.run(i, std::span(&ctx, 1), x.data(), y.data());
  }
  const std::vector<int64_t> ones(B, 1);
  for (auto _ : state) {
    if (batched) {
      s.run(0, ones, x.data(), y.data());
    } else {
      for (size_t i = 0; i < B; ++i) s.run(i, std::span(ones.data(), 1), x.data(), y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * B), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_V41FlashSliceDecodeBatch)
    ->ArgNames({"B", "batched"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({8, 0})
    ->Args({8, 1})
    ->Args({32, 0})
    ->Args({32, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);

}  // namespace
BENCHMARK_MAIN();
