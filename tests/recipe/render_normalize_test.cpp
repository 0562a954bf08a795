// Message normalization (encoding spec §3.2), reasoning-effort tables (§3.5) and the rendering
// rules of §3.4 that the worked examples do not cover.
#include "recipe/render_normalize.h"

#include <gtest/gtest.h>

#include "recipe/render.h"
#include "render_test_helpers.h"

namespace deepinfer::recipe {
namespace {

using namespace testing;  // NOLINT

const std::string kBos = "<｜begin▁of▁sentence｜>";

std::string render(std::vector<Message> messages, EncodingVersion v, bool thinking = false) {
  Conversation c;
  c.messages = std::move(messages);
  c.thinking_mode = thinking;
  return render_prompt(c, v).prompt;
}

TEST(RenderNormalize, V4MergesLeadingSystemMessages) {
  const auto n = normalize_messages(
      {system_msg("a"), system_msg(""), system_msg("b"), user_msg("u")}, EncodingVersion::V4);
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[0].role, Role::System);
  EXPECT_EQ(n[0].content, "a\n\nb");  // the empty one vanishes
  EXPECT_EQ(render({system_msg(""), system_msg("x")}, EncodingVersion::V4),
            kBos + "x<｜Assistant｜></think>");
}

TEST(RenderNormalize, V4DemotesLaterSystemToUserAndDropsEmptyOnes) {
  const std::vector<Message> in = {system_msg("s"),    user_msg("u"),  assistant_msg("a"),
                                   system_msg("late"), system_msg(""), user_msg("v")};
  EXPECT_EQ(render(in, EncodingVersion::V4),
            kBos +
                "s<｜User｜>u<｜Assistant｜></think>a<｜end▁of▁sentence｜><｜User｜>late\n\nv"
                "<｜Assistant｜></think>");
  // V4.1 keeps every system message in place, each with its own token.
  EXPECT_EQ(render(in, EncodingVersion::V41),
            kBos +
                "<｜System｜>s<｜User｜>u<｜Assistant｜></think>a<｜end▁of▁sentence｜>"
                "<｜System｜>late<｜System｜><｜User｜>v<｜Assistant｜></think>");
}

TEST(RenderNormalize, V41KeepsConsecutiveSystemMessages) {
  EXPECT_EQ(render({system_msg("a"), system_msg("b"), user_msg("u")}, EncodingVersion::V41),
            kBos + "<｜System｜>a<｜System｜>b<｜User｜>u<｜Assistant｜></think>");
}

TEST(RenderNormalize, AdjacentUserMessagesMergeWithImages) {
  Message a = user_msg("one <｜image｜>");
  a.image_sources.resize(1);
  a.image_sources[0].data = "A";
  Message b = user_msg("<｜image｜> two");
  b.image_sources.resize(1);
  b.image_sources[0].data = "B";
  const auto n = normalize_messages({a, b}, EncodingVersion::V41);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].content, "one <｜image｜>\n\n<｜image｜> two");
  ASSERT_EQ(n[0].image_sources.size(), 2u);
  EXPECT_EQ(n[0].image_sources[1].data, "B");
  EXPECT_EQ(render({user_msg("x"), user_msg(""), user_msg("y")}, EncodingVersion::V41),
            kBos + "<｜User｜>x\n\n\n\ny<｜Assistant｜></think>");
}

TEST(RenderNormalize, ToolResultsSortedByCallOrderUsersKeepSlots) {
  const auto calls = std::vector<ToolCall>{{"c1", "f", "{}"}, {"c2", "f", "{}"}, {"c3", "f", "{}"}};
  const auto n = normalize_messages(
      {user_msg("q"), assistant_msg("", "", calls), tool_msg("c3", "3"), user_msg("note"),
       tool_msg("c1", "1"), tool_msg("zz", "unknown"), tool_msg("c2", "2")},
      EncodingVersion::V41);
  ASSERT_EQ(n.size(), 7u);
  // Tool slots 2, 4, 5, 6 receive the stable order by rank: unknown id ranks 0 like c1.
  EXPECT_EQ(n[2].content, "1");
  EXPECT_EQ(n[3].content, "note");
  EXPECT_EQ(n[4].content, "unknown");
  EXPECT_EQ(n[5].content, "2");
  EXPECT_EQ(n[6].content, "3");
}

TEST(RenderNormalize, NoSortingWithoutPriorToolCallsOrSingleResult) {
  const auto n = normalize_messages({tool_msg("b", "B"), tool_msg("a", "A")}, EncodingVersion::V4);
  EXPECT_EQ(n[0].content, "B");
  // The order comes from the most recent assistant that has tool calls.
  const auto m = normalize_messages(
      {assistant_msg("", "", {{"a", "f", "{}"}, {"b", "f", "{}"}}), tool_msg("b", "B1"),
       tool_msg("a", "A1"), assistant_msg("plain"), tool_msg("b", "B2"), tool_msg("a", "A2")},
      EncodingVersion::V41);
  EXPECT_EQ(m[1].content, "A1");
  EXPECT_EQ(m[2].content, "B1");
  EXPECT_EQ(m[4].content, "A2");
  EXPECT_EQ(m[5].content, "B2");
}

TEST(RenderNormalize, UserAndToolTurnsJoinWithBlankLine) {
  EXPECT_EQ(render({tool_msg("a", "r"), user_msg("u"), tool_msg("b", "s")}, EncodingVersion::V41),
            kBos +
                "<｜User｜><tool_result>r</tool_result>\n\nu\n\n<tool_result>s</tool_result>"
                "<｜Assistant｜></think>");
}

TEST(RenderRules, HistoricalReasoningOnlyInThinkingMode) {
  const std::vector<Message> m = {user_msg("q"), assistant_msg("a", "why")};
  EXPECT_EQ(
      render(m, EncodingVersion::V4, false),
      kBos + "<｜User｜>q<｜Assistant｜></think>a<｜end▁of▁sentence｜><｜Assistant｜></think>");
  Conversation c;
  c.messages = m;
  c.reasoning_effort = ReasoningEffort::Low;
  EXPECT_EQ(render_prompt(c, EncodingVersion::V4).prompt,
            kBos +
                "<｜User｜>q<｜Assistant｜><think>why</think>a<｜end▁of▁sentence｜>"
                "<｜Assistant｜><think>");
}

TEST(RenderRules, AssistantFirstMessageHasNoThinkBlock) {
  Conversation c;
  c.messages = {assistant_msg("hi", "r")};
  c.reasoning_effort = ReasoningEffort::Low;
  EXPECT_EQ(render_prompt(c, EncodingVersion::V41).prompt,
            kBos +
                "<｜System｜>Reasoning Effort: 50 (range 1-100, the higher the value, the more "
                "thorough the reasoning)\n\n<｜Assistant｜></think>hi<｜end▁of▁sentence｜>"
                "<｜Assistant｜><think>");
}

TEST(RenderRules, EmptyConversation) {
  EXPECT_EQ(render({}, EncodingVersion::V41), kBos + "<｜Assistant｜></think>");
  // The effort prefix belongs to message 0: with no messages there is none.
  Conversation c;
  EXPECT_EQ(render_prompt(c, EncodingVersion::V4).prompt, kBos + "<｜Assistant｜><think>");
  EXPECT_EQ(render_prompt(c, EncodingVersion::V41).prompt, kBos + "<｜Assistant｜><think>");
}

TEST(RenderEffort, V41Table) {
  const std::string tail =
      " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
  const std::pair<std::optional<ReasoningEffort>, std::string> table[] = {
      {ReasoningEffort::Low, "50"},
      {ReasoningEffort::High, "75"},
      {ReasoningEffort::Xhigh, "75"},
      {ReasoningEffort::Max, "100"},
      {std::nullopt, "75"}};
  for (const auto& [effort, number] : table) {
    Conversation c;
    c.messages = {user_msg("u")};
    c.reasoning_effort = effort;
    EXPECT_EQ(render_prompt(c, EncodingVersion::V41).prompt,
              kBos + "<｜System｜>Reasoning Effort: " + number + tail +
                  "<｜User｜>u<｜Assistant｜><think>");
    c.thinking_mode = false;  // effort is ignored without thinking
    EXPECT_EQ(render_prompt(c, EncodingVersion::V41).prompt,
              kBos + "<｜User｜>u<｜Assistant｜></think>");
  }
}

TEST(RenderEffort, V4Table) {
  const std::string high = "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n";
  const std::string max =
      "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n";
  const std::pair<std::optional<ReasoningEffort>, std::string> table[] = {
      {ReasoningEffort::Low, ""},
      {ReasoningEffort::High, high},
      {ReasoningEffort::Xhigh, high},
      {ReasoningEffort::Max, max},
      {std::nullopt, high}};
  for (const auto& [effort, first_line] : table) {
    Conversation c;
    c.messages = {user_msg("u")};
    c.reasoning_effort = effort;
    const std::string p = render_prompt(c, EncodingVersion::V4).prompt;
    EXPECT_EQ(p.substr(0, kBos.size() + first_line.size()), kBos + first_line);
    const std::string end = first_line.empty() ? kBos + "<｜User｜>" : "\n\n<｜User｜>";
    EXPECT_NE(p.find(end), std::string::npos);
    EXPECT_EQ(p.find("<｜System｜>"), std::string::npos);  // V4 has no system token
  }
}

}  // namespace
}  // namespace deepinfer::recipe
