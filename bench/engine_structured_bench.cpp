// Structured output cost at the real DeepSeek V4.1 vocabulary (129,280 ids): grammar compile
// time (lowering + per-position mask precompute), and per-token mask time (fill_mask + accept)
// along a realistic token sequence (a valid document tokenized by the real tokenizer), with
// p50 / p99 counters of per-step thread CPU time, for a simple and a complex schema. Sampler
// time per token is measured alongside as the unconstrained reference. Goal (issue 9): mask
// p99 < 50 us per token. BM_Decode: engine decode throughput with and without a constraint at
// batch 1 and 64, with the fake model at the real vocabulary and with the tiny V4 fixture.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/batch.h"
#include "engine/engine.h"
#include "engine/fake_model.h"
#include "engine/sampler.h"
#include "engine/structured_request.h"
#include "engine/v4_model_runner.h"
#include "model/model.h"
#include "tokenizer/cache_dir.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::engine::structured {
namespace {

const char* kSimpleSchema =
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
        "required":["name","age"],"additionalProperties":false})";
const char* kSimpleDoc = R"({"name":"Alice Johnson","age":42})";

const char* kComplexSchema = R"({
  "$defs": {
    "item": {"type": "object", "properties": {
      "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
      "qty": {"type": "integer", "minimum": 1, "maximum": 100},
      "price": {"type": "number", "minimum": 0},
      "kind": {"enum": ["physical", "digital", "service"]},
      "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
      "required": ["sku", "qty", "price", "kind"], "additionalProperties": false}
  },
  "type": "object",
  "properties": {
    "id": {"type": "string", "format": "uuid"},
    "customer": {"type": "object", "properties": {
      "name": {"type": "string"}, "email": {"type": "string", "format": "email"},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8}},
      "required": ["name", "email"], "additionalProperties": false},
    "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1},
    "status": {"enum": ["open", "paid", "shipped", "cancelled"]},
    "created": {"type": "string", "format": "date-time"},
    "total": {"type": "number"},
    "gift": {"type": "boolean"}
  },
  "required": ["id", "customer", "items", "status", "created", "total"],
  "additionalProperties": false
})";
const char* kComplexDoc =
    R"({"id":"3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c","customer":{"name":"Jürgen Müller",)"
    R"("email":"j.mueller@example.com","tags":["vip","returning customer","newsletter"]},)"
    R"("items":[{"sku":"ABC-1234","qty":2,"price":19.99,"kind":"physical","note":"gift wrap, )"
    R"(please \"red\" paper"},{"sku":"XYZ-0042","qty":1,"price":5,"kind":"digital",)"
    R"("note":null}],"status":"paid","created":"2026-03-14T09:26:53Z","total":44.98,)"
    R"("gift":true})";

// Strict tool calls (tool_choice auto, V4.1 spelling): two tools, and a block calling both.
const char* kToolSpec = R"({"encoding":"v41","required":false,"thinking":false,"parallel":true,
  "tools":[{"name":"get_weather","strict":true,"parameters":{"type":"object","properties":{
    "location":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":14},
    "unit":{"enum":["celsius","fahrenheit"]}},"required":["location","days"],
    "additionalProperties":false}},
   {"name":"search","strict":true,"parameters":{"type":"object","properties":{
    "query":{"type":"string"},"filters":{"type":"object","properties":{
    "site":{"type":"string"},"after":{"type":"string","format":"date"}},
    "additionalProperties":false}},"required":["query"],"additionalProperties":false}}],
  "content":null})";
const char* kToolDoc =
    "Let me look that up.\n\n<\xef\xbd\x9c"
    "DSML\xef\xbd\x9c calls>\n"
    "<\xef\xbd\x9c"
    "DSML\xef\xbd\x9c invoke name=\"get_weather\">\n"
    "<\xef\xbd\x9c"
    "DSML\xef\xbd\x9c parameter name=\"location\" string=\"true\">San Francisco, "
    "CA</\xef\xbd\x9c"
    "DSML\xef\xbd\x9c parameter>\n"
    "<\xef\xbd\x9c"
    "DSML\xef\xbd\x9c parameter name=\"days\" string=\"false\">3</\xef\xbd\x9c"
    "DSML\xef\xbd\x9c parameter>\n"
    "</\xef\xbd\x9c"
    "DSML\xef\xbd\x9c invoke>\n"
    "<\xef\xbd\x9c"
    "DSML\xef\xbd\x9c invoke name=\"search\">\n"
    "<\xef\xbd\x9c"
    "DSML\xef\xbd\x9c parameter name=\"query\" string=\"true\">weekend events "
    "near the bay</\xef\xbd\x9c"
    "DSML\xef\xbd\x9c parameter>\n"
    "<\xef\xbd\x9c"
    "DSML\xef\xbd\x9c parameter name=\"filters\" string=\"false\">"
    "{\"site\":\"sfgate.com\",\"after\":\"2026-12-04\"}</\xef\xbd\x9c"
    "DSML\xef\xbd\x9c parameter>\n"
    "</\xef\xbd\x9c"
    "DSML\xef\xbd\x9c invoke>\n"
    "</\xef\xbd\x9c"
    "DSML\xef\xbd\x9c calls>";

struct Setup {
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::shared_ptr<const TokenTable> table;
  int32_t eos = -1;
};

const Setup* setup() {
  static const Setup* s = [] {
    auto tok = tokenizer::Tokenizer::from_path(tokenizer::deepseek_tokenizer_dir(true));
    if (!tok.ok()) return static_cast<Setup*>(nullptr);
    auto* out = new Setup;
    out->tok = std::move(tok.value());
    out->table = TokenTable::from_tokenizer(*out->tok);
    out->eos = out->tok->added_token_id(
        "<\xef\xbd\x9c"
        "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>");
    return out;
  }();
  return s;
}

ConstraintSpec spec(const char* schema) {
  if (schema == kToolSpec)
    return {ConstraintSpec::Kind::kToolCalls, to_json(parse_json(schema).value()), "bench"};
  return {ConstraintSpec::Kind::kJsonSchema, to_json(parse_json(schema).value()), "bench"};
}

void BM_Compile(benchmark::State& state, const char* schema) {
  const Setup* s = setup();
  if (s == nullptr) return state.SkipWithError("V4.1 tokenizer not built");
  CompileStats stats;
  for (auto _ : state) {
    auto g = build_grammar(spec(schema));
    auto c = CompiledGrammar::compile(std::move(g.value()), s->table);
    if (!c.ok()) return state.SkipWithError(c.error().message.c_str());
    stats = c.value()->stats();
    benchmark::DoNotOptimize(c);
  }
  state.counters["byte_positions"] = static_cast<double>(stats.byte_positions);
  state.counters["uncertain_total"] = static_cast<double>(stats.uncertain_total);
}

// Thread CPU time: the shared build machine preempts often, and wall-clock percentiles there
// measure the scheduler rather than the mask.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

void BM_MaskPerToken(benchmark::State& state, const char* schema, const char* doc) {
  const Setup* s = setup();
  if (s == nullptr) return state.SkipWithError("V4.1 tokenizer not built");
  auto g = CompiledGrammar::compile(build_grammar(spec(schema)).value(), s->table);
  if (!g.ok()) return state.SkipWithError(g.error().message.c_str());
  // The tool-call document holds the DSML marker token (added-token matching on).
  std::vector<int32_t> tokens =
      (schema == kToolSpec ? s->tok->encode(doc) : s->tok->encode_plain(doc)).value();
  tokens.push_back(s->eos);
  GrammarMatcher m(g.value(), {s->eos});
  std::vector<uint64_t> mask(mask_words(s->table->vocab_size()));
  std::vector<double> us;
  std::vector<double> worst(tokens.size(), 0.0);
  for (auto _ : state) {
    m.reset();
    for (size_t i = 0; i < tokens.size(); ++i) {
      const int32_t t = tokens[i];
      const double c0 = thread_cpu_us();
      m.fill_mask(mask);
      const bool ok = m.accept(t);
      const double c1 = thread_cpu_us();
      if (!ok || !mask_test(mask, t)) return state.SkipWithError("document rejected");
      us.push_back(c1 - c0);
      worst[i] = std::max(worst[i], us.back());
    }
  }
  // Where the slowest step is (index into the document's tokens).
  state.counters["slowest_step"] =
      static_cast<double>(std::max_element(worst.begin(), worst.end()) - worst.begin());
  state.counters["tokens"] = static_cast<double>(tokens.size());
  state.counters["p50_us"] = percentile(us, 0.50);
  state.counters["p99_us"] = percentile(us, 0.99);
  state.counters["max_us"] = percentile(us, 1.0);
}

// Unconstrained reference: one Sampler call (temperature 1, top_p 0.95) per token, and the
// same call with a mask applied.
void BM_SamplerPerToken(benchmark::State& state, bool with_mask) {
  const Setup* s = setup();
  if (s == nullptr) return state.SkipWithError("V4.1 tokenizer not built");
  const auto vocab = static_cast<int32_t>(s->table->vocab_size());
  std::vector<float> logits(static_cast<size_t>(vocab));
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 2.0f);
  for (float& l : logits) l = n(rng);
  std::vector<uint64_t> mask(mask_words(static_cast<size_t>(vocab)), ~uint64_t{0});
  SamplingParams p;
  p.top_p = 0.95f;
  Sampler sampler(vocab);
  std::vector<int32_t> out;
  for (auto _ : state) {
    SampleContext ctx{p, 7, {}, out};
    if (with_mask) ctx.allowed = mask;
    benchmark::DoNotOptimize(sampler.sample(logits, ctx));
  }
}

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// A byte-level stand-in vocabulary for the fixture model (ids 0-2 special, 3-255 bytes, the
// rest multi-byte pieces).
std::shared_ptr<const TokenTable> byte_vocab(int32_t size) {
  static const char* kPieces[] = {"{\"", "\":", "\",\"", "\"}", "true", "false",
                                  "ab",  "12",  "the",   "ing", " a",   "er"};
  std::vector<std::string> tokens(static_cast<size_t>(size));
  for (int32_t i = 3; i < size; ++i)
    tokens[i] = i < 256 ? std::string(1, static_cast<char>(i))
                        : kPieces[(i - 256) % 12] + std::string((i - 256) / 12 % 8, 'x');
  return TokenTable::from_bytes(tokens);
}

// Engine decode: `batch` requests of 8 prompt tokens and up to 64 generated tokens (temperature
// 1), all submitted at once; tokens/s over the whole run. With `constrained`, every request
// carries the simple schema (the random model stays inside the string most of the time).
// fixture = false: the fake model at the real V4.1 vocabulary (129,280 ids; the logits and
// the sampler dominate); true: the tiny V4 fixture model (1,280 ids, real forward on the CPU).
void BM_Decode(benchmark::State& state, bool fixture, bool constrained) {
  const int batch = static_cast<int>(state.range(0));
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<model::Model> model;
  std::shared_ptr<const TokenTable> table;
  int32_t eos = 1;
  if (fixture) {
    auto m = model::Model::load(std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/hf_v4_a", {1});
    if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
    model = std::move(m.value());
    runner = std::make_unique<V4ModelRunner>(*model);
    table = byte_vocab(runner->vocab_size());
  } else {
    const Setup* s = setup();
    if (s == nullptr) return state.SkipWithError("V4.1 tokenizer not built");
    FakeModelConfig mc;
    mc.vocab_size = static_cast<int32_t>(s->table->vocab_size());
    runner = std::make_unique<FakeModel>(mc);
    table = s->table;
    eos = s->eos;
  }
  auto grammar = CompiledGrammar::compile(build_grammar(spec(kSimpleSchema)).value(), table);
  if (!grammar.ok()) return state.SkipWithError(grammar.error().message.c_str());
  auto so = std::make_shared<StructuredOutput>();
  so->grammar = grammar.value();
  EngineConfig c;
  c.kv.block_size = 16;
  c.kv.num_blocks = 64 * 6 + 16;
  c.scheduler.max_num_seqs = 64;
  c.scheduler.max_num_batched_tokens = 1024;
  c.scheduler.max_model_len = 1024;
  c.scheduler.eos_token_ids = {eos};
  c.num_threads = 1;
  auto engine = Engine::create(c, *runner);
  if (!engine.ok()) return state.SkipWithError(engine.error().message.c_str());
  std::vector<EngineRequest> requests(static_cast<size_t>(batch));
  for (int i = 0; i < batch; ++i) {
    for (int k = 0; k < 8; ++k) requests[i].prompt.push_back(100 + 7 * i + k);
    requests[i].params.max_tokens = 64;
    requests[i].params.temperature = 1.0f;
    requests[i].params.seed = static_cast<uint64_t>(i);
    if (constrained) requests[i].params.structured = so;
  }
  int64_t tokens = 0;
  double seconds = 0, cpu_seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_s();
    auto out = generate_batch(*engine.value(), requests);
    cpu_seconds += process_cpu_s() - c0;
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const BatchResult& r : out) tokens += static_cast<int64_t>(r.ids.size());
  }
  state.counters["tok_per_s"] = static_cast<double>(tokens) / seconds;
  // Tokens per second of process CPU time (all engine threads): steadier on a shared machine.
  state.counters["tok_per_cpu_s"] = static_cast<double>(tokens) / cpu_seconds;
  state.counters["tokens_per_req"] =
      static_cast<double>(tokens) / static_cast<double>(state.iterations() * batch);
}

BENCHMARK_CAPTURE(BM_Decode, fake_129k_free, false, false)
    ->Arg(1)
    ->Arg(64)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Decode, fake_129k_schema, false, true)
    ->Arg(1)
    ->Arg(64)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Decode, v4_fixture_free, true, false)
    ->Arg(1)
    ->Arg(64)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Decode, v4_fixture_schema, true, true)
    ->Arg(1)
    ->Arg(64)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

BENCHMARK_CAPTURE(BM_Compile, simple, kSimpleSchema)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_Compile, complex, kComplexSchema)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_MaskPerToken, simple, kSimpleSchema, kSimpleDoc)
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(20);
BENCHMARK_CAPTURE(BM_MaskPerToken, complex, kComplexSchema, kComplexDoc)
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(10);
BENCHMARK_CAPTURE(BM_Compile, tool_calls, kToolSpec)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_MaskPerToken, tool_calls, kToolSpec, kToolDoc)
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(10);
BENCHMARK_CAPTURE(BM_SamplerPerToken, unmasked, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SamplerPerToken, masked, true)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace deepinfer::engine::structured

BENCHMARK_MAIN();
