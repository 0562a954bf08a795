#include "server/output_text_logprobs.h"

#include <algorithm>

#include "server/logprobs.h"

namespace deepinfer::server {
namespace {

// Actions whose bytes reach the output text as they are (JSON mode's whitespace, turned into
// one space, does not count: its tokens carry no text of their own).
bool is_text(recipe::OutputAction action) {
  return action == recipe::OutputAction::Raw || action == recipe::OutputAction::LabelBrace ||
         action == recipe::OutputAction::LabelBracket;
}

constexpr size_t kCompactAfter = 64;  // finished tokens kept before the front is dropped

}  // namespace

OutputTextLogprobs::OutputTextLogprobs(const tokenizer::Tokenizer& tokenizer,
                                       const recipe::ParsingOptions& parsing, int top)
    : tokenizer_(tokenizer), top_(std::max(0, top)), machine_(parsing) {
  tokens_.reserve(2 * kCompactAfter);
}

void OutputTextLogprobs::add(const engine::SampleResult& sample) {
  const size_t done = std::min(next_, cursor_);
  if (done >= kCompactAfter) {
    tokens_.erase(tokens_.begin(), tokens_.begin() + static_cast<std::ptrdiff_t>(done));
    next_ -= done;
    cursor_ -= done;
    unplaced_ -= done;
  }
  Token t;
  t.sample = sample;
  tokens_.push_back(t);
}

void OutputTextLogprobs::feed(std::string_view text) {
  uint64_t pos = fed_;
  fed_ += text.size();
  for (size_t i = unplaced_; i < tokens_.size(); ++i) {
    const bool last = i + 1 == tokens_.size();
    pos = last ? fed_
               : std::min<uint64_t>(fed_,
                                    pos + tokenizer_.token_bytes(tokens_[i].sample.token).size());
    tokens_[i].end = pos;
    tokens_[i].placed = true;
  }
  unplaced_ = tokens_.size();
  while (!text.empty() && !finished_) {
    segments_.clear();
    text.remove_prefix(machine_.feed(text, segments_));
    classify(segments_);
  }
}

void OutputTextLogprobs::finish() {
  if (finished_) return;
  finished_ = true;
  segments_.clear();
  machine_.finish(segments_);
  classify(segments_);
}

void OutputTextLogprobs::classify(const recipe::SegmentBatch& batch) {
  for (size_t s = 0; s < batch.size; ++s) {
    const auto& segment = batch.items[s];
    const uint64_t begin = classified_;
    const uint64_t end = begin + segment.length;
    if (is_text(segment.action)) {
      uint64_t p = begin;
      for (size_t i = cursor_; p < end && i < tokens_.size() && tokens_[i].placed; ++i) {
        Token& t = tokens_[i];
        if (t.end <= p) continue;
        const uint64_t piece = std::min(end, t.end) - p;
        if (t.text_bytes == 0) t.text_begin = text_ + (p - begin);
        t.text_bytes += static_cast<uint32_t>(piece);
        p += piece;
      }
      text_ += segment.length;
    }
    classified_ = end;
    while (cursor_ < tokens_.size() && classified(tokens_[cursor_])) ++cursor_;
  }
  // Wholly classified tokens without text (reasoning, markup, tool calls) are dropped at once.
  while (next_ < cursor_ && tokens_[next_].text_bytes == 0) ++next_;
}

std::string_view OutputTextLogprobs::output_text_logprobs(std::string_view delta) {
  out_.clear();
  emitted_ += delta.size();
  for (; next_ < tokens_.size(); ++next_) {
    const Token& t = tokens_[next_];
    if (t.text_bytes > 0) {
      if (t.text_begin >= emitted_) break;  // its text is still to come
      if (!out_.empty()) out_ += ',';
      append_logprob_entry(out_, tokenizer_, t.sample, top_, scratch_);
    } else if (!classified(t)) {
      break;  // may still turn out to be text
    }
  }
  return out_;
}

}  // namespace deepinfer::server
