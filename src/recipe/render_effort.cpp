#include "recipe/render_effort.h"

namespace deepinfer::recipe {
namespace {

constexpr std::string_view kV41Low =
    "Reasoning Effort: 50 (range 1-100, the higher the value, the more thorough the "
    "reasoning)\n\n";
constexpr std::string_view kV41High =
    "Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the "
    "reasoning)\n\n";
constexpr std::string_view kV41Max =
    "Reasoning Effort: 100 (range 1-100, the higher the value, the more thorough the "
    "reasoning)\n\n";

constexpr std::string_view kV4High =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";
constexpr std::string_view kV4Max =
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: "
    "exhaustively decompose the problem into its most fundamental components, trace every causal "
    "chain to its root, and resolve the underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple "
    "angles and are certain that no assumption remains unchecked and no error remains "
    "undiscovered.\n\n";

}  // namespace

std::string_view effort_prefix(EncodingVersion version, std::optional<ReasoningEffort> effort) {
  const ReasoningEffort level = effort.value_or(ReasoningEffort::High);
  if (version == EncodingVersion::V41) {
    switch (level) {
      case ReasoningEffort::Low:
        return kV41Low;
      case ReasoningEffort::Max:
        return kV41Max;
      case ReasoningEffort::High:
      case ReasoningEffort::Xhigh:
        return kV41High;
    }
    return kV41High;
  }
  switch (level) {
    case ReasoningEffort::Low:
      return {};
    case ReasoningEffort::Max:
      return kV4Max;
    case ReasoningEffort::High:
    case ReasoningEffort::Xhigh:
      return kV4High;
  }
  return kV4High;
}

}  // namespace deepinfer::recipe
