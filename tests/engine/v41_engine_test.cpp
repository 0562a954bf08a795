// The engine over the DeepSeek V4.1 CPU model (fixtures official_v41_c_bf16 and _fp8: ratios 0/1/2,
// three kv sources, shared index keys, candidate blocks, Engram): greedy ids equal the model's own
// incremental decode (same pieces: prompt up to block ends, then one token at a time) with
// logprobs within 1e-5; concurrent requests crossing window and compression-block boundaries,
// prefix hits, preemption and the fp32 layout give the same bits; the packed KV layout matches
// the figures derived from spec §12.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/json.h"
#include "engine/batch.h"
#include "engine/v41_kv_layout.h"
#include "engine/v41_model_runner.h"
#include "model/safetensors.h"
#include "model/state.h"
#include "model/v41_model.h"

namespace deepinfer::engine {
namespace {

using model::v41::V41Model;

std::string fixture(const std::string& name) {
  return std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/" + name;
}

std::vector<int32_t> reference_ids(const std::string& dir, const std::string& name) {
  auto file = model::SafetensorsFile::open(dir + "/reference.safetensors");
  if (!file.ok()) return {};
  const model::TensorInfo& t = file.value()->tensors().at(name);
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

constexpr int32_t kBlock = 16;

// The model alone: greedy (lowest id on ties), prompt in pieces that end at multiples of kBlock,
// then one token per forward; the chosen token's log-softmax.
struct Greedy {
  std::vector<int32_t> ids;
  std::vector<double> logprobs;
};
Greedy model_greedy(V41Model& m, const std::vector<int32_t>& prompt, int n_out) {
  const int V = m.config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(V));
  model::v41::V41State st = m.new_state();
  Greedy g;
  auto run = [&](std::span<const int32_t> ids, bool want) {
    const int64_t last = static_cast<int64_t>(ids.size()) - 1;
    Status s =
        m.forward(st, ids, want ? std::span<const int64_t>(&last, 1) : std::span<const int64_t>(),
                  logits.data());
    EXPECT_TRUE(s.ok()) << s.error().message;
  };
  const int32_t np = static_cast<int32_t>(prompt.size());
  for (int32_t p = 0; p < np;) {
    const int32_t e = std::min(np, (p / kBlock + 1) * kBlock);
    run(std::span(prompt).subspan(static_cast<size_t>(p), static_cast<size_t>(e - p)), e == np);
    p = e;
  }
  for (int i = 0; i < n_out; ++i) {
    int best = 0;
    for (int v = 1; v < V; ++v)
      if (logits[static_cast<size_t>(v)] > logits[static_cast<size_t>(best)]) best = v;
    double mx = logits[static_cast<size_t>(best)], sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - mx);
    g.ids.push_back(best);
    g.logprobs.push_back(-std::log(sum));
    if (i + 1 < n_out) run(std::span(&g.ids.back(), 1), true);
  }
  return g;
}

class V41Engine : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    for (const char* name : {"official_v41_c_bf16", "official_v41_c_fp8"}) {
      auto m = V41Model::load(fixture(name), {1});
      ASSERT_TRUE(m.ok()) << m.error().message;
      models_.push_back(std::move(m.value()));
    }
  }
  static void TearDownTestSuite() { models_.clear(); }

  V41Model& model() { return *models_[std::string(GetParam()) == "official_v41_c_fp8" ? 1 : 0]; }
  std::vector<int32_t> input_ids() { return reference_ids(fixture(GetParam()), "input_ids"); }

  static EngineConfig config() {
    EngineConfig c;
    c.kv.block_size = kBlock;
    c.kv.num_blocks = 64;
    c.kv.num_state_slots = 16;
    c.scheduler.max_num_seqs = 8;
    c.scheduler.max_num_batched_tokens = 40;
    c.scheduler.max_model_len = 256;
    c.scheduler.eos_token_ids = {1};
    return c;
  }

  std::vector<BatchResult> run(const EngineConfig& c, const std::vector<EngineRequest>& r,
                               EngineMetrics* metrics = nullptr, bool packed = true) {
    V41ModelRunner runner(model(), true, packed);
    auto engine = Engine::create(c, runner);
    EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
    if (!engine.ok()) return {};
    auto out = generate_batch(*engine.value(), r);
    if (metrics) *metrics = engine.value()->metrics();
    return out;
  }

  static EngineRequest greedy_request(std::vector<int32_t> prompt, int n_out) {
    EngineRequest r;
    r.prompt = std::move(prompt);
    r.params.temperature = 0.0f;
    r.params.max_tokens = n_out;
    r.params.ignore_eos = true;
    r.params.logprobs = true;
    r.params.top_logprobs = 2;
    return r;
  }

  // Prompts cut from the fixture's input ids (offsets differ so the prompts differ).
  std::vector<EngineRequest> mixed_requests(const std::vector<int>& lengths, uint32_t seed) {
    const std::vector<int32_t> ids = input_ids();
    std::mt19937 rng(seed);
    std::vector<EngineRequest> out;
    for (size_t i = 0; i < lengths.size(); ++i) {
      const size_t off = (i * 23) % (ids.size() - static_cast<size_t>(lengths[i]));
      EngineRequest r = greedy_request(
          {ids.begin() + static_cast<std::ptrdiff_t>(off),
           ids.begin() + static_cast<std::ptrdiff_t>(off + static_cast<size_t>(lengths[i]))},
          4 + static_cast<int>(rng() % 20));
      if (i % 2) {  // seeded sampling on every other request
        r.params.temperature = 0.9f;
        r.params.top_p = 0.95f;
        r.params.seed = rng();
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  static void expect_same(const BatchResult& a, const BatchResult& b, const std::string& what) {
    EXPECT_TRUE(a.error.empty()) << a.error;
    EXPECT_TRUE(b.error.empty()) << b.error;
    ASSERT_EQ(a.ids, b.ids) << what;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
    for (size_t i = 0; i < a.logprobs.size(); ++i) {
      EXPECT_EQ(std::memcmp(&a.logprobs[i].logprob, &b.logprobs[i].logprob, 4), 0) << what << i;
      for (int k = 0; k < a.logprobs[i].num_top; ++k)
        EXPECT_EQ(a.logprobs[i].top[k].token, b.logprobs[i].top[k].token) << what << i;
    }
  }

  void expect_model_greedy(const EngineRequest& r, const BatchResult& got,
                           const std::string& what) {
    const Greedy want = model_greedy(model(), r.prompt, r.params.max_tokens);
    EXPECT_TRUE(got.error.empty()) << got.error;
    ASSERT_EQ(got.ids, want.ids) << what;
    ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
    for (size_t i = 0; i < want.logprobs.size(); ++i)
      EXPECT_NEAR(got.logprobs[i].logprob, want.logprobs[i], 1e-5) << what << " token " << i;
  }

  static std::vector<std::unique_ptr<V41Model>> models_;
};

std::vector<std::unique_ptr<V41Model>> V41Engine::models_;

// Window 16, ratio-2 entries every 2 positions, candidate blocks of 6 entries (12 / 6 positions):
// a 50-token prompt and 30 generated tokens cross all of them several times.
TEST_P(V41Engine, GreedyEqualsTheModelsIncrementalDecode) {
  const std::vector<int32_t> ids = input_ids();
  ASSERT_GE(ids.size(), 60u);
  const int64_t mismatches = model::entry_pack_mismatches();
  const EngineRequest r = greedy_request({ids.begin(), ids.begin() + 50}, 30);
  const BatchResult got = run(config(), {r})[0];
  EXPECT_EQ(got.finish, FinishReason::kLength);
  expect_model_greedy(r, got, "greedy");
  EXPECT_EQ(model::entry_pack_mismatches(), mismatches) << "a stored row was off its QAT grid";
}

TEST_P(V41Engine, ConcurrentSequencesOfDifferentLengths) {
  const auto reqs = mixed_requests({3, 17, 31, 48, 70, 95}, 7);
  const auto batched = run(config(), reqs);
  ASSERT_EQ(batched.size(), reqs.size());
  EngineConfig alone = config();
  alone.scheduler.max_num_seqs = 1;
  alone.scheduler.max_num_batched_tokens = 256;  // one chunk: a different split than batched
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string what = "request " + std::to_string(i);
    if (reqs[i].params.temperature == 0.0f) expect_model_greedy(reqs[i], batched[i], what);
    expect_same(run(alone, {reqs[i]})[0], batched[i], what);
  }
}

TEST_P(V41Engine, PrefixHitEqualsColdRun) {
  const std::vector<int32_t> ids = input_ids();
  std::vector<int32_t> shared(ids.begin() + 100, ids.begin() + 140);  // 40: two full blocks
  EngineRequest a = greedy_request(shared, 6), b = greedy_request(shared, 12);
  a.prompt.insert(a.prompt.end(), ids.begin() + 10, ids.begin() + 19);
  b.prompt.insert(b.prompt.end(), ids.begin() + 30, ids.begin() + 45);
  V41ModelRunner runner(model());
  auto engine = Engine::create(config(), runner);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const BatchResult first = generate_batch(*engine.value(), {a})[0];
  const BatchResult warm = generate_batch(*engine.value(), {b})[0];
  EXPECT_EQ(first.usage.prompt_cache_hit_tokens, 0);
  EXPECT_EQ(warm.usage.prompt_cache_hit_tokens, 32);
  EngineConfig off = config();
  off.kv.prefix_caching = false;
  const BatchResult cold = run(off, {b})[0];
  EXPECT_EQ(cold.usage.prompt_cache_hit_tokens, 0);
  expect_same(cold, warm, "prefix hit");
  expect_model_greedy(b, warm, "prefix hit vs model");
  // A third request hits the same blocks after b extended them with its own entries.
  const BatchResult again = generate_batch(*engine.value(), {a})[0];
  EXPECT_GE(again.usage.prompt_cache_hit_tokens, 32);
  expect_same(first, again, "second hit");
}

TEST_P(V41Engine, PreemptionAndResumeEqualUninterrupted) {
  const auto reqs = mixed_requests({20, 26, 33, 38, 44}, 9);
  EngineConfig tight = config();
  tight.kv.num_blocks = 6;  // 96 positions for five requests of up to ~65
  EngineMetrics metrics;
  const auto got = run(tight, reqs, &metrics);
  EXPECT_GT(metrics.num_preemptions, 0);
  const auto calm = run(config(), reqs);
  ASSERT_EQ(got.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(got[i], calm[i], "request " + std::to_string(i));
}

// The packed formats hold the forward's values exactly: the same bits as fp32 rows.
TEST_P(V41Engine, PackedBlocksEqualFp32Blocks) {
  const auto reqs = mixed_requests({45, 60}, 5);
  const int64_t mismatches = model::entry_pack_mismatches();
  const auto packed = run(config(), reqs, nullptr, true);
  const auto f32 = run(config(), reqs, nullptr, false);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(packed[i], f32[i], "request " + std::to_string(i));
  EXPECT_EQ(model::entry_pack_mismatches(), mismatches);
}

TEST_P(V41Engine, LayoutBytesMatchTheRunner) {
  const auto& c = model().config();
  V41ModelRunner runner(model());
  for (int32_t bs : {2, 16, 64}) {
    const V41BlockBytes b = v41_kv_bytes_in_blocks(c, bs);
    EXPECT_EQ(runner.entry_bytes_per_block(bs), b.block_bytes) << bs;
    EXPECT_EQ(runner.bytes_per_block(bs), b.block_bytes + v41_snapshot_bytes(c)) << bs;
    EXPECT_LT(b.block_bytes, v41_kv_bytes_in_blocks(c, bs, false).block_bytes) << bs;
  }
  // Fixture (head_dim 64, index_head_dim 64): kv sources 1, 3 (ratio 2) and 4 (ratio 1), all of
  // them index sources. Compressed row 32 + 4 = 36 B, index key 32 + 2 = 34 B.
  const V41KvBytes p = v41_kv_bytes_packed(c);
  EXPECT_DOUBLE_EQ(p.compressed_per_token, 36.0 / 2 + 36.0 / 2 + 36.0);
  EXPECT_DOUBLE_EQ(p.index_keys_per_token, 34.0 / 2 + 34.0 / 2 + 34.0);
  EXPECT_EQ(p.ring_bytes, 7 * 16 * (64 + 2));
}

TEST_P(V41Engine, BlockSizeMustBeAMultipleOfTheRatios) {
  V41ModelRunner runner(model());
  EngineConfig c = config();
  c.kv.block_size = 15;
  auto engine = Engine::create(c, runner);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.error().message.find("multiple of every compress ratio"), std::string::npos)
      << engine.error().message;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41Engine,
                         ::testing::Values("official_v41_c_bf16", "official_v41_c_fp8"));

// V4.1-Flash (spec §12.1): 40 layers, ratios [0,0] + [2]x18 + [1]x20, kv sources 2, 8, 14, 20,
// index sources 2, 8, 14, 20, 24, 28, 32, 36, head_dim 512, index_head_dim 128, window 128.
// §12.2 item 6: compressed row 256 B e2m1 + 32 B E4M3 = 288 B; index key 64 + 4 = 68 B; window row
// 512 + 16 = 528 B. Only kv sources store (item 3/4): 3 sources at ratio 2 and one at ratio 1, each
// an index source, so 3·288/2 + 288 = 720 B and 3·68/2 + 68 = 170 B: 890 B per token.
TEST(V41KvLayout, FlashBytesPerTokenFromTheSpec) {
  const char* text = R"({
    "architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
    "text_config": {
      "vocab_size": 129280, "hidden_size": 5120, "num_hidden_layers": 40,
      "num_nextn_predict_layers": 3, "num_attention_heads": 64, "head_dim": 512,
      "qk_rope_head_dim": 64, "q_lora_rank": 1280, "o_lora_rank": 1024, "o_groups": 8,
      "sliding_window": 128,
      "compress_ratios": [0,0,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,
                          1,1,1,1,1,0,0,0],
      "kv_source_layer_ids": [2, 8, 14, 20],
      "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36],
      "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512,
      "candidate_source_layer_id": 20, "candidate_topk_blocks": 2048, "candidate_block_size": 8,
      "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 6,
      "moe_intermediate_size": 2304, "hc_mult": 4
    }})";
  auto json = parse_json(text);
  ASSERT_TRUE(json.ok());
  auto c = model::v41::parse_v41_config(json.value());
  ASSERT_TRUE(c.ok()) << c.error().message;
  const V41KvBytes p = v41_kv_bytes_packed(c.value());
  EXPECT_DOUBLE_EQ(p.compressed_per_token, 720.0);
  EXPECT_DOUBLE_EQ(p.index_keys_per_token, 170.0);
  EXPECT_DOUBLE_EQ(p.per_token, 890.0);
  EXPECT_EQ(p.ring_bytes, int64_t{40} * 128 * 528);
  EXPECT_EQ(p.tail_bytes, int64_t{3} * 2 * 2 * 512 * 4);  // (kv, score) rows of the ratio-2 sources
  for (int32_t bs : {16, 64, 128, 256}) {
    const V41BlockBytes b = v41_kv_bytes_in_blocks(c.value(), bs);
    EXPECT_DOUBLE_EQ(b.per_token.per_token, 890.0) << bs;
    EXPECT_EQ(b.block_bytes, int64_t{890} * bs) << bs;
  }
  // V4-Flash packs 3514 B per token (spec §7.2): V4.1-Flash stores about 3.9x less.
  EXPECT_LT(p.per_token * 3.9, 3514.0);
}

}  // namespace
}  // namespace deepinfer::engine
