// Internal to the V4.1 CUDA model: weights, per-slot state and scratch in device memory as
// CudaV41Model::Impl holds them (v41_model.cu uploads and drives, v41_attention.cu runs the
// attention sublayer, v41_ops.cu the row operations).
#pragma once

#include <memory>
#include <vector>

#include "backend/cuda/cuda_v41_model.h"
#include "backend/cuda/ops.cuh"
#include "backend/cuda/v41_ops.cuh"
#include "model/v41_forward.h"
#include "model/v41_model.h"

namespace deepinfer::cuda {

struct V41DevBlock {
  DevWeight hc_attn_fn, hc_ffn_fn;
  const float *hc_attn_base = nullptr, *hc_ffn_base = nullptr;
  const float *hc_attn_scale = nullptr, *hc_ffn_scale = nullptr;
  const float *attn_norm = nullptr, *ffn_norm = nullptr, *attn_sink = nullptr;
  DevWeight wq_a, wq_b, wkv, wo_a, wo_b;  // wo_a: bf16 [o_groups·o_lora, H·D / o_groups]
  const float *q_norm = nullptr, *kv_norm = nullptr;
  DevWeight comp_wkv, comp_wgate;
  const float* comp_norm = nullptr;
  DevWeight idx_wq_b, idx_weights_proj, idx_wk;
  const float* idx_k_norm = nullptr;
  DevWeight gate;
  const float* gate_bias = nullptr;
  const DevWeight *r1 = nullptr, *r2 = nullptr, *r3 = nullptr;  // routed experts, device [E]
  DevFormat routed_format = DevFormat::F32;
  bool routed_quantized = false;
  DevWeight s1, s2, s3;  // shared expert
};

// Per layer, for every slot: the window ring; kv sources: compressor tails (ratio > 1), the
// compressed entries and (index sources) the index keys, entry j of slot s at row s·max_entries +
// j.
struct V41DevLayer {
  DeviceArray<float> ring;                 // [slots, window, D]
  DeviceArray<float> tail_kv, tail_score;  // [slots, ratio, D]
  DeviceArray<float> entries;              // [slots, max_entries, D]
  DeviceArray<float> keys;                 // [slots, max_entries, index_head_dim]
  int64_t max_entries = 0;
};

struct V41DevEngram {
  const uint8_t* table = nullptr;  // [rows, head_dim] e4m3
  const uint8_t* scale = nullptr;  // [rows, head_dim / 32] e8m0
  int64_t table_rows = 0;
  DevWeight wkv;
  const float* qk = nullptr;  // [hc, d]
};

// One launch's row metadata on the device, built by the host from the segments.
struct V41Step {
  Rows rows;                // ids, slot, position, first row, first position, length per row
  int64_t n = 0;            // rows
  int64_t max_visible = 0;  // most compressed entries any row sees at ratio 1 (scores width)
  // Closing compressor entries per ratio (1, 2): the row, slot and entry index of each.
  const int32_t* ent[3] = {nullptr, nullptr, nullptr};
  int64_t n_ent[3] = {0, 0, 0};
  const int64_t* engram_rows = nullptr;  // [n, n_layers · n_cols]
};

struct CudaV41Model::Impl {
  Exec exec;
  model::v41::V41Config cfg;
  CudaModelOptions opt;
  std::vector<DeviceArray<uint8_t>> blobs;
  int64_t weight_bytes = 0, state_bytes = 0, workspace_bytes = 0;

  DevWeight embed, head;
  const float* norm = nullptr;
  std::vector<V41DevBlock> blocks;
  const float *main_cos = nullptr, *main_sin = nullptr, *comp_cos = nullptr, *comp_sin = nullptr;
  int scoring = 0;
  // Engram (host hash, device tables)
  bool has_engram = false;
  model::v41::EngramLayout eg_layout;  // a copy: the hash runs on the host
  float eg_eps = 0;
  std::vector<V41DevEngram> engram_layers;  // in layout order
  std::vector<int64_t> host_engram_rows;
  model::v41::EngramHistory history;

  std::vector<V41DevLayer> layers;
  std::vector<int64_t> positions;
  std::vector<std::vector<int32_t>> recent;  // per slot: the last max_ngram − 1 ids

  int64_t N = 0;  // rows per launch
  DeviceArray<float> X, X2, u, yv, mix, pre_mix, pre_a, post, comb, xq, qr, q, kv, ca, cg, lat,
      kbuf, iq, wts, scores, bscore, o, z, gsc, wsel, h1, h3, ye, ys, sh1, sh3, emb, ekv, xh, ph,
      uh, lg, rss, alog, arsc, aden;
  DeviceArray<int32_t> topk, bpick, sel, meta, amax, sampled;
  DeviceArray<SampleSpec> sample_specs;  // decode rows' device sampling (sampling.h)
  DeviceArray<uint8_t> cand, pick_flags;
  DeviceArray<int64_t> erows;
  int64_t cand_stride = 0;
  std::vector<int32_t> host_meta, ent_tmp[4];  // host scratch of run(), reused

  const float* upload_floats(const std::vector<float>& v);
  const float* upload_floats(const float* p, size_t n);
  DevWeight upload_weight(const cpu::WeightView& w);
  Status upload(const model::v41::V41Config& config, const model::v41::V41Weights& w,
                const model::v41::V41EngramParts* engram_parts);
  void allocate();

  struct Segment {
    int seq;
    std::span<const int32_t> ids;
  };
  // One launch: the segments' tokens stacked; logits of the global rows logit_rows.
  // specs (one per logit row, may be empty): tokens sampled on the device into tokens (host).
  Status run(std::span<const Segment> segs, std::span<const int32_t> logit_rows, float* logits,
             int32_t* argmax, std::span<const SampleSpec> specs = {}, int32_t* tokens = nullptr);
  std::vector<Segment> decode_segs;  // decode()'s bookkeeping, reused
  std::vector<int32_t> decode_rows;
  void attention(int layer, const V41Step& st, const float* x, float* y);
  void compressor(int layer, const V41Step& st, const float* x, const float* qr);
  void indexer(int layer, const V41Step& st, const float* x, const float* qr);
  void moe(int layer, const V41Step& st, const float* x, float* y);
};

}  // namespace deepinfer::cuda
