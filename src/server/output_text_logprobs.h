// Responses `output_text` logprobs: which generated tokens make up the message text. A second
// output stage machine, fed the same text as the session's StreamProcessor, classifies every
// output byte; a token belongs to the output text when some of its bytes are text (not reasoning,
// markup or tool-call syntax). Each output_text delta takes, in order, the text tokens whose first
// text byte it covers, written as the Chat entries (logprobs.h). No allocation per token once the
// buffers have grown.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "recipe/conversation.h"
#include "recipe/output_stage_machine.h"
#include "recipe/stream_events.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

class OutputTextLogprobs final : public recipe::TextLogprobsSource {
 public:
  // `parsing`: the options of the session's StreamProcessor; `top`: top_logprobs per token.
  OutputTextLogprobs(const tokenizer::Tokenizer& tokenizer, const recipe::ParsingOptions& parsing,
                     int top);

  // A generated token, before the text it completes is fed.
  void add(const engine::SampleResult& sample);
  // The text the session is about to feed its StreamProcessor: it belongs to the tokens added
  // since the last call (split by their byte lengths, the last one taking the rest).
  void feed(std::string_view text);
  // The generation ended: the bytes the machine still holds are classified (call before the
  // StreamProcessor gets its Finish, which does the same with its own machine).
  void finish();
  // The entries of the text tokens that `delta` (the next output text) reaches; valid until the
  // next call.
  std::string_view output_text_logprobs(std::string_view delta) override;

 private:
  struct Token {
    engine::SampleResult sample;
    uint64_t end = 0;         // end of its bytes in the fed text
    uint64_t text_begin = 0;  // position of its first text byte in the output text
    uint32_t text_bytes = 0;  // bytes of it classified as output text so far
    bool placed = false;      // its bytes have been fed
  };
  void classify(const recipe::SegmentBatch& batch);
  bool classified(const Token& t) const { return t.placed && t.end <= classified_; }

  const tokenizer::Tokenizer& tokenizer_;
  int top_;
  recipe::OutputStageMachine machine_;
  recipe::SegmentBatch segments_;
  std::vector<Token> tokens_;
  size_t next_ = 0;          // first token not yet written or dropped
  size_t unplaced_ = 0;      // first token whose bytes have not been fed
  size_t cursor_ = 0;        // first token not wholly classified
  uint64_t fed_ = 0;         // bytes fed
  uint64_t classified_ = 0;  // bytes classified by the machine
  uint64_t text_ = 0;        // output text bytes classified
  uint64_t emitted_ = 0;     // output text bytes the deltas have covered
  bool finished_ = false;    // the machine has classified its held bytes
  std::string out_;
  std::string scratch_;
};

}  // namespace deepinfer::server
