#include "server/logprobs.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "recipe/json_writer.h"

namespace deepinfer::server {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t utf8_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  if (n == 2 && c < 0xC2) return 0;  // overlong
  if (n == 3) {
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) return 0;
  }
  if (n == 4) {
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xF0 && c1 < 0x90) || c > 0xF4 || (c == 0xF4 && c1 >= 0x90)) return 0;
  }
  return n;
}

// The shortest text that reads back as the same float; -9999.0 (OpenAI's floor) if not finite.
void append_logprob(std::string& out, float value) {
  if (!std::isfinite(value)) {
    out += "-9999.0";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

// Code points of `bytes` as UTF-8 text: the bytes that are not continuation bytes.
int64_t code_points(std::string_view bytes) {
  int64_t n = 0;
  for (char c : bytes) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

void append_valid_utf8(std::string& out, std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (const size_t n = utf8_length(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
}

TokenLogprobs::TokenLogprobs(const tokenizer::Tokenizer& tokenizer, LogprobsFormat format, int top)
    : tokenizer_(tokenizer), format_(format), top_(std::max(0, top)) {
  pending_.reserve(16);
  key_store_.resize(static_cast<size_t>(engine::kMaxTopLogprobs) + 1);
}

std::string_view TokenLogprobs::next_chunk_logprobs() {
  out_.clear();
  if (pending_.empty()) return {};
  if (format_ == LogprobsFormat::Chat) {
    write_chat();
  } else {
    write_completions();
  }
  pending_.clear();
  return out_;
}

namespace {

// `{"token":…,"logprob":…,"bytes":[…]` (the object left open).
void append_token_fields(std::string& out, const tokenizer::Tokenizer& tokenizer, int32_t token,
                         float logprob, std::string& scratch) {
  const std::string_view raw = tokenizer.token_bytes(token);
  scratch.clear();
  append_valid_utf8(scratch, raw);
  recipe::JsonWriter w(out);
  w.raw("{\"token\":").str(scratch).raw(",\"logprob\":");
  append_logprob(out, logprob);
  w.raw(",\"bytes\":[");
  for (size_t i = 0; i < raw.size(); ++i) {
    if (i > 0) out += ',';
    w.num(static_cast<unsigned char>(raw[i]));
  }
  out += ']';
}

}  // namespace

void append_logprob_entry(std::string& out, const tokenizer::Tokenizer& tokenizer,
                          const engine::SampleResult& sample, int top, std::string& scratch) {
  append_token_fields(out, tokenizer, sample.token, sample.logprob, scratch);
  out += ",\"top_logprobs\":[";
  const int n = std::min(top, sample.num_top);
  for (int k = 0; k < n; ++k) {
    if (k > 0) out += ',';
    const auto& t = sample.top[static_cast<size_t>(k)];
    append_token_fields(out, tokenizer, t.token, t.logprob, scratch);
    out += '}';
  }
  out += "]}";
}

void TokenLogprobs::write_chat() {
  out_ += "{\"content\":[";
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (i > 0) out_ += ',';
    append_logprob_entry(out_, tokenizer_, pending_[i], top_, token_text_);
  }
  out_ += "],\"refusal\":null}";
}

void TokenLogprobs::write_completions() {
  recipe::JsonWriter w(out_);
  out_ += "{\"text_offset\":[";
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (i > 0) out_ += ',';
    w.num(text_offset_);
    text_offset_ += code_points(tokenizer_.token_bytes(pending_[i].token));
  }
  out_ += "],\"token_logprobs\":[";
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (i > 0) out_ += ',';
    append_logprob(out_, pending_[i].logprob);
  }
  out_ += "],\"tokens\":[";
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (i > 0) out_ += ',';
    token_text_.clear();
    append_valid_utf8(token_text_, tokenizer_.token_bytes(pending_[i].token));
    w.str(token_text_);
  }
  out_ += "],\"top_logprobs\":[";
  for (size_t i = 0; i < pending_.size(); ++i) {
    const auto& s = pending_[i];
    if (i > 0) out_ += ',';
    out_ += '{';
    // The top N by logprob, then the sampled token if it is not among them (up to N + 1
    // entries, as OpenAI documents). Ids with the same text keep the first (likeliest) entry.
    size_t keys = 0;
    auto put = [&](int32_t token, float logprob) {
      std::string& key = key_store_[keys];
      key.clear();
      append_valid_utf8(key, tokenizer_.token_bytes(token));
      for (size_t k = 0; k < keys; ++k)
        if (key_store_[k] == key) return;
      if (keys > 0) out_ += ',';
      ++keys;
      w.str(key).raw(":");
      append_logprob(out_, logprob);
    };
    bool sampled_seen = false;
    const int n = std::min(top_, s.num_top);
    for (int k = 0; k < n; ++k) {
      const auto& t = s.top[static_cast<size_t>(k)];
      sampled_seen |= t.token == s.token;
      put(t.token, t.logprob);
    }
    if (!sampled_seen) put(s.token, s.logprob);
    out_ += '}';
  }
  out_ += "]}";
}

}  // namespace deepinfer::server
