// Messages events and the accumulated message object (api spec §6, §9, §10.3).
#include <gtest/gtest.h>

#include "events_test_util.h"
#include "recipe/complete_response.h"

namespace deepinfer::recipe {
namespace {

using testing::ChunkScript;
using testing::example_options;
using testing::RecordingSink;
using testing::worked_example;

std::string block_delta(int index, const std::string& delta) {
  return R"({"type":"content_block_delta","index":)" + std::to_string(index) + R"(,"delta":)" +
         delta + "}";
}
std::string block_stop(int index) {
  return R"({"type":"content_block_stop","index":)" + std::to_string(index) + "}";
}

TEST(EventsMessages, WorkedExampleStream) {
  RecordingSink sink;
  MessagesEventGenerator gen(example_options(), sink);
  worked_example().run(gen);

  std::vector<std::pair<std::string, std::string>> want = {
      {"message_start",
       R"({"type":"message_start","message":{"id":"resp-1","type":"message","role":"assistant","model":"deepseek-flash","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0,"service_tier":"standard"}}})"},
      {"content_block_start",
       R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}})"},
      {"ping", R"({"type":"ping"})"},
      {"content_block_delta",
       block_delta(0, R"({"type":"thinking_delta","thinking":"Let me check both."})")},
      {"content_block_delta", block_delta(0, R"({"type":"signature_delta","signature":"resp-1"})")},
      {"content_block_stop", block_stop(0)},
      {"content_block_start",
       R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})"},
      {"content_block_delta",
       block_delta(1, R"({"type":"text_delta","text":"I'll look them up."})")},
      {"content_block_stop", block_stop(1)},
      {"content_block_start",
       R"({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_resp-1_0","name":"get_weather","input":{}}})"},
  };
  for (const char* x : {"{\\\"", "city", "\\\": ", "\\\"", "Paris", "\\\"", "}"}) {
    want.push_back(
        {"content_block_delta", block_delta(2, R"({"type":"input_json_delta","partial_json":")" +
                                                   std::string(x) + "\"}")});
  }
  want.push_back({"content_block_stop", block_stop(2)});
  want.push_back(
      {"content_block_start",
       R"({"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_resp-1_1","name":"get_time","input":{}}})"});
  for (const char* x : {"{\\\"", "tz", "\\\": ", "\\\"", "CET", "\\\"", "}"}) {
    want.push_back(
        {"content_block_delta", block_delta(3, R"({"type":"input_json_delta","partial_json":")" +
                                                   std::string(x) + "\"}")});
  }
  want.push_back({"content_block_stop", block_stop(3)});
  want.push_back(
      {"message_delta",
       R"({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40,"service_tier":"standard"}})"});
  want.push_back({"message_stop", R"({"type":"message_stop"})"});
  ASSERT_EQ(sink.events.size(), 29u);
  EXPECT_EQ(sink.events, want);
}

TEST(EventsMessages, WorkedExampleComplete) {
  const auto options = example_options();
  MessagesResponseAccumulator acc(options.id, options.model);
  MessagesEventGenerator gen(options, acc);
  worked_example().run(gen);
  EXPECT_EQ(
      acc.response_text(),
      R"({"id":"resp-1","type":"message","role":"assistant","model":"deepseek-flash","content":[)"
      R"({"type":"thinking","thinking":"Let me check both.","signature":"resp-1"},)"
      R"({"type":"text","text":"I'll look them up."},)"
      R"({"type":"tool_use","id":"toolu_resp-1_0","name":"get_weather","input":{"city":"Paris"}},)"
      R"({"type":"tool_use","id":"toolu_resp-1_1","name":"get_time","input":{"tz":"CET"}}],)"
      R"("stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":100,)"
      R"("cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40,)"
      R"("service_tier":"standard"}})");
}

TEST(EventsMessages, StopReasonMapping) {
  EXPECT_EQ(messages_stop_reason(FinishReason::Stop), "end_turn");
  EXPECT_EQ(messages_stop_reason(FinishReason::EndOfStream), "end_turn");
  EXPECT_EQ(messages_stop_reason(FinishReason::StopSequence), "stop_sequence");
  EXPECT_EQ(messages_stop_reason(FinishReason::ToolCalls), "tool_use");
  EXPECT_EQ(messages_stop_reason(FinishReason::Length), "max_tokens");
  EXPECT_EQ(messages_stop_reason(FinishReason::ContentFilter), "refusal");
}

TEST(EventsMessages, StopSequenceAndCachedUsage) {
  auto options = example_options();
  options.thinking_mode = false;
  RecordingSink sink;
  MessagesEventGenerator gen(options, sink);
  MessagesResponseAccumulator acc(options.id, options.model);
  MessagesEventGenerator gen2(options, acc);
  ChunkScript s;
  s.start(std::nullopt, 30, 50).raw("one").finish(FinishReason::StopSequence, 30, 4, 50, "END");
  s.run(gen);
  s.run(gen2);
  // Non-thinking: no initial thinking block; the text block is the first and gets the ping.
  EXPECT_EQ(sink.names(), (std::vector<std::string>{"message_start", "content_block_start", "ping",
                                                    "content_block_delta", "content_block_stop",
                                                    "message_delta", "message_stop"}));
  EXPECT_EQ(
      sink.events[5].second,
      R"({"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":50,"output_tokens":4,"service_tier":"standard"}})");
  EXPECT_EQ(
      acc.response_text(),
      R"({"id":"resp-1","type":"message","role":"assistant","model":"deepseek-flash","content":[{"type":"text","text":"one"}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":50,"output_tokens":4,"service_tier":"standard"}})");
}

TEST(EventsMessages, InvalidOrTruncatedToolInputBecomesEmptyObject) {
  auto options = example_options();
  options.thinking_mode = false;
  MessagesResponseAccumulator acc(options.id, options.model);
  MessagesEventGenerator gen(options, acc);
  ChunkScript s;
  s.start(std::nullopt, 1, 0)
      .tool("a")
      .args({"{\"x\": ", "1"})
      .tool("b")
      .tool("c")
      .args({"{\"n\": 1.0, \"e\": 1e16, \"s\": 1.5e-7, \"k\": [true, null]}"})
      .finish(FinishReason::Length, 1, 3, 0);
  s.run(gen);
  const std::string text = acc.response_text();
  EXPECT_NE(text.find(R"({"type":"tool_use","id":"toolu_resp-1_0","name":"a","input":{}})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"({"type":"tool_use","id":"toolu_resp-1_1","name":"b","input":{}})"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"({"type":"tool_use","id":"toolu_resp-1_2","name":"c","input":{"n":1.0,"e":1e16,"s":1.5e-7,"k":[true,null]}})"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("stop_reason":"max_tokens","stop_sequence":null)"), std::string::npos);
}

TEST(EventsMessages, ThinkingSignatureIsConfigurableAndArgumentsNeedAToolBlock) {
  auto options = example_options();
  options.signature = "sig";
  RecordingSink sink;
  MessagesEventGenerator gen(options, sink);
  ChunkScript s;
  s.start(std::nullopt, 1, 0).args({"stray"}).raw("t").finish(FinishReason::ContentFilter, 1, 1, 0);
  s.run(gen);
  EXPECT_EQ(sink.events[3].second,
            block_delta(0, R"({"type":"signature_delta","signature":"sig"})"));
  for (const auto& [name, data] : sink.events)
    EXPECT_EQ(data.find("stray"), std::string::npos) << data;
  EXPECT_NE(sink.events[sink.events.size() - 2].second.find(R"("stop_reason":"refusal")"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::recipe
