// Parallel plain encoding: long texts are cut at pre-tokenizer boundaries that no regex
// alternative can cross or look across, encoded on several threads and concatenated, so the ids
// equal the sequential result (tests/tokenizer/parallel_encode_test.cpp checks this property).
#include <algorithm>
#include <atomic>
#include <thread>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_workspace.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

constexpr size_t kMinParallelBytes = 64 * 1024;
constexpr size_t kMinChunkBytes = 16 * 1024;

bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Conservative: every code point that any engine (PCRE2, Oniguruma, JS) treats as `\s`, plus
// the format characters that once were spaces.
bool maybe_space(uint32_t cp) {
  if (cp <= 0x20) return true;
  switch (cp) {
    case 0x7F:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x180E:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x2060:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200B;
  }
}

}  // namespace

// A cut at p is safe when (a) text[p-1] is '\n' and text[p] starts a non-space character: every
// regex alternative that can consume '\n' ends at a line break or whitespace, so no piece spans
// p, and the whitespace run before p is the same with or without the suffix; or (b) text[p] is a
// space between two ASCII letters: the letter run ends at p and " word" starts a new piece.
// Neither position touches digits or CJK, which the first two Split steps isolate.
bool Tokenizer::is_safe_cut(std::string_view text, size_t p) {
  if (p == 0 || p >= text.size()) return false;
  if (text[p - 1] == '\n') {
    if (static_cast<uint8_t>(text[p]) < 0x80) return !maybe_space(static_cast<uint8_t>(text[p]));
    size_t len = utf8_sequence_length(text, p);
    if (len == 0) return false;
    return !maybe_space(utf8_decode(text, p, &len));
  }
  return text[p] == ' ' && p + 1 < text.size() && ascii_letter(text[p - 1]) &&
         ascii_letter(text[p + 1]);
}

std::vector<size_t> Tokenizer::safe_cuts(std::string_view text, size_t chunk_bytes) const {
  std::vector<size_t> cuts;
  chunk_bytes = std::max<size_t>(chunk_bytes, 1);
  size_t target = chunk_bytes;
  while (target < text.size()) {
    size_t p = target;
    const size_t limit = std::min(text.size(), target + chunk_bytes);
    while (p < limit && !is_safe_cut(text, p)) ++p;
    if (p >= limit) {
      target = limit;
      continue;
    }
    cuts.push_back(p);
    target = p + chunk_bytes;
  }
  return cuts;
}

bool Tokenizer::encode_plain_any(std::string_view text, int threads,
                                 std::vector<TokenId>& out) const {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads > 1 && text.size() >= kMinParallelBytes) {
    return encode_plain_parallel(text, threads, out);
  }
  auto ws = acquire();
  const bool ok = encode_plain_run(text, *ws, out);
  release(std::move(ws));
  return ok;
}

bool Tokenizer::encode_plain_parallel(std::string_view text, int threads,
                                      std::vector<TokenId>& out) const {
  const size_t chunk = std::max(kMinChunkBytes, text.size() / (static_cast<size_t>(threads) * 4));
  std::vector<size_t> bounds = safe_cuts(text, chunk);
  bounds.insert(bounds.begin(), 0);
  bounds.push_back(text.size());
  const size_t n = bounds.size() - 1;
  std::vector<std::vector<TokenId>> parts(n);
  std::atomic<size_t> next{0};
  std::atomic<bool> ok{true};
  auto worker = [&] {
    auto ws = acquire();
    for (size_t i = next++; i < n; i = next++) {
      const std::string_view piece = text.substr(bounds[i], bounds[i + 1] - bounds[i]);
      parts[i].reserve(piece.size() / 3 + 1);
      if (!encode_plain_run(piece, *ws, parts[i])) ok = false;
    }
    release(std::move(ws));
  };
  const size_t helpers = std::min<size_t>(static_cast<size_t>(threads), n) - 1;
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  size_t total = 0;
  for (const auto& p : parts) total += p.size();
  out.reserve(out.size() + total);
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return ok;
}

}  // namespace deepinfer::tokenizer
