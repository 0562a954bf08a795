// EntryStore: where compressed rows live (owned or paged) and the packed row formats of spec §7.2.
#include "model/state.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>

#include "backend/cpu/fp4.h"
#include "backend/cpu/fp8.h"

namespace deepinfer::model {
namespace {

constexpr int kFp8Block = 64;      // KV-QAT block along the no-RoPE dims
constexpr int kFp4Block = 32;      // indexer FP4 block
constexpr int kFp4E4m3Block = 16;  // V4.1 compressed-KV FP4 block (E4M3 scales)

std::atomic<int64_t> g_mismatches{0};

const std::array<float, 256>& fp8_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> v{};
    for (int c = 0; c < 256; ++c)
      v[static_cast<size_t>(c)] = cpu::fp8_e4m3_to_float(static_cast<uint8_t>(c));
    return v;
  }();
  return t;
}

// The smallest power-of-two exponent k with max_code · 2^k ≥ amax (k in [-127, 127]), where
// max_code = m · 2^max_code_exp with m in [0.5, 1): the scale of a block the quantizer has already
// put on its grid. Any scale at or below the quantizer's own keeps every value representable
// (codes only scale up by powers of two, staying within ±max_code), so the row decodes to the same
// bits.
int min_exponent(float amax, int max_code_exp, float max_code) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 0;
  int e = 0;
  std::frexp(amax, &e);  // amax in [2^(e-1), 2^e)
  int k = e - max_code_exp;
  if (std::ldexp(max_code, k) < amax) ++k;
  return std::clamp(k, -127, 127);
}

inline uint16_t bf16_bits(float v, bool& exact) {
  const uint32_t b = std::bit_cast<uint32_t>(v);
  exact = exact && (b & 0xffffu) == 0;
  return static_cast<uint16_t>(b >> 16);
}

void pack_fp8_kv(const float* v, int dim, int rope, uint8_t* out) {
  const int nope = dim - rope;
  const int nb = (nope + kFp8Block - 1) / kFp8Block;
  uint8_t* codes = out;
  uint8_t* rope_bytes = out + nope;
  uint8_t* scales = rope_bytes + 2 * rope;
  bool exact = true;
  const auto& table = fp8_table();
  for (int b = 0; b < nb; ++b) {
    const int i0 = b * kFp8Block, i1 = std::min(nope, i0 + kFp8Block);
    float amax = 0.0f;
    for (int i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(v[i]));
    // 448 = 0.875 · 2^9
    const int k = min_exponent(amax, 9, cpu::kFp8E4m3Max);
    scales[b] = static_cast<uint8_t>(k + 127);
    const float inv = std::ldexp(1.0f, -k), s = cpu::ue8m0_to_float(scales[b]);
    for (int i = i0; i < i1; ++i) {
      codes[i] = cpu::float_to_fp8_e4m3(v[i] * inv);
      const float back = table[codes[i]] * s;
      exact = exact && std::bit_cast<uint32_t>(back) == std::bit_cast<uint32_t>(v[i]);
    }
  }
  for (int i = 0; i < rope; ++i) {
    const uint16_t h = bf16_bits(v[nope + i], exact);
    std::memcpy(rope_bytes + 2 * i, &h, 2);
  }
  if (!exact) g_mismatches.fetch_add(1, std::memory_order_relaxed);
}

void unpack_fp8_kv(const uint8_t* in, int dim, int rope, float* v) {
  const int nope = dim - rope;
  const uint8_t* rope_bytes = in + nope;
  const uint8_t* scales = rope_bytes + 2 * rope;
  const auto& table = fp8_table();
  for (int i0 = 0, b = 0; i0 < nope; i0 += kFp8Block, ++b) {
    const float s = cpu::ue8m0_to_float(scales[b]);
    const int i1 = std::min(nope, i0 + kFp8Block);
    for (int i = i0; i < i1; ++i) v[i] = table[in[i]] * s;
  }
  for (int i = 0; i < rope; ++i) {
    uint16_t h;
    std::memcpy(&h, rope_bytes + 2 * i, 2);
    v[nope + i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
  }
}

void pack_mxfp4(const float* v, int dim, uint8_t* out) {
  const int nb = (dim + kFp4Block - 1) / kFp4Block;
  uint8_t* scales = out + (dim + 1) / 2;
  std::fill(out, scales, uint8_t{0});
  bool exact = true;
  for (int b = 0; b < nb; ++b) {
    const int i0 = b * kFp4Block, i1 = std::min(dim, i0 + kFp4Block);
    float amax = 0.0f;
    for (int i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(v[i]));
    // 6 = 0.75 · 2^3
    const int k = min_exponent(amax, 3, cpu::kFp4E2m1Max);
    scales[b] = static_cast<uint8_t>(k + 127);
    const float inv = std::ldexp(1.0f, -k), s = cpu::ue8m0_to_float(scales[b]);
    for (int i = i0; i < i1; ++i) {
      const uint8_t code = cpu::float_to_fp4_e2m1(v[i] * inv);
      out[i >> 1] |= static_cast<uint8_t>((i & 1) ? code << 4 : code);
      const float back = cpu::fp4_e2m1_to_float(code) * s;
      exact = exact && std::bit_cast<uint32_t>(back) == std::bit_cast<uint32_t>(v[i]);
    }
  }
  if (!exact) g_mismatches.fetch_add(1, std::memory_order_relaxed);
}

void unpack_mxfp4(const uint8_t* in, int dim, float* v) {
  const uint8_t* scales = in + (dim + 1) / 2;
  for (int i = 0; i < dim; ++i) {
    const float s = cpu::ue8m0_to_float(scales[i / kFp4Block]);
    v[i] = cpu::fp4_packed_at(in, i) * s;
  }
}

// The V4.1 compressed-KV QAT gives v = bf16(e2m1(u) · s) with s an E4M3 value (at least 2^-9),
// so v = code · s exactly. The block's scale is found again from its largest magnitude m: s = m / c
// for the code c of m (6 unless the block sat at the floor s = 2^-9); the first candidate that
// reproduces every value bit for bit is kept.
bool try_fp4_e4m3(const float* v, int len, float s, uint8_t* codes, int i0) {
  if (!(s > 0.0f) || cpu::round_fp8_e4m3(s) != s) return false;
  for (int i = 0; i < len; ++i) {
    const uint8_t code = cpu::float_to_fp4_e2m1(v[i] / s);
    const float back = cpu::fp4_e2m1_to_float(code) * s;
    if (std::bit_cast<uint32_t>(back) != std::bit_cast<uint32_t>(v[i])) return false;
    const int k = i0 + i;
    codes[k >> 1] |= static_cast<uint8_t>((k & 1) ? code << 4 : code);
  }
  return true;
}

void pack_fp4_e4m3(const float* v, int dim, uint8_t* out) {
  const int nb = (dim + kFp4E4m3Block - 1) / kFp4E4m3Block;
  uint8_t* scales = out + (dim + 1) / 2;
  std::fill(out, scales, uint8_t{0});
  bool exact = true;
  for (int b = 0; b < nb; ++b) {
    const int i0 = b * kFp4E4m3Block, len = std::min(dim - i0, kFp4E4m3Block);
    float amax = 0.0f;
    for (int i = 0; i < len; ++i) amax = std::max(amax, std::fabs(v[i0 + i]));
    const float candidates[] = {amax / 6.0f, 0x1p-9f,     amax / 4.0f, amax / 3.0f,
                                amax / 2.0f, amax / 1.5f, amax,        amax / 0.5f};
    bool found = false;
    for (float s : candidates) {
      for (int i = i0; i < i0 + len; ++i)
        out[i >> 1] &= static_cast<uint8_t>((i & 1) ? 0x0f : 0xf0);
      if (try_fp4_e4m3(v + i0, len, s, out, i0)) {
        scales[b] = cpu::float_to_fp8_e4m3(s);
        found = true;
        break;
      }
    }
    if (found) continue;
    // Off the grid (not a QAT output): the nearest representation, counted as a mismatch.
    exact = false;
    const float s = cpu::round_fp8_e4m3(std::max(amax, 6.0f * 0x1p-9f) / 6.0f);
    scales[b] = cpu::float_to_fp8_e4m3(s);
    for (int i = i0; i < i0 + len; ++i) {
      out[i >> 1] &= static_cast<uint8_t>((i & 1) ? 0x0f : 0xf0);
      const uint8_t code = cpu::float_to_fp4_e2m1(std::clamp(v[i] / s, -6.0f, 6.0f));
      out[i >> 1] |= static_cast<uint8_t>((i & 1) ? code << 4 : code);
    }
  }
  if (!exact) g_mismatches.fetch_add(1, std::memory_order_relaxed);
}

void unpack_fp4_e4m3(const uint8_t* in, int dim, float* v) {
  const uint8_t* scales = in + (dim + 1) / 2;
  for (int i = 0; i < dim; ++i)
    v[i] = cpu::fp4_packed_at(in, i) * cpu::fp8_e4m3_to_float(scales[i / kFp4E4m3Block]);
}

// e4m3 codes over all dims, one UE8M0 scale per 32 (the scale the quantizer used is recovered
// as in pack_fp8_kv).
void pack_fp8_b32(const float* v, int dim, uint8_t* out) {
  uint8_t* scales = out + dim;
  bool exact = true;
  const auto& table = fp8_table();
  for (int i0 = 0, b = 0; i0 < dim; i0 += kFp4Block, ++b) {
    const int i1 = std::min(dim, i0 + kFp4Block);
    float amax = 0.0f;
    for (int i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(v[i]));
    const int k = min_exponent(amax, 9, cpu::kFp8E4m3Max);
    scales[b] = static_cast<uint8_t>(k + 127);
    const float inv = std::ldexp(1.0f, -k), s = cpu::ue8m0_to_float(scales[b]);
    for (int i = i0; i < i1; ++i) {
      out[i] = cpu::float_to_fp8_e4m3(v[i] * inv);
      const float back = table[out[i]] * s;
      exact = exact && std::bit_cast<uint32_t>(back) == std::bit_cast<uint32_t>(v[i]);
    }
  }
  if (!exact) g_mismatches.fetch_add(1, std::memory_order_relaxed);
}

void unpack_fp8_b32(const uint8_t* in, int dim, float* v) {
  const uint8_t* scales = in + dim;
  const auto& table = fp8_table();
  for (int i = 0; i < dim; ++i) v[i] = table[in[i]] * cpu::ue8m0_to_float(scales[i / kFp4Block]);
}

}  // namespace

void entry_pack(EntryFormat format, const float* v, int dim, int rope_dim, uint8_t* out) {
  switch (format) {
    case EntryFormat::F32:
      std::memcpy(out, v, 4 * static_cast<size_t>(dim));
      return;
    case EntryFormat::Fp8Kv:
      pack_fp8_kv(v, dim, rope_dim, out);
      return;
    case EntryFormat::Mxfp4:
      pack_mxfp4(v, dim, out);
      return;
    case EntryFormat::Fp4E4m3:
      pack_fp4_e4m3(v, dim, out);
      return;
    case EntryFormat::Fp8B32:
      pack_fp8_b32(v, dim, out);
      return;
  }
}

void entry_unpack(EntryFormat format, const uint8_t* in, int dim, int rope_dim, float* v) {
  switch (format) {
    case EntryFormat::F32:
      std::memcpy(v, in, 4 * static_cast<size_t>(dim));
      return;
    case EntryFormat::Fp8Kv:
      unpack_fp8_kv(in, dim, rope_dim, v);
      return;
    case EntryFormat::Mxfp4:
      unpack_mxfp4(in, dim, v);
      return;
    case EntryFormat::Fp4E4m3:
      unpack_fp4_e4m3(in, dim, v);
      return;
    case EntryFormat::Fp8B32:
      unpack_fp8_b32(in, dim, v);
      return;
  }
}

int entry_row_bytes(EntryFormat format, int dim, int rope_dim) {
  switch (format) {
    case EntryFormat::F32:
      return 4 * dim;
    case EntryFormat::Fp8Kv: {
      const int nope = dim - rope_dim;
      const int bytes = nope + 2 * rope_dim + (nope + kFp8Block - 1) / kFp8Block;
      return (bytes + 7) / 8 * 8;
    }
    case EntryFormat::Mxfp4:
      return (dim + 1) / 2 + (dim + kFp4Block - 1) / kFp4Block;
    case EntryFormat::Fp4E4m3:
      return (dim + 1) / 2 + (dim + kFp4E4m3Block - 1) / kFp4E4m3Block;
    case EntryFormat::Fp8B32:
      return dim + (dim + kFp4Block - 1) / kFp4Block;
  }
  return 4 * dim;
}

int64_t entry_pack_mismatches() { return g_mismatches.load(std::memory_order_relaxed); }

const uint8_t* EntryStore::row_ptr(int64_t j) const {
  if (!paged()) return own.data() + j * row_bytes;
  const int64_t last = int64_t{ratio} * j + ratio - 1;
  const int64_t b = last / block_size;
  if (b >= static_cast<int64_t>(table.size())) return nullptr;
  const int64_t per_block = std::max(1, block_size / ratio);
  return pages + int64_t{table[static_cast<size_t>(b)]} * page_stride + (j % per_block) * row_bytes;
}

uint8_t* EntryStore::row_ptr(int64_t j) {
  return const_cast<uint8_t*>(static_cast<const EntryStore&>(*this).row_ptr(j));
}

void EntryStore::append(const float* v) {
  const int64_t j = count++;
  if (j < frozen) return;  // a shared block already holds it
  if (!paged()) {
    const size_t need = static_cast<size_t>(count * row_bytes);
    if (own.capacity() < need)
      own.reserve(std::max(2 * own.capacity(), std::max<size_t>(need, 64 * size_t(row_bytes))));
    own.resize(need);
  }
  uint8_t* dst = row_ptr(j);
  if (!dst) return;  // the block table does not cover the entry (the caller's bug)
  entry_pack(format, v, dim, rope_dim, dst);
}

const float* EntryStore::row(int64_t j, float* scratch) const {
  if (format == EntryFormat::F32) return reinterpret_cast<const float*>(row_ptr(j));
  read(j, scratch);
  return scratch;
}

void EntryStore::read(int64_t j, float* out) const {
  entry_unpack(format, row_ptr(j), dim, rope_dim, out);
}

}  // namespace deepinfer::model
