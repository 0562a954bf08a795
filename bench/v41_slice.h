// A one-layer V4.1-Flash-shaped slice for the V4.1 benches (CPU and CUDA): its dims, the config
// they parse to, and random weights in the shipped formats (FP8 e4m3 in 32×32 UE8M0 blocks, FP4
// e2m1 with a UE8M0 scale per 32, dense f32) whose buffers live as long as the generator.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <vector>

#include "backend/cpu/weight_view.h"
#include "common/json.h"
#include "model/v41_config.h"

namespace deepinfer::bench {

struct V41SliceDims {
  int64_t d, H, D, R, q, G, orank, win, Hi, Di, K, E, k, inter, V;
};
// hidden 5120, 64 heads × 512 with RoPE 64, q_lora 1280, o_lora 1024 × 8 groups, window 128,
// 32 × 128 index heads with top-512, 384 routed experts top-6 × 2304, a 1024-row vocab.
constexpr V41SliceDims kV41FlashDims{5120, 64,  512, 64,  1280, 8,    1024, 128,
                                     32,   128, 512, 384, 6,    2304, 1024};
constexpr V41SliceDims kV41TinyDims{256, 4, 64, 32, 64, 2, 32, 16, 2, 64, 16, 16, 2, 64, 256};

// One layer with a ratio-2 kv + index source; exits on a config error.
inline model::v41::V41Config v41_slice_config(const V41SliceDims& z) {
  char json[2048];
  std::snprintf(
      json, sizeof json,
      R"({"architectures":["DeepseekV41ForCausalLM"],"text_config":{
      "vocab_size":%lld,"hidden_size":%lld,"num_hidden_layers":1,"num_attention_heads":%lld,
      "head_dim":%lld,"qk_rope_head_dim":%lld,"q_lora_rank":%lld,"o_lora_rank":%lld,"o_groups":%lld,
      "sliding_window":%lld,"compress_ratios":[2],"kv_source_layer_ids":[0],
      "index_source_layer_ids":[0],"index_n_heads":%lld,"index_head_dim":%lld,"index_topk":%lld,
      "n_routed_experts":%lld,"num_experts_per_tok":%lld,"moe_intermediate_size":%lld,
      "routed_scaling_factor":1.5,"swiglu_limit":10.0,"hc_mult":4,"hc_sinkhorn_iters":20,
      "rms_norm_eps":1e-20,"rope_theta":10000,"compress_rope_theta":160000,
      "rope_scaling":{"factor":16,"original_max_position_embeddings":65536,"beta_fast":32,
      "beta_slow":1}},"quantization_config":{"quant_method":"fp8","weight_block_size":[32,32],
      "expert_dtype":"fp4"}})",
      static_cast<long long>(z.V), static_cast<long long>(z.d), static_cast<long long>(z.H),
      static_cast<long long>(z.D), static_cast<long long>(z.R), static_cast<long long>(z.q),
      static_cast<long long>(z.orank), static_cast<long long>(z.G), static_cast<long long>(z.win),
      static_cast<long long>(z.Hi), static_cast<long long>(z.Di), static_cast<long long>(z.K),
      static_cast<long long>(z.E), static_cast<long long>(z.k), static_cast<long long>(z.inter));
  auto parsed = parse_json(json);
  if (!parsed.ok()) std::abort();
  auto c = model::v41::parse_v41_config(parsed.value());
  if (!c.ok()) {
    std::fprintf(stderr, "config: %s\n", c.error().message.c_str());
    std::exit(1);
  }
  return c.value();
}

class RandomWeights {
 public:
  std::mt19937 rng{7};  // also drawn from by the benches' inputs, in their order

  cpu::WeightView fp8(int64_t out, int64_t in) {
    auto& d = bufs_.emplace_back(static_cast<size_t>(out * in));
    for (auto& b : d) b = static_cast<uint8_t>(rng() & 0x77);  // |x| < 448, no NaN
    const int64_t so = (out + 31) / 32, si = (in + 31) / 32;
    auto& s = bufs_.emplace_back(static_cast<size_t>(so * si), uint8_t{120});
    cpu::WeightView v;
    v.format = cpu::WeightFormat::FP8_E4M3_BLOCK;
    v.data = d.data();
    v.out = out, v.in = in, v.scale = s.data();
    v.scale_format = cpu::ScaleFormat::UE8M0;
    v.block_out = v.block_in = 32;
    v.scale_stride = si;
    return v;
  }
  // Bytes of an fp8(out, in) view: codes and block scales.
  static double fp8_bytes(int64_t out, int64_t in) {
    return static_cast<double>(out * in + ((out + 31) / 32) * ((in + 31) / 32));
  }
  cpu::WeightView fp4(int64_t out, int64_t in) {
    auto& d = bufs_.emplace_back(static_cast<size_t>(out * in / 2));
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    auto& s = bufs_.emplace_back(static_cast<size_t>(out * in / 32), uint8_t{122});
    cpu::WeightView v;
    v.format = cpu::WeightFormat::FP4_E2M1_BLOCK32;
    v.data = d.data();
    v.out = out, v.in = in, v.scale = s.data();
    v.scale_format = cpu::ScaleFormat::UE8M0;
    v.block_out = 1, v.block_in = 32, v.scale_stride = in / 32;
    return v;
  }
  cpu::WeightView dense(int64_t out, int64_t in, float scale) {
    auto& d = fbufs_.emplace_back(static_cast<size_t>(out * in));
    std::normal_distribution<float> n(0.0f, scale);
    for (auto& x : d) x = n(rng);
    cpu::WeightView v;
    v.format = cpu::WeightFormat::F32;
    v.data = d.data();
    v.out = out, v.in = in;
    return v;
  }
  static std::vector<float> vec(int64_t n, float value) {
    return std::vector<float>(static_cast<size_t>(n), value);
  }

 private:
  std::deque<std::vector<uint8_t>> bufs_;  // stable references on push
  std::deque<std::vector<float>> fbufs_;
};

}  // namespace deepinfer::bench
