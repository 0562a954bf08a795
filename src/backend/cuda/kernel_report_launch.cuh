// The launches the tensor-core kernel checks run (kernel_report_attention_tc.cu,
// kernel_report_indexer_tc.cu): segments of rows by sequence slot and first position, their
// metadata uploaded as the forward lays it out, and random inputs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {

struct CheckLaunch {
  std::string name;
  std::vector<int32_t> seq, pos, start, pos0, len;
  // n rows of sequence slot s at positions p0 … p0 + n − 1.
  void add(int s, int p0, int n) {
    const int row0 = static_cast<int>(seq.size());
    for (int i = 0; i < n; ++i) {
      seq.push_back(s);
      pos.push_back(p0 + i);
      start.push_back(row0);
      pos0.push_back(p0);
      len.push_back(n);
    }
  }
  int64_t n() const { return static_cast<int64_t>(seq.size()); }
  int slots() const { return seq.empty() ? 0 : *std::max_element(seq.begin(), seq.end()) + 1; }
  // The rows on the device; meta holds their metadata (seq, pos, start, pos0, len).
  Rows upload(Exec& e, DeviceArray<int32_t>& meta) const {
    std::vector<int32_t> m;
    for (const auto* v : {&seq, &pos, &start, &pos0, &len}) m.insert(m.end(), v->begin(), v->end());
    meta.upload(e, m);
    const int64_t k = n();
    return Rows{meta.ptr,         meta.ptr, meta.ptr + k, meta.ptr + 2 * k, meta.ptr + 3 * k,
                meta.ptr + 4 * k, k};
  }
};

inline std::vector<float> normal_values(std::mt19937& rng, size_t n, float sd = 1.0f,
                                        bool bf16_exact = false) {
  std::normal_distribution<float> g(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_exact ? bf16r(g(rng)) : g(rng);
  return v;
}

}  // namespace deepinfer::cuda
