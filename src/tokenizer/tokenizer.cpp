// Encoding and decoding entry points of Tokenizer (see tokenizer.h); loading is in
// tokenizer_json.cpp, the parallel split in parallel_encode.cpp.
#include "tokenizer/tokenizer.h"

#include <string>

#include "tokenizer/tokenizer_workspace.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer::Workspace> Tokenizer::acquire() const {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      auto ws = std::move(pool_.back());
      pool_.pop_back();
      return ws;
    }
  }
  auto ws = std::make_unique<Workspace>();
  ws->pre = pre_->make_workspace();
  return ws;
}

void Tokenizer::release(std::unique_ptr<Workspace> ws) const {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  if (pool_.size() < 64) pool_.push_back(std::move(ws));
}

bool Tokenizer::encode_plain_run(std::string_view text, Workspace& ws,
                                 std::vector<TokenId>& out) const {
  return pre_->split(text, *ws.pre, [&](uint32_t b, uint32_t e) {
    bpe_->encode_word(text.substr(b, e - b), ws.bpe, out);
  });
}

namespace {

const Error kRegexLimit{"the pre-tokenizer regex hit a PCRE2 resource limit on this input"};

Status check_utf8(std::string_view text) {
  const size_t bad = utf8_error_offset(text);
  if (bad == text.size()) return Status::Ok();
  return Error{"input is not valid UTF-8 (byte offset " + std::to_string(bad) + ")"};
}

}  // namespace

Status Tokenizer::encode_plain_append(std::string_view text, std::vector<TokenId>& out,
                                      int threads) const {
  if (Status s = check_utf8(text); !s) return s;
  if (!encode_plain_any(text, threads, out)) return kRegexLimit;
  return Status::Ok();
}

Result<std::vector<TokenId>> Tokenizer::encode_plain(std::string_view text, int threads) const {
  std::vector<TokenId> out;
  if (Status s = encode_plain_append(text, out, threads); !s) return s.error();
  return out;
}

Result<std::vector<TokenId>> Tokenizer::encode(std::string_view text, int threads) const {
  if (Status s = check_utf8(text); !s) return s.error();
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 1);
  bool ok = true;
  added_.split(
      text,
      [&](size_t b, size_t e) { ok = encode_plain_any(text.substr(b, e - b), threads, out) && ok; },
      [&](TokenId id) { out.push_back(id); });
  if (!ok) return kRegexLimit;
  return out;
}

Result<std::vector<TokenId>> Tokenizer::encode_segments(std::string_view prompt,
                                                        std::span<const TextSpan> special_spans,
                                                        int threads) const {
  if (Status s = check_utf8(prompt); !s) return s.error();
  auto on_boundary = [&](size_t p) {
    return p == prompt.size() || (static_cast<uint8_t>(prompt[p]) & 0xC0) != 0x80;
  };
  std::vector<TokenId> out;
  out.reserve(prompt.size() / 3 + special_spans.size() + 1);
  size_t pos = 0;
  for (const TextSpan& span : special_spans) {
    if (span.begin < pos || span.end <= span.begin || span.end > prompt.size()) {
      return Error{
          "special spans must be non-empty, ascending, non-overlapping and inside the "
          "prompt (span " +
          std::to_string(span.begin) + ".." + std::to_string(span.end) + ")"};
    }
    if (!on_boundary(span.begin) || !on_boundary(span.end)) {
      return Error{"special span " + std::to_string(span.begin) + ".." + std::to_string(span.end) +
                   " is not on character boundaries"};
    }
    const std::string_view content = prompt.substr(span.begin, span.end - span.begin);
    const AddedToken* t = added_.find_content(content);
    if (t == nullptr) {
      return Error{"special span \"" + std::string(content) +
                   "\" is not a token of this "
                   "tokenizer"};
    }
    if (span.begin > pos && !encode_plain_any(prompt.substr(pos, span.begin - pos), threads, out)) {
      return kRegexLimit;
    }
    out.push_back(t->id);
    pos = span.end;
  }
  if (pos < prompt.size() && !encode_plain_any(prompt.substr(pos), threads, out)) {
    return kRegexLimit;
  }
  return out;
}

Result<std::string> Tokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string bytes;
  for (TokenId id : ids) {
    if (!has_token(id)) {
      return Error{"token id " + std::to_string(id) + " is not in the vocabulary (size " +
                   std::to_string(vocab_size_) + ")"};
    }
    if (skip_special && (flags_[id] & 2) != 0) continue;
    bytes.append(token_bytes(id));
  }
  std::string text;
  text.reserve(bytes.size());
  append_utf8_lossy(bytes, text);
  return text;
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_size_) return {};
  return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
}

bool Tokenizer::is_special(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < vocab_size_ && (flags_[id] & 2) != 0;
}

bool Tokenizer::has_token(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < vocab_size_ && (flags_[id] & 4) != 0;
}

bool Tokenizer::is_added(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < vocab_size_ && (flags_[id] & 1) != 0;
}

TokenId Tokenizer::added_token_id(std::string_view content) const {
  const AddedToken* t = added_.find_content(content);
  return t == nullptr ? -1 : t->id;
}

TokenId Tokenizer::token_to_id(std::string_view token) const {
  const TokenId id = added_token_id(token);
  return id >= 0 ? id : bpe_->token_to_id(token);
}

}  // namespace deepinfer::tokenizer
