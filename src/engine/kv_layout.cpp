// V4 KV byte accounting (formulas of architecture spec §7.1/§7.2).
#include "engine/kv_layout.h"

#include <algorithm>

#include "model/state.h"

namespace deepinfer::engine {
namespace {

// Compressor tail of one compressor: kv and score rows of coff·d_c floats, ratio rows (plain) or
// 2·ratio rows (overlapping, coff = 2).
int64_t tail_bytes(int ratio, int dim, bool overlap) {
  const int64_t rows = overlap ? 2 * ratio : ratio;
  const int64_t width = overlap ? 2 * dim : dim;
  return 2 * rows * width * 4;
}

V4KvBytes tally(const model::ModelConfig& c, double main_row, double index_row, double ring_row) {
  V4KvBytes b;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const int r = c.ratio(layer);
    b.ring_bytes += static_cast<int64_t>(ring_row * c.sliding_window);
    if (r == 0) continue;
    if (c.kind(layer) == model::AttentionKind::Csa) {
      b.csa_per_token = (main_row + index_row) / r;
      b.per_token += b.csa_per_token;
      b.tail_bytes += tail_bytes(r, c.head_dim, true) + tail_bytes(r, c.index_head_dim, true);
    } else {
      b.hca_per_token = main_row / r;
      b.per_token += b.hca_per_token;
      b.tail_bytes += tail_bytes(r, c.head_dim, false);
    }
  }
  return b;
}

}  // namespace

V4KvBytes v4_kv_bytes_stored(const model::ModelConfig& c) {
  return tally(c, 4.0 * c.head_dim, 4.0 * c.index_head_dim, 4.0 * c.head_dim);
}

V4KvBytes v4_kv_bytes_packed(const model::ModelConfig& c) {
  // e4m3 no-RoPE dims + bf16 RoPE dims + one UE8M0 scale per 64, padded to 8 bytes (584 for V4).
  const int64_t main_row =
      model::entry_row_bytes(model::EntryFormat::Fp8Kv, c.head_dim, c.rope_dim);
  // MXFP4: two e2m1 per byte + one UE8M0 scale per 32 (68 for V4).
  const int64_t index_row = model::entry_row_bytes(model::EntryFormat::Mxfp4, c.index_head_dim, 0);
  return tally(c, static_cast<double>(main_row), static_cast<double>(index_row),
               static_cast<double>(main_row));
}

V4BlockBytes v4_kv_bytes_in_blocks(const model::ModelConfig& c, int32_t block_size, bool packed) {
  const model::EntryFormat main_fmt = packed ? model::EntryFormat::Fp8Kv : model::EntryFormat::F32;
  const model::EntryFormat index_fmt = packed ? model::EntryFormat::Mxfp4 : model::EntryFormat::F32;
  const int64_t main_row = model::entry_row_bytes(main_fmt, c.head_dim, c.rope_dim);
  const int64_t index_row = model::entry_row_bytes(index_fmt, c.index_head_dim, 0);
  auto region = [&](int r, int64_t row) { return (std::max(1, block_size / r) * row + 7) / 8 * 8; };
  V4BlockBytes out;
  out.per_token = v4_kv_bytes_stored(c);
  V4KvBytes& b = out.per_token;
  b.csa_per_token = b.hca_per_token = b.per_token = 0;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const int r = c.ratio(layer);
    if (r == 0) continue;
    int64_t bytes = region(r, main_row);
    if (c.kind(layer) == model::AttentionKind::Csa) {
      bytes += region(r, index_row);
      b.csa_per_token = static_cast<double>(bytes) / block_size;
    } else {
      b.hca_per_token = static_cast<double>(bytes) / block_size;
    }
    out.block_bytes += bytes;
  }
  b.per_token = static_cast<double>(out.block_bytes) / block_size;
  return out;
}

}  // namespace deepinfer::engine
