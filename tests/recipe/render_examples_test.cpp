// Worked examples of encoding spec §3.11, for V4.1 and (where the spec gives or implies it) V4.
#include <gtest/gtest.h>

#include "recipe/render.h"
#include "render_test_helpers.h"

namespace deepinfer::recipe {
namespace {

using namespace testing;  // NOLINT

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kV41Effort75 =
    "Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the "
    "reasoning)\n\n";
const std::string kV4EffortHigh =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough "
    "in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and "
    "adversarial scenarios.\nExplicitly write out your entire deliberation process, documenting "
    "every intermediate step, considered alternative, and rejected hypothesis to ensure "
    "absolutely no assumption is left unchecked.\n\n";
const std::string kV4EffortMax =
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\nYou MUST "
    "reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively "
    "decompose the problem into its most fundamental components, trace every causal chain to its "
    "root, and resolve the underlying cause rather than any surface symptom.\nDo not stop "
    "reasoning until you have independently verified the solution from multiple angles and are "
    "certain that no assumption remains unchecked and no error remains undiscovered.\n\n";

Conversation conv(std::vector<Message> messages, bool thinking = true) {
  Conversation c;
  c.messages = std::move(messages);
  c.thinking_mode = thinking;
  return c;
}

ToolDefinition weather_tool() {
  return tool_def("get_weather",
                  R"({"type":"object","properties":{"location":{"type":"string"}},)"
                  R"("required":["location"]})",
                  "Get the weather");
}

std::string weather_schema_line() {
  return R"({"name": "get_weather", "description": "Get the weather", "parameters": )"
         R"({"type": "object", "properties": {"location": {"type": "string"}}, )"
         R"("required": ["location"]}})";
}

TEST(RenderExamples, Example1UserHelloThinkingDefault) {
  const Conversation c = conv({user_msg("Hello")});
  const RenderedPrompt v41 = render_prompt(c, EncodingVersion::V41);
  EXPECT_EQ(v41.prompt,
            kBos + "<｜System｜>" + kV41Effort75 + "<｜User｜>Hello<｜Assistant｜><think>");
  EXPECT_EQ(span_texts(v41), (std::vector<std::string>{kBos, "<｜System｜>", "<｜User｜>",
                                                       "<｜Assistant｜>", "<think>"}));
  const RenderedPrompt v4 = render_prompt(c, EncodingVersion::V4);
  EXPECT_EQ(v4.prompt, kBos + kV4EffortHigh + "<｜User｜>Hello<｜Assistant｜><think>");
  EXPECT_EQ(span_texts(v4),
            (std::vector<std::string>{kBos, "<｜User｜>", "<｜Assistant｜>", "<think>"}));
}

TEST(RenderExamples, Example2SystemUserThinkingDisabled) {
  const Conversation c = conv({system_msg("You are helpful."), user_msg("Hello")}, false);
  EXPECT_EQ(render_prompt(c, EncodingVersion::V41).prompt,
            kBos + "<｜System｜>You are helpful.<｜User｜>Hello<｜Assistant｜></think>");
  EXPECT_EQ(render_prompt(c, EncodingVersion::V4).prompt,
            kBos + "You are helpful.<｜User｜>Hello<｜Assistant｜></think>");
}

TEST(RenderExamples, Example3EffortMaxWithSystem) {
  Conversation c = conv({system_msg("sys"), user_msg("Hi")});
  c.reasoning_effort = ReasoningEffort::Max;
  EXPECT_EQ(render_prompt(c, EncodingVersion::V41).prompt,
            kBos +
                "<｜System｜>Reasoning Effort: 100 (range 1-100, the higher the value, the more "
                "thorough the reasoning)\n\nsys<｜User｜>Hi<｜Assistant｜><think>");
  EXPECT_EQ(render_prompt(c, EncodingVersion::V4).prompt,
            kBos + kV4EffortMax + "sys<｜User｜>Hi<｜Assistant｜><think>");
}

TEST(RenderExamples, Example4ToolsWithoutSystemThinkingOff) {
  Conversation c = conv({user_msg("Weather in Paris?")}, false);
  c.tools = {weather_tool()};
  const RenderedPrompt v41 = render_prompt(c, EncodingVersion::V41);
  const std::string head = kBos + "<｜System｜>\n\n## Tools\n\n";
  ASSERT_EQ(v41.prompt.substr(0, head.size()), head);
  const std::string tail = weather_schema_line() +
                           "\n\nYou MUST strictly follow the above defined tool name and "
                           "parameter schemas to invoke tool calls.\n<｜User｜>Weather in "
                           "Paris?<｜Assistant｜></think>";
  ASSERT_GE(v41.prompt.size(), tail.size());
  EXPECT_EQ(v41.prompt.substr(v41.prompt.size() - tail.size()), tail);

  const RenderedPrompt v4 = render_prompt(c, EncodingVersion::V4);
  EXPECT_EQ(v4.prompt.substr(0, kBos.size() + 10), kBos + "\n\n## Tools");
  EXPECT_EQ(v4.prompt.substr(v4.prompt.size() - tail.size()), tail);

  c.tool_choice = ToolChoice::Required;
  const std::string v41_required = render_prompt(c, EncodingVersion::V41).prompt;
  const std::string suffix41 = "<｜Assistant｜></think>\n\n<｜DSML｜ calls>\n";
  EXPECT_EQ(v41_required.substr(v41_required.size() - suffix41.size()), suffix41);
  const std::string v4_required = render_prompt(c, EncodingVersion::V4).prompt;
  const std::string suffix4 = "<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n";
  EXPECT_EQ(v4_required.substr(v4_required.size() - suffix4.size()), suffix4);

  // tool_choice none: no tool prompt, no system message, no suffix.
  c.tool_choice = ToolChoice::None;
  EXPECT_EQ(render_prompt(c, EncodingVersion::V41).prompt,
            kBos + "<｜User｜>Weather in Paris?<｜Assistant｜></think>");
}

TEST(RenderExamples, Example5HistoryWithReasoningToolCallAndResult) {
  Conversation c =
      conv({user_msg("Weather?"),
            assistant_msg("", "Need tool.",
                          {ToolCall{"toolu_1", "get_weather", R"({"location":"Paris"})"}}),
            tool_msg("toolu_1", "20C")});
  c.tools = {weather_tool()};
  const std::string tail41 =
      "<｜User｜>Weather?<｜Assistant｜><think>Need tool.</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ "
      "invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"location\" "
      "string=\"true\">Paris</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ "
      "calls><｜end▁of▁sentence｜><｜User｜><tool_result>20C</tool_result><｜Assistant｜><think>";
  const std::string p41 = render_prompt(c, EncodingVersion::V41).prompt;
  const std::string head41 = kBos + "<｜System｜>" + kV41Effort75 + "\n\n## Tools";
  EXPECT_EQ(p41.substr(0, head41.size()), head41);
  const std::string schemas_end =
      weather_schema_line() +
      "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
      "tool calls.\n";
  EXPECT_EQ(p41.substr(p41.size() - tail41.size() - schemas_end.size()), schemas_end + tail41);

  const std::string tail4 =
      replace_all(replace_all(replace_all(tail41, "｜DSML｜ calls", "｜DSML｜tool_calls"),
                              "｜DSML｜ invoke", "｜DSML｜invoke"),
                  "｜DSML｜ parameter", "｜DSML｜parameter");
  const std::string p4 = render_prompt(c, EncodingVersion::V4).prompt;
  EXPECT_EQ(p4.substr(p4.size() - tail4.size()), tail4);
}

TEST(RenderExamples, Example6AssistantWithoutReasoningThenLatestReminder) {
  const Conversation c = conv({user_msg("x"), assistant_msg("y"), reminder_msg("Be brief.")});
  const RenderedPrompt r = render_prompt(c, EncodingVersion::V41);
  EXPECT_EQ(r.prompt,
            kBos + "<｜System｜>" + kV41Effort75 +
                "<｜User｜>x<｜Assistant｜><think></think>y<｜end▁of▁sentence｜><｜latest_"
                "reminder｜>Be brief.<｜Assistant｜><think>");
  EXPECT_EQ(span_texts(r),
            (std::vector<std::string>{kBos, "<｜System｜>", "<｜User｜>", "<｜Assistant｜>",
                                      "<think>", "</think>", "<｜end▁of▁sentence｜>",
                                      "<｜latest_reminder｜>", "<｜Assistant｜>", "<think>"}));
  EXPECT_EQ(render_prompt(c, EncodingVersion::V4).prompt,
            kBos + kV4EffortHigh +
                "<｜User｜>x<｜Assistant｜><think></think>y<｜end▁of▁sentence｜><｜latest_"
                "reminder｜>Be brief.<｜Assistant｜><think>");
}

TEST(RenderExamples, Example7Images) {
  Message user = user_msg("What is this?\n\n<｜image｜>\n\n<｜image｜>");
  ImageSource a;
  a.kind = ImageSource::Kind::Url;
  a.data = "https://example.com/a.png";
  ImageSource b;
  b.kind = ImageSource::Kind::DataUrl;
  b.data = "data:image/png;base64,AAAA";
  user.image_sources = {a, b};
  const RenderedPrompt r = render_prompt(conv({user}), EncodingVersion::V41);
  EXPECT_EQ(r.prompt,
            kBos + "<｜System｜>" + kV41Effort75 +
                "<｜User｜>What is this?\n\n<｜image｜>\n\n<｜image｜><｜Assistant｜><think>");
  EXPECT_EQ(span_texts(r),
            (std::vector<std::string>{kBos, "<｜System｜>", "<｜User｜>", "<｜image｜>",
                                      "<｜image｜>", "<｜Assistant｜>", "<think>"}));
  ASSERT_EQ(r.image_sources.size(), 2u);
  EXPECT_EQ(r.image_sources[0].data, a.data);
  EXPECT_EQ(r.image_sources[1].data, b.data);
}

TEST(RenderExamples, Example8JsonMode) {
  Conversation c = conv({system_msg("Answer with json."), user_msg("Give me a number")});
  c.response_format = ResponseFormat::JsonObject;
  const std::string format =
      "Answer with json.\n\n## Response Format:\n\nYou MUST strictly adhere to the following "
      "schema to reply:\n{\"type\": \"json_object\"}<｜User｜>Give me a "
      "number<｜Assistant｜><think>";
  EXPECT_EQ(render_prompt(c, EncodingVersion::V41).prompt,
            kBos + "<｜System｜>" + kV41Effort75 + format);
  EXPECT_EQ(render_prompt(c, EncodingVersion::V4).prompt, kBos + kV4EffortHigh + format);
}

TEST(RenderExamples, Example9ToolResultsOutOfCallOrder) {
  const Conversation c =
      conv({user_msg("q"),
            assistant_msg("", "", {ToolCall{"call_A", "a", "{}"}, ToolCall{"call_B", "b", "{}"}}),
            tool_msg("call_B", "B result"), tool_msg("call_A", "A result")},
           false);
  for (EncodingVersion v : {EncodingVersion::V4, EncodingVersion::V41}) {
    const std::string p = render_prompt(c, v).prompt;
    const std::string tail =
        "<｜end▁of▁sentence｜><｜User｜><tool_result>A result</tool_result>\n\n<tool_result>B "
        "result</tool_result><｜Assistant｜></think>";
    ASSERT_GE(p.size(), tail.size());
    EXPECT_EQ(p.substr(p.size() - tail.size()), tail);
  }
}

}  // namespace
}  // namespace deepinfer::recipe
