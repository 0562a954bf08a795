// Output parser throughput (encoding spec §4, api spec §6): 1 MB of realistic model output
// (reasoning, answer text with markup-like bytes, a DSML block of tool calls) fed through a
// StreamProcessor in token-sized, 16-byte, 64-byte and whole chunks. Reports bytes/s and the heap
// allocations per parsed response, counted by replacing the global operator new.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/output_parser.h"

namespace {

uint64_t g_allocations = 0;

}  // namespace

void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// GCC cannot see that operator new above is malloc-based.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

using deepinfer::recipe::InferenceChunk;
using deepinfer::recipe::OutputChunk;
using deepinfer::recipe::OutputSink;
using deepinfer::recipe::ParsingOptions;
using deepinfer::recipe::ReasoningInitialStage;
using deepinfer::recipe::StreamProcessor;

constexpr size_t kTarget = 1 << 20;

const char* const kWords[] = {
    "the",   "weather", "in",     "Paris", "is",     "likely", "to",   "be",     "mild,",
    "so",    "I",       "should", "check", "both",   "cities", "東京", "日本語", "quickly.",
    "a",     "<b>",     "x < y",  "{key}", "[1, 2]", "`code`", "—",    "naïve",  "résumé",
    "first", "then",    "call",   "tools", "with",   "care;",  "\n",   "\n\n",   "done."};

void append_words(std::string& out, size_t bytes, std::mt19937& rng) {
  const size_t end = out.size() + bytes;
  while (out.size() < end) {
    out += kWords[rng() % (sizeof kWords / sizeof kWords[0])];
    out += ' ';
  }
}

// Reasoning (55%), </think>, answer text (30%), then one DSML block of many invokes (15%).
std::string realistic_output() {
  std::mt19937 rng(2026);
  std::string out;
  out.reserve(kTarget + 4096);
  out += "\n";
  append_words(out, kTarget * 55 / 100, rng);
  out += "\n\n</think>\n\n";
  append_words(out, kTarget * 30 / 100, rng);
  out += "\n\n<｜DSML｜ calls>\n";
  for (int i = 0; out.size() < kTarget - 64; ++i) {
    out += "<｜DSML｜ invoke name=\"get_weather_" + std::to_string(i) + "\">\n";
    out += "<｜DSML｜ parameter name=\"city\" string=\"true\">";
    append_words(out, 200, rng);
    out += "</｜DSML｜ parameter>\n";
    out +=
        "<｜DSML｜ parameter name=\"options\" string=\"false\">{\"days\": 3, \"units\": "
        "[\"metric\", \"imperial\"]}</｜DSML｜ parameter>\n";
    out += "</｜DSML｜ invoke>\n";
  }
  out += "</｜DSML｜ calls>";
  return out;
}

// Cuts on UTF-8 character boundaries (as a detokenizer delivers text).
std::vector<std::string_view> chunks_of(std::string_view text, size_t min_len, size_t max_len) {
  std::mt19937 rng(7);
  std::vector<std::string_view> chunks;
  size_t at = 0;
  while (at < text.size()) {
    size_t len = min_len + (max_len > min_len ? rng() % (max_len - min_len + 1) : 0);
    len = std::min(len, text.size() - at);
    while (at + len < text.size() && (static_cast<unsigned char>(text[at + len]) & 0xC0) == 0x80) {
      ++len;
    }
    chunks.push_back(text.substr(at, len));
    at += len;
  }
  return chunks;
}

class CountingSink : public OutputSink {
 public:
  void on_output(const OutputChunk& chunk) override {
    bytes += chunk.text.size();
    ++count;
  }
  uint64_t bytes = 0;
  uint64_t count = 0;
};

void BM_ParseOutput(benchmark::State& state) {
  static const std::string output = realistic_output();
  const auto chunks =
      chunks_of(output, static_cast<size_t>(state.range(0)), static_cast<size_t>(state.range(1)));
  ParsingOptions options;
  options.parse_tool_calls = true;
  options.reasoning_initial_stage = ReasoningInitialStage::Start;
  options.stop_sequences = {"\n\nUser:"};
  CountingSink sink;
  uint64_t allocations = 0;
  for (auto _ : state) {
    const uint64_t before = g_allocations;
    StreamProcessor processor(options);
    InferenceChunk chunk;
    chunk.kind = InferenceChunk::Kind::Text;
    chunk.content_tokens = 1;
    for (std::string_view c : chunks) {
      chunk.content = c;
      processor.process(chunk, sink);
    }
    processor.end_of_stream(sink);
    allocations += g_allocations - before;
  }
  benchmark::DoNotOptimize(sink.bytes);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * output.size()));
  state.counters["chunks"] = static_cast<double>(chunks.size());
  state.counters["allocs_per_response"] =
      static_cast<double>(allocations) / static_cast<double>(state.iterations());
  state.counters["outputs_per_response"] =
      static_cast<double>(sink.count) / static_cast<double>(state.iterations());
}

BENCHMARK(BM_ParseOutput)
    ->ArgNames({"min", "max"})
    ->Args({1, 7})                      // token-sized (≈4 bytes)
    ->Args({16, 16})                    // 16-byte chunks
    ->Args({64, 64})                    // 64-byte chunks
    ->Args({kTarget * 2, kTarget * 2})  // the whole output at once
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
