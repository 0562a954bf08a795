// Prompt rendering throughput (encoding spec §3): a 40-message agent conversation with four tools,
// reasoning, historical tool calls and tool results, rendered for V4.1 and V4. Reports bytes/s of
// prompt text; the target is ≥ 50 MB/s on one core.
#include <benchmark/benchmark.h>

#include <string>

#include "recipe/render.h"

namespace deepinfer::recipe {
namespace {

std::string sentence(int i, size_t length) {
  std::string s;
  s.reserve(length + 64);
  while (s.size() < length) {
    s += "Step " + std::to_string(i) + ": the quick brown fox checks the weather in Paris, 日本. ";
  }
  return s;
}

ToolDefinition tool(const std::string& name, const std::string& schema) {
  ToolDefinition t;
  t.name = name;
  t.description = "Tool " + name + " used by the agent benchmark.";
  t.parameters = parse_json(schema).value();
  return t;
}

Conversation agent_conversation() {
  Conversation c;
  c.tools = {
      tool("get_weather",
           R"({"type":"object","properties":{"location":{"type":"string","description":"City"},)"
           R"("days":{"type":"integer","minimum":1,"maximum":14}},"required":["location"]})"),
      tool("search", R"({"type":"object","properties":{"query":{"type":"string"},)"
                     R"("top_k":{"type":"integer"},"filters":{"type":"array","items":)"
                     R"({"type":"string"}}},"required":["query"]})"),
      tool("read_file", R"({"type":"object","properties":{"path":{"type":"string"},)"
                        R"("offset":{"type":"number"}},"required":["path"]})"),
      tool("run", R"({"type":"object","properties":{"cmd":{"type":"string"},)"
                  R"("timeout_s":{"type":"number","default":2.5}}})")};
  Message system;
  system.role = Role::System;
  system.content = sentence(0, 600);
  c.messages.push_back(system);
  for (int turn = 0; c.messages.size() < 40; ++turn) {
    Message user;
    user.role = Role::User;
    user.content = sentence(turn, 300);
    c.messages.push_back(user);
    Message assistant;
    assistant.role = Role::Assistant;
    assistant.reasoning_content = sentence(turn, 500);
    assistant.content = sentence(turn, 200);
    assistant.tool_calls = {
        {"call_a" + std::to_string(turn), "get_weather", R"({"location":"Paris","days":3})"},
        {"call_b" + std::to_string(turn), "search",
         R"({"query":"weather \"Paris\"\nforecast","top_k":5,"filters":["news","blogs"]})"}};
    c.messages.push_back(assistant);
    for (const ToolCall& call : assistant.tool_calls) {
      Message result;
      result.role = Role::Tool;
      result.tool_call_id = call.id;
      result.content = sentence(turn, 400);
      c.messages.push_back(result);
    }
  }
  c.messages.resize(40);
  return c;
}

void BM_RenderAgentConversation(benchmark::State& state, EncodingVersion version) {
  const Conversation c = agent_conversation();
  size_t bytes = 0;
  for (auto _ : state) {
    RenderedPrompt r = render_prompt(c, version);
    bytes += r.prompt.size();
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["prompt_bytes"] = static_cast<double>(render_prompt(c, version).prompt.size());
}

BENCHMARK_CAPTURE(BM_RenderAgentConversation, v41, EncodingVersion::V41);
BENCHMARK_CAPTURE(BM_RenderAgentConversation, v4, EncodingVersion::V4);

}  // namespace
}  // namespace deepinfer::recipe

BENCHMARK_MAIN();
