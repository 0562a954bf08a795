// The official numerics checked structurally (logit bars cannot see every QAT step, see the
// fixture READMEs' probe tables): after a prefill of an official fixture, every window kv row and
// compressed entry has its no-RoPE dims on the e4m3·2^k grid per 64-block and every index key is on
// the e2m1·2^k grid per 32 (re-quantizing changes nothing), all in bf16; and the attention hook
// agrees with a plain softmax (sink included) to bf16 precision across tiles and window padding.
#include "model/official_numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/quant_act.h"
#include "model/model.h"

namespace deepinfer {
namespace {

bool all_bf16(const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] != cpu::round_bf16(v[i])) return false;
  }
  return true;
}

bool on_fp8_grid(const float* v, int64_t n) {
  std::vector<float> c(v, v + n);
  cpu::fp8_act_quant_inplace(c.data(), n, 64);
  return std::equal(c.begin(), c.end(), v);
}

bool on_fp4_grid(const float* v, int64_t n) {
  std::vector<float> c(v, v + n);
  cpu::fp4_act_quant_inplace(c.data(), n, 32);
  return std::equal(c.begin(), c.end(), v);
}

TEST(OfficialNumerics, KvAndIndexKeysLieOnTheirQuantizationGrids) {
  const std::string dir = std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/official_v4_c";
  auto m = model::Model::load(dir, model::ModelOptions{2});
  ASSERT_TRUE(m.ok()) << m.error().message;
  model::Model& M = *m.value();
  const auto& c = M.config();
  std::vector<int32_t> ids(300);
  std::mt19937 rng(5);
  for (auto& t : ids) t = static_cast<int32_t>(3 + rng() % (c.vocab_size - 3));
  auto st = M.new_state();
  ASSERT_TRUE(M.forward(st, ids, {}, nullptr).ok());
  const int D = c.head_dim, N = c.nope_dim();
  int rows = 0, entries = 0, keys = 0;
  for (const auto& b : st.blocks) {
    for (int r = 0; r < b.window; ++r) {
      const float* kv = b.ring.data() + static_cast<int64_t>(r) * D;
      EXPECT_TRUE(all_bf16(kv, D));
      EXPECT_TRUE(on_fp8_grid(kv, N)) << "window row " << r;
      ++rows;
    }
    std::vector<float> row(static_cast<size_t>(std::max(D, b.index_head_dim)));
    for (int64_t j = 0; j < b.compressed.count; ++j) {
      const float* e = b.compressed.row(j, row.data());
      EXPECT_TRUE(all_bf16(e, D));
      EXPECT_TRUE(on_fp8_grid(e, N)) << "compressed entry " << j;
      ++entries;
    }
    if (b.index_head_dim > 0) {
      for (int64_t j = 0; j < b.index_keys.count; ++j) {
        const float* k = b.index_keys.row(j, row.data());
        EXPECT_TRUE(all_bf16(k, b.index_head_dim));
        EXPECT_TRUE(on_fp4_grid(k, b.index_head_dim)) << "index key " << j;
        ++keys;
      }
    }
  }
  EXPECT_GT(rows, 0);
  EXPECT_GT(entries, 75);  // two CSA layers (75 entries each) and one HCA layer (2)
  EXPECT_GT(keys, 100);
}

TEST(OfficialNumerics, AttendMatchesSoftmaxWithSinkAcrossTiles) {
  const int D = 128;
  std::mt19937 rng(3);
  std::normal_distribution<float> g;
  for (int n_window : {1, 5, 16}) {
    for (int n_comp : {0, 3, 150}) {
      const int n_keys = n_window + n_comp, slots = 16;
      std::vector<float> q(D), kv(static_cast<size_t>(n_keys) * D);
      for (auto& v : q) v = cpu::round_bf16(g(rng));
      for (auto& v : kv) v = cpu::round_bf16(g(rng));
      std::vector<const float*> keys;
      for (int k = 0; k < n_keys; ++k) keys.push_back(kv.data() + k * D);
      const float sink = 0.7f, scale = 1.0f / std::sqrt(static_cast<float>(D));
      std::vector<float> out(D);
      model::official::attend(q.data(), keys.data(), n_keys, n_window, slots, sink, scale, D,
                              out.data());
      std::vector<double> l(static_cast<size_t>(n_keys));
      double m = sink;
      for (int k = 0; k < n_keys; ++k) {
        double s = 0;
        for (int i = 0; i < D; ++i) s += double(q[i]) * kv[static_cast<size_t>(k) * D + i];
        l[static_cast<size_t>(k)] = s * scale;
        m = std::max(m, l[static_cast<size_t>(k)]);
      }
      double den = std::exp(sink - m);
      for (double& v : l) den += (v = std::exp(v - m));
      for (int i = 0; i < D; ++i) {
        double o = 0;
        for (int k = 0; k < n_keys; ++k)
          o += l[static_cast<size_t>(k)] * kv[static_cast<size_t>(k) * D + i];
        o /= den;
        EXPECT_NEAR(out[i], o, 0.01 * std::fabs(o) + 0.004)
            << n_window << "/" << n_comp << " dim " << i;
        EXPECT_EQ(out[i], cpu::round_bf16(out[i]));
      }
    }
  }
}

TEST(OfficialNumerics, IndexScoreRoundsLikeBf16Tensors) {
  // Two heads of dim 2: dots 1.5 and −2 (ReLU'd away); weight 0.3 → bf16(bf16(1.5)·bf16(0.3)).
  const float q[] = {1.0f, 0.5f, -1.0f, -1.0f};
  const float k[] = {1.0f, 1.0f};
  const float w[] = {cpu::round_bf16(0.3f), 1.0f};
  EXPECT_EQ(model::official::index_score(q, k, w, 2, 2),
            cpu::round_bf16(1.5f * cpu::round_bf16(0.3f)));
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

TEST(OfficialNumerics, ConfigNeedsAPowerOfTwoIndexHeadDim) {
  model::ModelConfig c;
  c.num_layers = 2;
  c.compress_ratios = {0, 4};
  c.index_head_dim = 96;
  Status s = model::check_official_config(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("power-of-two index_head_dim (got 96)"), std::string::npos);
  c.index_head_dim = 64;
  EXPECT_TRUE(model::check_official_config(c).ok());
  c.compress_ratios = {0, 128};  // no CSA layer: no indexer
  c.index_head_dim = 96;
  EXPECT_TRUE(model::check_official_config(c).ok());
}

}  // namespace
}  // namespace deepinfer
