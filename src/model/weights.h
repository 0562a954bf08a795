// The V4 weights as the forward reads them: big matrices are WeightViews into the mapped
// checkpoint (zero copy); small vectors (norms, hc mixers' bases/scales, sinks, ape, gate bias,
// tid2eid) are owned fp32/int copies. load_weights() maps published and HF save_pretrained
// names, checks every shape, and rejects unknown, missing or mis-shaped tensors by name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/weight_view.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace deepinfer::model {

using cpu::WeightView;

struct HyperConnectionWeights {
  WeightView fn;             // [(2+hc)·hc or hc, hc·d]
  std::vector<float> base;   // [(2+hc)·hc] (head: [hc])
  std::vector<float> scale;  // [3] (head: [1])
};

struct CompressorWeights {
  WeightView wkv, wgate;    // [coff·d_c, d]
  std::vector<float> ape;   // [ratio, coff·d_c]
  std::vector<float> norm;  // [d_c]
};

struct IndexerWeights {
  WeightView wq_b;          // [index_heads·index_head_dim, q_lora_rank]
  WeightView weights_proj;  // [index_heads, d]
  CompressorWeights compressor;
};

struct ExpertWeights {
  WeightView w1, w2, w3;  // w1/w3 [inter, d], w2 [d, inter]
};

struct BlockWeights {
  HyperConnectionWeights hc_attn, hc_ffn;
  std::vector<float> attn_norm, ffn_norm;
  // attention
  std::vector<float> attn_sink;  // [heads]
  WeightView wq_a, wq_b, wkv, wo_a, wo_b;
  std::vector<float> q_norm, kv_norm;
  bool has_compressor = false, has_indexer = false;
  CompressorWeights compressor;
  IndexerWeights indexer;
  // MoE
  WeightView gate;               // [experts, d]
  std::vector<float> gate_bias;  // [experts] (score routing; zeros if absent)
  std::vector<int32_t> tid2eid;  // [vocab, topk] (hash routing)
  ExpertWeights shared;
  std::vector<ExpertWeights> experts;
};

struct MtpWeights {
  WeightView e_proj, h_proj;  // [d, d]
  std::vector<float> enorm, hnorm, norm;
  HyperConnectionWeights hc_head;
  BlockWeights block;
};

struct ModelWeights {
  WeightView embed;  // [vocab, d]
  WeightView head;   // [vocab, d]
  std::vector<float> norm;
  HyperConnectionWeights hc_head;
  std::vector<BlockWeights> blocks;
  std::vector<MtpWeights> mtp;  // empty when the checkpoint has no mtp.* tensors
};

// Published name for a stored name (HF save_pretrained names map; others pass through).
std::string canonical_tensor_name(const std::string& stored);

Result<ModelWeights> load_weights(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace deepinfer::model
