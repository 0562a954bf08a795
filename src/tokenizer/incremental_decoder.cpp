// Streaming detokenizer (see incremental_decoder.h).
#include "tokenizer/incremental_decoder.h"

#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tok_(tokenizer), skip_special_(skip_special) {
  scratch_.reserve(64);
}

Status IncrementalDecoder::push(TokenId id, std::string& out) {
  if (!tok_.has_token(id)) {
    return Error{"token id " + std::to_string(id) + " is not in the vocabulary"};
  }
  if (skip_special_ && tok_.is_special(id)) return Status::Ok();
  const std::string_view bytes = tok_.token_bytes(id);
  if (pending_len_ == 0) {
    // Fast path: the token alone. Emit its valid prefix; hold an incomplete tail.
    size_t i = 0;
    while (i < bytes.size()) {
      const size_t n = static_cast<uint8_t>(bytes[i]) < 0x80 ? 1 : utf8_sequence_length(bytes, i);
      if (n == 0) break;
      i += n;
    }
    out.append(bytes.data(), i);
    if (i == bytes.size()) return Status::Ok();
    if (utf8_is_incomplete_prefix(bytes, i)) {
      pending_len_ = bytes.size() - i;
      for (size_t k = 0; k < pending_len_; ++k) pending_[k] = bytes[i + k];
      return Status::Ok();
    }
    scratch_.assign(bytes.data() + i, bytes.size() - i);
  } else {
    scratch_.assign(pending_, pending_len_);
    scratch_.append(bytes);
    pending_len_ = 0;
  }
  // General path over scratch_: valid runs, U+FFFD for invalid subparts, hold the tail.
  const std::string_view s = scratch_;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = static_cast<uint8_t>(s[i]) < 0x80 ? 1 : utf8_sequence_length(s, i);
    if (n > 0) {
      out.append(s.data() + i, n);
      i += n;
    } else if (utf8_is_incomplete_prefix(s, i)) {
      pending_len_ = s.size() - i;
      for (size_t k = 0; k < pending_len_; ++k) pending_[k] = s[i + k];
      break;
    } else {
      out.append("\xEF\xBF\xBD");
      i += utf8_invalid_subpart_length(s, i);
    }
  }
  return Status::Ok();
}

void IncrementalDecoder::finish(std::string& out) {
  if (pending_len_ > 0) out.append("\xEF\xBF\xBD");
  pending_len_ = 0;
}

}  // namespace deepinfer::tokenizer
