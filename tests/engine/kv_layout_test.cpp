// V4 KV byte accounting against the numbers of architecture spec §7.2 for V4-Flash.
#include "engine/kv_layout.h"

#include <gtest/gtest.h>

namespace deepinfer::engine {
namespace {

model::ModelConfig v4_flash() {  // spec §2.1 / §3: 43 layers, ratios 0,0, then 4/128 alternating
  model::ModelConfig c;
  c.num_layers = 43;
  c.head_dim = 512;
  c.rope_dim = 64;
  c.index_head_dim = 128;
  c.sliding_window = 128;
  c.compress_ratios = {0, 0};
  for (int layer = 2; layer < 43; ++layer) c.compress_ratios.push_back(layer % 2 ? 128 : 4);
  return c;
}

TEST(V4KvBytes, PackedFormatsMatchSpecSection7) {
  const V4KvBytes b = v4_kv_bytes_packed(v4_flash());
  EXPECT_DOUBLE_EQ(b.csa_per_token, (584.0 + 68.0) / 4);  // 584 B main row + 68 B MXFP4 index row
  EXPECT_DOUBLE_EQ(b.hca_per_token, 584.0 / 128);
  EXPECT_DOUBLE_EQ(b.swa_per_token, 0.0);
  EXPECT_NEAR(b.per_token, 3514.0, 0.5);                            // "3514 B/token"
  EXPECT_NEAR(b.per_token * (1 << 20) / 1e9, 3.68, 0.01);           // "3.68 GB at 1M tokens"
  EXPECT_EQ(b.ring_bytes, 43 * 128 * 584);                          // 43 decoder rings (no MTP)
  EXPECT_NEAR(static_cast<double>(b.tail_bytes) / 1e6, 12.2, 0.1);  // "≈ 12.2 MB"
}

TEST(V4KvBytes, StoredFp32Rows) {
  const V4KvBytes b = v4_kv_bytes_stored(v4_flash());
  EXPECT_DOUBLE_EQ(b.csa_per_token, (512 * 4 + 128 * 4) / 4.0);
  EXPECT_DOUBLE_EQ(b.hca_per_token, 512 * 4 / 128.0);
  EXPECT_DOUBLE_EQ(b.per_token, 21 * 640.0 + 20 * 16.0);
}

}  // namespace
}  // namespace deepinfer::engine
