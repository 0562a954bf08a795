// DeepSeek V4.1 configuration (spec §12.1): the published config.json (architectures
// ["DeepseekV41ForCausalLM"], model_type deepseek_v41, text params under text_config, vision_config
// beside it) or the flat official inference keys (ModelArgs names), plus the derived layer roles:
// which KV source, index source and index-key source every layer reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "model/config.h"

namespace deepinfer::model::v41 {

struct V41Config {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;      // decoder blocks
  int num_mtp_layers = 0;  // DSpark stages (num_nextn_predict_layers), mtp.{s}
  int n_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;  // qk_rope_head_dim: the trailing RoPE'd dims of every vector
  int q_lora_rank = 0;
  int o_lora_rank = 0;
  int o_groups = 0;
  int sliding_window = 0;
  std::vector<int> compress_ratios;      // per decoder block: 0 (window only), 1 or 2
  std::vector<int> kv_source_layers;     // kv_source_layer_ids: own a compressor + compressed cache
  std::vector<int> index_source_layers;  // index_source_layer_ids: run an indexer
  RopeConfig main_rope, compress_rope;   // ratio 0 layers; ratio > 0 layers (YaRN)
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int candidate_source_layer = -1;  // candidate_source_layer_id; < 0: no pre-filter
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  // MoE (every layer: bias routing)
  int n_routed_experts = 0;
  int n_shared_experts = 1;
  int experts_per_token = 0;
  int moe_intermediate = 0;
  std::string scoring_func = "sqrtsoftplus";
  double gate_temp = 1.0;
  bool norm_topk_prob = true;
  double routed_scaling = 1.0;
  double swiglu_limit = 0.0;  // ≤ 0: no clamp
  // mHC
  int hc_mult = 1;
  int hc_sinkhorn_iters = 1;
  double hc_eps = 1e-6;
  double rms_eps = 1e-20;
  // Engram (spec §12.2 item 9)
  std::vector<int> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;
  int engram_max_ngram_size = 0;
  int64_t engram_vocab_size = 0;
  int engram_n_heads = 0;
  int engram_head_dim = 0;
  int engram_pad_token_id = 2;
  int64_t engram_compressed_vocab_size = 0;
  // DSpark (spec §12.2 item 10)
  int dspark_block_size = 0;
  int dspark_noise_token_id = 0;
  std::vector<int> dspark_target_layer_ids;
  int dspark_markov_rank = 0;
  int dspark_n_routed_experts = 0;
  int dspark_experts_per_token = 0;
  // vision_config (not supported: the text path runs)
  int vision_layers = 0;
  int image_token_id = 129264;
  // storage
  bool fp8 = false;         // quantization_config: FP8 e4m3 weights, 32×32 UE8M0 blocks
  bool expert_fp4 = false;  // routed experts FP4 e2m1, E8M0 per 32
  int weight_block = 32;
  bool tie_word_embeddings = false;
  int bos_token_id = 0;
  std::vector<int> eos_token_ids;

  // Derived per decoder block (filled by the parser).
  std::vector<int> kv_source_of;         // ratio > 0: the latest kv source ≤ layer; else −1
  std::vector<int> index_source_of;      // ratio > 0: the latest index source ≤ layer; else −1
  std::vector<int> index_key_source_of;  // index sources: the kv source whose latent gives keys

  int ratio(int layer) const { return compress_ratios[static_cast<size_t>(layer)]; }
  bool is_kv_source(int layer) const;
  bool is_index_source(int layer) const;
  bool is_engram_layer(int layer) const;
  bool uses_candidates(int layer) const {  // an index source after the candidate source
    return candidate_source_layer >= 0 && candidate_source_layer < layer && is_index_source(layer);
  }
  int hc_mix() const { return (2 + hc_mult) * hc_mult; }
};

// True when config.json names the V4.1 architecture (architectures / model_type).
bool is_v41_config(const Json& json);

Result<V41Config> parse_v41_config(const Json& json);
Result<V41Config> load_v41_config(const std::string& dir);

}  // namespace deepinfer::model::v41
