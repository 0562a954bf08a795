// Byte-level BPE model (HF `BPE`): a vocabulary of byte strings and ranked merges. encode_word()
// turns one pre-token piece (raw bytes) into ids exactly as HF does (lowest rank first, leftmost
// on ties); a per-workspace cache of hot words makes repeated pieces a single lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/result.h"

namespace deepinfer::tokenizer {

using TokenId = int32_t;

class BpeModel {
 public:
  struct Config {
    // Token text (byte-level alphabet) → id, and merges as pairs of token texts.
    std::vector<std::pair<std::string, TokenId>> vocab;
    std::vector<std::pair<std::string, std::string>> merges;
    bool ignore_merges = false;
    TokenId unk_id = -1;  // -1: none (unknown bytes are dropped, as in HF)
  };

  // Scratch space and the word cache of one thread; never shared between threads.
  class Workspace {
   public:
    Workspace();
    ~Workspace();
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;

   private:
    friend class BpeModel;
    struct Symbol {
      TokenId id;
      int32_t prev, next;
    };
    struct Merge {
      uint32_t rank;
      int32_t pos;
      TokenId left, right, result;
    };
    std::vector<Symbol> symbols;
    std::vector<Merge> heap;
    std::vector<TokenId> ids;
    // Word cache: open addressing over (hash, key, value) with arenas; cleared when full.
    struct Slot {
      uint64_t hash = 0;
      uint32_t key_off = 0, key_len = 0;  // into keys
      uint32_t val_off = 0, val_len = 0;  // into values
      bool used = false;
    };
    std::vector<Slot> slots;
    std::string keys;
    std::vector<TokenId> values;
    size_t used = 0;
  };

  static Result<std::unique_ptr<BpeModel>> create(Config config);

  // Appends the ids of one piece. bytes must be non-empty.
  void encode_word(std::string_view bytes, Workspace& ws, std::vector<TokenId>& out) const;

  // Id of a token given by its text form, if present.
  TokenId token_to_id(std::string_view text) const;
  size_t size() const { return id_to_text_.size(); }
  // Text form of id (empty if the id is not in the vocabulary).
  const std::string& id_to_text(TokenId id) const;

 private:
  BpeModel() = default;
  struct MergeEntry {
    uint64_t key = ~uint64_t{0};  // (left << 32) | right; ~0: empty
    uint32_t rank = 0;
    TokenId result = 0;
  };
  const MergeEntry* find_merge(TokenId left, TokenId right) const;
  void merge_small(Workspace& ws) const;
  void merge_large(Workspace& ws) const;
  bool cache_lookup(Workspace& ws, std::string_view bytes, uint64_t h,
                    std::vector<TokenId>& out) const;
  void cache_store(Workspace& ws, std::string_view bytes, uint64_t h) const;

  TokenId byte_id_[256];
  std::vector<MergeEntry> merges_;  // power-of-two open-addressing table
  uint64_t merge_mask_ = 0;
  std::unordered_map<std::string, TokenId> text_to_id_;
  std::unordered_map<std::string, TokenId> bytes_to_id_;  // for ignore_merges
  std::vector<std::string> id_to_text_;
  bool ignore_merges_ = false;
  TokenId unk_id_ = -1;
};

}  // namespace deepinfer::tokenizer
