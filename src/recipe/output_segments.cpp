// Segment merging, the input-chunk FIFO and the pop table of encoding spec §4.5.
#include "recipe/output_segments.h"

#include <algorithm>

#include "recipe/output_parser.h"

namespace deepinfer::recipe {
namespace {

// JSON string escaping without the quotes: `"`, `\` and control characters; everything else
// (including non-ASCII bytes) is copied as is.
void append_json_escaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (u < 0x20) {
          const char esc[6] = {'\\', 'u', '0', '0', kHex[u >> 4], kHex[u & 15]};
          out.append(esc, sizeof esc);
        } else {
          out += c;
        }
    }
  }
}

OutputChunk text_chunk(OutputChunk::Kind kind, std::string_view text) {
  OutputChunk chunk;
  chunk.kind = kind;
  chunk.text = text;
  return chunk;
}

}  // namespace

OutputSegmentApplier::OutputSegmentApplier() {
  ends_.reserve(16);
  stash_.reserve(256);
  tool_name_.reserve(64);
  escaped_.reserve(256);
}

void OutputSegmentApplier::begin(OutputSink& sink, std::string_view text) {
  sink_ = &sink;
  view_ = text;
  view_begin_ = stash_begin_ + stash_.size();
  has_view_ = true;
  ends_.push_back(view_begin_ + text.size());
}

void OutputSegmentApplier::apply_whole_run(OutputSink& sink, OutputAction action,
                                           std::string_view text) {
  sink_ = &sink;
  has_pending_ = true;
  pending_action_ = action;
  pending_length_ = 0;
  front_ += text.size();
  stash_begin_ = front_;
  if (action == OutputAction::Raw || action == OutputAction::Reasoning) {
    last_pop_ = action;
    sink.on_output(text_chunk(
        action == OutputAction::Raw ? OutputChunk::Kind::Raw : OutputChunk::Kind::Reasoning, text));
  } else {
    emit(action, text);
  }
  sink_ = nullptr;
}

void OutputSegmentApplier::begin_final(OutputSink& sink) { sink_ = &sink; }

void OutputSegmentApplier::apply(const SegmentBatch& batch) {
  for (size_t i = 0; i < batch.size; ++i) {
    const ActionSegment& segment = batch.items[i];
    if (has_pending_ && pending_action_ == segment.action) {
      pending_length_ += segment.length;
      continue;
    }
    if (has_pending_) {
      apply_whole_chunks();
      if (pending_length_ > 0) pop(pending_action_, pending_length_);
    }
    has_pending_ = true;
    pending_action_ = segment.action;
    pending_length_ = segment.length;
  }
}

void OutputSegmentApplier::end() {
  if (has_pending_) apply_whole_chunks();
  sink_ = nullptr;
  if (head_ == ends_.size()) {  // everything popped (the usual case)
    ends_.clear();
    head_ = 0;
    stash_.clear();
    stash_begin_ = front_;
    has_view_ = false;
    return;
  }
  // Keep what is still queued: drop consumed stash bytes, copy the unpopped rest of the view.
  const uint64_t stash_end = stash_begin_ + stash_.size();
  if (front_ >= stash_end) {
    stash_.clear();
    stash_begin_ = front_;
  } else if (front_ > stash_begin_) {
    stash_.erase(0, front_ - stash_begin_);
    stash_begin_ = front_;
  }
  if (has_view_) {
    const uint64_t from = std::max(front_, view_begin_);
    stash_.append(view_.substr(from - view_begin_));
    has_view_ = false;
  }
  ends_.erase(ends_.begin(), ends_.begin() + static_cast<std::ptrdiff_t>(head_));
  head_ = 0;
}

void OutputSegmentApplier::apply_whole_chunks() {
  while (head_ < ends_.size()) {
    const uint64_t length = ends_[head_] - front_;
    if (length > pending_length_) return;
    pop(pending_action_, length);
    pending_length_ -= length;
  }
}

void OutputSegmentApplier::pop(OutputAction action, size_t length) {
  if (head_ >= ends_.size()) return;  // more segment bytes than input: cannot happen
  const uint64_t begin = front_;
  if (front_ + length < ends_[head_]) {
    front_ += length;
  } else {
    front_ = ends_[head_++];
  }
  // A popped piece lies within one input chunk: wholly in the view or wholly in the stash.
  const size_t n = front_ - begin;
  emit(action, has_view_ && begin >= view_begin_
                   ? view_.substr(begin - view_begin_, n)
                   : std::string_view(stash_).substr(begin - stash_begin_, n));
}

void OutputSegmentApplier::emit(OutputAction action, std::string_view text) {
  const OutputAction last = last_pop_;
  last_pop_ = action;
  using Kind = OutputChunk::Kind;
  switch (action) {
    case OutputAction::Raw:
      if (!text.empty()) sink_->on_output(text_chunk(Kind::Raw, text));
      break;
    case OutputAction::Reasoning:
      if (!text.empty()) sink_->on_output(text_chunk(Kind::Reasoning, text));
      break;
    case OutputAction::ToSpace:
      sink_->on_output(text_chunk(Kind::Raw, " "));
      break;
    case OutputAction::Skip:
    case OutputAction::SkipExtraEndOfThinking:
    case OutputAction::SkipContentAfterFinished:
      break;
    case OutputAction::StopSequence:
      stop_sequence_.append(text);
      stop_matched_ = true;
      break;
    case OutputAction::ToolCallBegin:
      if (last != action) sink_->on_output(text_chunk(Kind::ToolCallBegin, {}));
      break;
    case OutputAction::ToolName:
      tool_name_.append(text);
      break;
    case OutputAction::ToolNameEnd:
      if (last != action) {
        has_tool_calls_ = true;
        sink_->on_output(text_chunk(Kind::ToolCall, tool_name_));
        tool_name_.clear();
      }
      break;
    case OutputAction::ArgLabelOpen:
    case OutputAction::ArgLabelNext:
    case OutputAction::ArgLabelColon:
    case OutputAction::ArgLabelQuoteOpen:
    case OutputAction::ArgLabelQuoteClose:
    case OutputAction::ArgLabelOpenLegacy:
    case OutputAction::ArgLabelNextLegacy:
    case OutputAction::ArgLabelColonLegacy:
    case OutputAction::ArgsEndEmpty:
    case OutputAction::ArgsEndClose:
      if (last != action) {
        sink_->on_output(text_chunk(Kind::ToolArgumentsDelta, output_action_label(action)));
      }
      break;
    case OutputAction::RawArgsString:
      escaped_.clear();
      append_json_escaped(escaped_, text);
      sink_->on_output(text_chunk(Kind::ToolArgumentsDelta, escaped_));
      break;
    case OutputAction::RawArgsVerbatim:
      sink_->on_output(text_chunk(Kind::ToolArgumentsDelta, text));
      break;
    case OutputAction::LabelBrace:
    case OutputAction::LabelBracket:
      if (last != action) sink_->on_output(text_chunk(Kind::Raw, output_action_label(action)));
      break;
  }
}

}  // namespace deepinfer::recipe
