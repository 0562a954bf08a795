#include "model/v41_engram.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "backend/cpu/fp8.h"
#include "backend/cpu/quant_act.h"
#include "common/io.h"
#include "common/json.h"
#include "model/pcg64.h"
#include "model/qat32_linear.h"
#include "model/tensor_reader.h"

namespace deepinfer::model::v41 {
namespace {

// ---- token map -------------------------------------------------------------------------------

// GPT-2 byte-level alphabet, inverted: code point → byte (−1 if not in the alphabet).
int byte_of_char(char32_t c) {
  static const std::unordered_map<char32_t, int> table = [] {
    std::unordered_map<char32_t, int> t;
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[keep ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++)] = b;
    }
    return t;
  }();
  auto it = table.find(c);
  return it == table.end() ? -1 : it->second;
}

// Strict UTF-8 decode (no overlongs, surrogates or values past U+10FFFF); false if invalid.
bool decode_utf8(std::string_view s, std::u32string& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = 0;
    char32_t cp = 0, min = 0;
    if (b0 < 0x80) {
      len = 1, cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(len) > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return true;
}

// What the ByteLevel decoder gives for one token: its characters mapped back to bytes when all of
// them are in the alphabet, else its own UTF-8 bytes.
std::string byte_level_decode(const std::string& token) {
  std::u32string cps;
  if (!decode_utf8(token, cps)) return token;
  std::string bytes;
  for (char32_t c : cps) {
    const int b = byte_of_char(c);
    if (b < 0) return token;
    bytes.push_back(static_cast<char>(b));
  }
  return bytes;
}

bool is_mark(UChar32 c) {
  const int8_t t = u_charType(c);
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK;
}

// ---- primes ----------------------------------------------------------------------------------

uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % m);
}

uint64_t powmod(uint64_t b, uint64_t e, uint64_t m) {
  uint64_t r = 1;
  for (b %= m; e; e >>= 1, b = mulmod(b, b, m))
    if (e & 1) r = mulmod(r, b, m);
  return r;
}

// Deterministic Miller–Rabin for 64-bit n.
bool is_prime(uint64_t n) {
  if (n < 2) return false;
  static const uint64_t kBases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  for (uint64_t p : kBases) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) d >>= 1, ++s;
  for (uint64_t a : kBases) {
    uint64_t x = powmod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < s && composite; ++i) {
      x = mulmod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

constexpr int32_t kDead = -1;

}  // namespace

EngramConfig engram_config(const V41Config& c) {
  EngramConfig e;
  e.layer_ids = c.engram_layer_ids;
  e.max_ngram_size = c.engram_max_ngram_size;
  e.bucket_start = c.engram_vocab_size;
  e.n_heads = c.engram_n_heads;
  e.head_dim = c.engram_head_dim;
  e.pad_token_id = c.engram_pad_token_id;
  e.compressed_vocab_size = c.engram_compressed_vocab_size;
  e.num_embeddings = c.engram_num_embeddings;
  e.hc_mult = c.hc_mult;
  e.dim = c.hidden_size;
  e.norm_eps = c.rms_eps;
  return e;
}

// ---- token map -------------------------------------------------------------------------------

std::string engram_normalize(std::string_view text) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfkc = icu::Normalizer2::getNFKCInstance(err);
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(err);
  if (U_FAILURE(err)) return std::string(text);
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  s = nfkc->normalize(s, err);
  s = nfd->normalize(s, err);
  if (U_FAILURE(err)) return std::string(text);
  // Accents stripped (general category M), then the per-character full lower-case mapping (no
  // context: a final sigma stays σ); the only unconditional multi-character one is U+0130.
  std::u32string cps;
  for (int32_t i = 0; i < s.length();) {
    const UChar32 c = s.char32At(i);
    i += U16_LENGTH(c);
    if (is_mark(c)) continue;
    if (c == 0x130) {
      cps.push_back(U'i');
      cps.push_back(0x307);
    } else {
      cps.push_back(static_cast<char32_t>(u_tolower(c)));
    }
  }
  // Runs of [ \t\r\n] → one space; a lone space is kept through the strip.
  std::u32string t;
  bool in_run = false;
  for (char32_t c : cps) {
    const bool ws = c == U' ' || c == U'\t' || c == U'\r' || c == U'\n';
    if (ws && !in_run) t.push_back(U' ');
    if (!ws) t.push_back(c);
    in_run = ws;
  }
  if (t.size() == 1 && t[0] == U' ') t[0] = 0xE000;  // the sentinel: a lone space survives
  size_t b = 0, e = t.size();
  while (b < e && u_isUWhiteSpace(static_cast<UChar32>(t[b]))) ++b;
  while (e > b && u_isUWhiteSpace(static_cast<UChar32>(t[e - 1]))) --e;
  icu::UnicodeString r;
  for (size_t i = b; i < e; ++i) r.append(static_cast<UChar32>(t[i] == 0xE000 ? U' ' : t[i]));
  std::string out;
  r.toUTF8String(out);
  return out;
}

Result<EngramTokenMap> build_engram_token_map(std::string_view tokenizer_json, int64_t n_tokens) {
  auto parsed = parse_json(tokenizer_json);
  if (!parsed.ok()) return Error{"tokenizer.json: " + parsed.error().message};
  const Json& root = parsed.value();
  const JsonObject* obj = root.if_object();
  const JsonObject* model =
      obj ? (*obj).if_contains("model") ? (*obj).at("model").if_object() : nullptr : nullptr;
  const JsonObject* vocab =
      model && model->if_contains("vocab") ? model->at("vocab").if_object() : nullptr;
  if (!vocab) return Error{"tokenizer.json: no model.vocab object"};
  std::map<int64_t, std::string> by_id;
  std::set<std::string> distinct;
  for (const auto& kv : *vocab) {
    if (!kv.value().is_int64() || kv.value().as_int64() < 0)
      return Error{"tokenizer.json: vocab entry with a non-integer id"};
    by_id[kv.value().as_int64()] = std::string(kv.key());
    distinct.insert(std::string(kv.key()));
  }
  if (const auto* added = obj->if_contains("added_tokens")) {
    if (!added->is_array()) return Error{"tokenizer.json: added_tokens is not an array"};
    for (const auto& a : added->as_array()) {
      const JsonObject* t = a.if_object();
      if (!t || !t->if_contains("id") || !t->at("id").is_int64() || !t->if_contains("content") ||
          !t->at("content").is_string())
        return Error{"tokenizer.json: added token without an integer id and a content string"};
      const std::string content(t->at("content").as_string());
      by_id[t->at("id").as_int64()] = content;
      distinct.insert(content);
    }
  }
  // len(tokenizer): the distinct token strings (vocab and added tokens together).
  if (n_tokens <= 0) n_tokens = static_cast<int64_t>(distinct.size());
  EngramTokenMap map;
  map.ids.resize(static_cast<size_t>(n_tokens));
  std::unordered_map<std::string, int32_t> key_to_new;
  std::u32string scratch;
  for (int64_t id = 0; id < n_tokens; ++id) {
    auto it = by_id.find(id);
    const std::string raw = it == by_id.end() ? std::string() : it->second;
    const std::string text = it == by_id.end() ? std::string() : byte_level_decode(raw);
    std::string key;
    if (!decode_utf8(text, scratch) ||
        std::find(scratch.begin(), scratch.end(), U'\uFFFD') != scratch.end()) {
      key = raw;  // a partial UTF-8 byte token: keyed by its raw vocabulary string
    } else {
      std::string normalized = engram_normalize(text);
      key = normalized.empty() ? text : std::move(normalized);
    }
    auto [pos, inserted] = key_to_new.emplace(key, static_cast<int32_t>(key_to_new.size()));
    map.ids[static_cast<size_t>(id)] = pos->second;
  }
  map.n_compressed = static_cast<int64_t>(key_to_new.size());
  return map;
}

Result<EngramTokenMap> load_engram_token_map(const std::string& tokenizer_json_path,
                                             int64_t n_tokens) {
  auto text = read_file(tokenizer_json_path);
  if (!text.ok()) return Error{text.error().message};
  return build_engram_token_map(text.value(), n_tokens);
}

// ---- layout and hashing ----------------------------------------------------------------------

std::vector<int64_t> engram_hash_multipliers(int layer_id, int max_ngram_size,
                                             int64_t compressed_vocab_size) {
  const int64_t max_long = std::numeric_limits<int64_t>::max();
  const int64_t bound = std::max<int64_t>(1, (max_long / compressed_vocab_size) / 2);
  Pcg64 g(static_cast<uint64_t>(10007) * static_cast<uint64_t>(layer_id));
  std::vector<int64_t> out(static_cast<size_t>(max_ngram_size));
  for (auto& m : out) m = g.integer(0, bound) * 2 + 1;
  return out;
}

int EngramLayout::layer_index(int layer_id) const {
  auto it = std::find(layer_ids.begin(), layer_ids.end(), layer_id);
  return it == layer_ids.end() ? -1 : static_cast<int>(it - layer_ids.begin());
}

Result<EngramLayout> make_engram_layout(const EngramConfig& config, EngramTokenMap map) {
  if (config.layer_ids.empty()) return Error{"engram: no engram_layer_ids"};
  if (config.max_ngram_size < 2 || config.n_heads < 1 || config.head_dim < 32 ||
      config.head_dim % 32 || config.bucket_start < 1)
    return Error{
        "engram: needs engram_max_ngram_size >= 2, engram_n_heads >= 1, "
        "engram_head_dim a multiple of 32 and engram_vocab_size >= 1"};
  if (map.n_compressed < 1 || map.ids.empty()) return Error{"engram: empty token map"};
  if (config.compressed_vocab_size > 0 && config.compressed_vocab_size != map.n_compressed)
    return Error{"engram: the tokenizer gives " + std::to_string(map.n_compressed) +
                 " compressed ids, the config says engram_compressed_vocab_size " +
                 std::to_string(config.compressed_vocab_size)};
  if (config.pad_token_id < 0 || config.pad_token_id >= static_cast<int64_t>(map.ids.size()))
    return Error{"engram: engram_pad_token_id outside the tokenizer"};
  EngramLayout l;
  l.layer_ids = config.layer_ids;
  l.max_ngram_size = config.max_ngram_size;
  l.n_heads = config.n_heads;
  l.head_dim = config.head_dim;
  std::set<int64_t> seen;
  for (size_t li = 0; li < config.layer_ids.size(); ++li) {
    std::vector<int64_t> primes;
    for (int ng = 0; ng < config.max_ngram_size - 1; ++ng) {
      int64_t current = config.bucket_start - 1;
      for (int h = 0; h < config.n_heads; ++h) {
        int64_t c = current + 1;
        while (!is_prime(static_cast<uint64_t>(c)) || seen.count(c)) ++c;
        seen.insert(c);
        current = c;
        primes.push_back(c);
      }
    }
    std::vector<int64_t> offsets(primes.size());
    int64_t total = 0;
    for (size_t c = 0; c < primes.size(); ++c) offsets[c] = total, total += primes[c];
    if (!config.num_embeddings.empty()) {
      if (config.num_embeddings.size() != config.layer_ids.size())
        return Error{"engram: engram_num_embeddings needs one entry per engram layer"};
      if (config.num_embeddings[li] < total)
        return Error{"engram: layer " + std::to_string(config.layer_ids[li]) + " needs " +
                     std::to_string(total) + " table rows, engram_num_embeddings says " +
                     std::to_string(config.num_embeddings[li])};
    }
    l.primes.push_back(std::move(primes));
    l.offsets.push_back(std::move(offsets));
    l.num_rows.push_back(total);
    l.multipliers.push_back(
        engram_hash_multipliers(config.layer_ids[li], config.max_ngram_size, map.n_compressed));
  }
  l.pad_id = map.ids[static_cast<size_t>(config.pad_token_id)];
  l.token_map = std::move(map.ids);
  return l;
}

EngramHistory engram_fresh_history(const EngramLayout& layout) {
  return EngramHistory{std::vector<int32_t>(static_cast<size_t>(layout.max_ngram_size - 1), kDead)};
}

EngramHistory engram_history_of(const EngramLayout& layout, const int32_t* recent, int64_t n) {
  EngramHistory h = engram_fresh_history(layout);
  const int64_t keep = static_cast<int64_t>(h.prev.size());
  for (int64_t k = 0; k < keep && k < n; ++k) {
    const int32_t id = recent[n - 1 - k];
    h.prev[static_cast<size_t>(k)] = id >= 0 && id < static_cast<int64_t>(layout.token_map.size())
                                         ? layout.token_map[static_cast<size_t>(id)]
                                         : kDead;
  }
  return h;
}

Status engram_hash_rows(const EngramLayout& layout, const int32_t* ids, int64_t n,
                        const uint8_t* text_mask, EngramHistory& history, int64_t* rows) {
  const int m = layout.max_ngram_size, nl = layout.n_layers(), nc = layout.n_cols();
  if (static_cast<int>(history.prev.size()) != m - 1) return Error{"engram: history size mismatch"};
  int64_t tokens[64];
  if (m > 64) return Error{"engram: engram_max_ngram_size above 64"};
  for (int64_t t = 0; t < n; ++t) {
    const bool text = !text_mask || text_mask[t];
    int32_t c = kDead;
    if (text) {
      if (ids[t] < 0 || ids[t] >= static_cast<int64_t>(layout.token_map.size()))
        return Error{"engram: token id " + std::to_string(ids[t]) + " outside the tokenizer's " +
                     std::to_string(layout.token_map.size()) + " ids"};
      c = layout.token_map[static_cast<size_t>(ids[t])];
    }
    bool blocked = false;
    for (int k = 0; k < m; ++k) {
      const int32_t src = k == 0 ? c : history.prev[static_cast<size_t>(k - 1)];
      blocked = blocked || src == kDead;
      tokens[k] = blocked ? layout.pad_id : src;
    }
    int64_t* out = rows + t * nl * nc;
    for (int l = 0; l < nl; ++l) {
      const auto& mult = layout.multipliers[static_cast<size_t>(l)];
      const auto& primes = layout.primes[static_cast<size_t>(l)];
      const auto& offs = layout.offsets[static_cast<size_t>(l)];
      int64_t rolling = tokens[0] * mult[0];
      for (int i = 1; i < m; ++i) {
        rolling ^= tokens[i] * mult[static_cast<size_t>(i)];
        for (int h = 0; h < layout.n_heads; ++h) {
          const size_t col = static_cast<size_t>((i - 1) * layout.n_heads + h);
          out[l * nc + static_cast<int64_t>(col)] = rolling % primes[col] + offs[col];
        }
      }
    }
    for (int k = m - 2; k > 0; --k)
      history.prev[static_cast<size_t>(k)] = history.prev[static_cast<size_t>(k - 1)];
    if (m > 1) history.prev[0] = c;
  }
  return Status::Ok();
}

// ---- weights and forward ---------------------------------------------------------------------

Result<EngramWeights> load_engram_weights(const Checkpoint& checkpoint, const EngramConfig& config,
                                          const EngramLayout& layout, int layer_id) {
  const int li = layout.layer_index(layer_id);
  if (li < 0) return Error{"engram: layer " + std::to_string(layer_id) + " is no Engram layer"};
  TensorReader rd(checkpoint);
  const std::string p = "layers." + std::to_string(layer_id) + ".engram.";
  EngramWeights w;
  w.layer_id = layer_id;
  w.layer_index = li;
  const int64_t hd = layout.head_dim;
  const TensorInfo* table = checkpoint.find(p + "embed.weight");
  if (!table || table->shape.size() != 2 || table->shape[1] != hd) {
    rd.fail("tensor " + p + "embed.weight missing or not [rows, " + std::to_string(hd) + "]");
  } else if (table->dtype != DType::F8_E4M3) {
    rd.fail("tensor " + p + "embed.weight has dtype " + dtype_name(table->dtype) +
            ", F8_E4M3 expected");
  } else {
    w.table_rows = table->shape[0];
    if (w.table_rows < layout.num_rows[static_cast<size_t>(li)])
      rd.fail("tensor " + p + "embed.weight has " + std::to_string(w.table_rows) +
              " rows; the hash layout needs " +
              std::to_string(layout.num_rows[static_cast<size_t>(li)]));
    w.table = table->data;
    const TensorInfo* s = rd.get(p + "embed.scale", {w.table_rows, hd / 32});
    if (s && s->dtype != DType::F8_E8M0 && s->dtype != DType::U8)
      rd.fail("tensor " + p + "embed.scale has dtype " + dtype_name(s->dtype) +
              ", F8_E8M0 expected");
    if (s) w.scale = s->data;
  }
  const int64_t hc = config.hc_mult, d = config.dim;
  w.wkv = rd.matrix(p + "wkv.weight", (hc + 1) * d, layout.n_cols() * hd);
  const std::vector<float> q = rd.floats(p + "q_weight", {hc, d});
  const std::vector<float> k = rd.floats(p + "k_weight", {hc, d});
  if (!rd.ok()) return rd.error();
  w.qk.resize(q.size());
  for (size_t i = 0; i < q.size(); ++i) w.qk[i] = q[i] * k[i];
  return w;
}

void engram_forward(const EngramWeights& w, const EngramLayout& layout, const EngramConfig& config,
                    const int64_t* rows, int64_t row_stride, int64_t n, const uint8_t* text_mask,
                    float* X, EngramScratch& scratch, cpu::ThreadPool* pool) {
  const int64_t hd = layout.head_dim, nc = layout.n_cols(), hc = config.hc_mult, d = config.dim;
  const int64_t in = nc * hd, out = (hc + 1) * d;
  if (scratch.emb.size() < static_cast<size_t>(n * in))
    scratch.emb.resize(static_cast<size_t>(n * in));
  if (scratch.kv.size() < static_cast<size_t>(n * out))
    scratch.kv.resize(static_cast<size_t>(n * out));
  // Rows dequantized: e4m3 · scale per 32, as bf16 (rows outside the table read as zeros).
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < nc; ++c) {
      float* dst = scratch.emb.data() + t * in + c * hd;
      const int64_t r = rows[t * row_stride + c];
      if (r < 0 || r >= w.table_rows) {
        std::fill(dst, dst + hd, 0.0f);
        continue;
      }
      const uint8_t* q = w.table + r * hd;
      const uint8_t* s = w.scale + r * (hd / 32);
      for (int64_t k = 0; k < hd; ++k)
        dst[k] = cpu::round_bf16(cpu::fp8_e4m3_to_float(q[k]) * cpu::ue8m0_to_float(s[k / 32]));
    }
  }
  qat32_linear(scratch.emb.data(), n, w.wkv, scratch.kv.data(), LinearOut::Bf16, scratch.xq, pool);
  const float eps = static_cast<float>(config.norm_eps);
  const float inv_sqrt_dim = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  for (int64_t t = 0; t < n; ++t) {
    if (text_mask && !text_mask[t]) continue;
    const float* kv = scratch.kv.data() + t * out;
    const float* value = kv + hc * d;
    for (int64_t j = 0; j < hc; ++j) {
      float* x = X + (t * hc + j) * d;
      const float* key = kv + j * d;
      const float* qk = w.qk.data() + j * d;
      double xx = 0, kk = 0, dot = 0;
      for (int64_t i = 0; i < d; ++i) {
        xx += static_cast<double>(x[i]) * x[i];
        kk += static_cast<double>(key[i]) * key[i];
        dot += static_cast<double>(x[i] * qk[i] * key[i]);
      }
      const float rx = 1.0f / std::sqrt(static_cast<float>(xx / static_cast<double>(d)) + eps);
      const float rk = 1.0f / std::sqrt(static_cast<float>(kk / static_cast<double>(d)) + eps);
      const float g = static_cast<float>(dot) * (rx * rk) * inv_sqrt_dim;
      const float mag = std::sqrt(std::max(std::fabs(g), 1e-6f));
      const float gate = 1.0f / (1.0f + std::exp(-std::copysign(mag, g)));
      for (int64_t i = 0; i < d; ++i) x[i] = cpu::round_bf16(x[i] + gate * value[i]);
    }
  }
}

}  // namespace deepinfer::model::v41
