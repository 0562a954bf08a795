// The decode roofline on the CPU: parallel memcpy bandwidth (read + write) of 512 MiB over a
// thread pool, in 1 MiB chunks; reported as the "GB/s" counter. Shared by the model benches.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/thread_pool.h"

namespace deepinfer::bench {

inline void measure_copy_bandwidth(benchmark::State& state, int threads) {
  const size_t bytes = size_t{512} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  cpu::ThreadPool pool(threads);
  for (auto _ : state) {
    pool.parallel_for(static_cast<int64_t>(bytes >> 20), 1, [&](int64_t b0, int64_t b1) {
      std::memcpy(b.data() + (b0 << 20), a.data() + (b0 << 20),
                  static_cast<size_t>((b1 - b0) << 20));
    });
    benchmark::DoNotOptimize(b.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(2.0 * bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

}  // namespace deepinfer::bench
