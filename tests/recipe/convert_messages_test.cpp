// Anthropic Messages request conversion (api spec §2, §5, §5.1).
#include <gtest/gtest.h>

#include "recipe/convert.h"

namespace deepinfer::recipe {
namespace {

Result<ConversationRequest, ConversionError> messages(std::string_view body,
                                                      const ConversionOptions& options = {}) {
  auto json = parse_json(body);
  EXPECT_TRUE(json.ok()) << body;
  if (!json.ok()) return ConversionError{ConversionError::Kind::Internal, "bad test JSON"};
  return convert_request(Protocol::Messages, json.value(), options);
}

ConversationRequest messages_ok(std::string_view body, const ConversionOptions& options = {}) {
  auto result = messages(body, options);
  EXPECT_TRUE(result.ok()) << body << "\n→ " << (result.ok() ? "" : result.error().detail);
  if (!result.ok()) return {};
  return std::move(result.value());
}

// A request with one user message "hi" plus `extra` top-level fields.
std::string with_user(std::string_view extra) {
  return std::string(
             R"({"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}])") +
         std::string(extra) + "}";
}

std::string with_messages(std::string_view list) {
  return std::string(R"({"model":"m","max_tokens":64,"messages":[)") + std::string(list) + "]}";
}

struct ErrorCase {
  const char* name;
  std::string body;
  std::string detail;
};

class MessagesErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(MessagesErrors, DetailIsExact) {
  const ErrorCase& c = GetParam();
  auto result = messages(c.body);
  ASSERT_FALSE(result.ok()) << c.body;
  EXPECT_EQ(result.error().kind, ConversionError::Kind::BadRequest);
  EXPECT_EQ(result.error().detail, c.detail);
}

const char* kToolUse =
    R"({"role":"assistant","content":[{"type":"tool_use","id":"tu_b","name":"f","input":{}},{"type":"tool_use","id":"tu_a","name":"f","input":{}}]})";
const char* kUnansweredTail =
    "`tool_use` ids were found without `tool_result` blocks immediately after: tu_a, tu_b. Each "
    "`tool_use` block must have a corresponding `tool_result` block in the next message.";

INSTANTIATE_TEST_SUITE_P(
    Spec, MessagesErrors,
    ::testing::Values(
        ErrorCase{"EmptyMessages", R"({"model":"m","max_tokens":1,"messages":[]})",
                  "messages: at least one message is required"},
        ErrorCase{"MissingModel", R"({"messages":[{"role":"user","content":"x"}]})",
                  "missing field `model`"},
        ErrorCase{"MessagesString", R"({"model":"m","messages":"hi"})",
                  "messages: expected an array"},
        ErrorCase{"ContentNumber", with_messages(R"({"role":"user","content":1})"),
                  "messages.0.content: expected a string or an array of content blocks"},
        ErrorCase{"EmptyBlocks", with_messages(R"({"role":"user","content":[]})"),
                  "messages.0: all messages must have non-empty content"},
        ErrorCase{"MaxTokensZero",
                  R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]})",
                  "max_tokens must be greater than zero"},
        ErrorCase{"Temperature", with_user(R"(,"temperature":2.01)"),
                  "temperature must be in [0, 2]"},
        ErrorCase{"TopP", with_user(R"(,"top_p":-1)"), "top_p must be in (0, 1]"},
        ErrorCase{
            "TooManyStops",
            with_user(
                R"(,"stop_sequences":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"])"),
            "stop_sequences must contain at most 16 non-empty strings"},
        ErrorCase{"EmptyStop", with_user(R"(,"stop_sequences":["a",""])"),
                  "stop_sequences must contain at most 16 non-empty strings"},
        ErrorCase{"MissingInputSchema", with_user(R"(,"tools":[{"name":"f","input_schema":null}])"),
                  "tools.0: missing input_schema"},
        ErrorCase{"SchemaNotObject",
                  with_user(R"(,"tools":[{"name":"f","input_schema":{"type":"string"}}])"),
                  "tools.0.input_schema must be a JSON Schema of type object"},
        ErrorCase{
            "ServerTool",
            with_user(
                R"(,"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"}])"),
            "tools.1: server tools are not supported"},
        ErrorCase{"WebSearchRejectedByDefault",
                  with_user(R"(,"tools":[{"type":"web_search_20250305","name":"web_search"}])"),
                  "tools.0: server tools are not supported"},
        ErrorCase{"BadToolName",
                  with_user(R"(,"tools":[{"name":"my tool","input_schema":{"type":"object"}}])"),
                  "tools.0.name: expected 1-128 ASCII letters, digits, underscores or hyphens"},
        ErrorCase{
            "DuplicateTools",
            with_user(
                R"(,"tools":[{"name":"f","input_schema":{"type":"object"}},{"name":"f","input_schema":{"type":"object"}}])"),
            "Tool names must be unique"},
        ErrorCase{
            "NamedToolWithThinking",
            with_user(
                R"(,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"})"),
            "Thinking mode does not support this tool_choice"},
        ErrorCase{
            "NamedToolUnknown",
            with_user(
                R"(,"thinking":{"type":"disabled"},"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"})"),
            "tool_choice: no tool named 'g' was specified"},
        ErrorCase{"UnknownEffort", with_user(R"(,"output_config":{"effort":"none"})"),
                  "output_config.effort: unknown variant `none`, expected one of `low`, "
                  "`medium`, `high`, `xhigh`, `ultra`, `max`"},
        ErrorCase{"PlaceholderInSystem", with_user(R"(,"system":"<｜image｜>")"),
                  "The sub-string \"<｜image｜>\" in your input is not allowed for this API. "
                  "Please remove \"<｜image｜>\" from your input and try again."},
        ErrorCase{
            "PlaceholderInToolUseInput",
            with_messages(
                R"({"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"q":"<｜image｜>"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]})"),
            "The sub-string \"<｜image｜>\" in your input is not allowed for this API. "
            "Please remove \"<｜image｜>\" from your input and try again."},
        ErrorCase{
            "ImageInSystem",
            with_user(
                R"(,"system":[{"type":"image","source":{"type":"url","url":"https://x/a.png"}}])"),
            "Image in system message is unsupported"},
        ErrorCase{
            "ImageInAssistant",
            with_messages(
                R"({"role":"user","content":"x"},{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"https://x/a.png"}}]})"),
            "Image in assistant message is unsupported"},
        ErrorCase{
            "FileImage",
            with_messages(
                R"({"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"file_1"}}]})"),
            "messages.0.content[0]: file_id is not supported. Pass the image as a base64 "
            "data url instead."},
        ErrorCase{
            "BadMediaType",
            with_messages(
                R"({"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AAAA"}}]})"),
            "messages.0.content[0]: You have uploaded an unsupported image. Please make "
            "sure your image is valid and has one of the following formats: webp, png, "
            "jpeg, and gif."},
        ErrorCase{
            "BadBase64",
            with_messages(
                R"({"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"A*AA"}}]})"),
            "messages.0.content[0]: base64 decode error"},
        ErrorCase{
            "UrlNotHttp",
            with_messages(
                R"({"role":"user","content":[{"type":"image","source":{"type":"url","url":"ftp://x"}}]})"),
            "messages.0.content[0]: invalid url: \"ftp://x\""},
        ErrorCase{"UnansweredToolUse",
                  with_messages(std::string(R"({"role":"user","content":"x"},)") + kToolUse +
                                R"(,{"role":"user","content":"no results"})"),
                  std::string("messages.2: ") + kUnansweredTail},
        ErrorCase{
            "PartiallyAnswered",
            with_messages(
                std::string(R"({"role":"user","content":"x"},)") + kToolUse +
                R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_a"}]})"),
            "messages.1:`tool_use` ids were found without `tool_result` blocks immediately "
            "after: tu_b. Each `tool_use` block must have a corresponding `tool_result` "
            "block in the next message."},
        ErrorCase{"EndsWithToolUse",
                  with_messages(std::string(R"({"role":"user","content":"x"},)") + kToolUse),
                  std::string("messages.1:") + kUnansweredTail},
        ErrorCase{
            "UnknownToolResult",
            with_messages(
                R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"zz","content":"r"}]})"),
            "unexpected `messages.0.content.0: tool_use_id` found in `tool_result` blocks: "
            "zz. Each `tool_result` block must have a corresponding `tool_use` block in the "
            "previous message."},
        ErrorCase{
            "DuplicateToolResult",
            with_messages(
                std::string(R"({"role":"user","content":"x"},)") + kToolUse +
                R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_a"},{"type":"tool_result","tool_use_id":"tu_a"}]})"),
            "messages.2.content.1: each tool_use must have a single result. Found "
            "multiple `tool_result` blocks with id: tu_a"},
        ErrorCase{
            "TextAfterToolUse",
            with_messages(
                R"({"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}},{"type":"text","text":"late"}]})"),
            "messages.1.1: `tool_use` ids were found without `tool_result` blocks "
            "immediately after: t1. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message."},
        ErrorCase{
            "ToolUseInUser",
            with_messages(
                R"({"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]})"),
            "messages.0: `tool_use` blocks can only be in `assistant` messages"},
        ErrorCase{
            "ThinkingInUser",
            with_messages(R"({"role":"user","content":[{"type":"thinking","thinking":"t"}]})"),
            "messages.0.content: thinking blocks may only be in `assistant` messages"},
        ErrorCase{
            "ToolResultInAssistant",
            with_messages(
                R"({"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t"}]})"),
            "messages.1: `tool_result` blocks can only be in `user` messages"},
        ErrorCase{
            "ServerToolUseInAssistant",
            with_messages(
                R"({"role":"user","content":"x"},{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]})"),
            "Unsupported content block: server tools are not supported"},
        ErrorCase{
            "DuplicateToolUseIds",
            with_messages(
                R"({"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}},{"type":"tool_use","id":"t","name":"f","input":{}}]})"),
            "messages.1.content.1: `tool_use` ids must be unique"},
        ErrorCase{
            "ToolResultImagePath",
            with_messages(
                R"({"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"},{"type":"image","source":{"type":"file","file_id":"f"}}]}]})"),
            "messages.2.content[0][1]: file_id is not supported. Pass the image as a "
            "base64 data url instead."},
        ErrorCase{"UnknownRole", with_messages(R"({"role":"tool","content":"x"})"),
                  "messages.0: unknown variant `tool`, expected one of `user`, `assistant`, "
                  "`system`"},
        ErrorCase{"UnknownBlock", with_messages(R"({"role":"user","content":[{"type":"audio"}]})"),
                  "Unsupported content block"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return std::string(info.param.name); });

TEST(MessagesConvert, SystemStopsAndOptions) {
  ConversationRequest r = messages_ok(with_user(
      R"(,"system":[{"type":"text","text":"Be kind."},{"type":"tool_reference","tool_name":"search"},{"type":"document","source":{}}],"stop_sequences":["END"],"temperature":0.5,"top_p":0.9,"stream":true,"metadata":{"user_id":"u"})"));
  const auto& m = r.conversation.messages;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].role, Role::System);
  EXPECT_EQ(m[0].content, "Be kind.\n\nsearch\n\n[Unsupported Document]");
  EXPECT_EQ(m[1].content, "hi");
  EXPECT_EQ(r.parsing_options.stop_sequences, std::vector<std::string>{"END"});
  EXPECT_EQ(r.inference_options.max_tokens, 64);
  EXPECT_EQ(r.inference_options.temperature, 0.5f);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.conversation.response_format, ResponseFormat::Text);
  EXPECT_FALSE(r.parsing_options.parse_json_output);
  EXPECT_TRUE(r.conversation.thinking_mode);
  EXPECT_EQ(r.conversation.reasoning_effort, ReasoningEffort::High);
}

TEST(MessagesConvert, ThinkingAndEffortTable) {
  ConversionOptions off;
  off.default_thinking_mode = false;
  struct Case {
    const char* extra;
    bool thinking;
    std::optional<ReasoningEffort> effort;
  };
  const Case cases[] = {
      {"", false, std::nullopt},
      {R"(,"output_config":{"effort":"low"})", true, ReasoningEffort::Low},
      {R"(,"output_config":{"effort":"medium"})", true, ReasoningEffort::High},
      {R"(,"output_config":{"effort":"high"})", true, ReasoningEffort::High},
      {R"(,"output_config":{"effort":"xhigh"})", true, ReasoningEffort::Xhigh},
      {R"(,"output_config":{"effort":"max"})", true, ReasoningEffort::Max},
      {R"(,"output_config":{"effort":"ultra"})", true, ReasoningEffort::Max},
      {R"(,"thinking":{"type":"disabled"},"output_config":{"effort":"max"})", false, std::nullopt},
      {R"(,"thinking":{"type":"enabled","budget_tokens":2048})", true, ReasoningEffort::High},
      {R"(,"thinking":{"type":"adaptive"},"output_config":{"effort":"xhigh"})", true,
       ReasoningEffort::Xhigh},
  };
  for (const Case& c : cases) {
    ConversationRequest r = messages_ok(with_user(c.extra), off);
    EXPECT_EQ(r.conversation.thinking_mode, c.thinking) << c.extra;
    EXPECT_EQ(r.conversation.reasoning_effort, c.effort) << c.extra;
  }
  ConversationRequest budget =
      messages_ok(with_user(R"(,"thinking":{"type":"enabled","budget_tokens":2048})"));
  EXPECT_EQ(budget.inference_options.thinking_budget_tokens, 2048);
}

TEST(MessagesConvert, ToolsChoicesAndParallelFlag) {
  const std::string tools =
      R"(,"tools":[{"name":"get_weather","description":"Weather.","input_schema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}},{"name":"now","input_schema":{"type":"object"}}])";
  ConversationRequest any = messages_ok(
      with_user(tools + R"(,"tool_choice":{"type":"any","disable_parallel_tool_use":true})"));
  EXPECT_EQ(any.conversation.tool_choice, ToolChoice::Auto);  // any → Auto
  ASSERT_EQ(any.conversation.tools.size(), 2u);
  EXPECT_EQ(any.conversation.tools[0].description, "Weather.");
  EXPECT_EQ(
      to_json(any.conversation.tools[0].parameters),
      R"({"type":"object","properties":{"location":{"type":"string"}},"required":["location"]})");
  EXPECT_EQ(any.inference_options.disable_parallel_tool_use, true);
  EXPECT_TRUE(any.parsing_options.parse_tool_calls);
  EXPECT_FALSE(any.parsing_options.tool_call_initial_stage);

  ConversationRequest named = messages_ok(with_user(
      tools + R"(,"thinking":{"type":"disabled"},"tool_choice":{"type":"tool","name":"now"})"));
  ASSERT_EQ(named.conversation.tools.size(), 1u);
  EXPECT_EQ(named.conversation.tools[0].name, "now");
  EXPECT_EQ(named.conversation.tool_choice, ToolChoice::Required);
  EXPECT_TRUE(named.parsing_options.tool_call_initial_stage);

  ConversationRequest none = messages_ok(with_user(tools + R"(,"tool_choice":{"type":"none"})"));
  EXPECT_TRUE(none.conversation.tools.empty());
  EXPECT_EQ(none.conversation.tool_choice, ToolChoice::None);
  EXPECT_FALSE(none.parsing_options.parse_tool_calls);
}

TEST(MessagesConvert, WebSearchIgnoredWhenConfigured) {
  ConversionOptions ignore;
  ignore.messages_web_search = WebSearchPolicy::Ignore;
  ConversationRequest r = messages_ok(
      with_messages(
          R"({"role":"user","content":"x"},{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}},{"type":"web_search_tool_result","tool_use_id":"s","content":[]},{"type":"text","text":"found"}]})"),
      ignore);
  ASSERT_EQ(r.conversation.messages.size(), 2u);
  EXPECT_EQ(r.conversation.messages[1].content, "found");
  ConversationRequest tools = messages_ok(
      with_user(
          R"(,"thinking":{"type":"disabled"},"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"web_search"})"),
      ignore);
  EXPECT_TRUE(tools.conversation.tools.empty());
  EXPECT_EQ(tools.conversation.tool_choice, ToolChoice::Auto);
}

TEST(MessagesConvert, ToolUseHistoryUsesPythonStyleArguments) {
  ConversationRequest r = messages_ok(with_messages(
      R"({"role":"user","content":"weather?"},{"role":"assistant","content":[{"type":"thinking","thinking":"t1","signature":"sig"},{"type":"thinking","thinking":"t2"},{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris","days":3,"opts":{"a":[1,2.5],"b":true}}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"Sunny"},{"type":"image","source":{"type":"base64","media_type":"image/JPG","data":"AAA=="}}],"is_error":false},{"type":"text","text":"thanks"}]})"));
  const auto& m = r.conversation.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1].role, Role::Assistant);
  EXPECT_EQ(m[1].reasoning_content, "t1\n\nt2");
  EXPECT_EQ(m[1].content, "Checking.");
  ASSERT_EQ(m[1].tool_calls.size(), 1u);
  EXPECT_EQ(m[1].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(m[1].tool_calls[0].arguments,
            R"({"location": "Paris", "days": 3, "opts": {"a": [1, 2.5], "b": true}})");
  EXPECT_EQ(m[2].role, Role::Tool);
  EXPECT_EQ(m[2].tool_call_id, "toolu_1");
  EXPECT_EQ(m[2].content, "Sunny\n\n<｜image｜>");
  ASSERT_EQ(m[2].image_sources.size(), 1u);
  EXPECT_EQ(m[2].image_sources[0].kind, ImageSource::Kind::DataUrl);
  EXPECT_EQ(m[2].image_sources[0].data, "data:image/jpeg;base64,AAA=");  // padding normalized
  EXPECT_EQ(m[3].role, Role::User);
  EXPECT_EQ(m[3].content, "thanks");
}

TEST(MessagesConvert, UserBlocksStaySeparateAndSystemRoleBecomesReminder) {
  ConversationRequest r = messages_ok(with_messages(
      R"({"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","url":"https://x/a.png"}},{"type":"document","source":{"type":"text","data":"d"}}]},{"role":"system","content":"Use metric."},{"role":"assistant","content":"ok"})"));
  const auto& m = r.conversation.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].content, "a");
  EXPECT_EQ(m[1].content, "<｜image｜>");
  ASSERT_EQ(m[1].image_sources.size(), 1u);
  EXPECT_EQ(m[1].image_sources[0].kind, ImageSource::Kind::Url);
  EXPECT_EQ(m[2].content, "[Unsupported Document]");
  EXPECT_EQ(m[3].role, Role::User);
  EXPECT_EQ(m[3].content, "<system-reminder>\nUse metric.\n</system-reminder>");
  EXPECT_EQ(m[4].role, Role::Assistant);
  EXPECT_EQ(m[4].content, "ok");
}

}  // namespace
}  // namespace deepinfer::recipe
