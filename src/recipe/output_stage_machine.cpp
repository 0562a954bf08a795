// Stage tables (encoding spec §4.3, current label set) and the matching loop (§4.4).
#include "recipe/output_stage_machine.h"

#include <algorithm>

namespace deepinfer::recipe {
namespace {

constexpr std::string_view kDsmlBegin = "<｜DSML｜";
constexpr std::string_view kDsmlEnd = "</｜DSML｜";
constexpr std::string_view kToolCallsEndV4 = "</｜DSML｜tool_calls>";
constexpr std::string_view kToolCallsEndV41 = "</｜DSML｜ calls>";
constexpr std::string_view kReasoningEnd = "</think>";
constexpr std::string_view kJsonBeginFenced = "```json\n";
constexpr std::string_view kJsonBeginBare = "```\n";
constexpr std::string_view kJsonEnd = "\n```";
constexpr std::string_view kInvokeName = "invoke name=\"";
constexpr std::string_view kParameterName = "parameter name=\"";
constexpr std::string_view kParameterNameLegacy = "parameter name=";

}  // namespace

std::string_view output_action_label(OutputAction action) {
  switch (action) {
    case OutputAction::ArgLabelOpen:
      return "{\"";
    case OutputAction::ArgLabelNext:
      return ", \"";
    case OutputAction::ArgLabelColon:
      return "\": ";
    case OutputAction::ArgLabelQuoteOpen:
    case OutputAction::ArgLabelQuoteClose:
      return "\"";
    case OutputAction::ArgLabelOpenLegacy:
      return "{";
    case OutputAction::ArgLabelNextLegacy:
      return ", ";
    case OutputAction::ArgLabelColonLegacy:
      return ": ";
    case OutputAction::ArgsEndEmpty:
      return "{}";
    case OutputAction::ArgsEndClose:
      return "}";
    case OutputAction::LabelBrace:
      return "{";
    case OutputAction::LabelBracket:
      return "[";
    default:
      return {};
  }
}

OutputStageMachine::OutputStageMachine(const ParsingOptions& options) {
  for (size_t s = 0; s < kOutputStageCount; ++s) build_stage(static_cast<OutputStage>(s), options);
  size_t most = 0;
  for (StageTable& t : stages_) {
    most = std::max(most, t.branches.size());
    for (Branch& b : t.branches) {
      const Pattern& p = patterns_[b.pattern];
      b.kind = p.kind;
      b.size = static_cast<uint32_t>(p.text.size());
      b.text = reinterpret_cast<const uint8_t*>(p.text.data());
      b.failure = p.failure.data();
    }
  }
  match_.resize(most);

  OutputStage initial = OutputStage::CommonLeading;
  if (options.tool_call_initial_stage) {
    initial = OutputStage::ToolCalls;
  } else {
    switch (options.reasoning_initial_stage) {
      case ReasoningInitialStage::Start:
        initial = OutputStage::ReasoningLeading;
        break;
      case ReasoningInitialStage::Reasoning:
        initial = OutputStage::Reasoning;
        break;
      case ReasoningInitialStage::Content:
        initial = OutputStage::Common;
        break;
      case ReasoningInitialStage::None:
        initial = OutputStage::CommonLeading;
        break;
    }
  }
  enter(initial);
}

uint32_t OutputStageMachine::add_pattern(PatternKind kind, std::string_view text) {
  for (uint32_t i = 0; i < patterns_.size(); ++i) {
    if (patterns_[i].kind == kind && patterns_[i].text == text) return i;
  }
  Pattern p;
  p.kind = kind;
  p.text = std::string(text);
  p.failure.assign(text.size(), 0);
  for (uint32_t i = 1, len = 0; i < text.size();) {
    if (text[i] == text[len]) {
      p.failure[i++] = ++len;
    } else if (len != 0) {
      len = p.failure[len - 1];
    } else {
      p.failure[i++] = 0;
    }
  }
  patterns_.push_back(std::move(p));
  return static_cast<uint32_t>(patterns_.size() - 1);
}

void OutputStageMachine::build_stage(OutputStage stage, const ParsingOptions& options) {
  StageTable& t = stages_[static_cast<size_t>(stage)];
  auto add = [&](PatternKind kind, std::string_view text, OutputStage next, OutputAction action) {
    t.branches.push_back(Branch{add_pattern(kind, text), next, action});
    if (kind != PatternKind::LeadingNewline) t.starts[static_cast<uint8_t>(text[0])] = true;
    if (kind == PatternKind::NewlinesAnd) t.starts['\n'] = true;
  };
  auto add_string = [&](std::string_view text, OutputStage next, OutputAction action) {
    add(PatternKind::String, text, next, action);
  };
  const bool legacy = options.legacy_argument_labels;
  auto add_stop_sequences = [&] {
    for (const std::string& s : options.stop_sequences) {
      if (!s.empty()) add_string(s, OutputStage::Finished, OutputAction::StopSequence);
    }
  };
  auto add_tool_call_begin = [&] {
    if (options.parse_tool_calls) {
      add(PatternKind::NewlinesAnd, kDsmlBegin, OutputStage::ToolCalls, OutputAction::Skip);
    }
  };

  switch (stage) {
    case OutputStage::CommonLeading:
    case OutputStage::Common:
      if (options.parse_json_output) {
        add_string(kJsonBeginFenced, OutputStage::Json, OutputAction::Skip);
        add_string(kJsonBeginBare, OutputStage::Json, OutputAction::Skip);
        add_string("{", OutputStage::Json, OutputAction::LabelBrace);
        add_string("[", OutputStage::Json, OutputAction::LabelBracket);
      } else {
        add_stop_sequences();
      }
      add_tool_call_begin();
      if (stage == OutputStage::CommonLeading) {
        add(PatternKind::LeadingNewline, "\n", OutputStage::CommonLeading, OutputAction::Skip);
      }
      add_string(kReasoningEnd, OutputStage::Common, OutputAction::SkipExtraEndOfThinking);
      t.unmatched = options.parse_json_output ? OutputAction::ToSpace : OutputAction::Raw;
      break;
    case OutputStage::Json:
      add_stop_sequences();
      add_string(kJsonEnd, OutputStage::MatchedJson, OutputAction::Skip);
      t.unmatched = OutputAction::Raw;
      break;
    case OutputStage::MatchedJson:
      add_tool_call_begin();
      t.unmatched = OutputAction::ToSpace;
      break;
    case OutputStage::ReasoningLeading:
    case OutputStage::Reasoning:
      add_tool_call_begin();
      if (stage == OutputStage::ReasoningLeading) {
        add(PatternKind::LeadingNewline, "\n", OutputStage::ReasoningLeading, OutputAction::Skip);
      }
      add(PatternKind::NewlinesAnd, kReasoningEnd, OutputStage::CommonLeading, OutputAction::Skip);
      t.unmatched = OutputAction::Reasoning;
      break;
    case OutputStage::ToolCalls:
      add_string(kInvokeName, OutputStage::ToolName, OutputAction::ToolCallBegin);
      add_string(kToolCallsEndV4, OutputStage::Finished, OutputAction::Skip);
      add_string(kToolCallsEndV41, OutputStage::Finished, OutputAction::Skip);
      t.unmatched = OutputAction::Skip;
      break;
    case OutputStage::ToolName:
      add_string("\"", OutputStage::ToolArgumentsLeading, OutputAction::ToolNameEnd);
      t.unmatched = OutputAction::ToolName;
      break;
    case OutputStage::ToolArgumentsLeading:
      if (legacy) {
        add_string(kParameterNameLegacy, OutputStage::ToolParamName,
                   OutputAction::ArgLabelOpenLegacy);
      } else {
        add_string(kParameterName, OutputStage::ToolParamName, OutputAction::ArgLabelOpen);
      }
      add_string(kDsmlEnd, OutputStage::ToolCalls, OutputAction::ArgsEndEmpty);
      t.unmatched = OutputAction::Skip;
      break;
    case OutputStage::ToolArguments:
      if (legacy) {
        add_string(kParameterNameLegacy, OutputStage::ToolParamName,
                   OutputAction::ArgLabelNextLegacy);
      } else {
        add_string(kParameterName, OutputStage::ToolParamName, OutputAction::ArgLabelNext);
      }
      add_string(kDsmlEnd, OutputStage::ToolCalls, OutputAction::ArgsEndClose);
      t.unmatched = OutputAction::Skip;
      break;
    case OutputStage::ToolParamName:
      if (legacy) {
        add_string(" ", OutputStage::ToolParamType, OutputAction::ArgLabelColonLegacy);
      } else {
        add_string("\"", OutputStage::ToolParamType, OutputAction::ArgLabelColon);
      }
      t.unmatched = OutputAction::RawArgsVerbatim;
      break;
    case OutputStage::ToolParamType:
      add_string("true\">", OutputStage::ToolParamValueString, OutputAction::ArgLabelQuoteOpen);
      add_string("false\">", OutputStage::ToolParamValue, OutputAction::Skip);
      t.unmatched = OutputAction::Skip;
      break;
    case OutputStage::ToolParamValueString:
      add_string(kDsmlEnd, OutputStage::ToolArguments, OutputAction::ArgLabelQuoteClose);
      t.unmatched = OutputAction::RawArgsString;
      break;
    case OutputStage::ToolParamValue:
      add_string(kDsmlEnd, OutputStage::ToolArguments, OutputAction::Skip);
      t.unmatched = OutputAction::RawArgsVerbatim;
      break;
    case OutputStage::Finished:
      t.unmatched = OutputAction::SkipContentAfterFinished;
      break;
  }
}

void OutputStageMachine::enter(OutputStage stage) {
  stage_ = stage;
  table_ = &stages_[static_cast<size_t>(stage)];
  for (size_t k = 0; k < table_->branches.size(); ++k) match_[k] = MatchState{};
  stashed_ = 0;
  fresh_ = true;
  idle_ = true;
}

void OutputStageMachine::step(uint8_t byte, SegmentBatch& out) {
  uint32_t busy = 0;
  const std::vector<Branch>& branches = table_->branches;
  for (size_t k = 0; k < branches.size(); ++k) {
    const Branch& branch = branches[k];
    MatchState& m = match_[k];
    bool complete = false;
    uint32_t matched = 0;
    if (branch.kind == PatternKind::LeadingNewline) {
      complete = fresh_ && byte == '\n';
      matched = 1;
    } else {
      const uint8_t* s = branch.text;
      if (branch.kind == PatternKind::NewlinesAnd && m.len == 0 && byte == '\n') {
        ++m.newlines;
      } else {
        uint32_t next = m.len;
        while (next > 0 && s[next] != byte) next = branch.failure[next - 1];
        if (s[next] == byte) ++next;
        if (next <= m.len) m.newlines = 0;
        m.len = next;
      }
      complete = m.len == branch.size;
      matched = m.len + m.newlines;
    }
    if (complete) {
      if (matched < stashed_) out.push(table_->unmatched, stashed_ - matched);
      if (matched > 0) out.push(branch.action, matched);
      enter(branch.next);
      return;
    }
    busy |= m.len | m.newlines;
  }
  fresh_ = false;
  idle_ = busy == 0;
}

uint32_t OutputStageMachine::hold() const {
  uint32_t most = 0;
  for (size_t k = 0; k < table_->branches.size(); ++k) {
    most = std::max(most, match_[k].len + match_[k].newlines);
  }
  return most;
}

size_t OutputStageMachine::feed(std::string_view bytes, SegmentBatch& out) {
  const uint8_t* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    if (idle_ && !fresh_) {
      // No partial match: skip ahead to the next byte that could begin one.
      const std::array<bool, 256>& starts = table_->starts;
      size_t j = i;
      while (j < n && !starts[data[j]]) ++j;
      stashed_ += j - i;
      i = j;
      if (i == n) break;
    }
    if (out.size + 3 > SegmentBatch::kCapacity) return i;  // room for a match and the tail
    ++stashed_;
    step(data[i++], out);
  }
  const uint32_t held = idle_ ? 0 : hold();
  if (held < stashed_) {
    out.push(table_->unmatched, stashed_ - held);
    stashed_ = held;
  }
  return n;
}

bool OutputStageMachine::feed_unmarked(std::string_view bytes, OutputAction* action) {
  if (!idle_ || fresh_ || stashed_ != 0) return false;
  const std::array<bool, 256>& starts = table_->starts;
  bool marked = false;
  for (char c : bytes) marked |= starts[static_cast<uint8_t>(c)];
  if (marked) return false;
  *action = table_->unmatched;
  return true;
}

void OutputStageMachine::finish(SegmentBatch& out) {
  if (stashed_ > 0) out.push(table_->unmatched, stashed_);
  stashed_ = 0;
}

}  // namespace deepinfer::recipe
