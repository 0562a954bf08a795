#include "cli/bench_cost.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "model/weights.h"

namespace deepinfer::cli {

namespace {

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// "layers.L.rest" → L and rest; false for anything else.
bool split_layer(const std::string& name, int* layer, std::string* rest) {
  if (name.compare(0, 7, "layers.") != 0) return false;
  const size_t dot = name.find('.', 7);
  if (dot == std::string::npos || dot == 7) return false;
  int v = 0;
  for (size_t i = 7; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || v > 100000) return false;
    v = v * 10 + (name[i] - '0');
  }
  *layer = v;
  *rest = name.substr(dot + 1);
  return true;
}

// Elements of the matrix a stored tensor holds (FP4 packs two per byte), 0 for vectors.
double matrix_elements(const model::TensorInfo& t) {
  if (t.shape.size() != 2) return 0;
  const double n = static_cast<double>(t.shape[0]) * static_cast<double>(t.shape[1]);
  return t.dtype == model::DType::I8 ? 2 * n : n;
}

bool is_matrix_name(const std::string& n) { return ends_with(n, ".weight") || ends_with(n, "_fn"); }

}  // namespace

Result<BenchCost> bench_cost(const model::ModelConfig& config, const model::Checkpoint& ckpt) {
  BenchCost c;
  const size_t L = static_cast<size_t>(config.num_layers);
  c.expert_bytes.assign(L, 0);
  c.expert_matmul_elements.assign(L, 0);
  c.tid2eid.assign(L, nullptr);
  for (const auto& [stored, t] : ckpt.tensors()) {
    const std::string name = model::canonical_tensor_name(stored);
    if (name.compare(0, 4, "mtp.") == 0) continue;
    if (name == "embed.weight") {
      if (config.vocab_size > 0) c.embed_row_bytes = t.nbytes / config.vocab_size;
      continue;
    }
    if (name == "head.weight") {
      c.dense_bytes += t.nbytes;
      c.head_matmul_elements = matrix_elements(t);
      continue;
    }
    int layer = -1;
    std::string rest;
    if (split_layer(name, &layer, &rest) && layer < config.num_layers) {
      const size_t l = static_cast<size_t>(layer);
      if (rest.compare(0, 12, "ffn.experts.") == 0) {
        if (rest.compare(12, 2, "0.") == 0) {  // every expert of a layer has the same size
          c.expert_bytes[l] += t.nbytes;
          if (ends_with(rest, ".weight")) c.expert_matmul_elements[l] += matrix_elements(t);
        }
        continue;
      }
      if (rest == "ffn.gate.tid2eid") {
        if (t.shape.size() != 2 || t.shape[0] != config.vocab_size ||
            t.shape[1] != config.experts_per_token ||
            (t.dtype != model::DType::I64 && t.dtype != model::DType::I32)) {
          return Error{"tensor " + stored + " is not a [vocab, top-k] integer table"};
        }
        c.tid2eid[l] = &t;
        continue;
      }
    }
    c.dense_bytes += t.nbytes;
    if (is_matrix_name(name)) c.dense_matmul_elements += matrix_elements(t);
  }
  if (c.head_matmul_elements == 0 && config.tie_word_embeddings) {
    c.head_matmul_elements = static_cast<double>(config.vocab_size) * config.hidden_size;
    c.dense_bytes += c.embed_row_bytes * config.vocab_size;
  }
  return c;
}

DecodeCost decode_cost(const BenchCost& cost, const model::ModelConfig& config,
                       std::span<const int32_t> tokens, int64_t context, const KvRowBytes& kv) {
  DecodeCost d;
  const double B = static_cast<double>(tokens.size());
  const int E = config.n_routed_experts, k = config.experts_per_token;
  d.weight_bytes = static_cast<double>(cost.dense_bytes) + B * cost.embed_row_bytes;
  const double uniform = E * (1.0 - std::pow(1.0 - static_cast<double>(k) / E, B));
  const int64_t keys = context + 1;
  for (int l = 0; l < config.num_layers; ++l) {
    const size_t li = static_cast<size_t>(l);
    double touched = uniform;
    if (const model::TensorInfo* t = cost.tid2eid[li]) {
      std::set<int64_t> experts;
      for (int32_t tok : tokens) {
        if (tok < 0 || tok >= config.vocab_size) continue;
        for (int j = 0; j < k; ++j) {
          const int64_t i = static_cast<int64_t>(tok) * k + j;
          int64_t e = 0;
          if (t->dtype == model::DType::I64) {
            std::memcpy(&e, t->data + 8 * i, 8);
          } else {
            int32_t e32;
            std::memcpy(&e32, t->data + 4 * i, 4);
            e = e32;
          }
          experts.insert(e);
        }
      }
      touched = static_cast<double>(experts.size());
    } else {
      d.experts_estimated = true;
    }
    d.experts_touched += touched / config.num_layers;
    d.weight_bytes += touched * static_cast<double>(cost.expert_bytes[li]);
    double per_seq =
        static_cast<double>(std::min<int64_t>(keys, config.sliding_window)) * kv.window;
    const int r = config.ratio(l);
    if (r > 0) {
      const double n = static_cast<double>(keys / r);
      if (config.kind(l) == model::AttentionKind::Csa) {
        per_seq += std::min<double>(n, config.index_topk) * kv.entry + n * kv.index_key;
      } else {
        per_seq += n * kv.entry;
      }
    }
    d.kv_bytes += B * per_seq;
  }
  return d;
}

PrefillFlops prefill_flops(const BenchCost& cost, const model::ModelConfig& config, int64_t len) {
  PrefillFlops f;
  double per_token = cost.dense_matmul_elements;
  for (int l = 0; l < config.num_layers; ++l) {
    per_token += config.experts_per_token * cost.expert_matmul_elements[static_cast<size_t>(l)];
  }
  f.linear = 2.0 * per_token * static_cast<double>(len) + 2.0 * cost.head_matmul_elements;
  const double qk_pv = 4.0 * config.n_heads * config.head_dim;  // per query and key
  const double index = 2.0 * config.index_n_heads * config.index_head_dim;
  for (int l = 0; l < config.num_layers; ++l) {
    const int r = config.ratio(l);
    const bool csa = r > 0 && config.kind(l) == model::AttentionKind::Csa;
    for (int64_t p = 0; p < len; ++p) {
      double keys = static_cast<double>(std::min<int64_t>(p + 1, config.sliding_window));
      if (r > 0) {
        const double n = static_cast<double>((p + 1) / r);
        keys += csa ? std::min<double>(n, config.index_topk) : n;
        if (csa) f.attention += index * n;
      }
      f.attention += qk_pv * keys;
    }
  }
  return f;
}

}  // namespace deepinfer::cli
