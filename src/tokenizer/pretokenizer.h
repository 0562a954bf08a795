// Pre-tokenization of HF byte-level BPE tokenizers: a sequence of Split steps whose regexes are
// taken as written in tokenizer.json (PCRE2 with UTF + UCP + JIT; `\s` follows Oniguruma, the
// engine HF uses), and the ByteLevel step's GPT-2 regex. Pieces are byte ranges of the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/result.h"

namespace deepinfer::tokenizer {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitRule {
  std::string pattern;   // PCRE2 syntax after translation
  bool literal = false;  // pattern is a plain string ({"String": ...})
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

// Translates an Oniguruma-style pattern to PCRE2 so that `\s`/`\S` mean Unicode White_Space
// (PCRE2's UCP `\s` also matches U+180E, Oniguruma's does not).
std::string translate_oniguruma_pattern(std::string_view pattern);

class PreTokenizer {
 public:
  struct Piece {
    uint32_t begin;
    uint32_t end;
  };
  // Per-thread matching state (one PCRE2 match block per step); reuse it across calls.
  class Workspace {
   public:
    ~Workspace();
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;

   private:
    friend class PreTokenizer;
    Workspace() = default;
    struct Segment {
      uint32_t begin, end;
      bool is_match;
    };
    std::vector<void*> match;                    // pcre2_match_data*, one per step
    std::vector<std::vector<Segment>> segments;  // per step, for the merging behaviors
    void* context = nullptr;                     // pcre2_match_context* with raised limits
    void* jit_stack = nullptr;                   // pcre2_jit_stack*
    bool failed = false;                         // a match hit a PCRE2 resource limit
  };

  static Result<std::unique_ptr<PreTokenizer>> create(std::vector<SplitRule> rules);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  std::unique_ptr<Workspace> make_workspace() const;

  // Calls sink(begin, end) for every piece of text[0, size) in order. text must be valid
  // UTF-8 (not re-checked). Pieces are never empty. Returns false if the regex engine gave up
  // (a resource limit; the pieces are then incomplete).
  template <class Sink>
  bool split(std::string_view text, Workspace& ws, Sink&& sink) const;

  // Convenience form for tests: the pieces as strings.
  std::vector<std::string> split_to_strings(std::string_view text) const;

  size_t steps() const { return steps_.size(); }

 private:
  struct Step;
  PreTokenizer() = default;
  // Splits text[begin,end) with step k and hands each piece to the next step; the last step's
  // pieces go to emit(ctx, begin, end).
  using Emit = void (*)(void* ctx, uint32_t begin, uint32_t end);
  void run(size_t k, std::string_view text, uint32_t begin, uint32_t end, Workspace& ws, Emit emit,
           void* ctx) const;
  void emit_piece(size_t k, std::string_view text, uint32_t begin, uint32_t end, Workspace& ws,
                  Emit emit, void* ctx) const;

  std::vector<Step*> steps_;
};

template <class Sink>
bool PreTokenizer::split(std::string_view text, Workspace& ws, Sink&& sink) const {
  using S = std::remove_reference_t<Sink>;
  Emit emit = [](void* ctx, uint32_t b, uint32_t e) { (*static_cast<S*>(ctx))(b, e); };
  ws.failed = false;
  if (text.empty()) return true;
  run(0, text, 0, static_cast<uint32_t>(text.size()), ws, emit,
      const_cast<void*>(static_cast<const void*>(&sink)));
  return !ws.failed;
}

}  // namespace deepinfer::tokenizer
