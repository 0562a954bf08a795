// DSpark draft stages of DeepSeek V4.1 (spec §12.2 item 10, §12.3) on the official fixture's
// checkpoint: the loader reads the official mtp.* names, the window ring is position-addressed
// (chunked observation = one observation), a draft is [token, greedy Markov chain], and the
// stream mean is the bf16 mean over the hc streams.
#include "model/v41_dspark.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "backend/cpu/fp8.h"
#include "backend/cpu/quant_act.h"
#include "backend/cpu/quant_linear.h"
#include "common/io.h"
#include "common/json.h"
#include "fixture_util.h"
#include "model/qat32_linear.h"
#include "model/tensor_reader.h"
#include "model/v41_model.h"

namespace deepinfer::model {
namespace {

struct Stages {
  v41::V41Config config;
  v41::DSparkConfig dc;
  std::unique_ptr<Checkpoint> ckpt;
  cpu::WeightView embed, head;
};

Stages open_stages(const std::string& name) {
  Stages s;
  const std::string dir = testing::fixture_dir(name);
  auto cfg = v41::load_v41_config(dir);
  EXPECT_TRUE(cfg.ok()) << (cfg.ok() ? "" : cfg.error().message);
  if (!cfg.ok()) return s;
  s.config = cfg.value();
  s.dc = v41::dspark_config(s.config);
  auto ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.ok());
  if (!ck.ok()) return s;
  s.ckpt = std::make_unique<Checkpoint>(std::move(ck.value()));
  TensorReader rd(*s.ckpt);
  s.embed = rd.matrix("embed.weight", s.config.vocab_size, s.config.hidden_size);
  s.head = rd.matrix("head.weight", s.config.vocab_size, s.config.hidden_size);
  EXPECT_TRUE(rd.ok());
  return s;
}

// Deterministic bf16 values in about [-2, 2).
std::vector<float> random_bf16(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 1664525u + 1013904223u;
    f = cpu::round_bf16(static_cast<float>(x >> 8) / static_cast<float>(1 << 22) - 2.0f);
  }
  return v;
}

TEST(Qat32Linear, Fp8WeightsTakeFp8InputsPer32) {
  // fp8_gemm of the V4.1 reference: x → e4m3(x / s_b) · s_b per 32 (s_b = 2^ceil(log2(amax /
  // 448))), W → e4m3 · 2^e per 32×32 block, products summed in fp32, the output rounded to bf16.
  const int64_t out = 40, in = 64;
  std::vector<uint8_t> codes(static_cast<size_t>(out * in)), scales(2 * 2);
  std::vector<float> wval(codes.size());
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < in; ++k) {
      const uint8_t scale_code = static_cast<uint8_t>(112 + (o / 32) * 2 + (k / 32) * 16);
      scales[static_cast<size_t>((o / 32) * 2 + k / 32)] = scale_code;
      const uint8_t c = cpu::float_to_fp8_e4m3(static_cast<float>((o * 7 + k * 3) % 23) - 11.0f);
      codes[static_cast<size_t>(o * in + k)] = c;
      wval[static_cast<size_t>(o * in + k)] =
          cpu::fp8_e4m3_to_float(c) * cpu::ue8m0_to_float(scale_code);
    }
  cpu::WeightView w;
  w.format = cpu::WeightFormat::FP8_E4M3_BLOCK;
  w.data = codes.data();
  w.out = out;
  w.in = in;
  w.scale = scales.data();
  w.scale_format = cpu::ScaleFormat::UE8M0;
  w.block_out = w.block_in = 32;
  w.scale_stride = 2;
  if (!cpu::linear_supported(w.format))
    cpu::register_quant_kernels(cpu::QuantActivations::Official);
  std::vector<float> x = random_bf16(2 * in, 5);
  for (int64_t r = 0; r < 2;
       ++r)  // a tiny second block (weights 2^16 larger): FP8 blocks wider than 32 would flush it
    for (int64_t k = 32; k < in; ++k) x[static_cast<size_t>(r * in + k)] /= 65536.0f;
  std::vector<float> y(2 * out), xq;
  qat32_linear(x.data(), 2, w, y.data(), LinearOut::Bf16, xq, nullptr);
  for (int64_t r = 0; r < 2; ++r) {
    float q[64];
    for (int64_t b = 0; b < 2; ++b) {
      float amax = 0;
      for (int64_t k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[r * in + b * 32 + k]));
      const float sb = std::exp2(std::ceil(std::log2(std::max(amax, 1e-4f) / 448.0f)));
      for (int64_t k = 0; k < 32; ++k)
        q[b * 32 + k] =
            cpu::fp8_e4m3_to_float(cpu::float_to_fp8_e4m3(x[r * in + b * 32 + k] / sb)) * sb;
    }
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k)
        acc += static_cast<double>(q[k]) * wval[static_cast<size_t>(o * in + k)];
      const float want = cpu::round_bf16(static_cast<float>(acc));
      EXPECT_NEAR(y[static_cast<size_t>(r * out + o)], want, std::fabs(want) * 0.008f + 1e-6f)
          << r << "," << o;
    }
  }
}

TEST(DSpark, LoadsTheOfficialStageTensors) {
  Stages s = open_stages("official_v41_c_bf16");
  ASSERT_TRUE(s.ckpt);
  EXPECT_EQ(s.dc.n_stages, 2);
  EXPECT_EQ(s.dc.block_size, 4);
  EXPECT_EQ(s.dc.noise_token_id, 511);
  EXPECT_EQ(s.dc.n_routed_experts, 3);  // dspark_n_routed_experts, not the main model's 4
  auto w = v41::load_dspark_weights(*s.ckpt, s.dc, s.embed, s.head);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->stages.size(), 2u);
  EXPECT_EQ(w->stages[1].experts.size(), 3u);
  EXPECT_EQ(w->main_proj.in, 3 * 128);
  EXPECT_EQ(w->confidence.size(), 128u + 16u);
  // A third stage is not in the checkpoint: the error names the first missing tensor.
  v41::DSparkConfig three = s.dc;
  three.n_stages = 3;
  auto bad = v41::load_dspark_weights(*s.ckpt, three, s.embed, s.head);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("mtp.2."), std::string::npos) << bad.error().message;
}

TEST(DSpark, StreamMeanIsTheBf16MeanOverStreams) {
  // Two tokens, hc 3, dim 2; out rows of stride 5 (one target layer's slice of a wider row).
  const float X[] = {1, 2, 2, 4, 4, 8, 1.0f / 3, 0, 1.0f / 3, 0, 1.0f / 3, 3};
  float out[10] = {};
  v41::dspark_stream_mean(X, 2, 3, 2, out, 5);
  EXPECT_EQ(out[0], cpu::round_bf16(7.0f / 3));
  EXPECT_EQ(out[1], cpu::round_bf16(14.0f / 3));
  EXPECT_EQ(out[5], cpu::round_bf16(1.0f / 3));
  EXPECT_EQ(out[6], 1.0f);
  EXPECT_EQ(out[2], 0.0f);
}

TEST(DSpark, ChunkedObservationEqualsOneObservation) {
  Stages s = open_stages("official_v41_c_bf16");
  ASSERT_TRUE(s.ckpt);
  auto w = v41::load_dspark_weights(*s.ckpt, s.dc, s.embed, s.head);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const int64_t n = 40, width = s.dc.n_targets() * s.dc.dim;  // window 16: the ring wraps
  const std::vector<float> hidden = random_bf16(static_cast<size_t>(n * width), 3);
  v41::DSparkScratch scratch;
  v41::DSparkState one = v41::dspark_fresh_state(s.dc), two = v41::dspark_fresh_state(s.dc);
  ASSERT_TRUE(
      v41::dspark_observe(w.value(), s.dc, one, hidden.data(), n, 0, scratch, nullptr).ok());
  ASSERT_TRUE(
      v41::dspark_observe(w.value(), s.dc, two, hidden.data(), 17, 0, scratch, nullptr).ok());
  ASSERT_TRUE(v41::dspark_observe(w.value(), s.dc, two, hidden.data() + 17 * width, n - 17, 17,
                                  scratch, nullptr)
                  .ok());
  EXPECT_EQ(one.next_position, n);
  EXPECT_EQ(one.ring, two.ring);
  // Window kv rows are FP8-rounded per 32: re-quantizing changes nothing.
  std::vector<float> row(one.ring[0].begin(), one.ring[0].begin() + s.dc.head_dim);
  std::vector<float> again = row;
  cpu::fp8_act_quant_inplace(again.data(), s.dc.head_dim, 32);
  EXPECT_EQ(row, again);
  // Positions must continue the state.
  EXPECT_FALSE(
      v41::dspark_observe(w.value(), s.dc, two, hidden.data(), 1, 5, scratch, nullptr).ok());
}

int32_t always_noise(const float*, int64_t vocab, void*) { return static_cast<int32_t>(vocab - 1); }

TEST(DSpark, DraftIsTheFedTokenThenAGreedyMarkovChain) {
  Stages s = open_stages("official_v41_c_bf16");
  ASSERT_TRUE(s.ckpt);
  auto w = v41::load_dspark_weights(*s.ckpt, s.dc, s.embed, s.head);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const int64_t P = 20, width = s.dc.n_targets() * s.dc.dim, V = s.dc.vocab_size;
  const std::vector<float> hidden = random_bf16(static_cast<size_t>((P + 1) * width), 9);
  v41::DSparkScratch scratch;
  auto run = [&](v41::DSparkSampler sampler) {
    v41::DSparkState st = v41::dspark_fresh_state(s.dc);
    EXPECT_TRUE(
        v41::dspark_observe(w.value(), s.dc, st, hidden.data(), P, 0, scratch, nullptr).ok());
    v41::DSparkDraft d;
    Status ok = v41::dspark_draft(w.value(), s.dc, st, hidden.data() + P * width, P, 77, d, scratch,
                                  nullptr, sampler);
    EXPECT_TRUE(ok.ok()) << (ok.ok() ? "" : ok.error().message);
    EXPECT_EQ(st.next_position, P + 1);
    return d;
  };
  const v41::DSparkDraft d = run(nullptr);
  ASSERT_EQ(d.ids.size(), static_cast<size_t>(s.dc.block_size + 1));
  ASSERT_EQ(d.logits.size(), static_cast<size_t>(s.dc.block_size * V));
  EXPECT_EQ(d.ids[0], 77);
  for (int b = 0; b < s.dc.block_size; ++b) {
    EXPECT_EQ(d.ids[static_cast<size_t>(b + 1)],
              testing::argmax(d.logits.data() + b * V, static_cast<int>(V)));
    EXPECT_TRUE(std::isfinite(d.confidence[static_cast<size_t>(b)]));
  }
  // Same inputs, same draft; a sampler picks the chain instead of argmax.
  const v41::DSparkDraft again = run(nullptr);
  EXPECT_EQ(again.ids, d.ids);
  EXPECT_EQ(again.logits, d.logits);
  EXPECT_EQ(again.confidence, d.confidence);
  const v41::DSparkDraft noise = run(always_noise);
  for (int b = 1; b <= s.dc.block_size; ++b) EXPECT_EQ(noise.ids[static_cast<size_t>(b)], V - 1);
  // The first slot's logits do not depend on the chain; later ones do (the Markov bias).
  EXPECT_TRUE(std::equal(d.logits.begin(), d.logits.begin() + V, noise.logits.begin()));
  EXPECT_FALSE(
      std::equal(d.logits.begin() + V, d.logits.begin() + 2 * V, noise.logits.begin() + V));
  // Bad token ids are errors.
  v41::DSparkState st = v41::dspark_fresh_state(s.dc);
  v41::DSparkDraft bad;
  EXPECT_FALSE(v41::dspark_draft(w.value(), s.dc, st, hidden.data(), 0, static_cast<int32_t>(V),
                                 bad, scratch, nullptr)
                   .ok());
}

// ---- against the official forward_spec --------------------------------------------------------

struct Stats {
  float median = 0, max = 0;
  int n = 0;
};

Stats row_stats(const float* a, const float* b, int rows, int64_t width) {
  std::vector<float> d;
  for (int r = 0; r < rows; ++r)
    d.push_back(testing::max_abs_diff(a + r * width, b + r * width, static_cast<size_t>(width)));
  std::sort(d.begin(), d.end());
  return {d[static_cast<size_t>((rows - 1) / 2)], d.back(), rows};
}

// Feeds a recorded chain: slot b picks ids[b + 1] (the reference's own pick).
struct ForcedChain {
  const int32_t* ids = nullptr;
  int next = 0;
};
int32_t forced_pick(const float*, int64_t, void* user) {
  auto* f = static_cast<ForcedChain*>(user);
  return f->ids[++f->next];
}

// The fixture's greedy run: prompt prefill, then one token per step; after each step the
// official code ran forward_spec(next token, stream means, pos) and recorded the draft. Here the
// engine's forward exports the stream means and the drafts follow the same tokens. Logits and
// confidences are compared with the reference's chain fed (a near-tie flip would change every
// later slot's Markov bias), by the fixture's decode bar; our own greedy chain must equal the
// reference's while its top-2 margin exceeds twice the decode noise.
class DSparkFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(DSparkFixture, DraftsMatchTheOfficialForwardSpec) {
  const std::string dir = testing::fixture_dir(GetParam());
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << dir << " not present";
  auto model = v41::V41Model::load(dir, {.threads = 2});
  ASSERT_TRUE(model.ok()) << model.error().message;
  v41::V41Model& m = *model.value();
  auto ref = testing::Reference::open(dir);
  ASSERT_TRUE(ref.ok());
  // The bar: this fixture's noise floor; a fixture made without noise variants borrows the one
  // of official_v41_c_bf16 (the same config in bf16).
  auto meta_of = [](const std::string& d) -> Json {
    auto text = read_file(d + "/meta.json");
    if (!text.ok()) return Json();
    auto j = parse_json(text.value());
    return j.ok() ? j.value() : Json();
  };
  Json meta = meta_of(dir);
  if (!meta.is_object() || !meta.as_object().contains("suggested_tolerance")) {
    std::printf("  %s has no noise variants: the bar of official_v41_c_bf16\n", GetParam());
    meta = meta_of(testing::fixture_dir("official_v41_c_bf16"));
  }
  ASSERT_TRUE(meta.is_object() && meta.as_object().contains("suggested_tolerance"));
  const auto& tol = meta.at("suggested_tolerance");
  const float bar_median = static_cast<float>(tol.at("decode_median").to_number<double>());
  const float bar_max = static_cast<float>(tol.at("decode_max").to_number<double>());
  const float noise_max =
      static_cast<float>(meta.at("noise").at("alt2").at("decode").at("max").to_number<double>());
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.ok());
  const v41::DSparkConfig dc = v41::dspark_config(m.config());
  auto w = v41::load_dspark_weights(ckpt.value(), dc, m.weights().embed, m.weights().head);
  ASSERT_TRUE(w.ok()) << w.error().message;

  const std::vector<int32_t> prompt = ref.i32("greedy_prompt"), out = ref.i32("greedy_out");
  const std::vector<int32_t> positions = ref.i32("dspark_positions");
  const std::vector<int32_t> ref_ids = ref.i32("dspark_draft_ids");
  const std::vector<float> ref_logits = ref.f32("dspark_draft_logits");
  const std::vector<float> ref_conf = ref.f32("dspark_confidence");
  const int64_t P = static_cast<int64_t>(prompt.size()), B = dc.block_size, V = dc.vocab_size;
  const int steps = static_cast<int>(positions.size());
  ASSERT_EQ(steps, static_cast<int>(out.size()) - 1);
  ASSERT_EQ(ref_ids.size(), static_cast<size_t>(steps * (B + 1)));
  const int64_t width = dc.n_targets() * dc.dim;

  v41::V41State st = m.new_state();
  v41::DSparkState ds = v41::dspark_fresh_state(dc);
  v41::DSparkScratch scratch;
  std::vector<float> hidden(static_cast<size_t>(P * width)), logits(static_cast<size_t>(V));
  const int64_t last = P - 1;
  ASSERT_TRUE(
      m.forward(st, prompt, std::span<const int64_t>(&last, 1), logits.data(), hidden.data()).ok());
  ASSERT_TRUE(v41::dspark_observe(w.value(), dc, ds, hidden.data(), P, 0, scratch, nullptr).ok());

  std::vector<float> got_logits(static_cast<size_t>(steps * B * V)), got_conf;
  int ids_equal = 0, ids_checked = 0;
  const int64_t zero = 0;
  for (int i = 0; i < steps; ++i) {
    const int64_t pos = P + i;
    ASSERT_EQ(positions[static_cast<size_t>(i)], pos);
    ASSERT_TRUE(m.forward(st, std::span<const int32_t>(&out[static_cast<size_t>(i)], 1),
                          std::span<const int64_t>(&zero, 1), logits.data(), hidden.data())
                    .ok());
    const int32_t* r = ref_ids.data() + i * (B + 1);
    v41::DSparkState own_state = ds;  // plain data: the same state for our own greedy chain
    ForcedChain chain{r, 0};
    v41::DSparkDraft d, own;
    Status s =
        v41::dspark_draft(w.value(), dc, ds, hidden.data(), pos, out[static_cast<size_t>(i + 1)], d,
                          scratch, nullptr, forced_pick, &chain);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_TRUE(v41::dspark_draft(w.value(), dc, own_state, hidden.data(), pos,
                                  out[static_cast<size_t>(i + 1)], own, scratch, nullptr)
                    .ok());
    std::copy(d.logits.begin(), d.logits.end(), got_logits.begin() + i * B * V);
    got_conf.insert(got_conf.end(), d.confidence.begin(), d.confidence.end());
    EXPECT_EQ(d.ids[0], r[0]);
    for (int64_t b = 0; b < B; ++b) {
      const float* lg = ref_logits.data() + (i * B + b) * V;
      std::vector<float> sorted(lg, lg + V);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] <= 2 * noise_max) break;  // later slots depend on this pick
      ++ids_checked;
      ids_equal += own.ids[static_cast<size_t>(b + 1)] == r[b + 1];
    }
  }
  const int rows = steps * static_cast<int>(B);
  const Stats ls = row_stats(got_logits.data(), ref_logits.data(), rows, V);
  const Stats cs = row_stats(got_conf.data(), ref_conf.data(), rows, 1);
  std::printf(
      "  %s dspark logits: median %.4f max %.4f (bar %.4f / %.4f) over %d rows; "
      "confidence median %.4f max %.4f; own greedy ids %d/%d\n",
      GetParam(), ls.median, ls.max, bar_median, bar_max, ls.n, cs.median, cs.max, ids_equal,
      ids_checked);
  EXPECT_LE(ls.median, bar_median);
  EXPECT_LE(ls.max, bar_max);
  EXPECT_LE(cs.median, bar_median);
  EXPECT_LE(cs.max, bar_max);
  EXPECT_GT(ids_checked, steps / 2);
  EXPECT_EQ(ids_equal, ids_checked);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DSparkFixture,
                         // official_v41_c_fp8 carries no noise variants (no DSpark bar of its own)
                         ::testing::Values("official_v41_c_bf16", "official_v41_a",
                                           "official_v41_b"));

}  // namespace
}  // namespace deepinfer::model
