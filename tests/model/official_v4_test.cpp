// The quantized checkpoints (FP8 128×128 + FP4 experts) through the official numerics, against
// fixtures made by DeepSeek's own V4-Flash inference code (tests/fixtures/official_v4_*, see their
// README.md). bf16 + QAT is not reproducible to 1e-3, so the bars come from each fixture's noise
// floor: `alt2` is an equally valid implementation of the same numerics (fp64 GEMMs, attention
// tiles of 16, butterfly Hadamard). Per row, the max-abs difference over the vocabulary; median
// ≤ 1.5·alt2 median + 0.01, max ≤ 2·alt2 max + 0.01, argmax agreement ≥ rows − 2; greedy ids equal
// while the reference's top-2 margin exceeds twice the decode noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/safetensors.h"

namespace deepinfer {
namespace {

using model::Model;

struct Reference {
  std::unique_ptr<model::SafetensorsFile> file;
  const model::TensorInfo& at(const std::string& n) const { return file->tensors().at(n); }
  bool has(const std::string& n) const { return file->tensors().count(n) > 0; }
  std::vector<float> f32(const std::string& n) const {
    const auto& t = at(n);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data, v.size() * 4);
    return v;
  }
  std::vector<int32_t> i32(const std::string& n) const {
    const auto& t = at(n);
    std::vector<int32_t> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data, v.size() * 4);
    return v;
  }
};

struct RowStats {
  float median = 0, max = 0;
  int argmax_agree = 0, n = 0;
};

int64_t argmax(const float* v, int64_t n) { return std::max_element(v, v + n) - v; }

RowStats compare(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab) {
  RowStats s;
  s.n = static_cast<int>(ref.size() / static_cast<size_t>(vocab));
  std::vector<float> d(static_cast<size_t>(s.n));
  for (int r = 0; r < s.n; ++r) {
    const float* g = got.data() + r * vocab;
    const float* f = ref.data() + r * vocab;
    float m = 0;
    for (int64_t k = 0; k < vocab; ++k) m = std::max(m, std::fabs(g[k] - f[k]));
    d[static_cast<size_t>(r)] = m;
    s.argmax_agree += argmax(g, vocab) == argmax(f, vocab);
  }
  s.max = *std::max_element(d.begin(), d.end());
  std::sort(d.begin(), d.end());
  // torch.median: the lower of the two middle values
  s.median = d[static_cast<size_t>((s.n - 1) / 2)];
  return s;
}

void expect_within_bar(const RowStats& got, const RowStats& noise, const char* what) {
  const float med_bar = 1.5f * noise.median + 0.01f, max_bar = 2.0f * noise.max + 0.01f;
  EXPECT_LE(got.median, med_bar) << what << ": median " << got.median << " (alt2 " << noise.median
                                 << ")";
  EXPECT_LE(got.max, max_bar) << what << ": max " << got.max << " (alt2 " << noise.max << ")";
  EXPECT_GE(got.argmax_agree, got.n - 2) << what;
  std::printf("  %-8s median %.4f (bar %.4f)  max %.4f (bar %.4f)  argmax %d/%d\n", what,
              got.median, med_bar, got.max, max_bar, got.argmax_agree, got.n);
}

class OfficialV4 : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/" + GetParam();
    auto m = Model::load(dir_, model::ModelOptions{2});
    ASSERT_TRUE(m.ok()) << m.error().message;
    model_ = std::move(m.value());
    auto r = model::SafetensorsFile::open(dir_ + "/reference.safetensors");
    ASSERT_TRUE(r.ok()) << r.error().message;
    ref_.file = std::move(r.value());
    vocab_ = model_->config().vocab_size;
  }

  // Logits of one forward over ids from a fresh state at the given rows.
  std::vector<float> prefill(const std::vector<int32_t>& ids, const std::vector<int64_t>& rows) {
    auto st = model_->new_state();
    std::vector<float> out(rows.size() * static_cast<size_t>(vocab_));
    Status s = model_->forward(st, ids, rows, out.data());
    EXPECT_TRUE(s.ok()) << s.error().message;
    return out;
  }

  std::string dir_;
  std::unique_ptr<Model> model_;
  Reference ref_;
  int64_t vocab_ = 0;
};

TEST_P(OfficialV4, ChoosesOfficialNumerics) {
  EXPECT_EQ(model_->config().numerics, model::Numerics::Official);
}

TEST_P(OfficialV4, PrefillLogitsWithinTheNoiseFloor) {
  const auto ids = ref_.i32("input_ids");
  const auto rows32 = ref_.i32("rows");
  const std::vector<int64_t> rows(rows32.begin(), rows32.end());
  const auto ref = ref_.f32("logits");
  const auto got = prefill(ids, rows);
  expect_within_bar(compare(got, ref, vocab_), compare(ref_.f32("alt2_logits"), ref, vocab_),
                    "prefill");
}

TEST_P(OfficialV4, TeacherForcedDecodeAndGreedy) {
  const auto prompt = ref_.i32("greedy_prompt");
  const auto greedy = ref_.i32("greedy_out");
  const auto ref = ref_.f32("decode_logits");
  const auto margins = ref_.f32("greedy_margins");
  const size_t steps = greedy.size();
  std::vector<float> got(steps * static_cast<size_t>(vocab_));
  auto st = model_->new_state();
  const int64_t last[] = {static_cast<int64_t>(prompt.size()) - 1};
  ASSERT_TRUE(model_->forward(st, prompt, last, got.data()).ok());
  const int64_t zero[] = {0};
  for (size_t i = 0; i + 1 < steps; ++i) {  // the reference's own tokens, one per step
    const int32_t tok[] = {greedy[i]};
    ASSERT_TRUE(model_->forward(st, tok, zero, got.data() + (i + 1) * vocab_).ok());
  }
  const RowStats noise = compare(ref_.f32("alt2_decode_logits"), ref, vocab_);
  expect_within_bar(compare(got, ref, vocab_), noise, "decode");
  // Our greedy picks equal the reference's while its margin exceeds twice the decode noise.
  size_t safe = 0;
  while (safe < steps && margins[safe] >= 2 * noise.max) ++safe;
  for (size_t i = 0; i < safe; ++i) {
    EXPECT_EQ(argmax(got.data() + i * vocab_, vocab_), greedy[i]) << "greedy step " << i;
  }
  std::printf("  greedy steps checked: %zu of %zu\n", safe, steps);
}

TEST_P(OfficialV4, MtpLogitsOnTheMainPrefillStreams) {
  ASSERT_TRUE(model_->has_mtp());
  const auto ids = ref_.i32("input_ids");
  const auto rows32 = ref_.i32("mtp_rows");
  const std::vector<int64_t> rows(rows32.begin(), rows32.end());
  const int64_t L = static_cast<int64_t>(ids.size());
  const int64_t width = int64_t{model_->config().hc_mult} * model_->config().hidden_size;
  std::vector<float> streams(static_cast<size_t>(L * width)), none;
  auto st = model_->new_state();
  ASSERT_TRUE(model_->forward(st, ids, {}, none.data(), streams.data()).ok());
  // Streams at positions 0 … L−2 with the tokens at 1 … L−1, from position 0.
  auto mst = model_->new_mtp_state();
  std::vector<float> got(rows.size() * static_cast<size_t>(vocab_));
  const std::span<const float> s(streams.data(), static_cast<size_t>((L - 1) * width));
  const std::span<const int32_t> next(ids.data() + 1, static_cast<size_t>(L - 1));
  Status status = model_->forward_mtp(mst, s, next, rows, got.data());
  ASSERT_TRUE(status.ok()) << status.error().message;
  // The MTP noise floor: alt2 run through the main prefill and the MTP block alike
  // (mtp_noise.safetensors, tools/make_mtp_noise.py).
  auto noise = model::SafetensorsFile::open(dir_ + "/mtp_noise.safetensors");
  ASSERT_TRUE(noise.ok()) << noise.error().message;
  Reference alt{std::move(noise.value())};
  const auto ref = ref_.f32("mtp_logits");
  expect_within_bar(compare(got, ref, vocab_), compare(alt.f32("alt2_mtp_logits"), ref, vocab_),
                    "mtp");
}

TEST_P(OfficialV4, MtpRejectsMismatchedInput) {
  auto mst = model_->new_mtp_state();
  std::vector<float> streams(7);
  const int32_t next[] = {5};
  EXPECT_FALSE(model_->forward_mtp(mst, streams, next, {}, nullptr).ok());
  auto main_state = model_->new_state();
  EXPECT_FALSE(model_->forward_mtp(main_state, streams, next, {}, nullptr).ok());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OfficialV4, ::testing::Values("official_v4_a", "official_v4_c"));

}  // namespace
}  // namespace deepinfer
