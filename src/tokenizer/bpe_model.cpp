// BPE merges, word encoding and the hot-word cache (see bpe_model.h).
#include "tokenizer/bpe_model.h"

#include <algorithm>

#include "tokenizer/byte_level.h"

namespace deepinfer::tokenizer {
namespace {

constexpr size_t kCacheSlots = 1 << 15;  // power of two
constexpr size_t kCacheMaxWords = kCacheSlots / 2;
constexpr size_t kCacheMaxWordBytes = 96;
constexpr size_t kSmallWord = 24;  // symbols; longer words use the heap algorithm

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, s.data() + i, 8);
    h = mix(h ^ w);
  }
  uint64_t w = 0;
  for (size_t k = 0; i < s.size(); ++i, ++k) w |= uint64_t{static_cast<uint8_t>(s[i])} << (8 * k);
  return mix(h ^ w);
}

}  // namespace

BpeModel::Workspace::Workspace() { slots.resize(kCacheSlots); }
BpeModel::Workspace::~Workspace() = default;

Result<std::unique_ptr<BpeModel>> BpeModel::create(Config config) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->ignore_merges_ = config.ignore_merges;
  m->unk_id_ = config.unk_id;
  TokenId max_id = -1;
  for (const auto& [text, id] : config.vocab) {
    if (id < 0) return Error{"vocab id must be non-negative: " + std::to_string(id)};
    max_id = std::max(max_id, id);
  }
  if (max_id >= (1 << 24)) return Error{"vocab id too large: " + std::to_string(max_id)};
  m->id_to_text_.resize(static_cast<size_t>(max_id + 1));
  m->text_to_id_.reserve(config.vocab.size());
  for (auto& [text, id] : config.vocab) {
    if (m->ignore_merges_) m->bytes_to_id_.emplace(byte_level_decode_token(text), id);
    m->id_to_text_[id] = text;
    m->text_to_id_.emplace(std::move(text), id);
  }
  for (int b = 0; b < 256; ++b) {
    m->byte_id_[b] = m->token_to_id(byte_to_text(static_cast<uint8_t>(b)));
  }
  size_t cap = 16;
  while (cap < config.merges.size() * 2 + 16) cap <<= 1;
  m->merges_.assign(cap, MergeEntry{});
  m->merge_mask_ = cap - 1;
  uint32_t rank = 0;
  for (const auto& [a, b] : config.merges) {
    const TokenId left = m->token_to_id(a), right = m->token_to_id(b);
    const TokenId result = m->token_to_id(a + b);
    if (left < 0 || right < 0 || result < 0) {
      return Error{"merge \"" + a + " " + b + "\" uses a token that is not in the vocabulary"};
    }
    const uint64_t key =
        (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
    uint64_t i = mix(key) & m->merge_mask_;
    while (m->merges_[i].key != ~uint64_t{0} && m->merges_[i].key != key)
      i = (i + 1) & m->merge_mask_;
    m->merges_[i] = MergeEntry{key, rank, result};  // a repeated pair: the last one wins, as in HF
    ++rank;
  }
  return m;
}

TokenId BpeModel::token_to_id(std::string_view text) const {
  auto it = text_to_id_.find(std::string(text));
  return it == text_to_id_.end() ? -1 : it->second;
}

const std::string& BpeModel::id_to_text(TokenId id) const {
  static const std::string empty;
  if (id < 0 || static_cast<size_t>(id) >= id_to_text_.size()) return empty;
  return id_to_text_[id];
}

const BpeModel::MergeEntry* BpeModel::find_merge(TokenId left, TokenId right) const {
  const uint64_t key = (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  uint64_t i = mix(key) & merge_mask_;
  while (true) {
    const MergeEntry& e = merges_[i];
    if (e.key == key) return &e;
    if (e.key == ~uint64_t{0}) return nullptr;
    i = (i + 1) & merge_mask_;
  }
}

// Short words: repeatedly merge the lowest-ranked adjacent pair (leftmost on ties).
void BpeModel::merge_small(Workspace& ws) const {
  auto& ids = ws.ids;
  while (ids.size() > 1) {
    uint32_t best_rank = ~0u;
    size_t best = 0;
    TokenId best_result = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const MergeEntry* e = find_merge(ids[i], ids[i + 1]);
      if (e != nullptr && e->rank < best_rank) {
        best_rank = e->rank;
        best = i;
        best_result = e->result;
      }
    }
    if (best_rank == ~0u) break;
    ids[best] = best_result;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

// Long words: a min-heap of candidate merges over a linked list of symbols (as HF does), so a
// megabyte-long run of letters or spaces stays O(n log n).
void BpeModel::merge_large(Workspace& ws) const {
  auto& sym = ws.symbols;
  auto& heap = ws.heap;
  const size_t n = ws.ids.size();
  sym.resize(n);
  heap.clear();
  // Min-heap on (rank, position): the lowest rank first, the leftmost among equal ranks.
  auto cmp = [](const Workspace::Merge& a, const Workspace::Merge& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto push = [&](int32_t pos, TokenId left, TokenId right) {
    const MergeEntry* e = find_merge(left, right);
    if (e == nullptr) return;
    heap.push_back({e->rank, pos, left, right, e->result});
    std::push_heap(heap.begin(), heap.end(), cmp);
  };
  for (size_t i = 0; i < n; ++i) {
    sym[i] = {ws.ids[i], static_cast<int32_t>(i) - 1, i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  }
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i), sym[i].id, sym[i + 1].id);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const Workspace::Merge top = heap.back();
    heap.pop_back();
    auto& s = sym[top.pos];
    if (s.id < 0 || s.next < 0) continue;
    auto& r = sym[s.next];
    if (s.id != top.left || r.id != top.right) continue;  // stale entry
    s.id = top.result;
    const int32_t after = r.next;
    r.id = -1;
    s.next = after;
    if (after >= 0) sym[after].prev = top.pos;
    if (s.prev >= 0) push(s.prev, sym[s.prev].id, s.id);
    if (after >= 0) push(top.pos, s.id, sym[after].id);
  }
  ws.ids.clear();
  for (int32_t i = 0; i >= 0 && static_cast<size_t>(i) < n; i = sym[i].next)
    ws.ids.push_back(sym[i].id);
}

bool BpeModel::cache_lookup(Workspace& ws, std::string_view bytes, uint64_t h,
                            std::vector<TokenId>& out) const {
  size_t i = h & (kCacheSlots - 1);
  while (ws.slots[i].used) {
    const auto& s = ws.slots[i];
    if (s.hash == h && s.key_len == bytes.size() &&
        std::string_view(ws.keys.data() + s.key_off, s.key_len) == bytes) {
      out.insert(out.end(), ws.values.begin() + s.val_off,
                 ws.values.begin() + s.val_off + s.val_len);
      return true;
    }
    i = (i + 1) & (kCacheSlots - 1);
  }
  return false;
}

void BpeModel::cache_store(Workspace& ws, std::string_view bytes, uint64_t h) const {
  if (ws.used >= kCacheMaxWords) {
    for (auto& s : ws.slots) s.used = false;
    ws.keys.clear();
    ws.values.clear();
    ws.used = 0;
  }
  size_t i = h & (kCacheSlots - 1);
  while (ws.slots[i].used) i = (i + 1) & (kCacheSlots - 1);
  auto& s = ws.slots[i];
  s.used = true;
  s.hash = h;
  s.key_off = static_cast<uint32_t>(ws.keys.size());
  s.key_len = static_cast<uint32_t>(bytes.size());
  s.val_off = static_cast<uint32_t>(ws.values.size());
  s.val_len = static_cast<uint32_t>(ws.ids.size());
  ws.keys.append(bytes);
  ws.values.insert(ws.values.end(), ws.ids.begin(), ws.ids.end());
  ++ws.used;
}

void BpeModel::encode_word(std::string_view bytes, Workspace& ws, std::vector<TokenId>& out) const {
  if (bytes.size() == 1) {
    const TokenId id = byte_id_[static_cast<uint8_t>(bytes[0])];
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_id_ >= 0) {
      out.push_back(unk_id_);
    }
    return;
  }
  if (ignore_merges_) {
    auto it = bytes_to_id_.find(std::string(bytes));
    if (it != bytes_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = bytes.size() <= kCacheMaxWordBytes;
  uint64_t h = 0;
  if (cacheable) {
    h = hash_bytes(bytes);
    if (cache_lookup(ws, bytes, h, out)) return;
  }
  ws.ids.clear();
  for (unsigned char c : bytes) {
    const TokenId id = byte_id_[c];
    if (id >= 0) {
      ws.ids.push_back(id);
    } else if (unk_id_ >= 0) {
      ws.ids.push_back(unk_id_);
    }
  }
  if (ws.ids.size() <= kSmallWord) {
    merge_small(ws);
  } else {
    merge_large(ws);
  }
  if (cacheable) cache_store(ws, bytes, h);
  out.insert(out.end(), ws.ids.begin(), ws.ids.end());
}

}  // namespace deepinfer::tokenizer
