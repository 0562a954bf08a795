// DeepSeek V4.1 Engram n-gram memory (spec §12.2 item 9, §12.3), as the official engram.py and
// model.py compute it: the compressed token map derived from tokenizer.json, the prime bucket
// layout and numpy-PCG64 hash multipliers, the per-position table rows of the n-grams ending there
// (look-back blocked at sequence start and image tokens), and the gated write of the FP8 table
// rows into the hc streams. Numerics follow the reference: bf16 activations, FP8 GEMMs per 32.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_view.h"
#include "common/result.h"
#include "model/safetensors.h"
#include "model/v41_config.h"

namespace deepinfer::model::v41 {

// The Engram keys of the V4.1 config (text_config) plus the model dims the gate needs.
struct EngramConfig {
  std::vector<int> layer_ids;           // engram_layer_ids
  int max_ngram_size = 0;               // engram_max_ngram_size (n-grams of 2..max)
  int64_t bucket_start = 0;             // engram_vocab_size: primes are searched above it
  int n_heads = 0;                      // engram_n_heads
  int head_dim = 0;                     // engram_head_dim
  int pad_token_id = 2;                 // engram_pad_token_id (a raw token id)
  int64_t compressed_vocab_size = 0;    // engram_compressed_vocab_size; 0 = not checked
  std::vector<int64_t> num_embeddings;  // engram_num_embeddings per layer; empty = not checked
  int hc_mult = 0;
  int dim = 0;
  double norm_eps = 1e-20;  // rms_norm_eps
};

// The Engram part of a parsed V4.1 config.
EngramConfig engram_config(const V41Config& config);

// Raw token id → compressed id: tokens whose decoded text normalizes alike (NFKC, NFD, accents
// stripped, lower case, whitespace runs → one space, stripped; a lone space survives) share an id;
// a token whose bytes are not valid UTF-8 keys by its raw vocabulary string.
struct EngramTokenMap {
  std::vector<int32_t> ids;  // [n_tokens]
  int64_t n_compressed = 0;
};

// From tokenizer.json text. n_tokens: the tokenizer's length (vocab + added tokens); 0 = one past
// the largest id the file defines. Every id below n_tokens must be defined.
Result<EngramTokenMap> build_engram_token_map(std::string_view tokenizer_json, int64_t n_tokens);
Result<EngramTokenMap> load_engram_token_map(const std::string& tokenizer_json_path,
                                             int64_t n_tokens);

// The normalizer sequence the map applies to a decoded token (UTF-8 in, UTF-8 out).
std::string engram_normalize(std::string_view text);

// The odd multipliers of one layer: 2·numpy.random.default_rng(10007·layer_id).integers(0,
// bound, max_ngram_size, int64) + 1 with bound = max(1, (2^63−1) // compressed_vocab // 2).
std::vector<int64_t> engram_hash_multipliers(int layer_id, int max_ngram_size,
                                             int64_t compressed_vocab_size);

// Everything the hash needs, fixed at load time. Columns: col = (n − 2)·n_heads + head for the
// n-gram of size n; each (layer, col) owns a prime-sized bucket range at offsets[layer][col].
struct EngramLayout {
  std::vector<int> layer_ids;
  int max_ngram_size = 0;
  int n_heads = 0;
  int head_dim = 0;
  std::vector<std::vector<int64_t>> primes;       // [layer][col]
  std::vector<std::vector<int64_t>> offsets;      // [layer][col]
  std::vector<std::vector<int64_t>> multipliers;  // [layer][look-back k = 0..max−1]
  std::vector<int64_t> num_rows;                  // [layer] table rows (sum of its primes)
  std::vector<int32_t> token_map;                 // raw → compressed
  int32_t pad_id = 0;                             // compressed id of pad_token_id

  int n_layers() const { return static_cast<int>(layer_ids.size()); }
  int n_cols() const { return (max_ngram_size - 1) * n_heads; }
  int layer_index(int layer_id) const;  // −1 if not an Engram layer
};

// Primes from the config, multipliers from PCG64; checks the map against
// compressed_vocab_size and the rows against num_embeddings when the config gives them.
Result<EngramLayout> make_engram_layout(const EngramConfig& config, EngramTokenMap map);

// Per-sequence hash state: the compressed ids of the last max_ngram_size − 1 positions, newest
// first; −1 = blocked (before the sequence, or an image token). Plain data: copy it to snapshot.
struct EngramHistory {
  std::vector<int32_t> prev;
};
EngramHistory engram_fresh_history(const EngramLayout& layout);
// The history after the raw ids recent[0..n) (oldest first; a negative id or one outside the
// token map blocks look-back, like an image token). Only the last max_ngram_size − 1 count.
EngramHistory engram_history_of(const EngramLayout& layout, const int32_t* recent, int64_t n);

// Table rows of the n-grams ending at each of the n tokens ids[0..n) (raw ids, continuing
// `history`, which is advanced): rows[(t·n_layers + l)·n_cols + c]. text_mask may be null (all
// text); text_mask[t] == 0 marks an image token (no n-gram spans it). Error on an id outside the
// token map.
Status engram_hash_rows(const EngramLayout& layout, const int32_t* ids, int64_t n,
                        const uint8_t* text_mask, EngramHistory& history, int64_t* rows);

// One Engram layer's tensors: layers.{L}.engram.{embed.weight, embed.scale, wkv.weight
// (+ .scale when FP8), q_weight, k_weight}.
struct EngramWeights {
  int layer_id = -1;
  int layer_index = 0;             // into EngramLayout's per-layer tables
  const uint8_t* table = nullptr;  // [rows, head_dim] e4m3
  const uint8_t* scale = nullptr;  // [rows, head_dim / 32] e8m0
  int64_t table_rows = 0;
  cpu::WeightView wkv;    // [(hc + 1)·dim, n_cols·head_dim], BF16 or FP8 32×32
  std::vector<float> qk;  // [hc, dim]: q_weight ⊙ k_weight in fp32
};
Result<EngramWeights> load_engram_weights(const Checkpoint& checkpoint, const EngramConfig& config,
                                          const EngramLayout& layout, int layer_id);

// Scratch buffers; they grow once and are reused.
struct EngramScratch {
  std::vector<float> emb, xq, kv;
};

// The Engram write before block `w.layer_id` on the streams X [n, hc, dim] (bf16 values held in
// fp32), in place: kv = wkv·rows → key [hc, dim], value [dim];
// gate_j = σ(sgnsqrt(⟨X_j, qk_j ⊙ key_j⟩ · rstd(X_j) · rstd(key_j) / √dim)) (|·| floored at 1e-6);
// X_j ← bf16(X_j + gate_j · value). rows: this layer's n_cols row ids of token t at
// rows + t·row_stride (engram_hash_rows output: base + layer_index·n_cols, stride
// n_layers·n_cols). text_mask (nullable): image tokens pass through untouched.
void engram_forward(const EngramWeights& w, const EngramLayout& layout, const EngramConfig& config,
                    const int64_t* rows, int64_t row_stride, int64_t n, const uint8_t* text_mask,
                    float* X, EngramScratch& scratch, cpu::ThreadPool* pool);

}  // namespace deepinfer::model::v41
