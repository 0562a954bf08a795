// Structured output inside the engine loop: each sampled token comes from the grammar's mask
// and advances the request's automaton. With the fake model (pseudo-random logits, the worst
// case: it knows nothing of JSON) and the tiny V4 fixture model: outputs equal a from-scratch
// constrained reference, validate under ajv, are the same batched, one by one and after
// preemption; thinking leaves the reasoning free and constrains the answer after </think>.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/batch.h"
#include "engine/engine.h"
#include "engine/fake_model.h"
#include "engine/structured_request.h"
#include "engine/v4_model_runner.h"
#include "model/model.h"

namespace deepinfer::engine {
namespace {

using structured::CompiledGrammar;
using structured::ConstraintSpec;
using structured::GrammarCache;
using structured::StructuredOutput;
using structured::TokenTable;

constexpr int32_t kEos = 1;
constexpr int32_t kThinkEnd = 2;

// A byte-level vocabulary of `size` ids: 0 and the two specials have no bytes, ids 3..255 are
// single bytes, the rest JSON-ish multi-byte pieces (so that tokens straddle grammar rules).
std::shared_ptr<const TokenTable> test_vocab(int32_t size) {
  static const char* kPieces[] = {"{\"",
                                  "\":",
                                  "\",\"",
                                  "\"}",
                                  "true",
                                  "false",
                                  "null",
                                  "ab",
                                  "12",
                                  "0.",
                                  "-1",
                                  "\":[",
                                  "],\"",
                                  "[{",
                                  "}]",
                                  "e+",
                                  "\u00e9t\u00e9",
                                  "\u65e5\u672c",
                                  "id",
                                  "name",
                                  "\":\"",
                                  "\"",
                                  "},{",
                                  "00",
                                  "a\"",
                                  ",\"",
                                  "\"]",
                                  "x",
                                  ":1",
                                  "]}"};
  std::vector<std::string> tokens(static_cast<size_t>(size));
  for (int32_t i = 3; i < size; ++i) {
    if (i < 256)
      tokens[i] = std::string(1, static_cast<char>(i));
    else
      tokens[i] = kPieces[(i - 256) % (sizeof(kPieces) / sizeof(kPieces[0]))] +
                  std::string((i - 256) / 30, ' ');
  }
  return TokenTable::from_bytes(tokens);
}

std::string text_of(const TokenTable& vocab, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t t : ids)
    if (t != kEos) s += vocab.bytes(t);
  return s;
}

// Schemas a know-nothing model finishes within a few hundred tokens: every string, array and
// number is bounded.
Json random_schema(std::mt19937_64& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const int kind = depth > 1 ? pick(5) : pick(7);
  switch (kind) {
    case 0:
      return JsonObject{{"type", "integer"}, {"minimum", -50}, {"maximum", 5000}};
    case 1:
      return JsonObject{{"type", "boolean"}};
    case 2:
      return JsonObject{{"type", "string"}, {"maxLength", 1 + pick(6)}};
    case 3:
      return JsonObject{{"enum", JsonArray{"red", "green", 3, nullptr}}};
    case 4:
      return JsonObject{{"type", "number"}, {"minimum", 0}, {"maximum", 100}};
    case 5: {
      JsonObject props;
      JsonArray required;
      const int n = 1 + pick(3);
      for (int i = 0; i < n; ++i) {
        const std::string name = "k" + std::to_string(i);
        props[name] = random_schema(rng, depth + 1);
        if (pick(2)) required.push_back(Json(name));
      }
      return JsonObject{{"type", "object"},
                        {"properties", props},
                        {"required", required},
                        {"additionalProperties", false}};
    }
    default:
      return JsonObject{
          {"type", "array"}, {"items", random_schema(rng, depth + 1)}, {"maxItems", 1 + pick(3)}};
  }
}

EngineConfig config(int32_t num_blocks = 512) {
  EngineConfig c;
  c.kv.block_size = 4;
  c.kv.num_blocks = num_blocks;
  c.scheduler.max_num_seqs = 64;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.max_model_len = 1024;
  c.scheduler.eos_token_ids = {kEos};
  return c;
}

std::shared_ptr<const StructuredOutput> output_for(std::shared_ptr<const CompiledGrammar> g,
                                                   int32_t think_end = -1) {
  auto so = std::make_shared<StructuredOutput>();
  so->grammar = std::move(g);
  so->think_end = think_end;
  return so;
}

// The constrained reference: every step recomputes the fake model's logits from scratch,
// masks them with a fresh replay of the automaton and samples.
std::vector<int32_t> reference(const FakeModelConfig& mc, const EngineRequest& req) {
  Sampler sampler(mc.vocab_size);
  const StructuredOutput& so = *req.params.structured;
  std::vector<int32_t> end = so.end_tokens;
  end.push_back(kEos);
  structured::StructuredConstraint c(so.grammar, end, so.think_end);
  std::vector<uint64_t> mask(structured::mask_words(static_cast<size_t>(mc.vocab_size)));
  std::vector<int32_t> tokens = req.prompt;
  const auto num_prompt = static_cast<int32_t>(tokens.size());
  for (;;) {
    const std::vector<float> logits = FakeModel::reference_logits(mc, tokens);
    const std::span<const int32_t> all(tokens);
    SampleContext ctx{req.params, *req.params.seed, all.first(num_prompt), all.subspan(num_prompt)};
    if (c.fill_mask(mask)) ctx.allowed = mask;
    const int32_t t = sampler.sample(logits, ctx).token;
    c.accept(t);
    tokens.push_back(t);
    if (t == kEos) break;
    if (static_cast<int32_t>(tokens.size()) - num_prompt >= req.params.max_tokens) break;
  }
  return {tokens.begin() + num_prompt, tokens.end()};
}

struct Fixture {
  FakeModelConfig mc;
  std::shared_ptr<const TokenTable> vocab;
  std::unique_ptr<GrammarCache> cache;
  std::vector<Json> schemas;
  std::vector<EngineRequest> requests;

  explicit Fixture(int n, uint64_t seed = 7) {
    mc.vocab_size = 320;
    vocab = test_vocab(mc.vocab_size);
    cache = std::make_unique<GrammarCache>(vocab);
    std::mt19937_64 rng(seed);
    for (int i = 0; i < n; ++i) {
      Json schema = random_schema(rng, 0);
      auto g = cache->get(ConstraintSpec{ConstraintSpec::Kind::kJsonSchema, to_json(schema), ""});
      EXPECT_TRUE(g.ok()) << to_json(schema) << ": " << (g.ok() ? "" : g.error().message);
      if (!g.ok()) continue;
      EngineRequest r;
      for (int k = 0; k < 1 + i % 9; ++k) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 250));
      r.params.max_tokens = 600;
      r.params.seed = rng();
      r.params.temperature = i % 3 == 0 ? 0.0f : 1.0f;
      r.params.top_p = i % 2 ? 0.95f : 1.0f;
      r.params.structured = output_for(g.value());
      schemas.push_back(std::move(schema));
      requests.push_back(std::move(r));
    }
  }
};

std::vector<BatchResult> run(const EngineConfig& c, FakeModel& model,
                             const std::vector<EngineRequest>& requests,
                             EngineMetrics* metrics = nullptr) {
  auto engine = Engine::create(c, model);
  EXPECT_TRUE(engine.ok());
  auto out = generate_batch(*engine.value(), requests);
  if (metrics) *metrics = engine.value()->metrics();
  return out;
}

void validate_with_ajv(const std::vector<Json>& schemas, const std::vector<std::string>& outputs,
                       const std::string& name) {
  const std::string path = std::string(DEEPINFER_BINARY_DIR) + "/" + name + ".jsonl";
  std::ofstream out(path);
  for (size_t i = 0; i < outputs.size(); ++i)
    out << to_json(JsonObject{{"schema", schemas[i]}, {"output", Json(outputs[i])}}) << "\n";
  out.close();
  const std::string cmd = "node " + std::string(DEEPINFER_SOURCE_DIR) +
                          "/tests/js/structured_validate.mjs " + path + " > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "ajv rejected outputs in " << path;
}

TEST(StructuredEngine, OutputsEqualTheConstrainedReferenceAndValidate) {
  Fixture f(40);
  FakeModel model(f.mc);
  const auto got = run(config(), model, f.requests);
  std::vector<std::string> texts;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].finish, FinishReason::kStop) << to_json(f.schemas[i]);
    EXPECT_EQ(got[i].ids, reference(f.mc, f.requests[i])) << "request " << i;
    texts.push_back(text_of(*f.vocab, got[i].ids));
    EXPECT_TRUE(parse_json(texts.back()).ok()) << texts.back();
  }
  validate_with_ajv(f.schemas, texts, "structured_engine_fake");
}

TEST(StructuredEngine, BatchedOneByOneAndPreemptedAreIdentical) {
  Fixture f(24, 11);
  FakeModel model(f.mc);
  EngineMetrics metrics;
  const auto batched = run(config(), model, f.requests);
  size_t longest = 0;
  for (const auto& r : batched) longest = std::max(longest, r.ids.size());
  // Room for the longest request and little more: preemption by recompute.
  EngineConfig tight = config(static_cast<int32_t>((longest + 16) / 4 + 4));
  const auto preempted = run(tight, model, f.requests, &metrics);
  EXPECT_GT(metrics.num_preemptions, 0);
  EngineConfig sync = config();
  sync.async_scheduling = false;
  sync.num_threads = 2;
  for (size_t i = 0; i < f.requests.size(); ++i) {
    const auto alone = run(sync, model, {f.requests[i]});
    EXPECT_EQ(batched[i].ids, alone[0].ids) << "request " << i;
    EXPECT_EQ(batched[i].ids, preempted[i].ids) << "request " << i;
  }
}

TEST(StructuredEngine, ThinkingIsFreeAndTheAnswerAfterThinkEndIsConstrained) {
  Fixture f(12, 21);
  FakeModel model(f.mc);
  for (auto& r : f.requests) {
    auto so = std::make_shared<StructuredOutput>(*r.params.structured);
    so->think_end = kThinkEnd;
    r.params.structured = so;
    // The fake model ends its reasoning soon, and never ends the output while reasoning.
    r.params.logit_bias = {{kThinkEnd, 3.0f}, {kEos, -100.0f}};
  }
  const auto got = run(config(), model, f.requests);
  std::vector<std::string> answers;
  int with_reasoning = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].finish, FinishReason::kStop);
    EXPECT_EQ(got[i].ids, reference(f.mc, f.requests[i])) << "request " << i;
    const auto& ids = got[i].ids;
    const auto end = std::find(ids.begin(), ids.end(), kThinkEnd);
    ASSERT_NE(end, ids.end()) << "request " << i << " never closed its reasoning";
    with_reasoning += end != ids.begin();
    answers.push_back(text_of(*f.vocab, std::vector<int32_t>(end + 1, ids.end())));
  }
  EXPECT_GT(with_reasoning, 0);
  validate_with_ajv(f.schemas, answers, "structured_engine_thinking");
}

// The sampler's mask equals setting the masked logits to -inf (vocabulary not a multiple of
// 64; words all allowed, all masked and mixed).
TEST(StructuredEngine, SamplerMaskEqualsMaskedLogits) {
  constexpr int32_t kVocab = 200;
  std::mt19937_64 rng(3);
  Sampler a(kVocab), b(kVocab);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(kVocab);
    std::normal_distribution<float> n(0.0f, 2.0f);
    for (float& l : logits) l = n(rng);
    std::vector<uint64_t> mask(structured::mask_words(kVocab));
    for (uint64_t& w : mask) {
      const uint64_t kind = rng() % 3;
      w = kind == 0 ? 0 : kind == 1 ? ~uint64_t{0} : rng() & rng();
    }
    mask[trial % mask.size()] |= uint64_t{1} << (trial % 8);  // at least one allowed id
    std::vector<float> masked = logits;
    for (int32_t i = 0; i < kVocab; ++i)
      if (!structured::mask_test(mask, i)) masked[i] = -std::numeric_limits<float>::infinity();
    SamplingParams p;
    p.temperature = trial % 4 == 0 ? 0.0f : 0.9f;
    p.top_p = trial % 2 ? 0.9f : 1.0f;
    const std::vector<int32_t> none;
    SampleContext with{p, static_cast<uint64_t>(trial), none, none};
    with.allowed = mask;
    const SampleContext without{p, static_cast<uint64_t>(trial), none, none};
    const int32_t t = a.sample(logits, with).token;
    EXPECT_EQ(t, b.sample(masked, without).token) << trial;
    EXPECT_TRUE(structured::mask_test(mask, t)) << trial;
  }
}

TEST(StructuredEngine, SubmitRejectsAGrammarWiderThanTheModel) {
  FakeModelConfig mc;  // 256 ids
  FakeModel model(mc);
  auto engine = Engine::create(config(), model);
  ASSERT_TRUE(engine.ok());
  GrammarCache cache(test_vocab(320));
  EngineRequest r;
  r.prompt = {5, 6};
  r.params.structured = output_for(cache.get({ConstraintSpec::Kind::kJsonObject, "", ""}).value());
  auto id = engine.value()->submit(r, {});
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.error().message.find("larger than the model"), std::string::npos);
}

// The tiny V4 fixture model (random weights, 1,280 ids) under the engine, schemas applied.
TEST(StructuredEngine, TinyV4FixtureModelOutputsValidate) {
  const std::string fixture = std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/hf_v4_a";
  auto m = model::Model::load(fixture, {1});
  ASSERT_TRUE(m.ok()) << m.error().message;
  V4ModelRunner runner(*m.value());
  auto vocab = test_vocab(runner.vocab_size());
  GrammarCache cache(vocab);
  std::mt19937_64 rng(5);
  std::vector<Json> schemas;
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 8; ++i) {
    Json schema = random_schema(rng, 0);
    auto g = cache.get(ConstraintSpec{ConstraintSpec::Kind::kJsonSchema, to_json(schema), ""});
    ASSERT_TRUE(g.ok());
    EngineRequest r;
    for (int k = 0; k < 4 + i; ++k) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 1270));
    r.params.max_tokens = 400;
    r.params.seed = rng();
    r.params.temperature = i % 2 ? 1.0f : 0.0f;
    r.params.structured = output_for(g.value());
    schemas.push_back(schema);
    requests.push_back(std::move(r));
  }
  EngineConfig c = config();
  c.kv.block_size = 16;
  c.kv.num_blocks = 256;
  auto engine = Engine::create(c, runner);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const auto got = generate_batch(*engine.value(), requests);
  std::vector<std::string> texts;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].finish, FinishReason::kStop) << got[i].error;
    texts.push_back(text_of(*vocab, got[i].ids));
  }
  validate_with_ajv(schemas, texts, "structured_engine_v4");
}

}  // namespace
}  // namespace deepinfer::engine
