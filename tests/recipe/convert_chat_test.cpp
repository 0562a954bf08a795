// Chat Completions request conversion (api spec §2, §3, §3.1; encoding spec §3.9, §3.10, §5.5).
#include <gtest/gtest.h>

#include "recipe/convert.h"

namespace deepinfer::recipe {
namespace {

Result<ConversationRequest, ConversionError> chat(std::string_view body,
                                                  const ConversionOptions& options = {}) {
  auto json = parse_json(body);
  EXPECT_TRUE(json.ok()) << body;
  if (!json.ok()) return ConversionError{ConversionError::Kind::Internal, "bad test JSON"};
  return convert_request(Protocol::ChatCompletions, json.value(), options);
}

ConversationRequest chat_ok(std::string_view body, const ConversionOptions& options = {}) {
  auto result = chat(body, options);
  EXPECT_TRUE(result.ok()) << body << "\n→ " << (result.ok() ? "" : result.error().detail);
  if (!result.ok()) return {};
  return std::move(result.value());
}

constexpr const char* kImageDetail =
    "The sub-string \"<｜image｜>\" in your input is not allowed for this API. Please remove "
    "\"<｜image｜>\" from your input and try again.";
constexpr const char* kToolsTail =
    R"(,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"get_time"}}])";

struct ErrorCase {
  const char* name;
  std::string body;
  std::string detail;
};

std::string with_user(std::string_view extra) {
  return std::string(R"({"model":"m","messages":[{"role":"user","content":"Hello json"}])") +
         std::string(extra) + "}";
}

class ChatErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ChatErrors, DetailIsExact) {
  const ErrorCase& c = GetParam();
  auto result = chat(c.body);
  ASSERT_FALSE(result.ok()) << c.body;
  EXPECT_EQ(result.error().kind, ConversionError::Kind::BadRequest);
  EXPECT_EQ(result.error().detail, c.detail);
}

const std::string kAssistantCalls =
    R"({"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]})";

INSTANTIATE_TEST_SUITE_P(
    Spec, ChatErrors,
    ::testing::Values(
        ErrorCase{"EmptyMessages", R"({"model":"m","messages":[]})", "Empty input messages"},
        ErrorCase{"MissingMessages", R"({"model":"m"})", "missing field `messages`"},
        ErrorCase{"MissingModel", R"({"messages":[{"role":"user","content":"x"}]})",
                  "missing field `model`"},
        ErrorCase{"MessagesNotArray", R"({"model":"m","messages":{}})",
                  "messages: expected an array"},
        ErrorCase{"ContentNumber", R"({"model":"m","messages":[{"role":"user","content":3}]})",
                  "messages[0].content: expected a string or an array of content blocks"},
        ErrorCase{"UnknownRole", R"({"model":"m","messages":[{"role":"robot","content":"x"}]})",
                  "messages[0]: unknown variant `robot`, expected one of `system`, `user`, "
                  "`assistant`, `tool`, `latest_reminder`"},
        ErrorCase{"TemperatureHigh", with_user(R"(,"temperature":2.5)"),
                  "temperature must be in [0, 2]"},
        ErrorCase{"TemperatureNegative", with_user(R"(,"temperature":-0.1)"),
                  "temperature must be in [0, 2]"},
        ErrorCase{"TopPZero", with_user(R"(,"top_p":0)"), "top_p must be in (0, 1]"},
        ErrorCase{"TopPAboveOne", with_user(R"(,"top_p":1.5)"), "top_p must be in (0, 1]"},
        ErrorCase{"MaxTokensZero", with_user(R"(,"max_tokens":0)"),
                  "max_tokens must be greater than zero"},
        ErrorCase{"FrequencyPenalty", with_user(R"(,"frequency_penalty":2.5)"),
                  "frequency_penalty must be in [-2, 2]"},
        ErrorCase{"PresencePenalty", with_user(R"(,"presence_penalty":-3)"),
                  "presence_penalty must be in [-2, 2]"},
        ErrorCase{"NNotOne", with_user(R"(,"n":2)"),
                  "Invalid n value (currently only n = 1 is supported)"},
        ErrorCase{"SeedTooLarge", with_user(R"(,"seed":9223372036854775808)"),
                  "seed must be in [0, 2^63)"},
        ErrorCase{
            "TooManyStops",
            with_user(
                R"(,"stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"])"),
            "ChatCompletionStopSequences string array too long: 17"},
        ErrorCase{"StreamOptionsWithoutStream",
                  with_user(R"(,"stream_options":{"include_usage":true})"),
                  "stream_options should be set along with stream = true"},
        ErrorCase{"BadToolName",
                  with_user(R"(,"tools":[{"type":"function","function":{"name":"get weather"}}])"),
                  "tools.0.function.name: expected 1-128 ASCII letters, digits, underscores or "
                  "hyphens"},
        ErrorCase{"ToolNameTooLong",
                  with_user(R"(,"tools":[{"type":"function","function":{"name":")" +
                            std::string(129, 'a') + R"("}}])"),
                  "tools.0.function.name: expected 1-128 ASCII letters, digits, underscores or "
                  "hyphens"},
        ErrorCase{
            "DuplicateTools",
            with_user(
                R"(,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])"),
            "Tool names must be unique"},
        ErrorCase{
            "SchemaNotObjectType",
            with_user(
                R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}])"),
            "tools.0.function.parameters must be a JSON Schema of type object"},
        ErrorCase{
            "SchemaArray",
            with_user(R"(,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}])"),
            "tools.0.function.parameters must be a JSON Schema of type object"},
        ErrorCase{"RequiredWithThinking",
                  with_user(std::string(kToolsTail) + R"(,"tool_choice":"required")"),
                  "Thinking mode does not support this tool_choice"},
        ErrorCase{"NamedWithThinking",
                  with_user(std::string(kToolsTail) +
                            R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}})"),
                  "Thinking mode does not support this tool_choice"},
        ErrorCase{
            "NamedUnknown",
            with_user(
                std::string(kToolsTail) +
                R"(,"thinking":{"type":"disabled"},"tool_choice":{"type":"function","function":{"name":"nope"}})"),
            "tool_choice: no tool named 'nope' was specified"},
        ErrorCase{"PlaceholderInUser",
                  R"({"model":"m","messages":[{"role":"user","content":"see <｜image｜>"}]})",
                  kImageDetail},
        ErrorCase{
            "PlaceholderInReasoning",
            R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y","reasoning_content":"<｜image｜>"}]})",
            kImageDetail},
        ErrorCase{
            "PlaceholderInToolDescription",
            with_user(
                R"(,"tools":[{"type":"function","function":{"name":"f","description":"<｜image｜>"}}])"),
            kImageDetail},
        ErrorCase{
            "PlaceholderInHistoricalArguments",
            R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"q\":\"<｜image｜>\"}"}}]},{"role":"tool","tool_call_id":"a","content":"r"}]})",
            kImageDetail},
        ErrorCase{
            "ImageInSystem",
            R"({"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]},{"role":"user","content":"x"}]})",
            "Image in system message is unsupported"},
        ErrorCase{
            "ImageInAssistant",
            R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]})",
            "Image in assistant message is unsupported"},
        ErrorCase{
            "ImageUrlUnsupported",
            R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"ftp://x/a.png"}}]}]})",
            "messages[0].content[1].image_url.url: Unsupported image_url format"},
        ErrorCase{
            "ImageUrlTooLong",
            R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://)" +
                std::string(8185, 'a') + R"("}}]}]})",
            "messages[0].content[0].image_url.url: external link length 8193 too long, "
            "max link length 8192. Consider passing file data directly with base64 data "
            "url instead."},
        ErrorCase{
            "FileId",
            R"({"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f-1"}}]}]})",
            "messages[0].content[0]: file_id is not supported. Pass the image as a base64 "
            "data url instead."},
        ErrorCase{
            "JsonWordMissing",
            R"({"model":"m","messages":[{"role":"user","content":"hello"}],"response_format":{"type":"json_object"}})",
            "Prompt must contain the word 'json' in some form to use 'response_format' of "
            "type 'json_object'."},
        ErrorCase{"RegexFormat", with_user(R"(,"response_format":{"type":"regex","regex":"a+"})"),
                  "response_format: only text and json_object are supported"},
        ErrorCase{
            "AssistantWithoutContent",
            R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant"}]})",
            "Invalid assistant message: content or tool_calls must be set"},
        ErrorCase{
            "EmptyToolCalls",
            R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[]}]})",
            "Invalid 'messages[1].tool_calls': empty array. Expected an array with minimum "
            "length 1, but got an empty array instead."},
        ErrorCase{"InsufficientToolMessages",
                  R"({"model":"m","messages":[{"role":"user","content":"x"},)" + kAssistantCalls +
                      R"(,{"role":"tool","tool_call_id":"a","content":"r"}]})",
                  "An assistant message with 'tool_calls' must be followed by tool messages "
                  "responding to each 'tool_call_id'. (insufficient tool messages following "
                  "tool_calls message)"},
        ErrorCase{
            "UserBetweenToolMessages",
            R"({"model":"m","messages":[{"role":"user","content":"x"},)" + kAssistantCalls +
                R"(,{"role":"user","content":"y"},{"role":"tool","tool_call_id":"a","content":"r"}]})",
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. (insufficient tool messages following "
            "tool_calls message)"},
        ErrorCase{
            "UnknownToolCallId",
            R"({"model":"m","messages":[{"role":"user","content":"x"},)" + kAssistantCalls +
                R"(,{"role":"tool","tool_call_id":"a","content":"r"},{"role":"tool","tool_call_id":"z","content":"r"}]})",
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. Unexpected tool_call_id: z"},
        ErrorCase{
            "DuplicateToolAnswer",
            R"({"model":"m","messages":[{"role":"user","content":"x"},)" + kAssistantCalls +
                R"(,{"role":"tool","tool_call_id":"a","content":"r"},{"role":"tool","tool_call_id":"a","content":"r"}]})",
            "Duplicate value for 'tool_call_id' of a in message[3]"},
        ErrorCase{
            "ToolWithoutAssistant",
            R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"a","content":"r"}]})",
            "Messages with role 'tool' must be a response to a preceding message with "
            "'tool_calls'"},
        ErrorCase{
            "LatestReminderBlocks",
            R"({"model":"m","messages":[{"role":"latest_reminder","content":[{"type":"text","text":"x"}]}]})",
            "messages[0].content: expected a string"},
        ErrorCase{"UnknownEffort", with_user(R"(,"reasoning_effort":"ultra")"),
                  "reasoning_effort: unknown variant `ultra`, expected one of `none`, `minimal`, "
                  "`low`, `medium`, `high`, `xhigh`, `max`"},
        ErrorCase{"TemperatureString", with_user(R"(,"temperature":"hot")"),
                  "temperature: expected a number"},
        // Tool-result block paths carry the reference adapter's "content.content" prefix.
        ErrorCase{
            "ToolResultImagePath",
            R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":[{"type":"image_url","image_url":{"url":"nope"}}]}]})",
            "messages[2].content.content[0].image_url.url: Unsupported image_url format"},
        ErrorCase{
            "FileWithoutData",
            R"({"model":"m","messages":[{"role":"user","content":[{"type":"file","filename":"a.png"}]}]})",
            "messages[0].content[0]: file must have file_data"},
        ErrorCase{
            "UnknownImageDetail",
            R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"ultra"}}]}]})",
            "messages[0].content[0].image_url.detail: unknown variant `ultra`, expected one "
            "of `low`, `high`, `original`, `auto`"},
        ErrorCase{
            "UnknownBlockType",
            R"({"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]})",
            "messages[0].content[0]: unknown variant `input_audio`, expected one of `text`, "
            "`image_url`, `file`"},
        ErrorCase{
            "MissingToolCallId",
            R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"r"}]})",
            "messages[2]: missing field `tool_call_id`"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return std::string(info.param.name); });

TEST(ChatConvert, BodyNotObject) {
  auto result = chat("[1,2]");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().kind, ConversionError::Kind::BadRequest);
}

// Worked example §3.11.1: thinking defaults on with effort High.
TEST(ChatConvert, MinimalRequestDefaults) {
  ConversationRequest r =
      chat_ok(R"({"model":"deepseek","messages":[{"role":"user","content":"Hello"}]})");
  EXPECT_EQ(r.model, "deepseek");
  ASSERT_EQ(r.conversation.messages.size(), 1u);
  EXPECT_EQ(r.conversation.messages[0].role, Role::User);
  EXPECT_EQ(r.conversation.messages[0].content, "Hello");
  EXPECT_TRUE(r.conversation.thinking_mode);
  EXPECT_EQ(r.conversation.reasoning_effort, ReasoningEffort::High);
  EXPECT_EQ(r.conversation.tool_choice, ToolChoice::Auto);
  EXPECT_EQ(r.conversation.response_format, ResponseFormat::Text);
  EXPECT_EQ(r.parsing_options.reasoning_initial_stage, ReasoningInitialStage::Start);
  EXPECT_FALSE(r.parsing_options.parse_tool_calls);
  EXPECT_FALSE(r.parsing_options.tool_call_initial_stage);
  EXPECT_FALSE(r.parsing_options.parse_json_output);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.include_usage);  // non-streaming requests always carry usage
}

TEST(ChatConvert, DefaultThinkingOffOption) {
  ConversionOptions options;
  options.default_thinking_mode = false;
  ConversationRequest r = chat_ok(with_user(""), options);
  EXPECT_FALSE(r.conversation.thinking_mode);
  EXPECT_FALSE(r.conversation.reasoning_effort.has_value());
  EXPECT_EQ(r.parsing_options.reasoning_initial_stage, ReasoningInitialStage::None);
}

struct EffortCase {
  const char* extra;
  bool thinking;
  std::optional<ReasoningEffort> effort;
};

TEST(ChatConvert, ThinkingResolutionTable) {
  const EffortCase cases[] = {
      {R"(,"reasoning_effort":"none")", false, std::nullopt},
      {R"(,"reasoning_effort":"minimal")", true, ReasoningEffort::Low},
      {R"(,"reasoning_effort":"low")", true, ReasoningEffort::Low},
      {R"(,"reasoning_effort":"medium")", true, ReasoningEffort::High},
      {R"(,"reasoning_effort":"high")", true, ReasoningEffort::High},
      {R"(,"reasoning_effort":"xhigh")", true, ReasoningEffort::Xhigh},
      {R"(,"reasoning_effort":"max")", true, ReasoningEffort::Max},
      {R"(,"thinking":{"type":"disabled"},"reasoning_effort":"max")", false, std::nullopt},
      {R"(,"thinking":{"type":"enabled"},"reasoning_effort":"none")", true, ReasoningEffort::High},
      {R"(,"thinking":{"type":"adaptive","budget_tokens":100})", true, ReasoningEffort::High},
      {R"(,"thinking":{"type":"enabled"},"reasoning_effort":"low")", true, ReasoningEffort::Low},
  };
  ConversionOptions off;
  off.default_thinking_mode = false;
  for (const EffortCase& c : cases) {
    ConversationRequest r = chat_ok(with_user(c.extra), off);
    EXPECT_EQ(r.conversation.thinking_mode, c.thinking) << c.extra;
    EXPECT_EQ(r.conversation.reasoning_effort, c.effort) << c.extra;
    EXPECT_EQ(r.parsing_options.reasoning_initial_stage,
              c.thinking ? ReasoningInitialStage::Start : ReasoningInitialStage::None);
    EXPECT_FALSE(r.inference_options.thinking_budget_tokens.has_value());  // budget ignored
  }
}

TEST(ChatConvert, ToolsKeepOrderSchemaAndStrict) {
  ConversationRequest r = chat_ok(with_user(
      R"(,"tools":[{"type":"function","function":{"name":"b","description":"d","parameters":{"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"number"}}},"strict":true}},{"type":"function","function":{"name":"a"}}])"));
  ASSERT_EQ(r.conversation.tools.size(), 2u);
  EXPECT_EQ(r.conversation.tools[0].name, "b");
  EXPECT_EQ(r.conversation.tools[0].description, "d");
  EXPECT_EQ(to_json(r.conversation.tools[0].parameters),
            R"({"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"number"}}})");
  EXPECT_EQ(r.conversation.tools[0].strict, true);
  EXPECT_EQ(r.conversation.tools[1].name, "a");
  EXPECT_EQ(to_json(r.conversation.tools[1].parameters), "{}");  // missing parameters → {}
  EXPECT_FALSE(r.conversation.tools[1].description.has_value());
  EXPECT_TRUE(r.parsing_options.parse_tool_calls);
  EXPECT_EQ(r.conversation.tool_choice, ToolChoice::Auto);
}

TEST(ChatConvert, ToolChoiceNoneClearsTools) {
  ConversationRequest r = chat_ok(with_user(std::string(kToolsTail) + R"(,"tool_choice":"none")"));
  EXPECT_TRUE(r.conversation.tools.empty());
  EXPECT_EQ(r.conversation.tool_choice, ToolChoice::None);
  EXPECT_FALSE(r.parsing_options.parse_tool_calls);
}

TEST(ChatConvert, NamedToolChoiceFiltersAndRequires) {
  ConversationRequest r = chat_ok(with_user(
      std::string(kToolsTail) +
      R"(,"reasoning_effort":"none","tool_choice":{"type":"function","function":{"name":"get_time"}})"));
  ASSERT_EQ(r.conversation.tools.size(), 1u);
  EXPECT_EQ(r.conversation.tools[0].name, "get_time");
  EXPECT_EQ(r.conversation.tool_choice, ToolChoice::Required);
  EXPECT_TRUE(r.parsing_options.parse_tool_calls);
  EXPECT_TRUE(r.parsing_options.tool_call_initial_stage);
}

TEST(ChatConvert, RequiredWithoutToolsIsAuto) {
  ConversationRequest r = chat_ok(with_user(R"(,"tool_choice":"required")"));
  EXPECT_EQ(r.conversation.tool_choice, ToolChoice::Auto);
  EXPECT_FALSE(r.parsing_options.tool_call_initial_stage);
}

TEST(ChatConvert, InferenceOptionsPassThroughAsF32) {
  ConversationRequest r = chat_ok(with_user(
      R"(,"max_tokens":64,"temperature":0.7,"top_p":1,"seed":5,"n":1,"frequency_penalty":-2,"logprobs":true,"user":"u")"));
  EXPECT_EQ(r.inference_options.max_tokens, 64);
  ASSERT_TRUE(r.inference_options.temperature.has_value());
  EXPECT_EQ(static_cast<double>(*r.inference_options.temperature), 0.699999988079071);
  EXPECT_EQ(r.inference_options.top_p, 1.0f);
  EXPECT_FALSE(r.inference_options.disable_parallel_tool_use.has_value());
}

TEST(ChatConvert, StopSequencesAndStreaming) {
  ConversationRequest one = chat_ok(with_user(R"(,"stop":"END")"));
  EXPECT_EQ(one.parsing_options.stop_sequences, std::vector<std::string>{"END"});
  ConversationRequest list = chat_ok(with_user(R"(,"stop":["a","","b"],"stream":true)"));
  EXPECT_EQ(list.parsing_options.stop_sequences, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(list.stream);
  EXPECT_FALSE(list.include_usage);
  ConversationRequest usage =
      chat_ok(with_user(R"(,"stream":true,"stream_options":{"include_usage":true})"));
  EXPECT_TRUE(usage.include_usage);
}

TEST(ChatConvert, JsonObjectFormat) {
  ConversationRequest r = chat_ok(
      R"({"model":"m","messages":[{"role":"system","content":"Reply in JSON."},{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}})");
  EXPECT_EQ(r.conversation.response_format, ResponseFormat::JsonObject);
  EXPECT_TRUE(r.parsing_options.parse_json_output);
  ConversationRequest schema =
      chat_ok(with_user(R"(,"response_format":{"type":"json_schema","json_schema":{}})"));
  EXPECT_EQ(schema.conversation.response_format, ResponseFormat::Text);
}

TEST(ChatConvert, ContentBlocksAndImages) {
  ConversationRequest r = chat_ok(
      R"({"model":"m","messages":[{"role":"system","content":""},{"role":"user","content":[{"type":"text","text":"Look:"},{"type":"image_url","image_url":{"url":"HTTPS://x/a.png","detail":"low"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},{"type":"file","file":{"file_data":"data:image/png;base64,AAAA","filename":"a.png"}}]}]})");
  ASSERT_EQ(r.conversation.messages.size(), 1u);  // empty system message dropped
  const Message& user = r.conversation.messages[0];
  EXPECT_EQ(user.content, "Look:\n\n<｜image｜>\n\n<｜image｜>\n\n<｜image｜>");
  ASSERT_EQ(user.image_sources.size(), 3u);
  EXPECT_EQ(user.image_sources[0].kind, ImageSource::Kind::Url);
  EXPECT_EQ(user.image_sources[0].data, "HTTPS://x/a.png");
  EXPECT_EQ(user.image_sources[0].detail, ImageDetail::Low);
  EXPECT_EQ(user.image_sources[1].kind, ImageSource::Kind::DataUrl);
  EXPECT_EQ(user.image_sources[1].detail, ImageDetail::High);
  EXPECT_EQ(user.image_sources[2].data, "data:image/png;base64,AAAA");
}

TEST(ChatConvert, ToolHistoryAnyOrderAndVerbatimArguments) {
  ConversationRequest r = chat_ok(
      R"({"model":"m","messages":[{"role":"user","content":"x"},)" + kAssistantCalls +
      R"(,{"role":"tool","tool_call_id":"b","content":"rb"},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"ra"},{"type":"image_url","image_url":{"url":"https://x/i.png"}}]},{"role":"latest_reminder","content":"date"}]})");
  const auto& m = r.conversation.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[1].role, Role::Assistant);
  ASSERT_EQ(m[1].tool_calls.size(), 2u);
  EXPECT_EQ(m[1].tool_calls[0].id, "a");
  EXPECT_EQ(m[1].tool_calls[0].arguments, "{}");
  EXPECT_EQ(m[2].role, Role::Tool);
  EXPECT_EQ(m[2].tool_call_id, "b");
  EXPECT_EQ(m[2].content, "rb");
  EXPECT_EQ(m[3].tool_call_id, "a");
  EXPECT_EQ(m[3].content, "ra\n\n<｜image｜>");
  EXPECT_EQ(m[3].image_sources.size(), 1u);
  EXPECT_EQ(m[4].role, Role::LatestReminder);
  EXPECT_EQ(m[4].content, "date");
}

TEST(ChatConvert, HistoricalReasoningKept) {
  ConversationRequest r = chat_ok(
      R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y","reasoning_content":"because"},{"role":"user","content":"z"}]})");
  ASSERT_EQ(r.conversation.messages.size(), 3u);
  EXPECT_EQ(r.conversation.messages[1].reasoning_content, "because");
  EXPECT_EQ(r.conversation.messages[1].content, "y");
}

}  // namespace
}  // namespace deepinfer::recipe
