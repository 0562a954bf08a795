// Responses events and the accumulated response object (api spec §6, §8, §10.2).
#include <gtest/gtest.h>

#include "events_test_util.h"
#include "recipe/complete_response.h"

namespace deepinfer::recipe {
namespace {

using testing::ChunkScript;
using testing::example_options;
using testing::RecordingSink;
using testing::worked_example;

std::string seq(int n) { return R"(,"sequence_number":)" + std::to_string(n) + "}"; }

const std::string kHead =
    R"({"id":"resp-1","object":"response","created_at":1700000000,"model":"deepseek-flash",)";
const std::string kInProgress =
    kHead + R"("status":"in_progress","completed_at":null,"error":null,"incomplete_details":null,)"
            R"("output":[],"usage":null})";

const std::string kReasoningDone =
    R"({"type":"reasoning","id":"rs_resp-1_0","status":"completed","content":[{"type":"reasoning_text","text":"Let me check both."}],"summary":[]})";
const std::string kMessageDone =
    R"({"type":"message","id":"msg_resp-1_1","status":"completed","role":"assistant","phase":"commentary","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"I'll look them up."}]})";
const std::string kWeatherDone =
    R"({"type":"function_call","id":"fc_resp-1_2","status":"completed","call_id":"call_resp-1_0","name":"get_weather","arguments":"{\"city\": \"Paris\"}"})";
const std::string kTimeDone =
    R"({"type":"function_call","id":"fc_resp-1_3","status":"completed","call_id":"call_resp-1_1","name":"get_time","arguments":"{\"tz\": \"CET\"}"})";
const std::string kUsage =
    R"({"input_tokens":100,"input_tokens_details":{"cached_tokens":0},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":140})";
const std::string kCompleted = kHead +
                               R"("status":"completed","completed_at":1700000005,"error":null,)"
                               R"("incomplete_details":null,"output":[)" +
                               kReasoningDone + "," + kMessageDone + "," + kWeatherDone + "," +
                               kTimeDone + R"(],"usage":)" + kUsage + "}";

void add_call(std::vector<std::string>& want, int& n, const std::string& fc, int index,
              const std::string& added, std::initializer_list<const char*> deltas,
              const std::string& arguments, const std::string& done_item) {
  const std::string at = R"("item_id":")" + fc + R"(","output_index":)" + std::to_string(index);
  want.push_back(R"({"type":"response.output_item.added","item":)" + added + R"(,"output_index":)" +
                 std::to_string(index) + seq(n++));
  for (const char* d : deltas) {
    want.push_back(R"({"type":"response.function_call_arguments.delta","delta":")" +
                   std::string(d) + "\"," + at + seq(n++));
  }
  want.push_back(R"({"type":"response.function_call_arguments.done","arguments":")" + arguments +
                 "\"," + at + seq(n++));
  want.push_back(R"({"type":"response.output_item.done","item":)" + done_item +
                 R"(,"output_index":)" + std::to_string(index) + seq(n++));
}

TEST(EventsResponses, WorkedExampleStream) {
  RecordingSink sink;
  ResponsesEventGenerator gen(example_options(), sink);
  worked_example().run(gen);

  int n = 0;
  std::vector<std::string> want;
  want.push_back(R"({"type":"response.created","response":)" + kInProgress + seq(n++));
  want.push_back(R"({"type":"response.in_progress","response":)" + kInProgress + seq(n++));
  const std::string rs = R"("item_id":"rs_resp-1_0","output_index":0)";
  want.push_back(
      R"({"type":"response.output_item.added","item":{"type":"reasoning","id":"rs_resp-1_0","status":"in_progress","content":[],"summary":[]},"output_index":0)" +
      seq(n++));
  want.push_back(R"({"type":"response.content_part.added","content_index":0,)" + rs +
                 R"(,"part":{"type":"reasoning_text","text":""})" + seq(n++));
  want.push_back(
      R"({"type":"response.reasoning_text.delta","content_index":0,"delta":"Let me check both.",)" +
      rs + seq(n++));
  want.push_back(R"({"type":"response.reasoning_text.done","content_index":0,)" + rs +
                 R"(,"sequence_number":)" + std::to_string(n++) +
                 R"(,"text":"Let me check both."})");
  want.push_back(R"({"type":"response.content_part.done","content_index":0,)" + rs +
                 R"(,"part":{"type":"reasoning_text","text":"Let me check both."})" + seq(n++));
  want.push_back(R"({"type":"response.output_item.done","item":)" + kReasoningDone +
                 R"(,"output_index":0)" + seq(n++));
  want.push_back(
      R"({"type":"response.output_item.added","item":{"type":"message","id":"msg_resp-1_1","status":"in_progress","role":"assistant","phase":"final_answer","content":[]},"output_index":1)" +
      seq(n++));
  want.push_back(
      R"({"type":"response.content_part.added","content_index":0,"item_id":"msg_resp-1_1","output_index":1,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""})" +
      seq(n++));
  want.push_back(
      R"({"type":"response.output_text.delta","content_index":0,"delta":"I'll look them up.","item_id":"msg_resp-1_1","logprobs":[],"output_index":1)" +
      seq(n++));
  want.push_back(
      R"({"type":"response.output_text.done","content_index":0,"item_id":"msg_resp-1_1","logprobs":[],"output_index":1,"sequence_number":)" +
      std::to_string(n++) + R"(,"text":"I'll look them up."})");
  want.push_back(
      R"({"type":"response.content_part.done","content_index":0,"item_id":"msg_resp-1_1","output_index":1,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"I'll look them up."})" +
      seq(n++));
  want.push_back(R"({"type":"response.output_item.done","item":)" + kMessageDone +
                 R"(,"output_index":1)" + seq(n++));
  add_call(
      want, n, "fc_resp-1_2", 2,
      R"({"type":"function_call","id":"fc_resp-1_2","status":"in_progress","call_id":"call_resp-1_0","name":"get_weather","arguments":""})",
      {"{\\\"", "city", "\\\": ", "\\\"", "Paris", "\\\"", "}"}, R"({\"city\": \"Paris\"})",
      kWeatherDone);
  add_call(
      want, n, "fc_resp-1_3", 3,
      R"({"type":"function_call","id":"fc_resp-1_3","status":"in_progress","call_id":"call_resp-1_1","name":"get_time","arguments":""})",
      {"{\\\"", "tz", "\\\": ", "\\\"", "CET", "\\\"", "}"}, R"({\"tz\": \"CET\"})", kTimeDone);
  want.push_back(R"({"type":"response.completed","response":)" + kCompleted + seq(n++));

  ASSERT_EQ(sink.events.size(), 35u);
  EXPECT_EQ(sink.data(), want);
  for (const auto& [name, data] : sink.events) {
    EXPECT_EQ(data.substr(0, 10 + name.size()), "{\"type\":\"" + name + "\"");
  }
}

TEST(EventsResponses, WorkedExampleComplete) {
  const auto options = example_options();
  ResponsesResponseAccumulator acc(options.id, options.model, options.created);
  ResponsesEventGenerator gen(options, acc);
  worked_example().run(gen);
  EXPECT_EQ(acc.response_text(), kCompleted);
}

TEST(EventsResponses, LengthMakesTheResponseIncomplete) {
  RecordingSink sink;
  const auto options = example_options();
  ResponsesEventGenerator gen(options, sink);
  ResponsesResponseAccumulator acc(options.id, options.model, options.created);
  ResponsesEventGenerator gen2(options, acc);
  ChunkScript s;
  s.start(std::nullopt, 10, 4).raw("Hel").raw("lo").finish(FinishReason::Length, 10, 2, 4);
  s.run(gen);
  s.run(gen2);
  const std::string message =
      R"({"type":"message","id":"msg_resp-1_0","status":"incomplete","role":"assistant","phase":"final_answer","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello"}]})";
  const std::string response =
      kHead +
      R"("status":"incomplete","completed_at":1700000005,"error":null,)"
      R"("incomplete_details":{"reason":"max_output_tokens"},"output":[)" +
      message +
      R"(],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12}})";
  ASSERT_FALSE(sink.events.empty());
  EXPECT_EQ(sink.events.back().first, "response.incomplete");
  EXPECT_EQ(sink.events.back().second,
            R"({"type":"response.incomplete","response":)" + response + seq(9));
  EXPECT_EQ(
      sink.events[sink.events.size() - 2].second,
      R"({"type":"response.output_item.done","item":)" + message + R"(,"output_index":0)" + seq(8));
  EXPECT_EQ(acc.response_text(), response);
}

TEST(EventsResponses, StatusMapping) {
  for (auto [reason, status, detail] :
       std::vector<std::tuple<FinishReason, std::string, std::string>>{
           {FinishReason::Stop, "completed", "null"},
           {FinishReason::EndOfStream, "completed", "null"},
           {FinishReason::StopSequence, "completed", "null"},
           {FinishReason::ToolCalls, "completed", "null"},
           {FinishReason::Length, "incomplete", R"({"reason":"max_output_tokens"})"},
           {FinishReason::ContentFilter, "incomplete", R"({"reason":"content_filter"})"}}) {
    RecordingSink sink;
    ResponsesEventGenerator gen(example_options(), sink);
    ChunkScript s;
    s.start(std::nullopt, 1, 0).finish(reason, 1, 0, 0);
    s.run(gen);
    ASSERT_EQ(sink.events.size(), 3u);
    EXPECT_EQ(sink.events[2].first,
              status == "completed" ? "response.completed" : "response.incomplete");
    EXPECT_NE(sink.events[2].second.find(
                  R"("status":")" + status +
                  R"(","completed_at":1700000005,"error":null,"incomplete_details":)" + detail +
                  R"(,"output":[],)"),
              std::string::npos)
        << sink.events[2].second;
  }
}

TEST(EventsResponses, NamespaceSplitAndCustomToolCall) {
  auto options = example_options();
  options.custom_tool_names = {"apply_patch"};
  RecordingSink sink;
  ResponsesEventGenerator gen(options, sink);
  ChunkScript s;
  s.start(std::nullopt, 1, 0)
      .tool("files::read")
      .args({R"({"path": "a"})"})
      .tool("apply_patch")
      .args({"{\"in", "put\": \"*** Begin", " Patch\\", "n\\u00e", "9\\ud83d", "\\ude00\"}"})
      .finish(FinishReason::ToolCalls, 1, 5, 0);
  s.run(gen);
  std::vector<std::string> got = sink.data();
  ASSERT_GE(got.size(), 2u);
  EXPECT_EQ(
      got[2],
      R"({"type":"response.output_item.added","item":{"type":"function_call","id":"fc_resp-1_0","status":"in_progress","call_id":"call_resp-1_0","name":"read","namespace":"files","arguments":""},"output_index":0,"sequence_number":2})");
  std::vector<std::string> custom;
  for (const auto& [name, data] : sink.events)
    if (name.starts_with("response.custom_tool_call_input")) custom.push_back(data);
  EXPECT_EQ(
      custom,
      (std::vector<std::string>{
          R"({"type":"response.custom_tool_call_input.delta","delta":"*** Begin","item_id":"ctc_resp-1_1","output_index":1,"sequence_number":7})",
          R"({"type":"response.custom_tool_call_input.delta","delta":" Patch","item_id":"ctc_resp-1_1","output_index":1,"sequence_number":8})",
          R"({"type":"response.custom_tool_call_input.delta","delta":"\n","item_id":"ctc_resp-1_1","output_index":1,"sequence_number":9})",
          R"({"type":"response.custom_tool_call_input.delta","delta":"é","item_id":"ctc_resp-1_1","output_index":1,"sequence_number":10})",
          R"({"type":"response.custom_tool_call_input.delta","delta":"😀","item_id":"ctc_resp-1_1","output_index":1,"sequence_number":11})",
          R"({"type":"response.custom_tool_call_input.done","input":"*** Begin Patch\né😀","item_id":"ctc_resp-1_1","output_index":1,"sequence_number":12})",
      }));
  EXPECT_EQ(
      got[6],
      R"({"type":"response.output_item.added","item":{"type":"custom_tool_call","id":"ctc_resp-1_1","status":"in_progress","call_id":"call_resp-1_1","name":"apply_patch","input":""},"output_index":1,"sequence_number":6})");
  EXPECT_EQ(
      got[13],
      R"({"type":"response.output_item.done","item":{"type":"custom_tool_call","id":"ctc_resp-1_1","status":"completed","call_id":"call_resp-1_1","name":"apply_patch","input":"*** Begin Patch\né😀"},"output_index":1,"sequence_number":13})");

  ResponsesResponseAccumulator acc(options.id, options.model, options.created);
  ResponsesEventGenerator gen2(options, acc);
  s.run(gen2);
  const Json r = acc.response();
  EXPECT_EQ(r.at("output").at(0).at("namespace"), Json("files"));
  EXPECT_EQ(r.at("output").at(0).at("arguments"), Json(R"({"path": "a"})"));
  EXPECT_EQ(r.at("output").at(1).at("input"), Json("*** Begin Patch\né😀"));
}

TEST(EventsResponses, UnfinishedCustomInputIsFlushedAtClose) {
  auto options = example_options();
  options.custom_tool_names = {"apply_patch"};
  RecordingSink sink;
  ResponsesEventGenerator gen(options, sink);
  ChunkScript s;
  s.start(std::nullopt, 1, 0)
      .tool("apply_patch")
      .args({"{\"input\": \"ab\\u00"})
      .finish(FinishReason::Length, 1, 5, 0);
  s.run(gen);
  std::vector<std::string> custom;
  for (const auto& [name, data] : sink.events)
    if (name.starts_with("response.custom_tool_call_input")) custom.push_back(data);
  ASSERT_EQ(custom.size(), 3u);
  EXPECT_NE(custom[0].find(R"("delta":"ab")"), std::string::npos);
  EXPECT_NE(custom[1].find(R"("delta":"\\u00")"), std::string::npos);
  EXPECT_NE(custom[2].find(R"("input":"ab\\u00")"), std::string::npos);
  EXPECT_NE(sink.events.back().second.find(R"("status":"incomplete","call_id")"),
            std::string::npos);
}

TEST(EventsResponses, ChunksBeforeStartAndAfterFinishAreIgnored) {
  RecordingSink sink;
  ResponsesEventGenerator gen(example_options(), sink);
  ChunkScript s;
  s.raw("early").start(std::nullopt, 1, 0).finish(FinishReason::Stop, 1, 0, 0).raw("late");
  s.run(gen);
  EXPECT_EQ(sink.names(), (std::vector<std::string>{"response.created", "response.in_progress",
                                                    "response.completed"}));
}

}  // namespace
}  // namespace deepinfer::recipe
