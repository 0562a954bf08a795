// Streaming detokenizer: push() token ids one at a time and get back only complete UTF-8 text
// (a multi-byte character split over several byte tokens is held until it is whole; bytes that
// can never form a character become U+FFFD, as in decode()). The concatenation of all outputs
// plus finish() equals Tokenizer::decode of the whole sequence. O(1) amortized per token, no
// allocation once the scratch buffer has grown to the longest token.
#pragma once

#include <string>

#include "common/result.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // Appends the text completed by this token to out. Unknown ids are an error (nothing appended).
  Status push(TokenId id, std::string& out);
  // Appends what is still held (an incomplete character becomes U+FFFD) and resets.
  void finish(std::string& out);
  // Bytes held back waiting for the rest of a character (0..3).
  size_t pending() const { return pending_len_; }

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  char pending_[4] = {};
  size_t pending_len_ = 0;
  std::string scratch_;
};

}  // namespace deepinfer::tokenizer
