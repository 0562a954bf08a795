// DeepSeek V4 model configuration read from config.json. Accepts the published layout (legacy
// keys: compress_ratios, num_hash_layers, qk_rope_head_dim, rope_scaling), HF transformers' own
// keys (layer_types, mlp_layer_types, rope_parameters, ...) and the official inference keys.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "model/numerics.h"

namespace deepinfer::model {

enum class AttentionKind { SlidingWindow, Csa, Hca };  // ratio 0, overlapping + indexer, plain

struct RopeConfig {
  double theta = 10000.0;
  bool yarn = false;
  double factor = 1.0;
  double original_max_position = 0.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;           // floor/ceil the YaRN correction range (HF default)
  double attention_factor = 1.0;  // cos/sin scale (V4: 1; HF's YaRN default when unset otherwise)
};

struct ModelConfig {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;      // decoder blocks (no MTP)
  int num_mtp_layers = 0;  // next-n blocks listed by the config (loaded only if present)
  int n_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;  // R: the trailing RoPE'd dims of every vector
  int q_lora_rank = 0;
  int o_lora_rank = 0;
  int o_groups = 0;
  int sliding_window = 0;
  std::vector<int> compress_ratios;  // per decoder block (0 = sliding window only)
  std::vector<bool> csa_layers;      // per block: overlap + indexer (empty: ratio == 4)
  std::vector<bool> hash_routed;     // per decoder block
  RopeConfig main_rope, compress_rope;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 1;
  int experts_per_token = 0;
  int moe_intermediate = 0;
  std::string scoring_func = "sqrtsoftplus";
  double routed_scaling = 1.0;
  double swiglu_limit = 0.0;  // ≤ 0: no clamp
  int hc_mult = 1;
  int hc_sinkhorn_iters = 1;
  double hc_eps = 1e-6;
  double rms_eps = 1e-6;
  bool tie_word_embeddings = false;
  int bos_token_id = 0;
  std::vector<int> eos_token_ids;
  Numerics numerics = Numerics::Exact;  // quantization_config present → Official

  AttentionKind kind(int layer) const;
  int ratio(int layer) const { return compress_ratios[static_cast<size_t>(layer)]; }
  int nope_dim() const { return head_dim - rope_dim; }
  int hc_mix() const { return (2 + hc_mult) * hc_mult; }
};

Result<ModelConfig> parse_model_config(const Json& json);
Result<ModelConfig> load_model_config(const std::string& dir);

}  // namespace deepinfer::model
