// The DeepSeek V4.1 decoder weights as the forward reads them (official state_dict names, spec
// §12): big matrices as WeightViews into the mapped checkpoint (BF16, FP8 e4m3 with 32×32 UE8M0
// blocks, FP4 e2m1 experts with E8M0 per 32), small vectors as fp32 copies, wo_a as bf16 values.
// Only kv sources carry a compressor, only index sources an indexer, only key owners wk / k_norm.
#pragma once

#include <string>
#include <vector>

#include "backend/cpu/weight_view.h"
#include "common/result.h"
#include "model/safetensors.h"
#include "model/v41_config.h"

namespace deepinfer::model::v41 {

struct V41Expert {
  cpu::WeightView w1, w2, w3;  // w1/w3 [inter, d], w2 [d, inter]
};

struct V41BlockWeights {
  cpu::WeightView hc_attn_fn, hc_ffn_fn;  // [(2+hc)·hc, hc·d] F32
  std::vector<float> hc_attn_base, hc_ffn_base, hc_attn_scale, hc_ffn_scale;
  std::vector<float> attn_norm, ffn_norm;
  // attention
  std::vector<float> attn_sink;  // [heads]
  cpu::WeightView wq_a, wq_b, wkv, wo_b;
  std::vector<float> wo_a;  // [o_groups·o_lora, heads·head_dim / o_groups] bf16 values
  std::vector<float> q_norm, kv_norm;
  // compressor (kv sources)
  cpu::WeightView comp_wkv, comp_wgate;  // [head_dim, d]; wgate only for ratio > 1
  std::vector<float> comp_norm;          // [head_dim]
  // indexer (index sources)
  cpu::WeightView idx_wq_b;          // [index_heads·index_head_dim, q_lora]
  cpu::WeightView idx_weights_proj;  // [index_heads, d]
  cpu::WeightView idx_wk;            // [index_head_dim, head_dim] (key owners)
  std::vector<float> idx_k_norm;     // [index_head_dim]
  // MoE
  cpu::WeightView gate;          // [experts, d]
  std::vector<float> gate_bias;  // [experts]
  std::vector<V41Expert> experts;
  V41Expert shared;
};

struct V41Weights {
  cpu::WeightView embed;  // [vocab, d]
  cpu::WeightView head;   // [vocab, d]
  std::vector<float> norm;
  std::vector<V41BlockWeights> blocks;
  std::vector<std::string> notes;  // e.g. vision tensors present but not used
};

Result<V41Weights> load_v41_weights(const V41Config& config, const Checkpoint& checkpoint);

}  // namespace deepinfer::model::v41
