// V4.1 KV byte accounting (formulas of architecture spec §12.2 item 6 over the layer roles).
#include "engine/v41_kv_layout.h"

#include <algorithm>

#include "model/state.h"

namespace deepinfer::engine {
namespace {

using model::EntryFormat;
using model::v41::V41Config;

struct Rows {
  int64_t compressed = 0, index_key = 0, ring = 0;
};

Rows row_bytes(const V41Config& c, bool packed) {
  Rows r;
  r.compressed =
      model::entry_row_bytes(packed ? EntryFormat::Fp4E4m3 : EntryFormat::F32, c.head_dim, 0);
  r.index_key =
      model::entry_row_bytes(packed ? EntryFormat::Mxfp4 : EntryFormat::F32, c.index_head_dim, 0);
  r.ring = model::entry_row_bytes(EntryFormat::Fp8B32, c.head_dim, 0);
  return r;
}

void bounded(const V41Config& c, const Rows& rows, V41KvBytes& b) {
  b.ring_bytes = int64_t{c.num_layers} * c.sliding_window * rows.ring;
  b.ring_bytes_f32 = int64_t{c.num_layers} * c.sliding_window * c.head_dim * 4;
  b.tail_bytes = 0;
  for (int l = 0; l < c.num_layers; ++l)
    if (c.is_kv_source(l) && c.ratio(l) > 1)
      b.tail_bytes += 2 * int64_t{c.ratio(l)} * c.head_dim * 4;
}

}  // namespace

V41KvBytes v41_kv_bytes_packed(const V41Config& c) {
  const Rows rows = row_bytes(c, true);
  V41KvBytes b;
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_kv_source(l)) continue;
    const double r = c.ratio(l);
    b.compressed_per_token += static_cast<double>(rows.compressed) / r;
    if (c.is_index_source(l)) b.index_keys_per_token += static_cast<double>(rows.index_key) / r;
  }
  b.per_token = b.compressed_per_token + b.index_keys_per_token;
  bounded(c, rows, b);
  return b;
}

V41BlockBytes v41_kv_bytes_in_blocks(const V41Config& c, int32_t block_size, bool packed) {
  const Rows rows = row_bytes(c, packed);
  auto region = [&](int r, int64_t row) { return (std::max(1, block_size / r) * row + 7) / 8 * 8; };
  V41BlockBytes out;
  V41KvBytes& b = out.per_token;
  int64_t comp = 0, keys = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_kv_source(l)) continue;
    comp += region(c.ratio(l), rows.compressed);
    if (c.is_index_source(l)) keys += region(c.ratio(l), rows.index_key);
  }
  out.block_bytes = comp + keys;
  b.compressed_per_token = static_cast<double>(comp) / block_size;
  b.index_keys_per_token = static_cast<double>(keys) / block_size;
  b.per_token = static_cast<double>(out.block_bytes) / block_size;
  bounded(c, row_bytes(c, true), b);
  return out;
}

int64_t v41_snapshot_bytes(const V41Config& c) {
  const V41KvBytes b = v41_kv_bytes_packed(c);
  const int64_t counters = 8 + 2 * 8 * int64_t{c.num_layers};
  const int64_t recent = 4 * int64_t{std::max(0, c.engram_max_ngram_size - 1)};
  return b.ring_bytes + b.tail_bytes + counters + recent;
}

}  // namespace deepinfer::engine
