// config.json parsing (published, HF and official keys) and the RoPE tables of spec §5.
#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/json.h"
#include "model/rope.h"

namespace deepinfer::model {
namespace {

// The V4-Flash config.json of spec §2.1 (published layout).
const char* kFlash = R"({"architectures":["DeepseekV4ForCausalLM"],"model_type":"deepseek_v4",
 "vocab_size":129280,"hidden_size":4096,"num_hidden_layers":43,"num_nextn_predict_layers":1,
 "num_attention_heads":64,"num_key_value_heads":1,"head_dim":512,"qk_rope_head_dim":64,
 "q_lora_rank":1024,"o_lora_rank":1024,"o_groups":8,"sliding_window":128,
 "compress_ratios":[0,0,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,
  4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,128,4,0],
 "compress_rope_theta":160000,"rope_theta":10000,
 "rope_scaling":{"type":"yarn","factor":16,"original_max_position_embeddings":65536,"beta_fast":32,"beta_slow":1},
 "max_position_embeddings":1048576,"index_n_heads":64,"index_head_dim":128,"index_topk":512,
 "n_routed_experts":256,"n_shared_experts":1,"num_experts_per_tok":6,"moe_intermediate_size":2048,
 "scoring_func":"sqrtsoftplus","topk_method":"noaux_tc","norm_topk_prob":true,"routed_scaling_factor":1.5,
 "num_hash_layers":3,"swiglu_limit":10.0,"hidden_act":"silu","hc_mult":4,"hc_sinkhorn_iters":20,
 "hc_eps":1e-6,"rms_norm_eps":1e-6,"expert_dtype":"fp4","tie_word_embeddings":false,
 "bos_token_id":0,"eos_token_id":1,
 "quantization_config":{"quant_method":"fp8","fmt":"e4m3","scale_fmt":"ue8m0","activation_scheme":"dynamic","weight_block_size":[128,128]}})";

ModelConfig flash() {
  auto j = parse_json(kFlash);
  EXPECT_TRUE(j.ok());
  auto c = parse_model_config(j.value());
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.value();
}

TEST(ModelConfig, FlashLayerSchedule) {
  const ModelConfig c = flash();
  EXPECT_EQ(c.num_layers, 43);
  EXPECT_EQ(c.num_mtp_layers, 1);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_EQ(c.kind(0), AttentionKind::SlidingWindow);
  EXPECT_EQ(c.kind(1), AttentionKind::SlidingWindow);
  EXPECT_EQ(c.kind(2), AttentionKind::Csa);
  EXPECT_EQ(c.kind(3), AttentionKind::Hca);
  EXPECT_EQ(c.kind(42), AttentionKind::Csa);
  EXPECT_EQ(c.ratio(41), 128);
  EXPECT_TRUE(c.hash_routed[2]);
  EXPECT_FALSE(c.hash_routed[3]);
  EXPECT_EQ(c.hc_mix(), 24);
  EXPECT_EQ(c.numerics, Numerics::Official);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{1});
}

// Spec §5: low = 15, high = 25; i ≤ 15 keeps θ^(−2i/64), i ≥ 25 is divided by 16; main θ = 10000.
TEST(Rope, FlashYarnTable) {
  const ModelConfig c = flash();
  const RopeTable t = make_rope_table(c.compress_rope, c.rope_dim);
  ASSERT_EQ(t.inv_freq.size(), 32u);
  EXPECT_EQ(t.attention_factor, 1.0f);
  for (int i = 0; i < 32; ++i) {
    const double f = std::pow(160000.0, -2.0 * i / 64);
    if (i <= 15) {
      EXPECT_NEAR(t.inv_freq[i] / f, 1.0, 1e-6) << i;
    }
    if (i >= 25) {
      EXPECT_NEAR(t.inv_freq[i] / f, 1.0 / 16, 1e-6) << i;
    }
    if (i > 15 && i < 25) {
      const double ramp = (i - 15) / 10.0;
      EXPECT_NEAR(t.inv_freq[i] / f, ramp / 16 + (1 - ramp), 1e-5) << i;
    }
  }
  const RopeTable m = make_rope_table(c.main_rope, c.rope_dim);
  EXPECT_NEAR(m.inv_freq[1], std::pow(10000.0, -2.0 / 64), 1e-7);
}

TEST(Rope, RotationAndInverse) {
  RopeTable t;
  t.inv_freq = {1.0f, 0.5f};
  float cs[2], sn[2];
  rope_cos_sin(t, 3, 2, cs, sn);
  float x[4] = {1, 2, 3, 4};
  rope_rotate(x, 2, cs, sn, false);
  EXPECT_NEAR(x[0], std::cos(3.0) - 2 * std::sin(3.0), 1e-6);
  EXPECT_NEAR(x[1], 2 * std::cos(3.0) + std::sin(3.0), 1e-6);
  rope_rotate(x, 2, cs, sn, true);
  EXPECT_NEAR(x[0], 1, 1e-6);
  EXPECT_NEAR(x[3], 4, 1e-6);
}

// HF nested rope_parameters: a YaRN entry without attention_factor gets HF's 0.1·ln(f) + 1.
TEST(ModelConfig, NestedRopeParametersAttentionFactor) {
  std::string text = kFlash;
  const std::string flat =
      R"("rope_scaling":{"type":"yarn","factor":16,"original_max_position_embeddings":65536,"beta_fast":32,"beta_slow":1},)";
  text.replace(
      text.find(flat), flat.size(),
      R"("rope_parameters":{"main":{"rope_type":"default","rope_theta":10000},"compress":{"rope_type":"yarn","rope_theta":160000,"factor":16,"original_max_position_embeddings":65536}},)");
  auto c = parse_model_config(parse_json(text).value());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_NEAR(c.value().compress_rope.attention_factor, 0.1 * std::log(16.0) + 1, 1e-12);
  EXPECT_EQ(c.value().main_rope.attention_factor, 1.0);
}

TEST(ModelConfig, ClearErrors) {
  auto bad = [](const std::string& from, const std::string& to) {
    std::string text = kFlash;
    text.replace(text.find(from), from.size(), to);
    auto c = parse_model_config(parse_json(text).value());
    return c.ok() ? std::string() : c.error().message;
  };
  EXPECT_EQ(bad("\"hidden_size\":4096,", ""), "config.json lacks \"hidden_size\"");
  EXPECT_EQ(bad("\"head_dim\":512", "\"head_dim\":\"x\""),
            "config.json: \"head_dim\" is not a number");
  EXPECT_NE(bad("\"o_groups\":8", "\"o_groups\":7").find("o_groups"), std::string::npos);
  EXPECT_NE(bad("\"compress_ratios\":[0,0,", "\"compress_ratios\":[").find("entries"),
            std::string::npos);
  EXPECT_FALSE(parse_model_config(parse_json("[1]").value()).ok());
}

}  // namespace
}  // namespace deepinfer::model
