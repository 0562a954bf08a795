// compressor_finish with a block per entry and a thread per dimension: the reference body
// (attention.cu) finishes an entry in one thread, 512 dimensions through six serial passes and,
// for index keys, a double-precision Hadamard transform — ~16 µs for the one entry a decode step
// closes, on the step's critical path. Same operations on the same values: the sum of squares
// stays serial in dimension order (one thread over the row in shared memory), maxima reduce in
// any order (exact), and each Hadamard butterfly is the reference's operation on the same two
// values; the entries are bit-identical (kernel check in kernel_report_compressor.cu).
#include "backend/cuda/attention.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/row_reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kMaxDim = 1024, kMaxIndexDim = 256;

__global__ void __launch_bounds__(kMaxDim)
    compressor_finish_kernel(const CompressorBuffers cb, const int32_t* __restrict__ ent_seq,
                             const int32_t* __restrict__ ent_j, const int32_t* __restrict__ n_ent,
                             const float* __restrict__ norm, float eps,
                             const float* __restrict__ inv_freq, float attention_factor, int pairs,
                             bool index_keys, bool official, float hscale) {
  pdl_begin();
  __shared__ float vs[kMaxDim];
  __shared__ double hb[kMaxIndexDim];
  __shared__ float warp_amax[kMaxDim / 32];
  __shared__ float inv_rms;
  const int64_t i = blockIdx.x;
  if (i >= *n_ent) return;  // uniform across the block
  const int dc = cb.dim, k = static_cast<int>(threadIdx.x), lane = k % 32, warp = k / 32;
  const int64_t j = ent_j[i];
  float* v = cb.store + entry_row(cb.pages, ent_seq[i], j) * dc;
  float x = v[k];
  if (official) x = bf16r(x);
  vs[k] = x;
  __syncthreads();
  if (k == 0) {  // the reference's serial sum, in its order
    float ss = 0.0f;
    for (int q = 0; q < dc; ++q) ss += vs[q] * vs[q];
    inv_rms = 1.0f / sqrtf(ss / static_cast<float>(dc) + eps);
  }
  __syncthreads();
  x = norm[k] * (x * inv_rms);
  if (official) x = bf16r(x);
  const int rot0 = dc - 2 * pairs;
  if (pairs > 0) {
    vs[k] = x;  // every read of vs above is behind the last barrier
    __syncthreads();
    if (k >= rot0) {
      const int q = (k - rot0) / 2;
      const float p = static_cast<float>(j * cb.ratio);
      const float phi = inv_freq[q] * p;
      const float cs = cosf(phi) * attention_factor, sn = sinf(phi) * attention_factor;
      const float x0 = vs[rot0 + 2 * q], x1 = vs[rot0 + 2 * q + 1];
      x = (k - rot0) % 2 == 0 ? x0 * cs - x1 * sn : x1 * cs + x0 * sn;
    }
  }
  if (!official) {
    v[k] = x;
    return;
  }
  x = bf16r(x);
  if (!index_keys) {  // KV QAT: FP8 per 64 on the no-RoPE dims (two warps a block)
    const float a = warp_max(k < rot0 ? fabsf(x) : 0.0f);
    if (lane == 0) warp_amax[warp] = a;
    __syncthreads();
    if (k < rot0) {
      const int b = k / 64;
      const float amax = fmaxf(warp_amax[2 * b], warp_amax[2 * b + 1]);
      const float sc = fp8_act_scale(amax);
      x = bf16r(round_e4m3(x / sc) * sc);
    }
    v[k] = x;
    return;
  }
  // Indexer QAT: Hadamard (exact sums in double), bf16, FP4 per 32 (one warp a block).
  hb[k] = static_cast<double>(x);
  __syncthreads();
  for (int span = 1; span < dc; span *= 2) {
    if (k < dc / 2) {
      const int b = k / span * 2 * span + k % span;
      const double x0 = hb[b], x1 = hb[b + span];
      hb[b] = x0 + x1;
      hb[b + span] = x0 - x1;
    }
    __syncthreads();
  }
  x = bf16r(static_cast<float>(hb[k]) * hscale);
  const float inv6 = static_cast<float>(1.0 / 6.0);
  const float floor6 = static_cast<float>(6.0 * 0x1p-126);
  const float sc = pow2_at_least(fmaxf(warp_max(fabsf(x)), floor6) * inv6);
  v[k] = bf16r(round_e2m1(x / sc) * sc);
}

}  // namespace

bool compressor_finish_fast(Exec& e, const CompressorBuffers& c, const int32_t* ent_seq,
                            const int32_t* ent_j, const int32_t* n_ent, int64_t max_ent,
                            const float* norm, float eps, const float* inv_freq,
                            float attention_factor, int pairs, bool index_keys, bool official) {
  const int dc = c.dim;
  if (e.emulate || !fast_kernels() || !compressor_fast() || dc <= 0 || dc % 64 != 0 ||
      dc > kMaxDim || (index_keys && dc > kMaxIndexDim) || pairs < 0 || 2 * pairs > dc)
    return false;
  if (max_ent <= 0) return true;
  const float hscale = static_cast<float>(1.0 / sqrt(static_cast<double>(dc)));
  e.launch(compressor_finish_kernel, static_cast<unsigned>(max_ent), static_cast<unsigned>(dc), 0,
           c, ent_seq, ent_j, n_ent, norm, eps, inv_freq, attention_factor, pairs, index_keys,
           official, hscale);
  e.note(cudaGetLastError());
  return true;
}

}  // namespace deepinfer::cuda
