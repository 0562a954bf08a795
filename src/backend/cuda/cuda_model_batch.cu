// CudaModel::prefill_batch: the prompts of several sequences packed into shared launches, so a
// batch of short prompts fills max_chunk_tokens rows per launch as one long prompt does.
#include <cuda_profiler_api.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/device_model.cuh"

namespace deepinfer::cuda {

namespace {

// DEEPINFER_CUDA_PROFILE_PREFILL_BATCH=K: the K-th prefill_batch call (from 1) runs between
// cudaProfilerStart/Stop, for `ncu --profile-from-start off` (as DEEPINFER_CUDA_PROFILE_PREFILL
// does for one sequence's chunks).
bool profiled_batch_call() {
  static const long which = [] {
    const char* env = std::getenv("DEEPINFER_CUDA_PROFILE_PREFILL_BATCH");
    return env ? std::atol(env) : 0L;
  }();
  static long calls = 0;
  return which > 0 && ++calls == which;
}

}  // namespace

Status CudaModel::prefill_batch(std::span<const int> seqs,
                                std::span<const std::span<const int32_t>> prompts, float* logits) {
  Impl& m = *impl_;
  if (seqs.size() != prompts.size()) return Error{"prefill_batch: seqs and prompts differ in size"};
  std::vector<uint8_t> seen(static_cast<size_t>(m.opt.max_sequences), 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int s = seqs[i];
    if (s < 0 || s >= m.opt.max_sequences || seen[static_cast<size_t>(s)])
      return Error{"prefill_batch: bad or repeated sequence slot " + std::to_string(s)};
    seen[static_cast<size_t>(s)] = 1;
    if (prompts[i].empty()) return Error{"prefill_batch: empty prompt"};
    for (int32_t id : prompts[i]) {
      if (id < 0 || id >= m.cfg.vocab_size)
        return Error{"token id " + std::to_string(id) + " outside the vocabulary"};
    }
    if (m.positions[static_cast<size_t>(s)] + static_cast<int64_t>(prompts[i].size()) >
        m.opt.max_context)
      return Error{"sequence would exceed max_context (" + std::to_string(m.opt.max_context) + ")"};
  }
  // Stopped after the final sync below (the guard's destructor runs after the return value).
  struct ProfiledCall {
    bool on;
    ~ProfiledCall() {
      if (on) (void)cudaProfilerStop();
    }
  } const profiled{profiled_batch_call()};
  if (profiled.on) (void)cudaProfilerStart();
  const int64_t V = m.cfg.vocab_size;
  std::vector<size_t> done(prompts.size(), 0);
  std::vector<Impl::Segment> segs;
  std::vector<int32_t> rows;
  std::vector<size_t> owner;
  std::vector<float> buf;
  size_t first = 0;  // prompts before it are fully queued
  while (first < prompts.size()) {
    segs.clear();
    rows.clear();
    owner.clear();
    int64_t used = 0;
    // Each launch holds a sequence at most once; a prompt that does not fit the room left is
    // split, its rest leading the next launch.
    for (size_t i = first; i < prompts.size() && used < m.opt.max_chunk_tokens &&
                           static_cast<int>(segs.size()) < m.opt.max_sequences;
         ++i) {
      const size_t left = prompts[i].size() - done[i];
      const size_t take = std::min(left, static_cast<size_t>(m.opt.max_chunk_tokens - used));
      segs.push_back({seqs[i], prompts[i].subspan(done[i], take)});
      done[i] += take;
      used += static_cast<int64_t>(take);
      if (done[i] == prompts[i].size()) {
        rows.push_back(static_cast<int32_t>(used - 1));
        owner.push_back(i);
      }
    }
    while (first < prompts.size() && done[first] == prompts[first].size()) ++first;
    if (!logits) rows.clear();
    buf.resize(rows.size() * static_cast<size_t>(V));
    if (Status s = m.run(segs, rows, logits ? buf.data() : nullptr, nullptr); !s) return s;
    if (logits) {
      for (size_t k = 0; k < owner.size(); ++k)
        std::copy_n(buf.data() + k * V, V, logits + owner[k] * V);
    }
  }
  return m.exec.sync();
}

}  // namespace deepinfer::cuda
