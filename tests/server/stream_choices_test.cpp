// n > 1 on a stream (Chat and legacy Completions): one SSE stream carries every choice, chunks
// tagged with their `index` and interleaved as the engine produces them, one finish chunk per
// choice, then one usage chunk with `choices: []` (stream_options.include_usage) and a single
// `data: [DONE]`. Each choice's concatenated deltas equal the same choice of the non-stream reply.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

#include "common/json.h"
#include "service_harness.h"
#include "sse_util.h"

namespace deepinfer::server {
namespace {

using testing::HarnessOptions;
using testing::ServiceHarness;
using testing::sse_data;
using testing::text_of;

constexpr const char* kScript = "Thinking it over.</think>Hello there.";

struct ChoiceStream {
  std::string content, reasoning;
  int finish_chunks = 0;
  std::string finish_reason;
  bool finished = false;
  bool chunk_after_finish = false;
  size_t first_frame = SIZE_MAX, finish_frame = SIZE_MAX;
};

TEST(StreamChoices, ChatNThreeInterleavesChoicesThenUsageThenDone) {
  HarnessOptions o;
  o.step_delay = std::chrono::milliseconds(2);  // the three requests share engine steps
  ServiceHarness h(o);
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string base =
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"n":3,"seed":7)";
  auto r = h.post("/v1/chat/completions",
                  base + R"(,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  const auto events = sse_data(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::map<int64_t, ChoiceStream> choices;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    auto v = parse_json(events[i]);
    ASSERT_TRUE(v.ok()) << events[i];
    const auto& obj = v.value().as_object();
    EXPECT_EQ(obj.at("object"), "chat.completion.chunk");
    ASSERT_TRUE(obj.at("usage").is_null()) << events[i];  // include_usage: null until the end
    const auto& list = obj.at("choices").as_array();
    ASSERT_EQ(list.size(), 1u) << events[i];
    const auto& c = list[0].as_object();
    ChoiceStream& s = choices[c.at("index").as_int64()];
    if (s.first_frame == SIZE_MAX) {
      s.first_frame = i;
      EXPECT_EQ(c.at("delta").at("role"), "assistant") << events[i];
    }
    if (s.finished) s.chunk_after_finish = true;
    const auto& d = c.at("delta").as_object();
    s.content += text_of(d, "content");
    s.reasoning += text_of(d, "reasoning_content");
    if (!c.at("finish_reason").is_null()) {
      ++s.finish_chunks;
      s.finished = true;
      s.finish_frame = i;
      s.finish_reason = c.at("finish_reason").as_string();
    }
  }
  ASSERT_EQ(choices.size(), 3u);
  const int64_t script_tokens =
      static_cast<int64_t>(h.tokenizer().encode(kScript).value().size()) + 1;  // + EOS
  for (auto& [index, s] : choices) {
    EXPECT_GE(index, 0);
    EXPECT_LT(index, 3);
    EXPECT_EQ(s.finish_chunks, 1) << index;
    EXPECT_FALSE(s.chunk_after_finish) << index;
    EXPECT_EQ(s.finish_reason, "stop") << index;
    EXPECT_EQ(s.reasoning, "Thinking it over.");
    EXPECT_EQ(s.content, "Hello there.");
  }
  // Interleaved: choice 1 and 2 have started before choice 0 has finished.
  EXPECT_LT(choices[1].first_frame, choices[0].finish_frame);
  EXPECT_LT(choices[2].first_frame, choices[0].finish_frame);

  // The usage chunk: OpenAI's shape for n > 1, prompt once, completion summed.
  auto usage_chunk = parse_json(events[events.size() - 2]);
  ASSERT_TRUE(usage_chunk.ok()) << events[events.size() - 2];
  const auto& u = usage_chunk.value().as_object();
  EXPECT_TRUE(u.at("choices").as_array().empty());
  EXPECT_EQ(u.at("object"), "chat.completion.chunk");
  const auto& usage = u.at("usage").as_object();
  EXPECT_EQ(usage.at("completion_tokens").as_int64(), 3 * script_tokens);
  const int64_t prompt = usage.at("prompt_tokens").as_int64();
  EXPECT_EQ(usage.at("total_tokens").as_int64(), prompt + 3 * script_tokens);
  EXPECT_EQ(usage.at("prompt_cache_miss_tokens").as_int64() +
                usage.at("prompt_cache_hit_tokens").as_int64(),
            prompt);
  EXPECT_EQ(std::count(events.begin(), events.end(), "[DONE]"), 1);

  // The non-stream reply with the same seed: the same choices, the same usage.
  auto full = h.post("/v1/chat/completions", base + "}");
  ASSERT_EQ(full.status, 200) << full.body;
  auto fv = parse_json(full.body);
  ASSERT_TRUE(fv.ok());
  const auto& fchoices = fv.value().at("choices").as_array();
  ASSERT_EQ(fchoices.size(), 3u);
  for (const auto& fc : fchoices) {
    const ChoiceStream& s = choices[fc.at("index").as_int64()];
    EXPECT_EQ(text_of(fc.at("message").as_object(), "content"), s.content);
    EXPECT_EQ(text_of(fc.at("message").as_object(), "reasoning_content"), s.reasoning);
    EXPECT_EQ(text_of(fc.as_object(), "finish_reason"), s.finish_reason);
  }
  EXPECT_EQ(fv.value().at("usage").at("completion_tokens").as_int64(), 3 * script_tokens);
  EXPECT_EQ(fv.value().at("usage").at("prompt_tokens").as_int64(), prompt);
  EXPECT_EQ(h.api().in_flight(), 0);
}

TEST(StreamChoices, ChatNWithoutIncludeUsageHasNoUsageAnywhere) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  auto r = h.post(
      "/v1/chat/completions",
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"n":2,"stream":true,"thinking":{"type":"disabled"}})");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto events = sse_data(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  int finishes[2] = {0, 0};
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i].find("\"usage\""), std::string::npos) << events[i];
    auto v = parse_json(events[i]);
    ASSERT_TRUE(v.ok());
    const auto& c = v.value().at("choices").at(0).as_object();
    if (!c.at("finish_reason").is_null()) ++finishes[c.at("index").as_int64()];
  }
  EXPECT_EQ(finishes[0], 1);
  EXPECT_EQ(finishes[1], 1);
}

TEST(StreamChoices, LegacyCompletionsNTwoStreamAndComplete) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string base = R"({"model":"deepseek-v4-test","prompt":"Hi","max_tokens":64,"n":2)";
  auto full = h.post("/v1/completions", base + "}");
  ASSERT_EQ(full.status, 200) << full.body;
  auto fv = parse_json(full.body);
  ASSERT_TRUE(fv.ok());
  const auto& fchoices = fv.value().at("choices").as_array();
  ASSERT_EQ(fchoices.size(), 2u) << full.body;
  const int64_t script_tokens =
      static_cast<int64_t>(h.tokenizer().encode(kScript).value().size()) + 1;
  const std::string want = text_of(fchoices[0].as_object(), "text");
  EXPECT_NE(want.find("Hello there."), std::string::npos) << full.body;
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(fchoices[static_cast<size_t>(i)].at("index").as_int64(), i);
    EXPECT_EQ(text_of(fchoices[static_cast<size_t>(i)].as_object(), "text"), want);
  }
  EXPECT_EQ(fv.value().at("usage").at("completion_tokens").as_int64(), 2 * script_tokens);

  auto r = h.post("/v1/completions",
                  base + R"(,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto events = sse_data(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text[2];
  int finishes[2] = {0, 0};
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    auto v = parse_json(events[i]);
    ASSERT_TRUE(v.ok()) << events[i];
    EXPECT_EQ(v.value().at("object"), "text_completion");
    EXPECT_EQ(events[i].find("\"usage\""), std::string::npos) << events[i];
    const auto& c = v.value().at("choices").at(0).as_object();
    const int64_t index = c.at("index").as_int64();
    ASSERT_TRUE(index == 0 || index == 1) << events[i];
    text[index] += text_of(c, "text");
    if (!c.at("finish_reason").is_null()) ++finishes[index];
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(text[i], want);
    EXPECT_EQ(finishes[i], 1);
  }
  auto u = parse_json(events[events.size() - 2]);
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u.value().at("choices").as_array().empty());
  EXPECT_EQ(u.value().at("usage").at("completion_tokens").as_int64(), 2 * script_tokens);
}

TEST(StreamChoices, ClientDisconnectAbortsEveryChoice) {
  HarnessOptions o;
  o.step_delay = std::chrono::milliseconds(5);
  ServiceHarness h(o);
  ASSERT_TRUE(h.ok()) << h.error();
  auto responder = h.start(
      "POST", "/v1/chat/completions",
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"n":4,"stream":true,"max_tokens":400,"ignore_eos":true})");
  ASSERT_TRUE(responder->wait_writes(8));
  responder->disconnect();
  ASSERT_TRUE(responder->wait()) << "the stream did not end after the client left";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((h.api().in_flight() > 0 || h.engine().metrics().kv_blocks_used > 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(h.api().in_flight(), 0);
  EXPECT_EQ(h.engine().metrics().kv_blocks_used, 0);
}

}  // namespace
}  // namespace deepinfer::server
