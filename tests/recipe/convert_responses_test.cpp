// Responses request conversion (api spec §2, §4, §4.1).
#include <gtest/gtest.h>

#include "recipe/convert.h"

namespace deepinfer::recipe {
namespace {

Result<ConversationRequest, ConversionError> responses(std::string_view body,
                                                       const ConversionOptions& options = {}) {
  auto json = parse_json(body);
  EXPECT_TRUE(json.ok()) << body;
  if (!json.ok()) return ConversionError{ConversionError::Kind::Internal, "bad test JSON"};
  return convert_request(Protocol::Responses, json.value(), options);
}

ConversationRequest responses_ok(std::string_view body, const ConversionOptions& options = {}) {
  auto result = responses(body, options);
  EXPECT_TRUE(result.ok()) << body << "\n→ " << (result.ok() ? "" : result.error().detail);
  if (!result.ok()) return {};
  return std::move(result.value());
}

std::string body(std::string_view fields) {
  return std::string(R"({"model":"m",)") + std::string(fields) + "}";
}

struct ErrorCase {
  const char* name;
  std::string body;
  std::string detail;
};

class ResponsesErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ResponsesErrors, DetailIsExact) {
  const ErrorCase& c = GetParam();
  auto result = responses(c.body);
  ASSERT_FALSE(result.ok()) << c.body;
  EXPECT_EQ(result.error().kind, ConversionError::Kind::BadRequest);
  EXPECT_EQ(result.error().detail, c.detail);
}

const char* kCall = R"({"type":"function_call","call_id":"c1","name":"f","arguments":"{}"})";

INSTANTIATE_TEST_SUITE_P(
    Spec, ResponsesErrors,
    ::testing::Values(
        ErrorCase{"MissingModel", R"({"input":"hi"})", "missing field `model`"},
        ErrorCase{"NoInputNoInstructions", body(R"("instructions":"")"),
                  "Either input or instructions must be provided"},
        ErrorCase{"EmptyItems", body(R"("input":[])"), "Input items array must not be empty"},
        ErrorCase{"InputNumber", body(R"("input":7)"),
                  "input: expected a string or an array of input items"},
        ErrorCase{"MaxOutputTokensZero", body(R"("input":"x","max_output_tokens":0)"),
                  "max_output_tokens must be greater than zero"},
        ErrorCase{"Temperature", body(R"("input":"x","temperature":3)"),
                  "temperature must be in [0, 2]"},
        ErrorCase{"TopP", body(R"("input":"x","top_p":0)"), "top_p must be in (0, 1]"},
        ErrorCase{"CustomNotApplyPatch",
                  body(R"("input":"x","tools":[{"type":"custom","name":"grep"}])"),
                  "Unsupported custom tool: 'grep'. Only 'apply_patch' is supported"},
        ErrorCase{
            "CustomInNamespace",
            body(
                R"("input":"x","tools":[{"type":"function","name":"a"},{"type":"namespace","name":"ns","tools":[{"type":"custom","name":"apply_patch"}]}])"),
            "tools[1].tools[0]: custom tools are not supported inside a namespace"},
        ErrorCase{"BadFunctionName",
                  body(R"("input":"x","tools":[{"type":"function","name":"a.b"}])"),
                  "tools[0].name: expected 1-128 ASCII letters, digits, underscores or hyphens"},
        ErrorCase{
            "BadNamespaceMemberName",
            body(
                R"("input":"x","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":""}]}])"),
            "tools[0].tools[0].name: expected 1-128 ASCII letters, digits, underscores or "
            "hyphens"},
        ErrorCase{
            "DuplicateTools",
            body(
                R"("input":"x","tools":[{"type":"function","name":"a"},{"type":"function","name":"a"}])"),
            "Tool names must be unique"},
        ErrorCase{
            "BadSchema",
            body(
                R"("input":"x","tools":[{"type":"function","name":"a","parameters":{"type":"array"}}])"),
            "Tool 'a' parameters must be a JSON Schema of type object"},
        ErrorCase{
            "RemoteRef",
            body(
                R"("input":"x","tools":[{"type":"function","name":"a","parameters":{"type":"object","properties":{"p":{"$ref":"https://example.com/s.json"}}}}])"),
            "Tool 'a' parameters: invalid JSON Schema at '#/properties/p/$ref': only "
            "local references are allowed"},
        ErrorCase{
            "RequiredWithThinking",
            body(
                R"("input":"x","tools":[{"type":"function","name":"a"}],"tool_choice":"required")"),
            "Thinking mode does not support this tool_choice"},
        ErrorCase{
            "NamedUnknown",
            body(
                R"("input":"x","reasoning":{"effort":"none"},"tools":[{"type":"function","name":"a"}],"tool_choice":{"type":"function","name":"b"})"),
            "tool_choice: no tool named 'b' was specified"},
        ErrorCase{"JsonWord", body(R"("input":"hello","text":{"format":{"type":"json_object"}})"),
                  "Response input messages must contain the word 'json' to use text.format of "
                  "type json_object"},
        ErrorCase{"PlaceholderInInstructions", body(R"("instructions":"<｜image｜>","input":"x")"),
                  "The sub-string \"<｜image｜>\" in your input is not allowed for this API. "
                  "Please remove \"<｜image｜>\" from your input and try again."},
        ErrorCase{
            "PlaceholderInReasoning",
            body(
                R"("input":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"<｜image｜>"}]}])"),
            "The sub-string \"<｜image｜>\" in your input is not allowed for this API. "
            "Please remove \"<｜image｜>\" from your input and try again."},
        ErrorCase{
            "UnsupportedBlock",
            body(R"("input":[{"role":"user","content":[{"type":"refusal","refusal":"no"}]}])"),
            "Unsupported content block"},
        ErrorCase{
            "ImageInAssistant",
            body(
                R"("input":[{"role":"assistant","content":[{"type":"input_image","image_url":"https://x/a.png"}]}])"),
            "Image in assistant message is unsupported"},
        ErrorCase{
            "FileIdImage",
            body(
                R"("input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}])"),
            "input[0].content[0]: file_id is not supported. Pass the image as a base64 "
            "data url instead."},
        ErrorCase{
            "InvalidImageUrl",
            body(
                R"("input":[{"role":"user","content":[{"type":"input_image","image_url":"nope"}]}])"),
            "input[0].content[0].image_url: Unsupported image_url format"},
        ErrorCase{
            "EmptyCallId",
            body(R"("input":[{"type":"function_call","call_id":"","name":"f","arguments":"{}"}])"),
            "Invalid 'input[0].call_id': empty string. Expected a string with minimum "
            "length 1, but got an empty string instead."},
        ErrorCase{"DuplicateCallId", body(std::string(R"("input":[)") + kCall + "," + kCall + "]"),
                  "Duplicate 'call_id': c1."},
        ErrorCase{"OutputWithoutCall",
                  body(R"("input":[{"type":"function_call_output","call_id":"zz","output":"r"}])"),
                  "No tool call found for tool output with call_id zz."},
        ErrorCase{
            "DuplicateOutput",
            body(
                std::string(R"("input":[)") + kCall +
                R"(,{"type":"function_call_output","call_id":"c1","output":"r"},{"type":"function_call_output","call_id":"c1","output":"r"}])"),
            "Duplicate tool output for call_id: c1."},
        ErrorCase{"MissingOutput", body(std::string(R"("input":[)") + kCall + "]"),
                  "No tool output found for tool call c1."},
        ErrorCase{
            "MessageBeforeOutput",
            body(std::string(R"("input":[)") + kCall + R"(,{"role":"user","content":"next"}])"),
            "No tool output found for tool call c1."},
        ErrorCase{
            "OutputImagePath",
            body(
                std::string(R"("input":[)") + kCall +
                R"(,{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"x"}]}])"),
            "input[1].output[0].image_url: Unsupported image_url format"},
        ErrorCase{
            "ImageWithoutSource",
            body(R"("input":[{"role":"user","content":[{"type":"input_image","detail":"low"}]}])"),
            "input[0].content[0]: input_image must have image_url or file_id"},
        ErrorCase{
            "ImageWithBothSources",
            body(
                R"("input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/a.png","file_id":"f"}]}])"),
            "input[0].content[0]: input_image cannot have both image_url and file_id"},
        ErrorCase{
            "DuplicateNamespace",
            body(
                R"("input":"x","tools":[{"type":"namespace","name":"ns","tools":[]},{"type":"namespace","name":"ns","tools":[]}])"),
            "tools[1]: duplicate namespace name 'ns'"},
        ErrorCase{
            "DuplicateNamespaceMember",
            body(
                R"("input":"x","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"a"},{"type":"function","name":"a"}]}])"),
            "tools[0].tools[1]: tool names within a namespace must be unique"},
        ErrorCase{"UnknownRole", body(R"("input":[{"role":"tool","content":"x"}])"),
                  "input[0].role: unknown variant `tool`, expected one of `user`, `assistant`, "
                  "`system`, `developer`"},
        ErrorCase{"UnknownEffort", body(R"("input":"x","reasoning":{"effort":"ultra"})"),
                  "reasoning.effort: unknown variant `ultra`, expected one of `none`, "
                  "`minimal`, `low`, `medium`, `high`, `xhigh`, `max`"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return std::string(info.param.name); });

TEST(ResponsesConvert, WebSearchRejectOption) {
  ConversionOptions reject;
  reject.responses_web_search = WebSearchPolicy::Reject;
  auto result = responses(body(R"("input":"x","tools":[{"type":"web_search"}])"), reject);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().detail, "Server tools are not supported");
  auto choice =
      responses(body(R"("input":"x","tool_choice":{"type":"web_search_2025_08_26"})"), reject);
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.error().detail, "Server tools are not supported");
}

TEST(ResponsesConvert, InstructionsAndStringInput) {
  ConversationRequest r = responses_ok(body(
      R"("instructions":"Be brief.","input":"Hello","max_output_tokens":9,"stream":true,"thinking":{"type":"disabled"})"));
  ASSERT_EQ(r.conversation.messages.size(), 2u);
  EXPECT_EQ(r.conversation.messages[0].role, Role::System);
  EXPECT_EQ(r.conversation.messages[0].content, "Be brief.");
  EXPECT_EQ(r.conversation.messages[1].role, Role::User);
  EXPECT_EQ(r.conversation.messages[1].content, "Hello");
  // Responses has no thinking switch besides reasoning.effort "none" (api spec §4).
  EXPECT_TRUE(r.conversation.thinking_mode);
  EXPECT_EQ(r.conversation.reasoning_effort, ReasoningEffort::High);
  EXPECT_EQ(r.inference_options.max_tokens, 9);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.parsing_options.stop_sequences.empty());
}

TEST(ResponsesConvert, EffortTable) {
  const std::pair<const char*, std::optional<ReasoningEffort>> cases[] = {
      {"none", std::nullopt},          {"minimal", ReasoningEffort::Low},
      {"low", ReasoningEffort::Low},   {"medium", ReasoningEffort::High},
      {"high", ReasoningEffort::High}, {"xhigh", ReasoningEffort::Xhigh},
      {"max", ReasoningEffort::Max},
  };
  for (const auto& [name, effort] : cases) {
    ConversationRequest r =
        responses_ok(body(std::string(R"("input":"x","reasoning":{"effort":")") + name + R"("})"));
    EXPECT_EQ(r.conversation.thinking_mode, effort.has_value()) << name;
    EXPECT_EQ(r.conversation.reasoning_effort, effort) << name;
  }
}

TEST(ResponsesConvert, MessagesRolesBlocksAndAssistantMerge) {
  ConversationRequest r = responses_ok(body(
      R"("input":[{"role":"developer","content":"dev"},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"https://x/i.png","detail":"original"},{"type":"input_file","file_id":"f"}]},{"role":"system","content":"sys"},{"role":"assistant","content":[{"type":"output_text","text":"one"}]},{"role":"assistant","content":""},{"role":"assistant","content":"two"},{"type":"web_search_call","id":"ws"}])"));
  const auto& m = r.conversation.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].role, Role::User);
  EXPECT_EQ(m[0].content, "dev");
  EXPECT_EQ(m[1].content, "a\n\n<｜image｜>\n\n[Unsupported Document]");
  ASSERT_EQ(m[1].image_sources.size(), 1u);
  EXPECT_EQ(m[1].image_sources[0].detail, ImageDetail::Original);
  EXPECT_EQ(m[2].role, Role::System);
  EXPECT_EQ(m[3].role, Role::Assistant);
  EXPECT_EQ(m[3].content, "one\n\ntwo");
}

TEST(ResponsesConvert, ReasoningAttachesToEmptyAssistant) {
  ConversationRequest r = responses_ok(body(
      R"("input":[{"role":"user","content":"q"},{"type":"reasoning","content":[{"text":"r1"},{"text":"r2"}],"encrypted_content":"xx"},{"type":"reasoning","content":[{"text":"r3"}]},{"role":"assistant","content":"answer"},{"type":"reasoning","content":[{"text":"r4"}]}])"));
  const auto& m = r.conversation.messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].reasoning_content, "r1\nr2\nr3");
  EXPECT_EQ(m[1].content, "answer");  // assistant text merges into the reasoning-only message
  EXPECT_EQ(m[2].role, Role::Assistant);
  EXPECT_EQ(m[2].reasoning_content, "r4");
  EXPECT_EQ(m[2].content, "");
}

TEST(ResponsesConvert, CallGroupSortedByCallId) {
  ConversationRequest r = responses_ok(body(
      R"("input":[{"role":"user","content":"q"},{"role":"assistant","content":"let me"},{"type":"function_call","call_id":"call_b","name":"f","arguments":"{\"x\":1}"},{"type":"function_call","call_id":"call_a","name":"g","arguments":"{}"},{"type":"function_call_output","call_id":"call_b","output":"rb"},{"type":"function_call_output","call_id":"call_a","output":[{"type":"input_text","text":"ra"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]},{"type":"function_call","call_id":"c3","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c3","output":"r3"}])"));
  const auto& m = r.conversation.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[1].content, "let me");
  ASSERT_EQ(m[1].tool_calls.size(), 2u);
  EXPECT_EQ(m[1].tool_calls[0].id, "call_a");
  EXPECT_EQ(m[1].tool_calls[0].name, "g");
  EXPECT_EQ(m[1].tool_calls[1].id, "call_b");
  EXPECT_EQ(m[1].tool_calls[1].arguments, "{\"x\":1}");
  EXPECT_EQ(m[2].tool_call_id, "call_a");
  EXPECT_EQ(m[2].content, "ra\n\n<｜image｜>");
  EXPECT_EQ(m[2].image_sources.size(), 1u);
  EXPECT_EQ(m[3].tool_call_id, "call_b");
  EXPECT_EQ(m[4].role, Role::Assistant);  // new empty assistant for the next group
  EXPECT_EQ(m[4].content, "");
  EXPECT_EQ(m[4].tool_calls.size(), 1u);
  EXPECT_EQ(m[5].role, Role::Tool);
  EXPECT_EQ(m[5].tool_call_id, "c3");
}

TEST(ResponsesConvert, NamespacesFlattenAndHistoricalCallsResolve) {
  ConversationRequest r = responses_ok(body(
      R"("reasoning":{"effort":"none"},"input":[{"role":"user","content":"q"},{"type":"function_call","call_id":"c1","namespace":"fs","name":"read","arguments":"{}"},{"type":"function_call","call_id":"c2","namespace":"a","name":"b::c","arguments":"{}"},{"type":"function_call","call_id":"c3","namespace":"a::b","name":"c","arguments":"{}"},{"type":"function_call","call_id":"c4","namespace":"a","name":"b::c","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"},{"type":"function_call_output","call_id":"c2","output":"ok"},{"type":"function_call_output","call_id":"c3","output":"ok"},{"type":"function_call_output","call_id":"c4","output":"ok"}],"tools":[{"type":"namespace","name":"fs","description":"Files.","tools":[{"type":"function","name":"read","description":"Read one."},{"type":"function","name":"list"}]}],"tool_choice":{"type":"function","name":"fs::read"})"));
  ASSERT_EQ(r.conversation.tools.size(), 1u);
  EXPECT_EQ(r.conversation.tools[0].name, "fs::read");
  EXPECT_EQ(r.conversation.tools[0].description, "Files.\nRead one.");
  EXPECT_EQ(r.conversation.tool_choice, ToolChoice::Required);
  EXPECT_TRUE(r.parsing_options.tool_call_initial_stage);
  const auto& calls = r.conversation.messages[1].tool_calls;
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0].name, "fs::read");
  EXPECT_EQ(calls[1].name, "a::b::c");
  EXPECT_EQ(calls[2].name, "a::b::c_1");  // a different pair with the same flattened name
  EXPECT_EQ(calls[3].name, "a::b::c");    // the same pair keeps its name
}

TEST(ResponsesConvert, NamespaceDescriptionsAndOrder) {
  ConversationRequest r = responses_ok(body(
      R"("input":"x","tools":[{"type":"namespace","name":"fs","description":"Files.","tools":[{"type":"function","name":"list"}]},{"type":"namespace","name":"web","tools":[{"type":"function","name":"get","description":"Fetch."}]},{"type":"web_search"},{"type":"file_search"}])"));
  ASSERT_EQ(r.conversation.tools.size(), 2u);
  EXPECT_EQ(r.conversation.tools[0].name, "fs::list");
  EXPECT_EQ(r.conversation.tools[0].description, "Files.\n");
  EXPECT_EQ(r.conversation.tools[1].name, "web::get");
  EXPECT_EQ(r.conversation.tools[1].description, "Fetch.");
  EXPECT_TRUE(r.parsing_options.parse_tool_calls);
}

TEST(ResponsesConvert, ApplyPatchCustomTool) {
  ConversationRequest r = responses_ok(body(
      R"("input":[{"role":"user","content":"patch it"},{"type":"custom_tool_call","call_id":"p1","name":"apply_patch","input":"*** Begin Patch\n\"x\"\n*** End Patch"},{"type":"custom_tool_call_output","call_id":"p1","output":"Done"}],"tools":[{"type":"custom","name":"apply_patch"}])"));
  EXPECT_EQ(r.custom_tool_names, std::vector<std::string>{"apply_patch"});
  ASSERT_EQ(r.conversation.tools.size(), 1u);
  const ToolDefinition& tool = r.conversation.tools[0];
  EXPECT_EQ(tool.name, "apply_patch");
  ASSERT_TRUE(tool.description.has_value());
  EXPECT_NE(tool.description->find("*** Begin Patch"), std::string::npos);
  EXPECT_EQ(
      to_json(tool.parameters),
      R"({"type":"object","additionalProperties":false,"properties":{"input":{"type":"string","description":"The entire contents of the apply_patch command (the *** Begin Patch ... *** End Patch envelope)."}},"required":["input"]})");
  const Message& call = r.conversation.messages[1];
  ASSERT_EQ(call.tool_calls.size(), 1u);
  EXPECT_EQ(call.tool_calls[0].arguments, R"({"input":"*** Begin Patch\n\"x\"\n*** End Patch"})");
  EXPECT_EQ(r.conversation.messages[2].content, "Done");
}

TEST(ResponsesConvert, WebSearchChoiceDroppedAndToolChoiceNone) {
  ConversationRequest dropped = responses_ok(
      body(R"("input":"x","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"})"));
  EXPECT_TRUE(dropped.conversation.tools.empty());
  EXPECT_EQ(dropped.conversation.tool_choice, ToolChoice::Auto);
  ConversationRequest none = responses_ok(
      body(R"("input":"x","tools":[{"type":"function","name":"a"}],"tool_choice":"none")"));
  EXPECT_TRUE(none.conversation.tools.empty());
  EXPECT_EQ(none.conversation.tool_choice, ToolChoice::None);
  EXPECT_FALSE(none.parsing_options.parse_tool_calls);
}

TEST(ResponsesConvert, JsonObjectAndSchemaFormats) {
  ConversationRequest json =
      responses_ok(body(R"("input":"Answer in JSON","text":{"format":{"type":"json_object"}})"));
  EXPECT_EQ(json.conversation.response_format, ResponseFormat::JsonObject);
  EXPECT_TRUE(json.parsing_options.parse_json_output);
  ConversationRequest schema = responses_ok(
      body(R"("input":"x","text":{"format":{"type":"json_schema","name":"s","schema":{}}})"));
  EXPECT_EQ(schema.conversation.response_format, ResponseFormat::Text);
}

}  // namespace
}  // namespace deepinfer::recipe
