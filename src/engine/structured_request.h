// Structured output at the request level: reading the constraint fields of an API request body
// (OpenAI response_format / text.format, vLLM structured_outputs and guided_*), compiling them
// through a cache keyed by a hash of the constraint and the vocabulary, and the per-request
// constraint that stays unmasked while the model thinks and constrains the answer after
// `</think>`.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "engine/structured_mask.h"

namespace deepinfer::engine::structured {

struct ConstraintSpec {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kGrammar, kChoice, kToolCalls };
  Kind kind = Kind::kJsonObject;
  // Schema JSON text, regex, GBNF text, the choices as a JSON array, or the tool-call grammar
  // spec as JSON text (engine/structured_tool_calls.h).
  std::string source;
  std::string field;  // the request field it came from (for messages)
};

// The constraint a request body asks for; nullopt when none. The error text is a 400 message
// naming the field. At most one constraint field may be given.
Result<std::optional<ConstraintSpec>> read_structured_output(const JsonObject& body);

// Compiles a spec into a grammar (no vocabulary yet).
Result<std::unique_ptr<Grammar>> build_grammar(const ConstraintSpec& spec,
                                               GrammarLimits limits = {});

// Thread-safe cache of compiled grammars for one vocabulary (least recently used evicted).
class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const TokenTable> vocab, size_t capacity = 128,
                        GrammarLimits limits = {});
  Result<std::shared_ptr<const CompiledGrammar>> get(const ConstraintSpec& spec);
  const std::shared_ptr<const TokenTable>& vocab() const { return vocab_; }
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }

 private:
  std::shared_ptr<const TokenTable> vocab_;
  size_t capacity_;
  GrammarLimits limits_;
  std::mutex mu_;
  struct Entry {
    std::string key;
    std::shared_ptr<const CompiledGrammar> grammar;
  };
  std::list<Entry> lru_;  // front = most recent
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
  size_t hits_ = 0, misses_ = 0;
};

// What a request carries into the engine (SamplingParams::structured): the compiled grammar,
// the tokens that may end the output once the grammar is complete (the engine adds its EOS ids
// and the request's stop ids), and the `</think>` id when the model thinks first (-1: the
// grammar applies from the first generated token).
struct StructuredOutput {
  std::shared_ptr<const CompiledGrammar> grammar;
  std::vector<int32_t> end_tokens;
  int32_t think_end = -1;
};

// One request's constraint. think_end >= 0: unconstrained until that token was generated
// (thinking mode), then the grammar applies. Replaying the generated tokens after reset()
// restores the state (preemption by recompute).
class StructuredConstraint {
 public:
  StructuredConstraint(std::shared_ptr<const CompiledGrammar> grammar,
                       std::vector<int32_t> end_tokens, int32_t think_end = -1);
  // True when the grammar applies to the next token.
  bool active() const { return active_; }
  // Fills `mask` when active and returns true; returns false (mask untouched) otherwise.
  bool fill_mask(std::span<uint64_t> mask);
  // Advances with a generated token; false if the grammar rejects it.
  bool accept(int32_t token);
  bool can_finish() const { return matcher_.can_finish(); }
  const GrammarMatcher& matcher() const { return matcher_; }
  void reset();

 private:
  GrammarMatcher matcher_;
  int32_t think_end_;
  bool active_;
};

}  // namespace deepinfer::engine::structured
