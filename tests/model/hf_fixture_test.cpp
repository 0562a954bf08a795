// The V4 forward against HF transformers fixtures (tests/fixtures/hf_v4_*): exact fp32 logits
// within 1e-3 max-abs at every recorded row, identical greedy continuations through the cache,
// decode logits, teacher-forced prefill, and incremental decode == one full forward.
#include <gtest/gtest.h>

#include "fixture_util.h"
#include "model/model.h"

namespace deepinfer::model {
namespace {

using testing::argmax;
using testing::fixture_dir;
using testing::max_abs_diff;
using testing::Reference;

constexpr float kTolerance = 1e-3f;

class HfFixture : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = fixture_dir(GetParam());
    auto m = Model::load(dir_, {2});
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(m.value());
    ref_ = Reference::open(dir_);
    ASSERT_TRUE(ref_.ok());
  }
  std::string dir_;
  std::unique_ptr<Model> model_;
  Reference ref_;
};

TEST_P(HfFixture, LogitsAtEveryRecordedRow) {
  const auto ids = ref_.i32("input_ids");
  const auto rows32 = ref_.i32("rows");
  const auto want = ref_.f32("logits");
  const int V = model_->config().vocab_size;
  std::vector<int64_t> rows(rows32.begin(), rows32.end());
  std::vector<float> got(rows.size() * V);
  SequenceState st = model_->new_state();
  ASSERT_TRUE(model_->forward(st, ids, rows, got.data()).ok());
  float worst = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const float e = max_abs_diff(got.data() + i * V, want.data() + i * V, V);
    worst = std::max(worst, e);
    EXPECT_LE(e, kTolerance) << "row " << rows[i];
  }
  RecordProperty("max_abs", std::to_string(worst));
}

TEST_P(HfFixture, GreedyContinuationAndDecodeLogits) {
  const auto prompt = ref_.i32("greedy_prompt");
  const auto want_ids = ref_.i32("greedy_out");
  const auto want_logits = ref_.f32("decode_logits");
  const int V = model_->config().vocab_size;
  SequenceState st = model_->new_state();
  std::vector<float> lg(V);
  const int64_t last = static_cast<int64_t>(prompt.size()) - 1;
  ASSERT_TRUE(model_->forward(st, prompt, std::span<const int64_t>(&last, 1), lg.data()).ok());
  std::vector<int32_t> got;
  for (size_t i = 0; i < want_ids.size(); ++i) {
    EXPECT_LE(max_abs_diff(lg.data(), want_logits.data() + i * V, V), kTolerance) << "step " << i;
    got.push_back(argmax(lg.data(), V));
    const int64_t zero = 0;
    ASSERT_TRUE(model_
                    ->forward(st, std::span<const int32_t>(&got.back(), 1),
                              std::span<const int64_t>(&zero, 1), lg.data())
                    .ok());
  }
  EXPECT_EQ(got, want_ids);
}

TEST_P(HfFixture, TeacherForcedPrefill) {
  auto ids = ref_.i32("greedy_prompt");
  const auto out = ref_.i32("greedy_out");
  const auto want = ref_.f32("teacher_forced_prefill_logits");
  const int V = model_->config().vocab_size;
  const int64_t P = static_cast<int64_t>(ids.size());
  ids.insert(ids.end(), out.begin(), out.end() - 1);
  std::vector<int64_t> rows;
  for (int64_t r = P - 1; r < static_cast<int64_t>(ids.size()); ++r) rows.push_back(r);
  std::vector<float> got(rows.size() * V);
  SequenceState st = model_->new_state();
  ASSERT_TRUE(model_->forward(st, ids, rows, got.data()).ok());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_LE(max_abs_diff(got.data() + i * V, want.data() + i * V, V), kTolerance)
        << "row " << rows[i];
  }
}

// Token-by-token decoding over the whole input (every window, CSA and HCA boundary) gives the
// logits of one full forward, and so does chunked prefill with odd chunk sizes.
TEST_P(HfFixture, IncrementalDecodeEqualsFullForward) {
  const auto ids = ref_.i32("input_ids");
  const auto rows32 = ref_.i32("rows");
  const auto want = ref_.f32("logits");
  const int V = model_->config().vocab_size;
  for (int chunk : {1, 37}) {
    SequenceState st = model_->new_state();
    std::vector<float> lg(V);
    size_t next = 0;
    for (size_t s = 0; s < ids.size(); s += chunk) {
      const size_t len = std::min<size_t>(chunk, ids.size() - s);
      std::vector<int64_t> rows;
      std::vector<size_t> which;
      for (size_t k = next; k < rows32.size() && static_cast<size_t>(rows32[k]) < s + len; ++k) {
        rows.push_back(rows32[k] - static_cast<int64_t>(s));
        which.push_back(k);
      }
      next += rows.size();
      std::vector<float> got(rows.size() * V);
      ASSERT_TRUE(
          model_->forward(st, std::span<const int32_t>(ids.data() + s, len), rows, got.data())
              .ok());
      for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_LE(max_abs_diff(got.data() + i * V, want.data() + which[i] * V, V), kTolerance)
            << "chunk " << chunk << " row " << rows32[which[i]];
      }
    }
    EXPECT_EQ(next, rows32.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfFixture, ::testing::Values("hf_v4_a", "hf_v4_b"));

}  // namespace
}  // namespace deepinfer::model
