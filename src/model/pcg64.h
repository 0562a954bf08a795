// numpy's default random generator, bit-exact: SeedSequence (pool of 4 uint32 words) seeding a
// PCG64 (128-bit LCG, XSL-RR 128/64 output), and Generator.integers(low, high, dtype=int64)
// (Lemire's bounded draw). DeepSeek V4.1's Engram hash multipliers come from
// numpy.random.default_rng(seed); an engine must reproduce them exactly.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::model {

// numpy.random.SeedSequence(entropy).generate_state(n_words, uint32) for an integer entropy
// (no spawn key, pool size 4).
std::vector<uint32_t> seed_sequence_state(uint64_t entropy, int n_words);

class Pcg64 {
 public:
  // numpy.random.PCG64(seed): state and increment from the seed sequence's first 4 uint64s.
  explicit Pcg64(uint64_t seed);
  // pcg_setseq_128_srandom_r(initstate, initseq).
  Pcg64(unsigned __int128 initstate, unsigned __int128 initseq);

  uint64_t next64();  // bit_generator.random_raw()
  uint32_t next32();  // low half of a 64-bit draw, then its high half (numpy's buffered form)

  // Generator.integers(low, high, dtype=np.int64), one value; requires low < high.
  int64_t integer(int64_t low, int64_t high);

  unsigned __int128 state() const { return state_; }
  unsigned __int128 increment() const { return inc_; }

 private:
  void step();
  unsigned __int128 state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

}  // namespace deepinfer::model
