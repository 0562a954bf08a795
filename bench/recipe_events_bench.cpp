// Cost of building one stream event (api spec §7–§9; target ≤ 1 µs per event): each API's
// generator is fed a long response — Start, 1000 reasoning deltas, 1000 text deltas, two tool
// calls of 50 argument deltas each, Finish — into a sink that only counts bytes. Also the same
// stream accumulated into the complete response (Boost.JSON per event; not the streaming path).
#include <benchmark/benchmark.h>

#include <optional>
#include <string>
#include <vector>

#include "recipe/complete_response.h"
#include "recipe/stream_events.h"

namespace deepinfer::recipe {
namespace {

struct CountingSink final : EventSink {
  size_t bytes = 0;
  size_t events = 0;
  void on_event(std::string_view name, std::string_view data) override {
    benchmark::DoNotOptimize(data.data());
    bytes += name.size() + data.size();
    ++events;
  }
};

struct Script {
  std::optional<std::string> fingerprint = std::string("fp-bench");
  std::vector<OutputChunk> chunks;
  Script() {
    auto add = [&](OutputChunk::Kind kind, std::string_view text) {
      OutputChunk c;
      c.kind = kind;
      c.text = text;
      chunks.push_back(c);
    };
    OutputChunk start;
    start.kind = OutputChunk::Kind::Start;
    start.system_fingerprint = &fingerprint;
    start.usage = {1200, 0, 800};
    chunks.push_back(start);
    static constexpr std::string_view kWords[] = {" the", " quick", " \"brown\"", " fox\n", " é"};
    for (int i = 0; i < 1000; ++i) add(OutputChunk::Kind::Reasoning, kWords[i % 5]);
    for (int i = 0; i < 1000; ++i) add(OutputChunk::Kind::Raw, kWords[(i + 2) % 5]);
    for (std::string_view name : {"get_weather", "files::read"}) {
      add(OutputChunk::Kind::ToolCallBegin, {});
      add(OutputChunk::Kind::ToolCall, name);
      add(OutputChunk::Kind::ToolArgumentsDelta, "{\"");
      for (int i = 0; i < 48; ++i) add(OutputChunk::Kind::ToolArgumentsDelta, "ab\"c");
      add(OutputChunk::Kind::ToolArgumentsDelta, "\"}");
    }
    OutputChunk finish;
    finish.kind = OutputChunk::Kind::Finish;
    finish.finish_reason = FinishReason::ToolCalls;
    finish.usage = {1200, 2110, 800};
    chunks.push_back(finish);
  }
};

EventOptions bench_options() {
  EventOptions o;
  o.id = "chatcmpl-0123456789abcdef01234567";
  o.model = "deepseek-v4-flash";
  o.created = 1700000000;
  o.completed_at = 1700000001;
  o.include_usage = true;
  return o;
}

void BM_Stream(benchmark::State& state, Protocol protocol) {
  const Script script;
  CountingSink sink;
  size_t events = 0;
  for (auto _ : state) {
    auto gen = make_event_generator(protocol, bench_options(), sink);
    const size_t before = sink.events;
    for (const auto& c : script.chunks) gen->on_output(c);
    events = sink.events - before;
  }
  state.counters["events"] = static_cast<double>(events);
  state.counters["time_per_event"] = benchmark::Counter(
      static_cast<double>(events),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(sink.bytes));
}

void BM_Complete(benchmark::State& state, Protocol protocol) {
  const Script script;
  for (auto _ : state) {
    const auto o = bench_options();
    auto acc = make_response_accumulator(protocol, o.id, o.model, o.created);
    auto gen = make_event_generator(protocol, o, *acc);
    for (const auto& c : script.chunks) gen->on_output(c);
    benchmark::DoNotOptimize(acc->response_text());
  }
}

BENCHMARK_CAPTURE(BM_Stream, chat, Protocol::ChatCompletions);
BENCHMARK_CAPTURE(BM_Stream, responses, Protocol::Responses);
BENCHMARK_CAPTURE(BM_Stream, messages, Protocol::Messages);
BENCHMARK_CAPTURE(BM_Complete, chat, Protocol::ChatCompletions);
BENCHMARK_CAPTURE(BM_Complete, responses, Protocol::Responses);
BENCHMARK_CAPTURE(BM_Complete, messages, Protocol::Messages);

}  // namespace
}  // namespace deepinfer::recipe

BENCHMARK_MAIN();
