// Output parsing (encoding spec §4) and the StreamProcessor (api spec §6): the worked examples
// of §4.11, the §10 chunk sequence, leading newlines, invalid output, JSON mode, stop sequences
// and truncation, asserted against the spec's exact strings.
#include "recipe/output_parser.h"

#include <gtest/gtest.h>

#include "output_parser_test_util.h"

namespace deepinfer::recipe {
namespace {

using testing::bytewise;
using testing::describe;
using testing::non_thinking;
using testing::parse;
using testing::Parsed;
using testing::Recorder;
using testing::run_chunks;
using testing::thinking;
using testing::ToolCallOut;
using Strings = std::vector<std::string>;

const std::string kWeatherCallV41 =
    "<｜DSML｜ calls>\n"
    "<｜DSML｜ invoke name=\"get_weather\">\n"
    "<｜DSML｜ parameter name=\"location\" string=\"true\">Paris</｜DSML｜ parameter>\n"
    "<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n"
    "</｜DSML｜ invoke>\n"
    "</｜DSML｜ calls>";

const std::string kWeatherCallV4 =
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"get_weather\">\n"
    "<｜DSML｜parameter name=\"location\" string=\"true\">Paris</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>";

// ---- §4.11 worked parse examples -------------------------------------------------------------

TEST(OutputParserExamples, ThinkingSplitsReasoningAndContent) {
  const auto events = run_chunks(thinking(), {"Let me think about this.</think>The answer is 42."});
  EXPECT_EQ(describe(events), (Strings{"Start", "Reasoning:Let me think about this.",
                                       "Raw:The answer is 42.", "Finish:stop"}));
}

TEST(OutputParserExamples, NonThinkingDropsEndOfThinking) {
  const Parsed p = parse(non_thinking(), "Let me think about this.</think>The answer is 42.");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "Let me think about this.The answer is 42.");
  EXPECT_EQ(p.reason, FinishReason::Stop);
}

TEST(OutputParserExamples, StopSequenceEndsTheAnswer) {
  ParsingOptions o = non_thinking();
  o.stop_sequences = {"STOP"};
  const Parsed p = parse(o, "Answer STOP ignored tail");
  EXPECT_EQ(p.content, "Answer ");
  EXPECT_EQ(p.reason, FinishReason::StopSequence);
  EXPECT_EQ(p.stop_sequence, "STOP");
}

TEST(OutputParserExamples, ThinkingToolCallWithoutEndOfThinking) {
  const Parsed p = parse(thinking(true), kWeatherCallV41);
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"location": "Paris", "days": 3})");
  EXPECT_EQ(p.reason, FinishReason::ToolCalls);
}

TEST(OutputParserExamples, TruncatedToolCallKeepsPartialArguments) {
  const Parsed p = parse(non_thinking(true),
                         "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
                         "<｜DSML｜ parameter name=\"location\" string=\"true\">Par");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"location": "Par)");
  EXPECT_EQ(p.reason, FinishReason::ToolCalls);
}

TEST(OutputParserExamples, NoToolsMeansDsmlIsPlainContent) {
  const Parsed p = parse(non_thinking(false), kWeatherCallV41);
  EXPECT_EQ(p.content, kWeatherCallV41);
  EXPECT_TRUE(p.tool_calls.empty());
  EXPECT_EQ(p.reason, FinishReason::Stop);
}

// ---- §4.6 exact argument strings ------------------------------------------------------------

TEST(OutputParserArguments, GoldenLocationDaysCall) {
  for (const std::string& call : {kWeatherCallV41, kWeatherCallV4}) {
    const Parsed p = parse(non_thinking(true), call);
    ASSERT_EQ(p.tool_calls.size(), 1u);
    EXPECT_EQ(p.tool_calls[0].name, "get_weather");
    EXPECT_EQ(p.tool_calls[0].arguments, "{\"location\": \"Paris\", \"days\": 3}");
  }
}

TEST(OutputParserArguments, NoParametersGiveEmptyObject) {
  const Parsed p = parse(non_thinking(true),
                         "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"now\">\n\n</｜DSML｜ invoke>\n"
                         "</｜DSML｜ calls>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "now");
  EXPECT_EQ(p.tool_calls[0].arguments, "{}");
}

TEST(OutputParserArguments, StringValuesAreJsonEscaped) {
  const Parsed p = parse(non_thinking(true),
                         "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"w\">\n"
                         "<｜DSML｜ parameter name=\"s\" string=\"true\">a\"b\\c\td\x01 é"
                         "</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"e\" string=\"true\">"
                         "</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"s": "a\"b\\c\td\u0001 é", "e": ""})");
}

TEST(OutputParserArguments, TwoInvokesInOneBlock) {
  const Parsed p =
      parse(non_thinking(true),
            "<｜DSML｜ calls>\n"
            "<｜DSML｜ invoke name=\"a\">\n"
            "<｜DSML｜ parameter name=\"x\" string=\"false\">[1, 2]</｜DSML｜ parameter>\n"
            "</｜DSML｜ invoke>\n"
            "<｜DSML｜ invoke name=\"b\">\n"
            "</｜DSML｜ invoke>\n"
            "</｜DSML｜ calls>");
  EXPECT_EQ(p.tool_calls,
            (std::vector<ToolCallOut>{{"a", R"({"x": [1, 2]})", true}, {"b", "{}", true}}));
}

// ---- api spec §10 chunk sequence --------------------------------------------------------------

const std::string kSection10Output =
    "Let me check both.</think>I'll look them up.\n\n<｜DSML｜ calls>\n"
    "<｜DSML｜ invoke name=\"get_weather\">\n"
    "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n"
    "</｜DSML｜ invoke>\n"
    "<｜DSML｜ invoke name=\"get_time\">\n"
    "<｜DSML｜ parameter name=\"tz\" string=\"true\">CET</｜DSML｜ parameter>\n"
    "</｜DSML｜ invoke>\n"
    "</｜DSML｜ calls>";

TEST(StreamProcessorSection10, ChunkSequenceForSingleChunk) {
  StreamProcessor processor(thinking(true));
  Recorder rec;
  InferenceChunk ready;
  ready.kind = InferenceChunk::Kind::Ready;
  ready.system_fingerprint = "fp-1";
  ready.prompt_tokens = 100;
  ready.prompt_cache_hit_tokens = 0;
  EXPECT_TRUE(processor.process(ready, rec));
  InferenceChunk text;
  text.kind = InferenceChunk::Kind::Text;
  text.content = kSection10Output;
  text.content_tokens = 40;
  EXPECT_TRUE(processor.process(text, rec));
  InferenceChunk finish;
  finish.kind = InferenceChunk::Kind::Finish;
  finish.finish = BackendFinish::Stop;
  EXPECT_FALSE(processor.process(finish, rec));
  EXPECT_TRUE(processor.finished());

  EXPECT_EQ(describe(rec.events), (Strings{"Start",
                                           "Reasoning:Let me check both.",
                                           "Raw:I'll look them up.",
                                           "Begin",
                                           "Call:get_weather",
                                           "Δ{\"",
                                           "Δcity",
                                           "Δ\": ",
                                           "Δ\"",
                                           "ΔParis",
                                           "Δ\"",
                                           "Δ}",
                                           "Begin",
                                           "Call:get_time",
                                           "Δ{\"",
                                           "Δtz",
                                           "Δ\": ",
                                           "Δ\"",
                                           "ΔCET",
                                           "Δ\"",
                                           "Δ}",
                                           "Finish:tool_calls"}));
  const auto& start = rec.events.front();
  ASSERT_TRUE(start.has_fingerprint_ptr);
  EXPECT_EQ(start.fingerprint, std::optional<std::string>("fp-1"));
  EXPECT_EQ(start.usage.prompt_tokens, 100);
  const auto& end = rec.events.back();
  EXPECT_EQ(end.usage.prompt_tokens, 100);
  EXPECT_EQ(end.usage.completion_tokens, 40);
  EXPECT_EQ(end.usage.prompt_cache_hit_tokens, 0);
}

TEST(StreamProcessorSection10, LegacyLabelSetDeltas) {
  ParsingOptions o = thinking(true);
  o.legacy_argument_labels = true;
  EXPECT_EQ(describe(run_chunks(o, {kSection10Output})), (Strings{"Start",
                                                                  "Reasoning:Let me check both.",
                                                                  "Raw:I'll look them up.",
                                                                  "Begin",
                                                                  "Call:get_weather",
                                                                  "Δ{",
                                                                  "Δ\"city\"",
                                                                  "Δ: ",
                                                                  "Δ\"",
                                                                  "ΔParis",
                                                                  "Δ\"",
                                                                  "Δ}",
                                                                  "Begin",
                                                                  "Call:get_time",
                                                                  "Δ{",
                                                                  "Δ\"tz\"",
                                                                  "Δ: ",
                                                                  "Δ\"",
                                                                  "ΔCET",
                                                                  "Δ\"",
                                                                  "Δ}",
                                                                  "Finish:tool_calls"}));
}

TEST(OutputParserArguments, LegacyLabelSetGivesTheSameArguments) {
  ParsingOptions o = non_thinking(true);
  o.legacy_argument_labels = true;
  for (const std::string& call : {kWeatherCallV41, kWeatherCallV4}) {
    const Parsed p = parse(o, call);
    ASSERT_EQ(p.tool_calls.size(), 1u);
    EXPECT_EQ(p.tool_calls[0].arguments, R"({"location": "Paris", "days": 3})");
    EXPECT_EQ(parse(o, bytewise(call)).tool_calls, p.tool_calls);
  }
}

// ---- §4.5 chunk boundaries ---------------------------------------------------------------------

TEST(OutputParserChunks, InputBoundariesArePreserved) {
  EXPECT_EQ(describe(run_chunks(non_thinking(), {"Hel", "lo ", "world"})),
            (Strings{"Start", "Raw:Hel", "Raw:lo ", "Raw:world", "Finish:stop"}));
}

TEST(OutputParserChunks, HeldMarkerPrefixIsReleasedWithItsChunk) {
  EXPECT_EQ(describe(run_chunks(non_thinking(true), {"Hello <", "b>"})),
            (Strings{"Start", "Raw:Hello <", "Raw:b>", "Finish:stop"}));
  EXPECT_EQ(describe(run_chunks(thinking(), {"a</th", "ink>b"})),
            (Strings{"Start", "Reasoning:a", "Raw:b", "Finish:stop"}));
}

TEST(OutputParserChunks, MarkerSplitAcrossChunksIsEmittedOnce) {
  const auto events = run_chunks(non_thinking(true), bytewise(kWeatherCallV41));
  EXPECT_EQ(describe(events), (Strings{"Start",
                                       "Begin",
                                       "Call:get_weather",
                                       "Δ{\"",
                                       "Δl",
                                       "Δo",
                                       "Δc",
                                       "Δa",
                                       "Δt",
                                       "Δi",
                                       "Δo",
                                       "Δn",
                                       "Δ\": ",
                                       "Δ\"",
                                       "ΔP",
                                       "Δa",
                                       "Δr",
                                       "Δi",
                                       "Δs",
                                       "Δ\"",
                                       "Δ, \"",
                                       "Δd",
                                       "Δa",
                                       "Δy",
                                       "Δs",
                                       "Δ\": ",
                                       "Δ3",
                                       "Δ}",
                                       "Finish:tool_calls"}));
}

// ---- §4.9 leading newlines and invalid output ---------------------------------------------------

TEST(OutputParserNewlines, LeadingNewlinesOfReasoningAndAnswerAreRemoved) {
  const Parsed p = parse(thinking(), "\n\nReason\n\nmore\n\n</think>\n\nAnswer\n\nend\n");
  EXPECT_EQ(p.reasoning, "Reason\n\nmore");
  EXPECT_EQ(p.content, "Answer\n\nend\n");
}

TEST(OutputParserNewlines, NonThinkingAnswerLosesLeadingNewlines) {
  EXPECT_EQ(parse(non_thinking(), "\n\n\nHi\n").content, "Hi\n");
}

TEST(OutputParserNewlines, ContinuedStagesKeepLeadingNewlines) {
  ParsingOptions reasoning = non_thinking();
  reasoning.reasoning_initial_stage = ReasoningInitialStage::Reasoning;
  const Parsed r = parse(reasoning, "\nstill thinking</think>\nanswer");
  EXPECT_EQ(r.reasoning, "\nstill thinking");
  EXPECT_EQ(r.content, "answer");

  ParsingOptions content = non_thinking();
  content.reasoning_initial_stage = ReasoningInitialStage::Content;
  EXPECT_EQ(parse(content, "\nmore answer").content, "\nmore answer");
}

TEST(OutputParserNewlines, NewlinesBeforeDsmlBlockAreRemoved) {
  const Parsed p = parse(non_thinking(true), "Checking.\n\n\n" + kWeatherCallV41);
  EXPECT_EQ(p.content, "Checking.");
  ASSERT_EQ(p.tool_calls.size(), 1u);

  const Parsed r = parse(thinking(true), "Plan\n\n" + kWeatherCallV41);
  EXPECT_EQ(r.reasoning, "Plan");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u);
}

TEST(OutputParserNewlines, NewlineNotDirectlyBeforeMarkerIsKept) {
  // The LF before "x" is not followed by the marker, so it is content.
  EXPECT_EQ(parse(non_thinking(true), "a\nx\n\n<｜DSML｜ calls>\n</｜DSML｜ calls>").content,
            "a\nx");
  EXPECT_EQ(parse(thinking(), "r\n\nx</think>").reasoning, "r\n\nx");
}

TEST(OutputParserInvalid, ExtraEndOfThinkingIsDiscarded) {
  const Parsed p = parse(non_thinking(), "a</think>\n\nb");
  EXPECT_EQ(p.content, "a\n\nb");  // no leading-LF removal after the discarded marker
  const Parsed q = parse(thinking(), "r</think>x</think>y");
  EXPECT_EQ(q.reasoning, "r");
  EXPECT_EQ(q.content, "xy");
  EXPECT_EQ(parse(non_thinking(), "</think>\nz").content, "\nz");
}

TEST(OutputParserInvalid, ContentAfterToolCallsBlockIsDiscarded) {
  const Parsed p =
      parse(non_thinking(true), kWeatherCallV41 + "\ntrailing junk<｜end▁of▁sentence｜>");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"location": "Paris", "days": 3})");
  EXPECT_EQ(p.reason, FinishReason::ToolCalls);
}

TEST(OutputParserInvalid, WrongBlockNameStillStartsToolParsing) {
  const Parsed p = parse(non_thinking(true),
                         "<｜DSML｜function_calls>\n<｜DSML｜ invoke name=\"f\">\n"
                         "</｜DSML｜ invoke>\n</｜DSML｜ calls>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "f");
  EXPECT_EQ(p.tool_calls[0].arguments, "{}");
}

TEST(OutputParserInvalid, UnclosedReasoningIsAllReasoning) {
  const Parsed p = parse(thinking(), "thinking forever <thi");
  EXPECT_EQ(p.reasoning, "thinking forever <thi");
  EXPECT_EQ(p.content, "");
}

TEST(OutputParserInitialStage, RequiredToolChoiceStartsInsideTheBlock) {
  ParsingOptions o = thinking(true);
  o.tool_call_initial_stage = true;
  const Parsed p = parse(o,
                         "<｜DSML｜ invoke name=\"get_weather\">\n"
                         "<｜DSML｜ parameter name=\"location\" string=\"true\">Paris"
                         "</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>");
  EXPECT_EQ(p.reasoning, "");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"location": "Paris"})");
}

// ---- §4.7 JSON output mode ----------------------------------------------------------------------

ParsingOptions json_mode(bool think = false) {
  ParsingOptions o = think ? thinking() : non_thinking();
  o.parse_json_output = true;
  return o;
}

TEST(OutputParserJson, FencedJsonSurroundingsBecomeSpaces) {
  const auto events = run_chunks(json_mode(), {"Sure:\n```json\n{\"a\": 1}\n```\nDone"});
  EXPECT_EQ(describe(events),
            (Strings{"Start", "Raw: ", "Raw:{\"a\": 1}", "Raw: ", "Finish:stop"}));
  EXPECT_EQ(parse(json_mode(), "```\n[1, 2]\n```").content, "[1, 2]");
}

TEST(OutputParserJson, RawBraceOrBracketStartsJson) {
  EXPECT_EQ(describe(run_chunks(json_mode(), {"Result: {\"a\": [1]}"})),
            (Strings{"Start", "Raw: ", "Raw:{", "Raw:\"a\": [1]}", "Finish:stop"}));
  EXPECT_EQ(parse(json_mode(), "[true]").content, "[true]");
  EXPECT_EQ(parse(json_mode(), "\n\n{}").content, "{}");  // leading LFs skipped, not spaced
}

TEST(OutputParserJson, ToSpaceGivesOneSpacePerPop) {
  EXPECT_EQ(parse(json_mode(), Strings{"ab", "cd", "{}"}).content, "  {}");
}

TEST(OutputParserJson, ReasoningIsUnaffected) {
  const Parsed p = parse(json_mode(true), "think {x}</think>\n{\"a\":1}");
  EXPECT_EQ(p.reasoning, "think {x}");
  EXPECT_EQ(p.content, "{\"a\":1}");
}

TEST(OutputParserJson, StopSequencesOnlyInsideJson) {
  ParsingOptions o = json_mode();
  o.stop_sequences = {"STOP"};
  const Parsed before = parse(o, "STOP {\"a\":1}");
  EXPECT_EQ(before.content, " {\"a\":1}");
  EXPECT_EQ(before.reason, FinishReason::Stop);
  const Parsed inside = parse(o, "{\"a\":\"xSTOPy\"}");
  EXPECT_EQ(inside.content, "{\"a\":\"x");
  EXPECT_EQ(inside.reason, FinishReason::StopSequence);
}

TEST(OutputParserJson, MatchedJsonStillRecognizesToolCalls) {
  ParsingOptions o = json_mode();
  o.parse_tool_calls = true;
  const Parsed p = parse(o, "```json\n{}\n```\nthen\n\n" + kWeatherCallV41);
  EXPECT_EQ(p.content, "{} ");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
}

// ---- §4.8 stop sequences ------------------------------------------------------------------------

ParsingOptions with_stops(ParsingOptions o, Strings stops) {
  o.stop_sequences = std::move(stops);
  return o;
}

TEST(OutputParserStop, SplitAcrossChunksAndLaterChunksIgnored) {
  const auto o = with_stops(non_thinking(), {"STOP"});
  StreamProcessor processor(o);
  Recorder rec;
  auto text = [](std::string_view s, int64_t tokens) {
    InferenceChunk c;
    c.kind = InferenceChunk::Kind::Text;
    c.content = s;
    c.content_tokens = tokens;
    return c;
  };
  EXPECT_TRUE(processor.process(text("Answer ST", 3), rec));
  EXPECT_FALSE(processor.process(text("OP after", 2), rec));
  EXPECT_TRUE(processor.finished());
  EXPECT_FALSE(processor.process(text("more", 7), rec));
  processor.end_of_stream(rec);
  EXPECT_EQ(describe(rec.events), (Strings{"Start", "Raw:Answer ", "Finish:stop_sequence"}));
  EXPECT_EQ(rec.events.back().stop_sequence, "STOP");
  EXPECT_EQ(rec.events.back().usage.completion_tokens, 5);
}

TEST(OutputParserStop, PiecesFromManyChunksAreConcatenated) {
  const auto o = with_stops(non_thinking(), {"<end>"});
  const Parsed p = parse(o, Strings{"x<", "e", "nd", ">tail"});
  EXPECT_EQ(p.content, "x");
  EXPECT_EQ(p.stop_sequence, "<end>");
  EXPECT_EQ(p.reason, FinishReason::StopSequence);
  EXPECT_EQ(p.usage.completion_tokens, 4);
}

TEST(OutputParserStop, MultiByteStopSplitInsideCharacter) {
  const auto o = with_stops(non_thinking(), {"。"});  // E3 80 82
  const Parsed p = parse(o, Strings{"好\xE3", "\x80", "\x82后"});
  EXPECT_EQ(p.content, "好");
  EXPECT_EQ(p.stop_sequence, "。");
}

TEST(OutputParserStop, OverlappingPrefixes) {
  const auto o = with_stops(non_thinking(), {"abac"});
  EXPECT_EQ(parse(o, "xababac!").content, "xab");
  EXPECT_EQ(parse(o, bytewise("xababac!")).content, "xab");
  EXPECT_EQ(parse(o, "abab").content, "abab");
}

TEST(OutputParserStop, FirstListedSequenceWinsAtTheSameByte) {
  const auto o = with_stops(non_thinking(), {"", "cd", "bcd"});
  const Parsed p = parse(o, "abcde");
  EXPECT_EQ(p.content, "ab");  // "cd" completes first (at 'd') and is listed first
  EXPECT_EQ(p.stop_sequence, "cd");
}

TEST(OutputParserStop, NotMatchedInReasoningOrToolMarkup) {
  const auto o = with_stops(thinking(true), {"STOP", "name"});
  const Parsed p = parse(o, "STOP here</think>" + kWeatherCallV41);
  EXPECT_EQ(p.reasoning, "STOP here");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.reason, FinishReason::ToolCalls);
  const Parsed q = parse(o, "r</think>ans STOP x");
  EXPECT_EQ(q.content, "ans ");
  EXPECT_EQ(q.stop_sequence, "STOP");
}

// ---- §4.9 truncation
// ------------------------------------------------------------------------------

TEST(OutputParserTruncation, HeldMarkerBytesAreFlushedAsArguments) {
  const Parsed p = parse(non_thinking(true),
                         "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
                         "<｜DSML｜ parameter name=\"location\" string=\"true\">Par</｜DS",
                         BackendFinish::Length);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"location": "Par</｜DS)");
  EXPECT_EQ(p.reason, FinishReason::Length);
}

TEST(OutputParserTruncation, InsideToolNameEmitsOnlyTheBegin) {
  const Parsed p =
      parse(non_thinking(true), "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_wea", std::nullopt);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_FALSE(p.tool_calls[0].named);
  EXPECT_EQ(p.reason, FinishReason::EndOfStream);
}

TEST(OutputParserTruncation, HeldAnswerBytesAreFlushedAtTheEnd) {
  EXPECT_EQ(parse(non_thinking(true), "end with <｜DS", std::nullopt).content, "end with <｜DS");
  EXPECT_EQ(parse(thinking(), "r\n\n</thi").reasoning, "r\n\n</thi");
}

// ---- api spec §6 StreamProcessor
// -----------------------------------------------------------------

InferenceChunk ready_chunk(std::optional<std::string> fp, int64_t prompt, int64_t hit) {
  InferenceChunk c;
  c.kind = InferenceChunk::Kind::Ready;
  c.system_fingerprint = std::move(fp);
  c.prompt_tokens = prompt;
  c.prompt_cache_hit_tokens = hit;
  return c;
}

InferenceChunk text_chunk(std::string_view s, int64_t tokens) {
  InferenceChunk c;
  c.kind = InferenceChunk::Kind::Text;
  c.content = s;
  c.content_tokens = tokens;
  return c;
}

InferenceChunk finish_chunk(BackendFinish f) {
  InferenceChunk c;
  c.kind = InferenceChunk::Kind::Finish;
  c.finish = f;
  return c;
}

TEST(StreamProcessor, ReadyGivesStartWithPromptUsage) {
  StreamProcessor p(non_thinking());
  Recorder rec;
  EXPECT_TRUE(p.process(ready_chunk("fp-9", 12, 8), rec));
  EXPECT_TRUE(p.process(ready_chunk("other", 99, 99), rec));  // ignored
  EXPECT_TRUE(p.process(text_chunk("Hi", 2), rec));
  EXPECT_TRUE(p.process(text_chunk("!", 3), rec));
  EXPECT_FALSE(p.process(finish_chunk(BackendFinish::Stop), rec));
  ASSERT_EQ(describe(rec.events), (Strings{"Start", "Raw:Hi", "Raw:!", "Finish:stop"}));
  EXPECT_EQ(rec.events[0].fingerprint, std::optional<std::string>("fp-9"));
  EXPECT_EQ(rec.events[0].usage.prompt_tokens, 12);
  EXPECT_EQ(rec.events[0].usage.prompt_cache_hit_tokens, 8);
  EXPECT_EQ(rec.events[0].usage.completion_tokens, 0);
  const Usage& u = rec.events.back().usage;
  EXPECT_EQ(u.prompt_tokens, 12);
  EXPECT_EQ(u.prompt_cache_hit_tokens, 8);
  EXPECT_EQ(u.completion_tokens, 5);
}

TEST(StreamProcessor, TextFirstGivesStartWithZeroUsage) {
  StreamProcessor p(non_thinking());
  Recorder rec;
  EXPECT_TRUE(p.process(text_chunk("Hi", 1), rec));
  EXPECT_TRUE(p.process(ready_chunk("fp-late", 50, 0), rec));  // after Start: ignored
  p.end_of_stream(rec);
  ASSERT_EQ(describe(rec.events), (Strings{"Start", "Raw:Hi", "Finish:end_of_stream"}));
  EXPECT_EQ(rec.events[0].fingerprint, std::nullopt);
  EXPECT_EQ(rec.events[0].usage.prompt_tokens, 0);
  EXPECT_EQ(rec.events.back().usage.prompt_tokens, 0);
  EXPECT_EQ(rec.events.back().usage.completion_tokens, 1);
}

TEST(StreamProcessor, FinishWithoutAnyTextStillStarts) {
  StreamProcessor p(non_thinking());
  Recorder rec;
  EXPECT_FALSE(p.process(finish_chunk(BackendFinish::ContentFilter), rec));
  EXPECT_EQ(describe(rec.events), (Strings{"Start", "Finish:content_filter"}));
  p.end_of_stream(rec);  // already finished: nothing
  EXPECT_FALSE(p.process(text_chunk("x", 1), rec));
  EXPECT_EQ(rec.events.size(), 2u);
}

TEST(StreamProcessor, FinishReasonResolution) {
  const std::string call = kWeatherCallV41;
  EXPECT_EQ(parse(non_thinking(true), "plain", BackendFinish::Stop).reason, FinishReason::Stop);
  EXPECT_EQ(parse(non_thinking(true), call, BackendFinish::Stop).reason, FinishReason::ToolCalls);
  EXPECT_EQ(parse(non_thinking(true), call, BackendFinish::Length).reason, FinishReason::Length);
  EXPECT_EQ(parse(non_thinking(true), call, BackendFinish::ContentFilter).reason,
            FinishReason::ContentFilter);
  EXPECT_EQ(parse(non_thinking(true), call, std::nullopt).reason, FinishReason::EndOfStream);
  EXPECT_EQ(parse(with_stops(non_thinking(), {"."}), "a.b", BackendFinish::Length).reason,
            FinishReason::StopSequence);
}

TEST(StreamProcessor, EmptyTextChunksAreHarmless) {
  const Parsed p = parse(thinking(true), Strings{"", "r", "", "</think>", "", "a", ""});
  EXPECT_EQ(p.reasoning, "r");
  EXPECT_EQ(p.content, "a");
  EXPECT_EQ(p.usage.completion_tokens, 7);
}

}  // namespace
}  // namespace deepinfer::recipe
