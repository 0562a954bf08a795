// Per-row operations of the forward with the row spread over a warp or block (fast_ops.cuh): the
// official q-head RMSNorm, the official KV row roundings, the official indexer rows (Hadamard
// transform, FP4 rounding) and the mHC pre-mix's per-row matrices.
// Each computes what its reference body in ops.cu computes, bitwise: element-wise steps run in
// parallel, maxima reduce in any order (exact), and sums stay in the reference's order.
#include <cmath>

#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/mhc_rows.cuh"
#include "backend/cuda/row_reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kNormWarps = 4;

__global__ void __launch_bounds__(kNormWarps * 32)
    q_head_norm_kernel(float* q, int64_t rows, int64_t head_dim, float eps, const RopeRows rr) {
  pdl_begin();
  extern __shared__ float squares[];  // [kNormWarps][head_dim]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kNormWarps + warp;
  if (r >= rows) return;  // uniform across the warp; only warp barriers below
  float* v = q + r * head_dim;
  float* sq = squares + warp * head_dim;
#pragma unroll 4
  for (int64_t i = lane; i < head_dim; i += 32) {
    const float x = bf16r(v[i]);
    v[i] = x;
    sq[i] = bf16r(x * x);
  }
  __syncwarp();
  float rs = 0.0f;
  if (lane == 0) {
    float sum = 0.0f;
#pragma unroll 8
    for (int64_t i = 0; i < head_dim; ++i) sum += sq[i];
    const float mean = bf16r(sum / static_cast<float>(head_dim));
    const float t = bf16r(mean + eps);
    rs = bf16r(1.0f / sqrtf(t));
  }
  rs = __shfl_sync(0xffffffffu, rs, 0);
  // rr.pairs > 0: rope()'s rotation of the last 2 · pairs values, which start on a warp boundary,
  // so a pair sits in lanes 2p, 2p + 1 of one step and its partner comes by a shuffle.
  const int64_t rot0 = head_dim - 2 * rr.pairs;
#pragma unroll 4
  for (int64_t i = lane; i < head_dim; i += 32) {
    float x = bf16r(v[i] * rs);
    if (rr.pairs > 0 && i >= rot0) {  // uniform across the warp
      const float other = __shfl_xor_sync(0xffffffffu, x, 1);
      const int64_t pr = (i - rot0) / 2;
      const float phi = rr.inv_freq[pr] * static_cast<float>(rr.pos[r / rr.per_row]);
      const float c = cosf(phi) * rr.attention_factor;
      const float s = sinf(phi) * rr.attention_factor;
      x = i % 2 == 0 ? rotate_pair(x, other, c, s).x : rotate_pair(other, x, c, s).y;
    }
    v[i] = x;
  }
}

// q_head_norm_kernel's operations, the head held as kV float4s a lane (value 128 j + 4 lane + c
// in float4 j): every load of the head issued at once with the RoPE factors' before the sum
// (their cosines and sines computed while the loads are in flight), lane 0's serial sum over the
// squares by float4s of shared memory, the head's values kept in registers to the end, and a
// pair's partner in the same float4. The same operations in the same order, so the same bits.
template <int kV>
__global__ void __launch_bounds__(kNormWarps * 32)
    q_head_norm_vec_kernel(float* q, int64_t rows, float eps, const RopeRows rr) {
  pdl_begin();
  constexpr int kDim = 128 * kV;
  __shared__ __align__(16) float squares[kNormWarps][kDim];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kNormWarps + warp;
  if (r >= rows) return;  // uniform across the warp; only warp barriers below
  float4* v = reinterpret_cast<float4*>(q + r * kDim);
  float4 x[kV];
#pragma unroll
  for (int j = 0; j < kV; ++j) x[j] = v[j * 32 + lane];
  // The RoPE factors of the lane's pairs (2 a float4 in the rotated part, which starts on a
  // float4 boundary): phi is independent of the norm.
  const int rot0 = kDim - 2 * rr.pairs;
  float cs[kV][2][2];
  const float pos = static_cast<float>(rr.pos[r / rr.per_row]);
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    const int i0 = 128 * j + 4 * lane;
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      cs[j][p][0] = cs[j][p][1] = 0.0f;
      if (i0 >= rot0) {
        const float phi = rr.inv_freq[(i0 - rot0) / 2 + p] * pos;
        cs[j][p][0] = cosf(phi) * rr.attention_factor;
        cs[j][p][1] = sinf(phi) * rr.attention_factor;
      }
    }
  }
  float4* sq = reinterpret_cast<float4*>(squares[warp]);
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    x[j] = make_float4(bf16r(x[j].x), bf16r(x[j].y), bf16r(x[j].z), bf16r(x[j].w));
    sq[j * 32 + lane] = make_float4(bf16r(x[j].x * x[j].x), bf16r(x[j].y * x[j].y),
                                    bf16r(x[j].z * x[j].z), bf16r(x[j].w * x[j].w));
  }
  __syncwarp();
  float rs = 0.0f;
  if (lane == 0) {
    float sum = 0.0f;
#pragma unroll 8
    for (int i = 0; i < kDim / 4; ++i) {
      const float4 s = sq[i];
      sum += s.x;
      sum += s.y;
      sum += s.z;
      sum += s.w;
    }
    const float mean = bf16r(sum / static_cast<float>(kDim));
    const float t = bf16r(mean + eps);
    rs = bf16r(1.0f / sqrtf(t));
  }
  rs = __shfl_sync(0xffffffffu, rs, 0);
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    float4 o =
        make_float4(bf16r(x[j].x * rs), bf16r(x[j].y * rs), bf16r(x[j].z * rs), bf16r(x[j].w * rs));
    if (128 * j + 4 * lane >= rot0) {
      const float2 a = rotate_pair(o.x, o.y, cs[j][0][0], cs[j][0][1]);
      const float2 b = rotate_pair(o.z, o.w, cs[j][1][0], cs[j][1][1]);
      o = make_float4(a.x, a.y, b.x, b.y);
    }
    v[j * 32 + lane] = o;
  }
}

constexpr int kKvThreads = 256, kKvBlock = 64;

// The official KV row's non-RoPE part FP8-rounded in blocks of 64, a warp per block (the block's
// amax by shuffles, exact in any order).
__device__ __forceinline__ void kv_nope_quant(float* row, int nope) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int b0 = warp * kKvBlock; b0 < nope; b0 += warps * kKvBlock) {
    const int len = nope - b0 < kKvBlock ? nope - b0 : kKvBlock;
    float amax = 0.0f;
    for (int i = lane; i < len; i += 32) amax = fmaxf(amax, fabsf(row[b0 + i]));
    amax = warp_max(amax);
    const float s = fp8_act_scale(amax);
    for (int i = lane; i < len; i += 32) row[b0 + i] = bf16r(round_e4m3(row[b0 + i] / s) * s);
  }
}

__global__ void __launch_bounds__(kKvThreads)
    kv_rows_kernel(float* kv, int head_dim, int rope_dim) {
  pdl_begin();
  float* row = kv + static_cast<int64_t>(blockIdx.x) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += kKvThreads) row[i] = bf16r(row[i]);
  __syncthreads();
  kv_nope_quant(row, head_dim - rope_dim);
}

// rms_norm (official rounding out) → rope() → kv_rows_kernel over one KV row in one block of
// head_dim / 4 threads: each step the same expressions over the same values as its own launch,
// barriers between them (kv_norm_rope_official).
__global__ void __launch_bounds__(1024)
    kv_norm_rope_kernel(float* kv, int head_dim, int rope_dim, const float* w, float eps,
                        const RopeRows rr) {
  pdl_begin();
  __shared__ float sh[33];
  const int64_t r = blockIdx.x;
  float* row = kv + r * head_dim;
  float4 v[kVecMax];
  load_row4(reinterpret_cast<const float4*>(row), head_dim / 4, false, v);
  norm_row4<false>(v, head_dim, w, eps, reinterpret_cast<float4*>(row), true, nullptr, sh);
  __syncthreads();
  for (int p = threadIdx.x; p < rr.pairs; p += blockDim.x) {
    const float phi = rr.inv_freq[p] * static_cast<float>(rr.pos[r]);
    const float c = cosf(phi) * rr.attention_factor;
    const float s = sinf(phi) * rr.attention_factor;
    float* xp = row + head_dim - 2 * rr.pairs + 2 * p;
    const float2 y = rotate_pair(xp[0], xp[1], c, s);
    xp[0] = y.x;
    xp[1] = y.y;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) row[i] = bf16r(row[i]);
  __syncthreads();
  kv_nope_quant(row, head_dim - rope_dim);
}

// The official indexer rows: a warp per row of 32·P values, lane l holding l·P … l·P + P − 1.
// The Walsh–Hadamard butterflies in double are the reference's (a + b at the lower index, a − b
// at the upper; spans below P within a lane, the others with the partner lane by shuffles), in
// the same span order, so the same bits; a 32-wide FP4 block's maximum over its 32 / P lanes by
// shuffles (exact in any order).
template <int P>
__global__ void indexer_rows_kernel(float* x, int64_t rows, float scale) {
  pdl_begin();
  const int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;  // uniform across the warp
  constexpr unsigned kAll = 0xffffffffu;
  float* v = x + (r * 32 + lane) * P;
  double b[P];
#pragma unroll
  for (int i = 0; i < P; ++i) b[i] = static_cast<double>(bf16r(v[i]));
#pragma unroll
  for (int span = 1; span < P; span *= 2) {
#pragma unroll
    for (int i = 0; i < P; i += 2 * span) {
#pragma unroll
      for (int j = i; j < i + span; ++j) {
        const double lo = b[j], hi = b[j + span];
        b[j] = lo + hi;
        b[j + span] = lo - hi;
      }
    }
  }
#pragma unroll
  for (int m = 1; m < 32; m *= 2) {
    const bool upper = (lane & m) != 0;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const double other = __shfl_xor_sync(kAll, b[i], m);
      b[i] = upper ? other - b[i] : b[i] + other;
    }
  }
  float q[P];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    q[i] = bf16r(static_cast<float>(b[i]) * scale);
    amax = fmaxf(amax, fabsf(q[i]));
  }
#pragma unroll
  for (int m = 1; m < 32 / P; m *= 2) amax = fmaxf(amax, __shfl_xor_sync(kAll, amax, m));
  const float inv6 = static_cast<float>(1.0 / 6.0);
  const float floor6 = static_cast<float>(6.0 * 0x1p-126);
  const float s = pow2_at_least(fmaxf(amax, floor6) * inv6);
#pragma unroll
  for (int i = 0; i < P; ++i) v[i] = bf16r(round_e2m1(q[i] / s) * s);
}

template <int HC>
__global__ void hc_pre_rows_kernel(const HcParams q, const float* __restrict__ mix,
                                   const float* __restrict__ row_ss, int64_t n, float* pre,
                                   float* post, float* comb) {
  pdl_begin();
  const int64_t t = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (t >= n) return;  // uniform across the warp
  hc_pre_row<HC>(q, mix, row_ss, t, static_cast<int>(threadIdx.x % 32), pre, post, comb);
}

}  // namespace

namespace {
bool g_fused_rows = env_switch("DEEPINFER_CUDA_FUSED_ROWS", true);
}  // namespace

bool fused_rows() { return g_fused_rows; }
void set_fused_rows(bool on) { g_fused_rows = on; }

bool fast_ops() {
  static const bool on = env_switch("DEEPINFER_CUDA_FAST_OPS", true);
  return on;
}

void q_head_norm_official_fast(Exec& e, float* q, int64_t rows, int64_t head_dim, float eps) {
  if (rows <= 0) return;
  const unsigned blocks = static_cast<unsigned>((rows + kNormWarps - 1) / kNormWarps);
  const size_t shared = static_cast<size_t>(kNormWarps * head_dim) * sizeof(float);
  e.launch(q_head_norm_kernel, blocks, kNormWarps * 32, shared, q, rows, head_dim, eps, RopeRows{});
  e.note(cudaGetLastError());
}

bool q_head_norm_rope_fast(Exec& e, float* q, int64_t rows, int64_t head_dim, float eps,
                           const RopeRows& rr) {
  const bool on = fused_rows();
  if (!on || rr.pairs <= 0 || head_dim % 32 != 0 || (head_dim - 2 * rr.pairs) % 32 != 0 ||
      2 * rr.pairs > head_dim || rr.per_row <= 0)
    return false;
  if (rows <= 0) return true;
  const unsigned blocks = static_cast<unsigned>((rows + kNormWarps - 1) / kNormWarps);
  // The float4 body where a head is whole float4s a lane and the rotated part starts on a float4
  // (V4's 512 / 64); DEEPINFER_CUDA_Q_NORM_VEC=0 keeps the scalar one.
  static const bool vec_on = env_switch("DEEPINFER_CUDA_Q_NORM_VEC", true);
  const bool vec = vec_on && (head_dim == 256 || head_dim == 512 || head_dim == 1024) &&
                   rr.pairs % 2 == 0 && aligned16(q);
  if (vec) {
    if (head_dim == 256) {
      e.launch(q_head_norm_vec_kernel<2>, blocks, kNormWarps * 32, 0, q, rows, eps, rr);
    } else if (head_dim == 512) {
      e.launch(q_head_norm_vec_kernel<4>, blocks, kNormWarps * 32, 0, q, rows, eps, rr);
    } else {
      e.launch(q_head_norm_vec_kernel<8>, blocks, kNormWarps * 32, 0, q, rows, eps, rr);
    }
    e.note(cudaGetLastError());
    return true;
  }
  const size_t shared = static_cast<size_t>(kNormWarps * head_dim) * sizeof(float);
  e.launch(q_head_norm_kernel, blocks, kNormWarps * 32, shared, q, rows, head_dim, eps, rr);
  e.note(cudaGetLastError());
  return true;
}

bool kv_norm_rope_official_fast(Exec& e, float* kv, int64_t rows, int head_dim, int rope_dim,
                                const float* w, float eps, const RopeRows& rr) {
  const bool on = fused_rows();
  // The row as one float4 a thread, as rms_norm's float4 kernel holds it (the same sum order).
  const bool shape = head_dim % 128 == 0 && head_dim >= 256 && head_dim / 4 <= 1024 &&
                     rope_dim == 2 * rr.pairs && rr.per_row == 1;
  if (!on || !shape || !aligned16(kv) || !aligned16(w)) return false;
  if (rows <= 0) return true;
  e.launch(kv_norm_rope_kernel, static_cast<unsigned>(rows), static_cast<unsigned>(head_dim / 4), 0,
           kv, head_dim, rope_dim, w, eps, rr);
  e.note(cudaGetLastError());
  return true;
}

void kv_rows_official_fast(Exec& e, float* kv, int64_t rows, int head_dim, int rope_dim) {
  if (rows <= 0) return;
  e.launch(kv_rows_kernel, static_cast<unsigned>(rows), kKvThreads, 0, kv, head_dim, rope_dim);
  e.note(cudaGetLastError());
}

bool indexer_rows_fast_supported(int dim) {
  return dim == 32 || dim == 64 || dim == 128 || dim == 256;
}

void indexer_rows_official_fast(Exec& e, float* x, int64_t rows, int dim) {
  if (rows <= 0) return;
  const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(dim)));
  constexpr int kThreads = 128, kRowsPerBlock = kThreads / 32;
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  switch (dim) {
    case 32:
      e.launch(indexer_rows_kernel<1>, blocks, kThreads, 0, x, rows, scale);
      break;
    case 64:
      e.launch(indexer_rows_kernel<2>, blocks, kThreads, 0, x, rows, scale);
      break;
    case 128:
      e.launch(indexer_rows_kernel<4>, blocks, kThreads, 0, x, rows, scale);
      break;
    default:
      e.launch(indexer_rows_kernel<8>, blocks, kThreads, 0, x, rows, scale);
  }
}

bool hc_pre_fast_supported(int hc) { return hc == 4; }

void hc_pre_rows_fast(Exec& e, const HcParams& p, const float* mix, const float* row_ss, int64_t n,
                      float* pre, float* post, float* comb) {
  if (n <= 0) return;
  constexpr int kThreads = 64, kRowsPerBlock = kThreads / 32;  // a warp per row
  e.launch(hc_pre_rows_kernel<4>, static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock),
           kThreads, 0, p, mix, row_ss, n, pre, post, comb);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
