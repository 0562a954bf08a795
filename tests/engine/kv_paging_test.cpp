// Compressed KV paged inside engine blocks (V4ModelRunner) in the packed formats of spec §7.2:
// packed rows round-trip bit for bit once the official numerics have rounded them; the official
// fixture gives bitwise the same outputs with packed and with fp32 entries; the block layout's
// bytes match the accounting and, for V4-Flash, the ≈ 3.7 GB per 1M tokens of §7.2.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/batch.h"
#include "engine/kv_layout.h"
#include "engine/v4_model_runner.h"
#include "model/model.h"
#include "model/official_numerics.h"
#include "model/state.h"

namespace deepinfer::engine {
namespace {

const std::string kOfficial = std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/official_v4_a";

model::ModelConfig v4_flash() {
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

// Rows with a wide dynamic range: zeros, signed zeros, tiny and large magnitudes per block.
std::vector<float> random_rows(int rows, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(rows) * dim);
  for (size_t i = 0; i < v.size(); ++i) {
    const int block = static_cast<int>(i / 32);
    const float scale = std::ldexp(1.0f, (block * 7) % 40 - 24);
    v[i] = normal(rng) * scale;
    if (rng() % 17 == 0) v[i] = 0.0f;
    if (rng() % 19 == 0) v[i] = -0.0f;
  }
  for (int d = 0; d < dim; ++d) v[static_cast<size_t>(dim) + d] = 0.0f;  // an all-zero row
  return v;
}

void expect_round_trip(model::EntryFormat format, int dim, int rope, std::vector<float> rows) {
  model::EntryStore store;
  store.format = format;
  store.dim = dim;
  store.rope_dim = rope;
  store.ratio = 4;
  store.row_bytes = model::entry_row_bytes(format, dim, rope);
  const int n = static_cast<int>(rows.size()) / dim;
  for (int r = 0; r < n; ++r) store.append(rows.data() + static_cast<size_t>(r) * dim);
  ASSERT_EQ(store.count, n);
  std::vector<float> back(static_cast<size_t>(dim));
  for (int r = 0; r < n; ++r) {
    const float* got = store.row(r, back.data());
    for (int d = 0; d < dim; ++d) {
      const float want = rows[static_cast<size_t>(r) * dim + d];
      ASSERT_EQ(std::bit_cast<uint32_t>(got[d]), std::bit_cast<uint32_t>(want))
          << "row " << r << " dim " << d << ": " << got[d] << " vs " << want;
    }
  }
}

TEST(KvPaging, PackedRowSizesAreThoseOfSection7) {
  EXPECT_EQ(model::entry_row_bytes(model::EntryFormat::Fp8Kv, 512, 64), 584);
  EXPECT_EQ(model::entry_row_bytes(model::EntryFormat::Mxfp4, 128, 0), 68);
  EXPECT_EQ(model::entry_row_bytes(model::EntryFormat::F32, 512, 64), 2048);
}

TEST(KvPaging, OfficiallyRoundedRowsRoundTripBitwise) {
  const int64_t before = model::entry_pack_mismatches();
  for (const auto& [dim, rope] : {std::pair{512, 64}, std::pair{96, 32}, std::pair{128, 64}}) {
    std::vector<float> rows = random_rows(64, dim, static_cast<uint32_t>(dim));
    model::official::kv_rows(rows.data(), 64, dim, rope);
    expect_round_trip(model::EntryFormat::Fp8Kv, dim, rope, rows);
  }
  for (int dim : {128, 64, 32}) {
    std::vector<float> rows = random_rows(64, dim, static_cast<uint32_t>(dim) + 1);
    model::official::indexer_rows(rows.data(), 64, dim);
    expect_round_trip(model::EntryFormat::Mxfp4, dim, 0, rows);
  }
  EXPECT_EQ(model::entry_pack_mismatches(), before);
}

TEST(KvPaging, RowsOffTheGridAreCounted) {
  const int64_t before = model::entry_pack_mismatches();
  std::vector<float> row(96, 0.3f);  // 0.3 is on no e4m3 · 2^k grid
  model::EntryStore store;
  store.format = model::EntryFormat::Fp8Kv;
  store.dim = 96;
  store.rope_dim = 32;
  store.ratio = 4;
  store.row_bytes = model::entry_row_bytes(store.format, 96, 32);
  store.append(row.data());
  EXPECT_EQ(model::entry_pack_mismatches(), before + 1);
}

TEST(KvPaging, V4FlashBytesInBlocks) {
  const model::ModelConfig c = v4_flash();
  const V4BlockBytes b128 = v4_kv_bytes_in_blocks(c, 128, true);
  EXPECT_DOUBLE_EQ(b128.per_token.csa_per_token, (584.0 + 68.0) / 4);
  EXPECT_DOUBLE_EQ(b128.per_token.hca_per_token, 584.0 / 128);
  EXPECT_NEAR(b128.per_token.per_token, 3514.0, 0.5);
  EXPECT_NEAR(b128.per_token.per_token * (1 << 20) / 1e9, 3.68, 0.01);
  // Blocks of 16: every block reserves one HCA row slot, filled by one block in eight.
  const V4BlockBytes b16 = v4_kv_bytes_in_blocks(c, 16, true);
  EXPECT_DOUBLE_EQ(b16.per_token.csa_per_token, (584.0 + 68.0) / 4);
  EXPECT_DOUBLE_EQ(b16.per_token.hca_per_token, 584.0 / 16);
  const V4BlockBytes f32 = v4_kv_bytes_in_blocks(c, 128, false);
  EXPECT_DOUBLE_EQ(f32.per_token.per_token, 21 * 640.0 + 20 * 16.0);
}

class OfficialPaging : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = model::Model::load(kOfficial, {1});
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(m.value()).release();
  }
  static void TearDownTestSuite() { delete model_; }
  static model::Model* model_;
};
model::Model* OfficialPaging::model_ = nullptr;

TEST_F(OfficialPaging, BlockBytesMatchTheAccounting) {
  for (int32_t bs : {16, 128}) {
    for (bool pack : {true, false}) {
      V4ModelRunner runner(*model_, true, PrefixMode::kExact, 0, pack);
      EXPECT_EQ(runner.entry_bytes_per_block(bs),
                v4_kv_bytes_in_blocks(model_->config(), bs, pack).block_bytes)
          << bs << " " << pack;
    }
  }
  V4ModelRunner packed(*model_), plain(*model_, true, PrefixMode::kExact, 0, false);
  EXPECT_LT(packed.entry_bytes_per_block(16) * 3, plain.entry_bytes_per_block(16));
}

TEST_F(OfficialPaging, PackedEntriesGiveTheSameBitsAsFp32Entries) {
  const int64_t before = model::entry_pack_mismatches();
  std::mt19937 rng(21);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    const int len = 100 + static_cast<int>(rng() % 200);  // several HCA entries (ratio 128)
    for (int k = 0; k < len; ++k) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 630));
    r.params.max_tokens = 12;
    r.params.ignore_eos = true;
    r.params.seed = rng();
    r.params.temperature = i % 2 ? 0.9f : 0.0f;
    r.params.logprobs = true;
    r.params.top_logprobs = 4;
    reqs.push_back(std::move(r));
  }
  EngineConfig c;
  c.kv.block_size = 16;
  c.kv.num_blocks = 160;
  c.scheduler.max_num_seqs = 6;
  c.scheduler.max_num_batched_tokens = 256;
  auto run = [&](bool pack) {
    V4ModelRunner runner(*model_, true, PrefixMode::kExact, 0, pack);
    auto engine = Engine::create(c, runner);
    EXPECT_TRUE(engine.ok());
    return generate_batch(*engine.value(), reqs);
  };
  const auto packed = run(true), plain = run(false);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(packed[i].error.empty()) << packed[i].error;
    EXPECT_EQ(packed[i].ids, plain[i].ids) << i;
    ASSERT_EQ(packed[i].logprobs.size(), plain[i].logprobs.size());
    for (size_t k = 0; k < packed[i].logprobs.size(); ++k)
      EXPECT_EQ(std::bit_cast<uint32_t>(packed[i].logprobs[k].logprob),
                std::bit_cast<uint32_t>(plain[i].logprobs[k].logprob))
          << i << " " << k;
  }
  EXPECT_EQ(model::entry_pack_mismatches(), before);
}

}  // namespace
}  // namespace deepinfer::engine
