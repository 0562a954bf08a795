// One V4.1-Flash-shaped layer on the GPU (CudaV41Model) at the dims of model_v41_bench.cpp (hidden
// 5120, 64 heads × 512 with RoPE 64, q_lora 1280, o_lora 1024 × 8 groups, window 128, a ratio-2 kv
// + index source with 32 × 128 index heads and top-512, 384 routed experts top-6 × 2304 + 1
// shared; FP8 32×32 attention/shared weights, FP4 experts, random codes; every expert its own
// device copy), plus an embedding and a 1024-row head. Prints a table: the time of a prefill
// chunk and of one decode step at batch 1 / 16 / 64 (each slot after a prefill of `context`
// tokens), the bytes the step reads (the layer's weights, the experts its tokens route to, the
// KV it attends) and that over the H200's 4.8e12 B/s: the HBM roofline fraction.
//   bench_cuda_v41 [--context N] [--seconds S] [--tiny]
// --seconds bounds the whole run (rows that would start later are skipped); --tiny runs small
// dims (a smoke test; emulated on the host with DEEPINFER_CUDA_EMULATE=1).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_v41_model.h"
#include "model/v41_config.h"
#include "model/v41_weights.h"
#include "v41_slice.h"

namespace {

using namespace deepinfer;
using model::v41::V41Config;

using Dims = bench::V41SliceDims;

struct Slice {
  Dims z;
  V41Config cfg;
  model::v41::V41Weights w;
  bench::RandomWeights rw;
  double layer_bytes = 0, expert_bytes = 0;  // non-expert weights; one routed expert

  cpu::WeightView fp8(int64_t out, int64_t in) {
    layer_bytes += bench::RandomWeights::fp8_bytes(out, in);
    return rw.fp8(out, in);
  }
  cpu::WeightView fp4(int64_t out, int64_t in) { return rw.fp4(out, in); }
  cpu::WeightView dense(int64_t out, int64_t in, float scale, bool counted = true) {
    if (counted) layer_bytes += 4.0 * static_cast<double>(out * in);
    return rw.dense(out, in, scale);
  }
  static std::vector<float> vec(int64_t n, float value) {
    return bench::RandomWeights::vec(n, value);
  }

  explicit Slice(const Dims& dims) : z(dims), cfg(bench::v41_slice_config(dims)) {
    const int64_t d = z.d, hc = 4, mix = (2 + hc) * hc;
    w.embed = dense(z.V, d, 1.0f, false);
    w.head = dense(z.V, d, 0.01f, false);
    w.norm = vec(d, 1.0f);
    model::v41::V41BlockWeights& b = w.blocks.emplace_back();
    b.hc_attn_fn = dense(mix, hc * d, 0.01f);
    b.hc_ffn_fn = dense(mix, hc * d, 0.01f);
    b.hc_attn_base = b.hc_ffn_base = vec(mix, 0.0f);
    b.hc_attn_scale = b.hc_ffn_scale = vec(3, 0.1f);
    b.attn_norm = b.ffn_norm = vec(d, 1.0f);
    b.attn_sink = vec(z.H, 0.0f);
    b.wq_a = fp8(z.q, d);
    b.q_norm = vec(z.q, 1.0f);
    b.wq_b = fp8(z.H * z.D, z.q);
    b.wkv = fp8(z.D, d);
    b.kv_norm = vec(z.D, 1.0f);
    b.wo_a = std::vector<float>(static_cast<size_t>(z.G * z.orank * (z.H * z.D / z.G)), 0.001f);
    layer_bytes += 2.0 * static_cast<double>(b.wo_a.size());  // shipped as bf16
    b.wo_b = fp8(d, z.G * z.orank);
    b.comp_wkv = dense(z.D, d, 0.01f);
    b.comp_wgate = dense(z.D, d, 0.01f);
    b.comp_norm = vec(z.D, 1.0f);
    b.idx_wq_b = fp8(z.Hi * z.Di, z.q);
    b.idx_weights_proj = dense(z.Hi, d, 0.01f);
    b.idx_wk = dense(z.Di, z.D, 0.03f);
    b.idx_k_norm = vec(z.Di, 1.0f);
    b.gate = dense(z.E, d, 0.01f);
    b.gate_bias = vec(z.E, 0.0f);
    std::vector<model::v41::V41Expert> distinct;
    for (int e = 0; e < 6; ++e)
      distinct.push_back({fp4(z.inter, d), fp4(d, z.inter), fp4(z.inter, d)});
    for (int64_t e = 0; e < z.E; ++e) b.experts.push_back(distinct[static_cast<size_t>(e % 6)]);
    b.shared = {fp8(z.inter, d), fp8(d, z.inter), fp8(z.inter, d)};
    expert_bytes = 3.0 * static_cast<double>(z.inter * d) * (0.5 + 1.0 / 32);
  }
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t context = 1024;
  double seconds = 300;
  bool tiny = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--context" && i + 1 < argc) {
      context = std::atoll(argv[++i]);
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--tiny") {
      tiny = true;
    } else {
      std::fprintf(stderr, "usage: %s [--context N] [--seconds S] [--tiny]\n", argv[0]);
      return 2;
    }
  }
  const double t_start = now();
  const char* env = std::getenv("DEEPINFER_CUDA_EMULATE");
  const bool emulate = env && std::string(env) == "1";
  if (!emulate && !cuda::device_available()) {
    std::printf("no GPU: %s (DEEPINFER_CUDA_EMULATE=1 --tiny runs the bodies on the host)\n",
                cuda::device_name().c_str());
    return 0;
  }
  const Dims z = tiny ? bench::kV41TinyDims : bench::kV41FlashDims;
  Slice s(z);
  const int batches[] = {1, 16, 64};
  cuda::CudaModelOptions o;
  o.emulate = emulate;
  o.max_sequences = 64;
  o.max_context = context + 64;
  o.max_chunk_tokens = 512;
  auto made = cuda::CudaV41Model::from_parts(s.cfg, s.w, nullptr, o);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.error().message.c_str());
    return 1;
  }
  cuda::CudaV41Model& m = *made.value();
  std::printf("device: %s%s\n", emulate ? "emulated on the host, " : "",
              cuda::device_name().c_str());
  std::printf(
      "V4.1-Flash layer slice%s: d %lld, %lld experts top-%lld x %lld; weights %.2f GB, "
      "state %.2f GB, upload %.1f s\n",
      tiny ? " (tiny dims)" : "", static_cast<long long>(z.d), static_cast<long long>(z.E),
      static_cast<long long>(z.k), static_cast<long long>(z.inter),
      static_cast<double>(m.weight_bytes()) / 1e9, static_cast<double>(m.state_bytes()) / 1e9,
      now() - t_start);
  std::vector<int32_t> ids(static_cast<size_t>(context));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % z.V);
  std::printf("\n| step | batch | ms | tokens/s | bytes read | HBM roofline (4.8e12 B/s) |\n");
  std::printf("|---|---|---|---|---|---|\n");
  // Prefill: one chunk of 512 tokens into a fresh slot (weights + per-token expert traffic).
  {
    const int64_t n = std::min<int64_t>(512, context);
    double best = 1e30;
    for (int rep = 0; rep < 3 && now() - t_start < seconds; ++rep) {
      m.reset(0);
      const double t0 = now();
      if (!m.prefill(0, std::span(ids.data(), static_cast<size_t>(n)), {}, nullptr).ok()) return 1;
      best = std::min(best, now() - t0);
    }
    const double bytes = s.layer_bytes + static_cast<double>(z.E) * s.expert_bytes;
    std::printf("| prefill chunk | %lld tokens | %.2f | %.0f | %.3g | %.1f%% |\n",
                static_cast<long long>(n), best * 1e3, static_cast<double>(n) / best, bytes,
                100.0 * bytes / best / 4.8e12);
  }
  for (int B : batches) {
    if (now() - t_start > seconds) {
      std::printf("| decode | %d | skipped (past --seconds %.0f) | | | |\n", B, seconds);
      continue;
    }
    std::vector<int> seqs(static_cast<size_t>(B));
    std::vector<int32_t> next(static_cast<size_t>(B));
    for (int b = 0; b < B; ++b) {
      seqs[static_cast<size_t>(b)] = b;
      next[static_cast<size_t>(b)] = static_cast<int32_t>((b * 13 + 5) % z.V);
      m.reset(b);
      if (!m.prefill(b, ids, {}, nullptr).ok()) return 1;
    }
    for (int w = 0; w < 2; ++w)
      if (!m.decode(seqs, next, nullptr, nullptr).ok()) return 1;
    if (!m.synchronize().ok()) return 1;
    const int steps = tiny ? 3 : 10;
    const double t0 = now();
    for (int i = 0; i < steps; ++i)
      if (!m.decode(seqs, next, nullptr, nullptr).ok()) return 1;
    if (!m.synchronize().ok()) return 1;
    const double step = (now() - t0) / steps;
    // Experts touched: the expected distinct count of B·k uniform picks out of E.
    const double experts =
        static_cast<double>(z.E) *
        (1.0 - std::pow(1.0 - static_cast<double>(z.k) / static_cast<double>(z.E), B));
    const double kv = static_cast<double>(B) * 4.0 * static_cast<double>(z.D) *
                      static_cast<double>(z.win + z.K);  // fp32 window + picked entries
    const double bytes = s.layer_bytes + experts * s.expert_bytes + kv;
    std::printf("| decode | %d | %.3f | %.0f | %.3g | %.1f%% |\n", B, step * 1e3,
                static_cast<double>(B) / step, bytes, 100.0 * bytes / step / 4.8e12);
  }
  std::printf("\n(total %.1f s)\n", now() - t_start);
  return 0;
}
