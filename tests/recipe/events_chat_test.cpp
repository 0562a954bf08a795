// Chat Completions chunks and the accumulated chat.completion (api spec §6, §7, §10.1).
#include <gtest/gtest.h>

#include "events_test_util.h"
#include "recipe/complete_response.h"

namespace deepinfer::recipe {
namespace {

using testing::ChunkScript;
using testing::example_options;
using testing::RecordingSink;
using testing::worked_example;

const std::string kEnvelope =
    R"({"id":"resp-1","object":"chat.completion.chunk","created":1700000000,)"
    R"("model":"deepseek-flash","system_fingerprint":"fp-1","choices":[{"index":0,"delta":)";

std::string chunk(const std::string& delta) {
  return kEnvelope + delta + R"(,"logprobs":null,"finish_reason":null}],"usage":null})";
}

std::string args_chunk(int index, const std::string& escaped_args) {
  return chunk(R"({"tool_calls":[{"index":)" + std::to_string(index) +
               R"(,"function":{"arguments":")" + escaped_args + R"("}}]})");
}

TEST(EventsChat, WorkedExampleStream) {
  RecordingSink sink;
  auto options = example_options();
  options.include_usage = true;
  ChatEventGenerator gen(options, sink);
  worked_example().run(gen);

  std::vector<std::string> want = {
      chunk(R"({"role":"assistant","content":null,"reasoning_content":""})"),
      chunk(R"({"content":null,"reasoning_content":"Let me check both."})"),
      chunk(R"({"content":"I'll look them up.","reasoning_content":null})"),
      chunk(
          R"({"tool_calls":[{"index":0,"id":"call_resp-1_0","type":"function","function":{"name":"get_weather","arguments":""}}]})"),
  };
  for (const char* a : {"{\\\"", "city", "\\\": ", "\\\"", "Paris", "\\\"", "}"})
    want.push_back(args_chunk(0, a));
  want.push_back(chunk(
      R"({"tool_calls":[{"index":1,"id":"call_resp-1_1","type":"function","function":{"name":"get_time","arguments":""}}]})"));
  for (const char* a : {"{\\\"", "tz", "\\\": ", "\\\"", "CET", "\\\"", "}"})
    want.push_back(args_chunk(1, a));
  want.push_back(
      kEnvelope +
      R"({"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"tool_calls"}],)"
      R"("usage":{"prompt_tokens":100,"completion_tokens":40,"total_tokens":140,)"
      R"("prompt_tokens_details":{"cached_tokens":0},"prompt_cache_hit_tokens":0,)"
      R"("prompt_cache_miss_tokens":100}})");
  ASSERT_EQ(sink.events.size(), 20u);
  EXPECT_EQ(sink.data(), want);
  for (const auto& name : sink.names()) EXPECT_EQ(name, "");
}

TEST(EventsChat, WorkedExampleComplete) {
  auto options = example_options();
  options.include_usage = true;
  ChatResponseAccumulator acc(options.id, options.model, options.created);
  ChatEventGenerator gen(options, acc);
  worked_example().run(gen);
  EXPECT_EQ(
      acc.response_text(),
      R"({"id":"resp-1","object":"chat.completion","created":1700000000,"model":"deepseek-flash",)"
      R"("system_fingerprint":"fp-1","choices":[{"index":0,"message":{"role":"assistant",)"
      R"("content":"I'll look them up.","reasoning_content":"Let me check both.","tool_calls":[)"
      R"({"id":"call_resp-1_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},)"
      R"({"id":"call_resp-1_1","type":"function","function":{"name":"get_time","arguments":"{\"tz\": \"CET\"}"}}]},)"
      R"("logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":100,)"
      R"("completion_tokens":40,"total_tokens":140,"prompt_tokens_details":{"cached_tokens":0},)"
      R"("prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":100}})");
}

TEST(EventsChat, WithoutIncludeUsageTheFieldIsOmittedUntilTheFinalChunk) {
  RecordingSink sink;
  auto options = example_options();
  options.include_usage = false;
  ChatEventGenerator gen(options, sink);
  ChunkScript s;
  s.start(std::nullopt, 7, 3).reasoning("r").raw("x").finish(FinishReason::Stop, 7, 2, 3);
  s.run(gen);
  const std::string env =
      R"({"id":"resp-1","object":"chat.completion.chunk","created":1700000000,)"
      R"("model":"deepseek-flash","system_fingerprint":null,"choices":[{"index":0,"delta":)";
  std::vector<std::string> want = {
      env +
          R"({"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]})",
      env + R"({"content":null,"reasoning_content":"r"},"logprobs":null,"finish_reason":null}]})",
      env + R"({"content":"x","reasoning_content":null},"logprobs":null,"finish_reason":null}]})",
      env + R"({"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9,)"
            R"("prompt_tokens_details":{"cached_tokens":3},"prompt_cache_hit_tokens":3,)"
            R"("prompt_cache_miss_tokens":4}})",
  };
  EXPECT_EQ(sink.data(), want);
}

TEST(EventsChat, NonThinkingDeltas) {
  RecordingSink sink;
  auto options = example_options();
  options.thinking_mode = false;
  options.include_usage = true;
  ChatEventGenerator gen(options, sink);
  ChunkScript s;
  s.start("fp", 5, 0).raw("Hi \"there\"\n").finish(FinishReason::EndOfStream, 5, 1, 0);
  s.run(gen);
  ASSERT_EQ(sink.events.size(), 3u);
  const std::string env =
      R"({"id":"resp-1","object":"chat.completion.chunk","created":1700000000,)"
      R"("model":"deepseek-flash","system_fingerprint":"fp","choices":[{"index":0,"delta":)";
  EXPECT_EQ(
      sink.events[0].second,
      env +
          R"({"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null})");
  EXPECT_EQ(
      sink.events[1].second,
      env + R"({"content":"Hi \"there\"\n"},"logprobs":null,"finish_reason":null}],"usage":null})");
  EXPECT_EQ(
      sink.events[2].second.substr(0, env.size() + 60),
      (env + R"({"content":""},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens")")
          .substr(0, env.size() + 60));

  ChatResponseAccumulator acc(options.id, options.model, options.created);
  ChatEventGenerator gen2(options, acc);
  s.run(gen2);
  // Non-thinking: reasoning_content never set → omitted; no tool calls → omitted.
  EXPECT_EQ(acc.response().at("choices").at(0).at("message"),
            parse_json(R"({"role":"assistant","content":"Hi \"there\"\n"})").value());
}

TEST(EventsChat, FinishReasonMapping) {
  EXPECT_EQ(chat_finish_reason(FinishReason::Stop), "stop");
  EXPECT_EQ(chat_finish_reason(FinishReason::EndOfStream), "stop");
  EXPECT_EQ(chat_finish_reason(FinishReason::StopSequence), "stop");
  EXPECT_EQ(chat_finish_reason(FinishReason::ToolCalls), "tool_calls");
  EXPECT_EQ(chat_finish_reason(FinishReason::Length), "length");
  EXPECT_EQ(chat_finish_reason(FinishReason::ContentFilter), "content_filter");
}

TEST(EventsChat, LengthFinishAndOnlyStartMakeEmptyContent) {
  auto options = example_options();
  ChatResponseAccumulator acc(options.id, options.model, options.created);
  ChatEventGenerator gen(options, acc);
  ChunkScript s;
  s.start("fp-1", 3, 0).finish(FinishReason::Length, 3, 9, 0);
  s.run(gen);
  const Json r = acc.response();
  EXPECT_EQ(r.at("choices").at(0).at("finish_reason"), Json("length"));
  // Thinking mode: Start sets reasoning_content "", Finish sets content "".
  EXPECT_EQ(r.at("choices").at(0).at("message"),
            parse_json(R"({"role":"assistant","content":"","reasoning_content":""})").value());
}

TEST(EventsChat, NoChunksGivesNullContent) {
  ChatResponseAccumulator acc("x", "m", 1);
  EXPECT_EQ(acc.response_text(), R"({"id":"x","object":"chat.completion","created":1,"model":"m",)"
                                 R"("system_fingerprint":null,"choices":[]})");
}

}  // namespace
}  // namespace deepinfer::recipe
