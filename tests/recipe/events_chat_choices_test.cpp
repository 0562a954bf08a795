// Chat chunks of one choice among several in a stream (n > 1): the choice index, the finish
// chunk without the usage object, and caller-supplied per-chunk logprobs (api spec §7 envelope).
#include <gtest/gtest.h>

#include "events_test_util.h"

namespace deepinfer::recipe {
namespace {

using testing::example_options;
using testing::RecordingSink;
using testing::worked_example;

const std::string kEnvelope =
    R"({"id":"resp-1","object":"chat.completion.chunk","created":1700000000,)"
    R"("model":"deepseek-flash","system_fingerprint":"fp-1","choices":[{"index":2,"delta":)";

// Hands out "L0", "L1", ... as the logprobs text of successive chunks, "" (null) every third.
struct CountingLogprobs final : ChunkLogprobsSource {
  int calls = 0;
  std::string text;
  std::string_view next_chunk_logprobs() override {
    const int k = calls++;
    if (k % 3 == 2) return {};
    text = "{\"L\":" + std::to_string(k) + "}";
    return text;
  }
};

TEST(EventsChatChoices, IndexUsageNullAndLogprobsPerChunk) {
  RecordingSink sink;
  CountingLogprobs logprobs;
  auto options = example_options();
  options.include_usage = true;
  options.choice_index = 2;
  options.usage_on_finish = false;
  options.chunk_logprobs = &logprobs;
  ChatEventGenerator gen(options, sink);
  worked_example().run(gen);
  ASSERT_EQ(sink.events.size(), 20u);
  EXPECT_EQ(logprobs.calls, 20);
  EXPECT_EQ(sink.events[0].second,
            kEnvelope + R"({"role":"assistant","content":null,"reasoning_content":""})" +
                R"(,"logprobs":{"L":0},"finish_reason":null}],"usage":null})");
  EXPECT_EQ(sink.events[2].second,
            kEnvelope + R"({"content":"I'll look them up.","reasoning_content":null})" +
                R"(,"logprobs":null,"finish_reason":null}],"usage":null})");
  EXPECT_EQ(sink.events[19].second,
            kEnvelope + R"({"content":"","reasoning_content":null})" +
                R"(,"logprobs":{"L":19},"finish_reason":"tool_calls"}],"usage":null})");
}

TEST(EventsChatChoices, WithoutIncludeUsageTheFinishChunkHasNoUsage) {
  RecordingSink sink;
  auto options = example_options();
  options.include_usage = false;
  options.choice_index = 2;
  options.usage_on_finish = false;
  ChatEventGenerator gen(options, sink);
  worked_example().run(gen);
  ASSERT_EQ(sink.events.size(), 20u);
  EXPECT_EQ(sink.events[19].second, kEnvelope + R"({"content":"","reasoning_content":null})" +
                                        R"(,"logprobs":null,"finish_reason":"tool_calls"}]})");
}

}  // namespace
}  // namespace deepinfer::recipe
