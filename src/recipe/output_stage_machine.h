// The byte-level stage machine of the output parser (encoding spec §4.3, §4.4): classifies every
// output byte and reports (action, length) segments, holding back bytes that may still begin a
// marker. Identical segment totals for every chunking; no allocation after construction.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/conversation.h"

namespace deepinfer::recipe {

// Every distinct action of §4.3; equality of two actions is equality of these values (each
// ArgLabel id and each ArgsEnd output is its own value).
enum class OutputAction : uint8_t {
  Raw,
  ToSpace,
  Skip,
  SkipExtraEndOfThinking,    // SkipInvalid ExtraEndOfThinking
  SkipContentAfterFinished,  // SkipInvalid ContentAfterFinished
  StopSequence,
  Reasoning,
  ToolCallBegin,
  ToolName,
  ToolNameEnd,
  ArgLabelOpen,         // id 0: `{"`
  ArgLabelNext,         // id 1: `, "`
  ArgLabelColon,        // id 2: `": `
  ArgLabelQuoteOpen,    // id 3: `"`
  ArgLabelQuoteClose,   // id 4: `"`
  ArgLabelOpenLegacy,   // 0.1.x id 0: `{`
  ArgLabelNextLegacy,   // 0.1.x id 1: `, `
  ArgLabelColonLegacy,  // 0.1.x id 2: `: `
  RawArgsString,        // RawArgs{string=true}: JSON-escaped
  RawArgsVerbatim,      // RawArgs{string=false}
  ArgsEndEmpty,         // ArgsEnd `{}`
  ArgsEndClose,         // ArgsEnd `}`
  LabelBrace,           // JSON mode Label `{`
  LabelBracket,         // JSON mode Label `[`
};

// The fixed text an action stands for (ArgLabel, ArgsEnd, Label); empty for the others.
std::string_view output_action_label(OutputAction action);

enum class OutputStage : uint8_t {
  CommonLeading,
  Common,
  Json,
  MatchedJson,
  ReasoningLeading,
  Reasoning,
  ToolCalls,
  ToolName,
  ToolArgumentsLeading,
  ToolArguments,
  ToolParamName,
  ToolParamType,
  ToolParamValueString,
  ToolParamValue,
  Finished,
};
inline constexpr size_t kOutputStageCount = 15;

struct ActionSegment {
  OutputAction action = OutputAction::Skip;
  size_t length = 0;  // > 0
};

// A fixed-capacity batch of segments in byte order; filled by feed()/finish().
struct SegmentBatch {
  static constexpr size_t kCapacity = 32;
  std::array<ActionSegment, kCapacity> items;
  size_t size = 0;
  void clear() { size = 0; }
  void push(OutputAction action, size_t length) { items[size++] = ActionSegment{action, length}; }
};

class OutputStageMachine {
 public:
  explicit OutputStageMachine(const ParsingOptions& options);

  // Classifies `bytes`, appending segments to `out`; bytes that may begin a marker stay held
  // for the next feed. Returns the bytes consumed: fewer than bytes.size() only when `out`
  // filled up, in which case the caller drains it and feeds the rest.
  size_t feed(std::string_view bytes, SegmentBatch& out);
  // Fast path for a chunk without marker bytes: when nothing is held and no byte of `bytes` can
  // begin a marker, consumes them all and returns true with `*action` = the action feed() would
  // give the whole chunk; otherwise returns false and changes nothing.
  bool feed_unmarked(std::string_view bytes, OutputAction* action);
  // The source ended: held bytes get the current stage's unmatched action (≤ 1 segment).
  void finish(SegmentBatch& out);

  OutputStage stage() const { return stage_; }

 private:
  enum class PatternKind : uint8_t { String, NewlinesAnd, LeadingNewline };
  struct Pattern {
    PatternKind kind = PatternKind::String;
    std::string text;
    std::vector<uint32_t> failure;  // KMP failure function of text
  };
  struct Branch {
    uint32_t pattern = 0;  // index into patterns_
    OutputStage next = OutputStage::Finished;
    OutputAction action = OutputAction::Skip;
    // Copied from patterns_[pattern] once all stages are built (hot loop, no indirection).
    PatternKind kind = PatternKind::String;
    uint32_t size = 0;
    const uint8_t* text = nullptr;
    const uint32_t* failure = nullptr;
  };
  struct StageTable {
    std::vector<Branch> branches;  // priority order
    OutputAction unmatched = OutputAction::Skip;
    std::array<bool, 256> starts{};  // bytes that can leave an idle matcher set non-idle
  };
  struct MatchState {
    uint32_t len = 0;       // KMP prefix length
    uint32_t newlines = 0;  // NewlinesAnd: LFs counted before the label
  };

  uint32_t add_pattern(PatternKind kind, std::string_view text);
  void build_stage(OutputStage stage, const ParsingOptions& options);
  void enter(OutputStage stage);
  // Feeds one byte to the branches; on a match emits ≤ 2 segments and changes stage.
  void step(uint8_t byte, SegmentBatch& out);
  uint32_t hold() const;

  std::vector<Pattern> patterns_;
  std::array<StageTable, kOutputStageCount> stages_;
  std::vector<MatchState> match_;  // one per branch of the current stage

  OutputStage stage_ = OutputStage::CommonLeading;
  const StageTable* table_ = nullptr;
  size_t stashed_ = 0;  // bytes fed in this stage and not yet reported
  bool fresh_ = true;   // no byte fed since entering the stage (LeadingNewline)
  bool idle_ = true;    // every matcher is in its initial state
};

}  // namespace deepinfer::recipe
