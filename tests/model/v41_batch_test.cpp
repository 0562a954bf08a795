// V41Model::forward_batch against forward(): B = 1, 3, 8, 16 sequences after prompts of different
// lengths (so at different positions: window wrap, compressor tails, entries and index keys at
// different counts, Engram look-back), decoded together for several steps; each sequence's logits
// and state must equal those of running it alone, bitwise. Plus a mixed step (a long chunk, short
// chunks and decodes together).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "fixture_util.h"
#include "model/v41_model.h"

namespace deepinfer::model::v41 {
namespace {

using model::testing::fixture_dir;

int32_t token(int64_t seq, int64_t pos, int32_t vocab) {
  return static_cast<int32_t>((37 * pos + 11 * seq + 5 + (pos * pos) % 13) % vocab);
}

class V41Batch : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string dir = fixture_dir(GetParam());
    if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " not present";
    auto m = V41Model::load(dir, {.threads = 2});
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(m.value());
    vocab_ = model_->config().vocab_size;
  }

  // Runs seq's tokens [pos, pos + n) alone through forward(), logits of the last row.
  std::vector<float> alone(V41State& st, int64_t seq, int64_t n, bool want = true) {
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < n; ++t) ids.push_back(token(seq, st.position + t, vocab_));
    std::vector<float> lg(static_cast<size_t>(vocab_));
    const int64_t last = n - 1;
    Status s = model_->forward(st, ids, want ? std::span(&last, 1) : std::span<const int64_t>(),
                               lg.data());
    EXPECT_TRUE(s.ok()) << s.error().message;
    return lg;
  }

  // One forward_batch step: n[i] tokens of sequence i from its position, logits of each last row.
  std::vector<std::vector<float>> together(std::vector<V41State>& st,
                                           const std::vector<int64_t>& n) {
    std::vector<std::vector<int32_t>> ids(st.size());
    std::vector<std::vector<float>> lg(st.size(), std::vector<float>(static_cast<size_t>(vocab_)));
    std::vector<int64_t> last(st.size());
    std::vector<V41BatchSequence> batch;
    for (size_t i = 0; i < st.size(); ++i) {
      for (int64_t t = 0; t < n[i]; ++t)
        ids[i].push_back(token(static_cast<int64_t>(i), st[i].position + t, vocab_));
      last[i] = n[i] - 1;
      batch.push_back({&st[i], ids[i], std::span(&last[i], 1), lg[i].data()});
    }
    Status s = model_->forward_batch(batch);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return lg;
  }

  static void expect_same_state(const V41State& a, const V41State& b, size_t seq) {
    EXPECT_EQ(a.position, b.position) << "seq " << seq;
    EXPECT_EQ(a.recent_ids, b.recent_ids) << "seq " << seq;
    for (size_t l = 0; l < a.layers.size(); ++l) {
      const V41LayerState &x = a.layers[l], &y = b.layers[l];
      EXPECT_TRUE(x.ring == y.ring) << "seq " << seq << " layer " << l;
      EXPECT_TRUE(x.tail_kv == y.tail_kv && x.tail_score == y.tail_score) << "layer " << l;
      EXPECT_EQ(x.compressed.count, y.compressed.count) << "layer " << l;
      EXPECT_TRUE(x.compressed.own == y.compressed.own) << "seq " << seq << " layer " << l;
      EXPECT_TRUE(x.index_keys.own == y.index_keys.own) << "seq " << seq << " layer " << l;
    }
  }

  std::unique_ptr<V41Model> model_;
  int32_t vocab_ = 0;
};

TEST_P(V41Batch, DecodeBatchesEqualEachSequenceAlone) {
  for (const size_t B : {size_t{1}, size_t{3}, size_t{8}, size_t{16}}) {
    SCOPED_TRACE("B = " + std::to_string(B));
    std::vector<V41State> ref, bat;
    for (size_t i = 0; i < B; ++i) {
      ref.push_back(model_->new_state(i % 2 == 1));  // packed and fp32 stores mixed
      const int64_t prompt = 1 + static_cast<int64_t>((i * 7) % 37);
      alone(ref.back(), static_cast<int64_t>(i), prompt, false);
      bat.push_back(ref.back());
    }
    for (int step = 0; step < 6; ++step) {
      const std::vector<std::vector<float>> got = together(bat, std::vector<int64_t>(B, 1));
      for (size_t i = 0; i < B; ++i) {
        const std::vector<float> want = alone(ref[i], static_cast<int64_t>(i), 1);
        EXPECT_EQ(0, std::memcmp(got[i].data(), want.data(), want.size() * sizeof(float)))
            << "seq " << i << " step " << step << " position " << ref[i].position - 1;
      }
    }
    for (size_t i = 0; i < B; ++i) expect_same_state(bat[i], ref[i], i);
  }
}

TEST_P(V41Batch, MixedChunksAndDecodesEqualEachSequenceAlone) {
  const std::vector<int64_t> prompts = {0, 5, 19, 0, 33, 2};
  const std::vector<int64_t> step = {23, 1, 1, 4, 12, 1};  // long, decodes, short chunks
  std::vector<V41State> ref, bat;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ref.push_back(model_->new_state());
    if (prompts[i] > 0) alone(ref.back(), static_cast<int64_t>(i), prompts[i], false);
    bat.push_back(ref.back());
  }
  const std::vector<std::vector<float>> got = together(bat, step);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<float> want = alone(ref[i], static_cast<int64_t>(i), step[i]);
    EXPECT_EQ(0, std::memcmp(got[i].data(), want.data(), want.size() * sizeof(float)))
        << "seq " << i;
    expect_same_state(bat[i], ref[i], i);
  }
}

TEST_P(V41Batch, RejectsASharedStateAndBadInput) {
  V41State st = model_->new_state();
  const int32_t id = 3, bad = vocab_;
  const int64_t row = 0;
  float lg[1];
  std::vector<float> out(static_cast<size_t>(2 * vocab_));
  const V41BatchSequence twice[] = {{&st, std::span(&id, 1), std::span(&row, 1), out.data()},
                                    {&st, std::span(&id, 1), std::span(&row, 1), out.data()}};
  EXPECT_FALSE(model_->forward_batch(twice).ok());
  const V41BatchSequence bad_id[] = {{&st, std::span(&bad, 1), {}, lg}};
  EXPECT_FALSE(model_->forward_batch(bad_id).ok());
  EXPECT_EQ(st.position, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41Batch,
                         ::testing::Values("official_v41_c_bf16", "official_v41_c_fp8"));

}  // namespace
}  // namespace deepinfer::model::v41
