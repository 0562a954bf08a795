// An HF byte-level BPE tokenizer loaded from tokenizer.json (DeepSeek V3/V4/V4.1, GPT-2 style):
// encode with or without added-token recognition, segment encoding of rendered prompts (only the
// marked special spans become special ids), multi-threaded encoding of long texts with ids
// identical to the sequential result, and decoding. Thread-safe: all methods are const.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pretokenizer.h"

namespace deepinfer::tokenizer {

// A byte range [begin, end) of a text.
struct TextSpan {
  size_t begin = 0;
  size_t end = 0;
};

class Tokenizer {
 public:
  // Loads tokenizer.json text. Errors name what is malformed or unsupported.
  static Result<std::unique_ptr<Tokenizer>> from_json(std::string_view json);
  // path: a tokenizer.json file or a directory that contains one.
  static Result<std::unique_ptr<Tokenizer>> from_path(const std::string& path);
  ~Tokenizer();

  // HF `encode(text, add_special_tokens=False)`: added tokens spelled in the text become their
  // ids; the rest is BPE. No BOS/EOS is added. Text must be valid UTF-8.
  Result<std::vector<TokenId>> encode(std::string_view text, int threads = 1) const;

  // Plain BPE without added-token matching: `<｜User｜>` in the text encodes to the ids of its
  // characters (encoding spec §5.2).
  Result<std::vector<TokenId>> encode_plain(std::string_view text, int threads = 1) const;
  Status encode_plain_append(std::string_view text, std::vector<TokenId>& out,
                             int threads = 1) const;

  // A rendered prompt: each span in special_spans (ascending, non-overlapping, inside the
  // prompt) must spell exactly one added token and becomes its id; everything between spans
  // is plain BPE (maximal runs). Spec §5.
  Result<std::vector<TokenId>> encode_segments(std::string_view prompt,
                                               std::span<const TextSpan> special_spans,
                                               int threads = 1) const;

  // Decoded text (invalid UTF-8 from byte tokens becomes U+FFFD). Out-of-range ids are an error.
  Result<std::string> decode(std::span<const TokenId> ids, bool skip_special = false) const;

  // Raw bytes of one token (added tokens: their content). Empty for unknown ids.
  std::string_view token_bytes(TokenId id) const;
  bool is_special(TokenId id) const;
  // True for every id that has a token (vocabulary or added).
  bool has_token(TokenId id) const;
  bool is_added(TokenId id) const;

  // Id of an added token by content, or of a vocabulary token by its text form; -1 if none.
  TokenId token_to_id(std::string_view token) const;
  // Id of an added token by content; -1 if none.
  TokenId added_token_id(std::string_view content) const;
  // One past the largest id (129280 for DeepSeek V4.1).
  size_t vocab_size() const { return vocab_size_; }
  const AddedVocabulary& added_vocabulary() const { return added_; }

  // Cut points for parallel encoding: offsets p where encoding text[..p) and text[p..)
  // separately gives the same ids as encoding text (pre-tokenizer boundaries that do not
  // depend on context). Exposed for tests.
  std::vector<size_t> safe_cuts(std::string_view text, size_t chunk_bytes) const;
  static bool is_safe_cut(std::string_view text, size_t p);

 private:
  struct Workspace;
  Tokenizer() = default;
  std::unique_ptr<Workspace> acquire() const;
  void release(std::unique_ptr<Workspace> ws) const;
  // These return false when the pre-tokenizer gave up (see PreTokenizer::split).
  bool encode_plain_run(std::string_view text, Workspace& ws, std::vector<TokenId>& out) const;
  bool encode_plain_parallel(std::string_view text, int threads, std::vector<TokenId>& out) const;
  bool encode_plain_any(std::string_view text, int threads, std::vector<TokenId>& out) const;

  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeModel> bpe_;
  AddedVocabulary added_;
  size_t vocab_size_ = 0;
  // Decoded bytes of every id: bytes_[offsets_[id] .. offsets_[id + 1]).
  std::string bytes_;
  std::vector<uint32_t> offsets_;
  std::vector<uint8_t> flags_;  // bit 0: added, bit 1: special

  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Workspace>> pool_;
};

}  // namespace deepinfer::tokenizer
