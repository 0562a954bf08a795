#include "model/pcg64.h"

#include <cstddef>

namespace deepinfer::model {
namespace {

using u128 = unsigned __int128;

// SeedSequence's hash constants (numpy/random/bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5u, kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu, kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu, kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  r ^= r >> kXShift;
  return r;
}

constexpr u128 kPcgMultiplier =
    (static_cast<u128>(0x2360ED051FC65DA4ull) << 64) | 0x4385DF649FCCF645ull;

}  // namespace

std::vector<uint32_t> seed_sequence_state(uint64_t entropy, int n_words) {
  // The entropy as little-endian uint32 words (0 is one word).
  std::vector<uint32_t> words;
  do {
    words.push_back(static_cast<uint32_t>(entropy));
    entropy >>= 32;
  } while (entropy != 0);

  uint32_t pool[kPoolSize];
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i) {
    const uint32_t w = i < static_cast<int>(words.size()) ? words[static_cast<size_t>(i)] : 0u;
    pool[i] = hashmix(w, hash_const);
  }
  for (int src = 0; src < kPoolSize; ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
    }
  }
  for (size_t src = kPoolSize; src < words.size(); ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst)
      pool[dst] = mix(pool[dst], hashmix(words[src], hash_const));
  }

  std::vector<uint32_t> out(static_cast<size_t>(n_words));
  uint32_t hc = kInitB;
  for (int i = 0; i < n_words; ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hc;
    hc *= kMultB;
    v *= hc;
    v ^= v >> kXShift;
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

Pcg64::Pcg64(uint64_t seed) {
  const std::vector<uint32_t> w = seed_sequence_state(seed, 8);
  auto u64 = [&](int i) {
    return static_cast<uint64_t>(w[static_cast<size_t>(2 * i)]) |
           (static_cast<uint64_t>(w[static_cast<size_t>(2 * i + 1)]) << 32);
  };
  *this =
      Pcg64((static_cast<u128>(u64(0)) << 64) | u64(1), (static_cast<u128>(u64(2)) << 64) | u64(3));
}

Pcg64::Pcg64(u128 initstate, u128 initseq) {
  state_ = 0;
  inc_ = (initseq << 1) | 1u;
  step();
  state_ += initstate;
  step();
}

void Pcg64::step() { state_ = state_ * kPcgMultiplier + inc_; }

uint64_t Pcg64::next64() {
  step();
  const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (x >> rot) | (x << ((64u - rot) & 63u));
}

uint32_t Pcg64::next32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const uint64_t v = next64();
  has_uint32_ = true;
  uinteger_ = static_cast<uint32_t>(v >> 32);
  return static_cast<uint32_t>(v);
}

int64_t Pcg64::integer(int64_t low, int64_t high) {
  // numpy: rng = (high - 1) - low as uint64, off = low; random_bounded_uint64_fill, unmasked.
  const uint64_t rng = static_cast<uint64_t>(high - 1) - static_cast<uint64_t>(low);
  const uint64_t off = static_cast<uint64_t>(low);
  uint64_t v = 0;
  if (rng == 0) {
    v = 0;
  } else if (rng <= 0xFFFFFFFFull) {
    if (rng == 0xFFFFFFFFull) {
      v = next32();
    } else {  // 32-bit Lemire
      const uint32_t rng32 = static_cast<uint32_t>(rng), excl = rng32 + 1u;
      uint64_t m = static_cast<uint64_t>(next32()) * excl;
      uint32_t leftover = static_cast<uint32_t>(m);
      if (leftover < excl) {
        const uint32_t threshold = (0xFFFFFFFFu - rng32) % excl;
        while (leftover < threshold) {
          m = static_cast<uint64_t>(next32()) * excl;
          leftover = static_cast<uint32_t>(m);
        }
      }
      v = m >> 32;
    }
  } else if (rng == 0xFFFFFFFFFFFFFFFFull) {
    v = next64();
  } else {  // 64-bit Lemire
    const uint64_t excl = rng + 1u;
    u128 m = static_cast<u128>(next64()) * excl;
    uint64_t leftover = static_cast<uint64_t>(m);
    if (leftover < excl) {
      const uint64_t threshold = (0xFFFFFFFFFFFFFFFFull - rng) % excl;
      while (leftover < threshold) {
        m = static_cast<u128>(next64()) * excl;
        leftover = static_cast<uint64_t>(m);
      }
    }
    v = static_cast<uint64_t>(m >> 64);
  }
  return static_cast<int64_t>(off + v);
}

}  // namespace deepinfer::model
