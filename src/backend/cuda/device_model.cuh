// Internal to the CUDA backend: the model's weights, per-slot state and scratch in device memory,
// as CudaModel::Impl holds them (cuda_model.cu uploads, forward.cu runs).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/moe.cuh"
#include "backend/cuda/moe_grouped.cuh"
#include "backend/cuda/sampling.cuh"
#include "model/model.h"

namespace deepinfer::cuda {

struct DevHc {
  DevWeight fn;
  const float* base = nullptr;
  const float* scale = nullptr;
};

struct DevCompressor {
  DevWeight wkv, wgate;
  const float* ape = nullptr;
  const float* norm = nullptr;
};

struct DevExperts {
  DevWeight w1, w2, w3;           // shared expert
  const DevWeight* r1 = nullptr;  // routed, device arrays [E]
  const DevWeight* r2 = nullptr;
  const DevWeight* r3 = nullptr;
  bool routed_quantized = false;
  DevFormat f1 = DevFormat::F32, f2 = DevFormat::F32, f3 = DevFormat::F32;
  // One routed expert of each product on the host, and whether all E are alike (RoutedExperts).
  DevWeight e1, e2, e3;
  bool uniform1 = false, uniform2 = false, uniform3 = false;
};

struct DevBlock {
  DevHc hc_attn, hc_ffn;
  const float *attn_norm = nullptr, *ffn_norm = nullptr, *attn_sink = nullptr;
  DevWeight wq_a, wq_b, wkv, wo_a, wo_b;
  const float *q_norm = nullptr, *kv_norm = nullptr;
  bool has_compressor = false, has_indexer = false;
  DevCompressor compressor, index_compressor;
  DevWeight index_wq_b, index_weights_proj;
  DevWeight gate;
  const float* gate_bias = nullptr;
  const int32_t* tid2eid = nullptr;
  DevExperts ffn;
};

struct LayerState {
  DeviceArray<float> ring;  // [slots, W, D]
  DeviceArray<float> ckv, csc, cstore, ikv, isc, istore;
  CompressorBuffers comp, icomp;
};

// One buffer of the bounded per-slot state, as a block snapshot lays it out: slot s's part is
// base[s · per_slot, (s + 1) · per_slot), at [offset, offset + per_slot) of a snapshot.
struct SnapshotRegion {
  float* base = nullptr;
  int64_t per_slot = 0;
  int64_t offset = 0;
};

struct CudaModel::Impl {
  Exec exec;
  // A second stream the shared expert runs on beside the routed experts at GEMV-sized launches
  // (moe_sublayer), forked from and joined to exec.stream by the two events; null when emulated.
  cudaStream_t side_stream = nullptr;
  cudaEvent_t fork_event = nullptr, join_event = nullptr;
  // A third stream the CSA layer's indexer chain runs on beside the side stream's kv norm and
  // compressors (attention_sublayer): index_event when the side stream's index compressor is
  // done, index_join_event when the indexer is.
  cudaStream_t index_stream = nullptr;
  cudaEvent_t index_event = nullptr, index_join_event = nullptr;
  std::unique_ptr<model::Model> owned;  // the CPU model when loaded from a folder
  model::ModelConfig cfg;
  CudaModelOptions opt;
  bool official = false;

  std::vector<DeviceArray<uint8_t>> blobs;  // every uploaded tensor
  int64_t weight_bytes = 0, state_bytes = 0, workspace_bytes = 0;

  DevWeight embed_table, head;
  const float* norm = nullptr;
  DevHc hc_head_w;
  std::vector<DevBlock> blocks;
  const float *main_inv = nullptr, *comp_inv = nullptr;
  float main_af = 1.0f, comp_af = 1.0f;

  std::vector<LayerState> layers;
  std::vector<int64_t> positions;
  // Paged entry stores (kv_pages.cuh): the slots' block tables, on the host and the device (rows
  // dirty_lo … dirty_hi − 1 not uploaded yet).
  int32_t block_size = 0, num_blocks = 0, max_blocks = 0;
  std::vector<int32_t> host_tables;
  DeviceArray<int32_t> tables;
  int dirty_lo = 0, dirty_hi = 0;
  void upload_tables();
  // Block snapshots of the bounded state: [num_blocks, snapshot_floats] and the regions.
  std::vector<SnapshotRegion> host_regions;
  DeviceArray<SnapshotRegion> regions;
  DeviceArray<float> snapshots;
  int64_t snapshot_floats = 0;
  void copy_snapshot(int seq, int32_t block, bool save);
  std::vector<int> ratios;  // distinct compress ratios > 0

  // scratch (N rows = max(max_chunk_tokens, max_sequences))
  int64_t N = 0;
  DeviceArray<float> X, X2, u, xn, y, pre, post, comb, mix, qa, qr, q, kv, o, z, ca, cg, ica, icg,
      iq, iw, iscore, probs, xq, xnq, Xr, hh, lg, mlog, wts, sh1, sh3, shq, rh1, rh3, rout, rss;
  DeviceArray<int32_t> sel, cnt, idx, meta, sampled;
  DeviceArray<SampleSpec> sample_specs;  // decode rows' device sampling (sampling.h)
  ExpertPlanBuffers expert_plan;         // the routed slots by expert (grouped expert kernels)
  std::vector<int32_t> host_meta;
  // xnq holds xn FP8-quantized once for all of its products (official numerics, GEMV-sized
  // launches); xn_q points at it then, else null.
  const float* xn_q = nullptr;
  // per launch: closed-entry lists per ratio (offsets into meta: seq list, then j list, and the
  // count at ent_count + ri), the upper bound of entries, the logit-row and argmax offsets
  std::vector<int64_t> ent_off;
  int64_t ent_count = 0, ent_max = 0, o_lrows = 0, o_amax = 0;
  // decode graphs by batch size (all segments one token, logits of every row)
  std::map<int64_t, cudaGraphExec_t> graphs;
  bool graphs_failed = false;

  const float* upload_floats(const std::vector<float>& v);
  DevWeight upload_weight(const cpu::WeightView& w);
  Status upload(const model::Model& m);
  void allocate_state_and_scratch();

  // One launch: segments (slot, ids) → logits of the given global rows.
  struct Segment {
    int seq;
    std::span<const int32_t> ids;
  };
  // specs (one per logit row, may be empty): tokens sampled on the device into tokens (host).
  Status run(std::span<const Segment> segs, std::span<const int32_t> logit_rows, float* logits,
             int32_t* argmax, std::span<const SampleSpec> specs = {}, int32_t* tokens = nullptr);
  // decode()'s per-step bookkeeping, kept so that a step allocates nothing on the host.
  std::vector<Segment> decode_segs;
  std::vector<int32_t> decode_rows;
  std::vector<uint8_t> decode_seen;
  // Every kernel of one launch (no host sync, no allocation: capturable in a graph).
  void compute(const Rows& rows, const Segments& segs, int64_t n_logits);
  void block(int layer, const Rows& rows, const Segments& segs, const int32_t* entries);
  // True where it also wrote hc_post's outputs (hc_post_args) in wo_b's launch.
  bool attention_sublayer(int layer, const Rows& rows, const Segments& segs, const int32_t* entries,
                          const HcPostArgs& hc_post_args);
  // y = the shared expert's output, rout the routed slots' (block() adds them in hc_post's launch).
  void moe_sublayer(int layer, const Rows& rows);
};

}  // namespace deepinfer::cuda
