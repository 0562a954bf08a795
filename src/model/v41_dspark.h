// DeepSeek V4.1 DSpark draft stages (spec §12.2 item 10, §12.3), the forward of the official
// model.py (DSparkBlock / DSparkAttention / Markov and confidence heads): main_x =
// main_norm(main_proj(concat of the stream means entering the target layers)); a block
// [token, noise × (block − 1)] at positions pos+1 … pos+block runs through the stages (each a
// V4.1 block whose attention reads its own window ring of main_x KV plus the whole block); the
// shared head plus a rank-r Markov bias per previous draft token gives the logits, a linear head
// the confidences. Numerics follow the reference: bf16 activations, FP8/FP4 GEMMs per 32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_view.h"
#include "common/result.h"
#include "model/rope.h"
#include "model/safetensors.h"
#include "model/v41_config.h"

namespace deepinfer::model::v41 {

// The DSpark keys of the V4.1 config plus the main-model dims the stages share.
struct DSparkConfig {
  int n_stages = 0;                   // num_nextn_predict_layers
  int first_layer_id = 0;             // num_hidden_layers: stage s is mtp.{s}, layer id first + s
  int block_size = 0;                 // dspark_block_size
  int32_t noise_token_id = 0;         // dspark_noise_token_id
  std::vector<int> target_layer_ids;  // dspark_target_layer_ids
  int markov_rank = 0;                // dspark_markov_rank
  int n_routed_experts = 0;           // dspark_n_routed_experts
  int experts_per_token = 0;          // dspark_num_experts_per_tok
  // shared with the main model
  int vocab_size = 0, dim = 0;
  int n_heads = 0, head_dim = 0, rope_dim = 0;
  int q_lora_rank = 0, o_lora_rank = 0, o_groups = 0;
  int window = 0;  // sliding_window
  int moe_inter = 0;
  int hc_mult = 0, hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6, norm_eps = 1e-20;
  double rope_theta = 10000.0;  // stages are ratio-0 layers: plain RoPE, no YaRN
  std::string score_func = "sqrtsoftplus";
  double route_scale = 1.0, swiglu_limit = 0.0, gate_temp = 1.0;
  bool norm_topk_prob = true;

  int n_targets() const { return static_cast<int>(target_layer_ids.size()); }
};

// The DSpark part of a parsed V4.1 config (expert counts default to the main model's).
DSparkConfig dspark_config(const V41Config& config);

struct DSparkExpert {
  cpu::WeightView w1, w2, w3;
};

struct DSparkStageWeights {
  // mHC
  cpu::WeightView hc_attn_fn, hc_ffn_fn;  // [(2+hc)·hc, hc·dim] F32
  std::vector<float> hc_attn_base, hc_ffn_base, hc_attn_scale, hc_ffn_scale;
  std::vector<float> attn_norm, ffn_norm;
  // attention
  std::vector<float> attn_sink;  // [heads]
  cpu::WeightView wq_a, wq_b, wkv, wo_b;
  std::vector<float> wo_a;  // [o_groups·o_lora, heads·head_dim / o_groups], bf16 values
  std::vector<float> q_norm, kv_norm;
  // MoE
  cpu::WeightView gate;          // [experts, dim]
  std::vector<float> gate_bias;  // [experts]
  std::vector<DSparkExpert> experts;
  DSparkExpert shared;
};

struct DSparkWeights {
  std::vector<DSparkStageWeights> stages;
  cpu::WeightView main_proj;      // [dim, n_targets·dim] (stage 0)
  std::vector<float> main_norm;   // [dim] (stage 0)
  std::vector<float> norm;        // [dim] (last stage)
  cpu::WeightView markov_embed;   // [vocab, rank] (last stage)
  cpu::WeightView markov_head;    // [vocab, rank] (last stage)
  std::vector<float> confidence;  // [dim + rank] (last stage)
  cpu::WeightView embed, head;    // the main model's (tied)
  RopeTable rope;                 // the stages' plain RoPE (rope_theta)
};

// Reads mtp.{s}.* (official state_dict names; tied mtp.{s}.embed / head absent). embed and head
// are the main model's views.
Result<DSparkWeights> load_dspark_weights(const Checkpoint& checkpoint, const DSparkConfig& config,
                                          const cpu::WeightView& embed,
                                          const cpu::WeightView& head);

// Per-sequence state: each stage's window ring of main_x KV (slot p mod window holds position
// p, FP8-rounded, RoPE'd at p). Plain data, like the model's SequenceState.
struct DSparkState {
  std::vector<std::vector<float>> ring;  // [stage][window · head_dim]
  int64_t next_position = 0;             // positions [0, next_position) have been observed
};
DSparkState dspark_fresh_state(const DSparkConfig& config);

// The target's hidden input to DSpark at one target layer: the mean over the hc streams of X
// [n, hc, dim] (bf16 values) entering that layer, rounded to bf16, written to
// out + t·out_stride (so the means of all target layers concatenate into one row per token).
void dspark_stream_mean(const float* X, int64_t n, int hc, int dim, float* out, int64_t out_stride);

struct DSparkScratch {
  std::vector<float> f[32];
  std::vector<int32_t> idx;
};

// Prefill: writes positions [pos0, pos0 + n) into every stage's ring from main_hidden
// [n, n_targets·dim] (the concatenated stream means). Positions must continue next_position.
Status dspark_observe(const DSparkWeights& w, const DSparkConfig& config, DSparkState& state,
                      const float* main_hidden, int64_t n, int64_t pos0, DSparkScratch& scratch,
                      cpu::ThreadPool* pool);

struct DSparkDraft {
  std::vector<int32_t> ids;       // [block + 1]: the fed token, then one draft per block slot
  std::vector<float> logits;      // [block, vocab]: head logits plus the Markov bias
  std::vector<float> confidence;  // [block]
};

// Picks the next draft token from one row of logits; null = greedy (argmax, lowest id on ties).
using DSparkSampler = int32_t (*)(const float* logits, int64_t vocab, void* user);

// One draft after the target processed position pos (main_hidden [n_targets·dim]: its stream
// means) and chose `token` for pos + 1: observes pos, then runs the block at pos+1 … pos+block.
// Equals the official forward_spec(token, main_hidden, pos) for pos > 0.
Status dspark_draft(const DSparkWeights& w, const DSparkConfig& config, DSparkState& state,
                    const float* main_hidden, int64_t pos, int32_t token, DSparkDraft& out,
                    DSparkScratch& scratch, cpu::ThreadPool* pool, DSparkSampler sampler = nullptr,
                    void* sampler_user = nullptr);

}  // namespace deepinfer::model::v41
