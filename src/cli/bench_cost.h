// The work `deepinfer bench` divides its times by: bytes a decode step reads from memory
// (weights as stored: every dense matrix, the routed experts the step's tokens touch, the
// embedding rows, plus the cached KV rows attention reads) and the FLOPs of a prefill (linear
// layers and attention), all counted from the checkpoint's own tensor headers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace deepinfer::cli {

struct BenchCost {
  int64_t dense_bytes = 0;      // read whole by every step (head included, embedding excluded)
  int64_t embed_row_bytes = 0;  // one embedding row
  std::vector<int64_t> expert_bytes;  // per layer: one routed expert (w1 + w2 + w3, scales)
  std::vector<const model::TensorInfo*> tid2eid;  // per layer: [vocab, k] I64/I32, or null
  double dense_matmul_elements = 0;            // per token: every matrix but embed, head, experts
  std::vector<double> expert_matmul_elements;  // per layer: one routed expert
  double head_matmul_elements = 0;
};

// Counts from the checkpoint of `config` (names as stored or published; mtp.* ignored).
Result<BenchCost> bench_cost(const model::ModelConfig& config, const model::Checkpoint& ckpt);

struct KvRowBytes {
  int window = 0, entry = 0, index_key = 0;
};

struct DecodeCost {
  double weight_bytes = 0;         // dense + touched experts + embedding rows
  double kv_bytes = 0;             // window rows, selected / all compressed entries, index keys
  double experts_touched = 0;      // mean per layer
  bool experts_estimated = false;  // a score-routed layer: uniform-routing expectation
};

// One step of tokens.size() sequences, each at position `context` (it attends context + 1 keys).
// Hash layers count the exact union of their tokens' experts; score-routed layers the expected
// union under uniform routing, E·(1 − (1 − k/E)^B) (random weights route near uniformly).
DecodeCost decode_cost(const BenchCost& cost, const model::ModelConfig& config,
                       std::span<const int32_t> tokens, int64_t context, const KvRowBytes& kv);

struct PrefillFlops {
  double linear = 0;     // 2 · matrix elements per token (k routed experts), head on the last row
  double attention = 0;  // QK and PV over window + compressed keys, indexer scores
};
// One fresh sequence of `len` tokens.
PrefillFlops prefill_flops(const BenchCost& cost, const model::ModelConfig& config, int64_t len);

}  // namespace deepinfer::cli
