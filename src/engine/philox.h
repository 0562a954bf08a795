// Philox-4x32-10 counter-based random numbers (Salmon et al., SC'11): a pure function of
// (key, counter), so a request's draws depend only on its seed and token index, never on the batch.
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer::engine {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of Philox-4x32 on `counter` under `key`.
constexpr PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = uint64_t{kM0} * counter[0];
    const uint64_t p1 = uint64_t{kM1} * counter[2];
    const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
  }
  return counter;
}

// The uniform double in [0, 1) (53 random bits) drawn for token `index` of a request with `seed`.
// `stream` separates independent draws for the same token (0 = the sampling draw).
constexpr double philox_uniform(uint64_t seed, uint64_t index, uint32_t stream = 0) {
  const PhiloxCounter out =
      philox4x32_10({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), stream, 0u},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const uint64_t bits = (uint64_t{out[0]} << 32 | out[1]) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

}  // namespace deepinfer::engine
