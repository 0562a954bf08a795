// Token masks for structured output. TokenTable: a vocabulary's token bytes sorted into a trie
// (built once per vocabulary). CompiledGrammar: a Grammar plus, for every byte position, the
// tokens accepted there whatever the stack below holds and the few whose fate depends on it
// (context-independent precompute). GrammarMatcher: one request's automaton state; fills the
// allowed-token bitmask per step and advances with each accepted token.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/structured_grammar.h"
#include "engine/structured_stack.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::engine::structured {

// Bit i of word i / 64 set = token i allowed.
inline size_t mask_words(size_t vocab_size) { return (vocab_size + 63) / 64; }
inline bool mask_test(std::span<const uint64_t> m, int32_t t) {
  return (m[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1u;
}

// Special tokens a grammar can name by one byte that never occurs in UTF-8 text: the DSML
// marker token (tool-call markup) and `</think>`. from_tokenizer maps them; vocabulary tokens
// holding bytes F8..FF take no part.
inline constexpr std::string_view kDsmlSpelling =
    "\xef\xbd\x9c"
    "DSML"
    "\xef\xbd\x9c";
inline constexpr uint8_t kDsmlByte = 0xf8;
inline constexpr uint8_t kThinkEndByte = 0xf9;

class TokenTable {
 public:
  // Every id with bytes that is not an added token takes part; added/special tokens never do
  // (except the end tokens a matcher is given, and the two marker tokens above).
  static std::shared_ptr<const TokenTable> from_tokenizer(const tokenizer::Tokenizer& tok);
  // tokens[i] = bytes of id i; empty = no token.
  static std::shared_ptr<const TokenTable> from_bytes(const std::vector<std::string>& tokens);

  struct TrieNode {
    uint32_t child_begin = 0, child_end = 0;  // children are contiguous in nodes
    uint32_t lo = 0, hi = 0;                  // sorted-token range of the subtree
    uint32_t end_hi = 0;                      // [lo, end_hi): tokens that end at this node
    uint8_t byte = 0;
  };

  size_t vocab_size() const { return vocab_size_; }
  size_t num_sorted() const { return sorted_.size(); }
  int32_t sorted_id(uint32_t i) const { return sorted_[i]; }
  std::string_view bytes(int32_t id) const {
    return std::string_view(blob_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  const std::vector<TrieNode>& trie() const { return trie_; }
  size_t max_len() const { return max_len_; }
  // A hash of the vocabulary (cache key part).
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  void build();
  size_t vocab_size_ = 0;
  std::string blob_;
  std::vector<uint32_t> offsets_;
  std::vector<int32_t> sorted_;
  std::vector<TrieNode> trie_;
  uint64_t fingerprint_ = 0;
  size_t max_len_ = 0;
};

struct CompileStats {
  double precompute_ms = 0;
  size_t byte_positions = 0;
  size_t uncertain_total = 0;
};

class CompiledGrammar {
 public:
  // Builds the per-position tables. Fails when the precompute exceeds the grammar's time limit.
  static Result<std::shared_ptr<const CompiledGrammar>> compile(
      std::unique_ptr<Grammar> grammar, std::shared_ptr<const TokenTable> vocab);

  struct PosTable {
    std::vector<uint64_t> accepted_bits;  // full mask, or empty when accepted_ids is used
    std::vector<int32_t> accepted_ids;
    std::vector<uint32_t> uncertain;  // sorted-token indices, ascending
  };
  const Grammar& grammar() const { return *grammar_; }
  const TokenTable& vocab() const { return *vocab_; }
  const PosTable* table(uint32_t pos) const {
    const int32_t i = table_index_[pos];
    return i < 0 ? nullptr : &tables_[static_cast<size_t>(i)];
  }
  const CompileStats& stats() const { return stats_; }
  // Fewest bytes from position `pos` to the end of its alternative.
  uint32_t remaining(uint32_t pos) const { return remaining_[pos]; }
  // The tables of several top positions merged (built on first use, shared by matchers).
  struct Merged {
    std::vector<uint64_t> accepted;
    std::vector<uint32_t> uncertain;
  };
  std::shared_ptr<const Merged> merged(const std::vector<uint32_t>& positions) const;

 private:
  void compute_remaining();
  std::unique_ptr<Grammar> grammar_;
  std::vector<uint32_t> remaining_;
  mutable std::mutex merged_mu_;
  mutable std::vector<std::pair<std::vector<uint32_t>, std::shared_ptr<const Merged>>> merged_;
  std::shared_ptr<const TokenTable> vocab_;
  std::vector<int32_t> table_index_;
  std::vector<PosTable> tables_;
  CompileStats stats_;
};

class GrammarMatcher {
 public:
  // end_tokens: allowed exactly when the grammar is complete (EOS, stop ids).
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::vector<int32_t> end_tokens);

  // Writes the allowed tokens into `mask` (mask_words(vocab) words). After an end token was
  // accepted, or in a dead state, only the end tokens are allowed.
  void fill_mask(std::span<uint64_t> mask);
  // Advances; false (state unchanged) when the token is not allowed.
  bool accept(int32_t token);
  bool accept_bytes(std::string_view bytes);
  // The grammar is complete here (end tokens allowed).
  bool can_finish() const { return state_.finished; }
  bool terminated() const { return terminated_; }
  void reset();
  // Fewest bytes that complete the grammar from here, and the next bytes on such a shortest
  // completion (to steer a finishing budget, e.g. when max_tokens is near).
  uint32_t min_remaining() const;
  ByteSet shortest_completion_bytes() const;

 private:
  bool check(uint32_t sorted_index, size_t& depth_valid);
  uint32_t stack_cost(uint32_t node) const;

  std::shared_ptr<const CompiledGrammar> g_;
  std::vector<int32_t> end_tokens_;
  StackRunner runner_;
  StackSet state_, scratch_state_;
  bool terminated_ = false;
  // Mask scratch (reused, no per-step allocation once warm).
  std::vector<StackSet> levels_;
  std::vector<uint32_t> uncertain_;
  std::vector<uint32_t> seen_pos_;
  std::shared_ptr<const CompiledGrammar::Merged> merged_now_;
  // Masks of recent states (a state recurs on every token of a long string or number).
  struct CachedMask {
    std::vector<uint32_t> tops;
    bool finished = false;
    uint64_t stamp = 0;
    std::vector<uint64_t> mask;
  };
  std::vector<CachedMask> mask_cache_;
  uint64_t clock_ = 0;

  std::string_view prev_;
};

}  // namespace deepinfer::engine::structured
