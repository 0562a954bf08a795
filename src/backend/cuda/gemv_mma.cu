#include <algorithm>
#include <cstdlib>

#include "backend/cuda/gemv_bulk.cuh"
#include "backend/cuda/gemv_group.cuh"
#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/gemv_mma_step.cuh"
#include "backend/cuda/gemv_mma_tile.cuh"

namespace deepinfer::cuda {
namespace {

using namespace mma;

// A block's tile over its K slice (mma_step's layout), the slices of a cluster summed in rank
// order.
template <DevFormat F, int S, bool kExperts, int kIntDecode>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_mma_kernel(const __grid_constant__ MmaLaunch L) {
  constexpr int kStages = 4;
  constexpr int kStepK = F == DevFormat::FP8 ? 128 : 256;
  const TileJob J = tile_job<S, kExperts>(L);
  const DevWeight& w = J.w;
  const int n = J.n, slice = J.slice, steps = slice / kStepK;
  const int64_t k0 = J.k0;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Rows past the last one read a valid row; their sums are never written.
  const int64_t ra = min(J.t0 + warp * 16 + g, w.out - 1) + w.row0;
  const int64_t rb = min(J.t0 + warp * 16 + g + 8, w.out - 1) + w.row0;
  const int64_t row_bytes = F == DevFormat::FP8 ? w.stride : w.stride / 2;
  const int64_t k0_bytes = F == DevFormat::FP8 ? k0 : k0 / 2;  // a step is 128 bytes of a row
  const LaneChunks chunks = lane_chunks<F>(t, L.full_sectors);
  const int lo = chunks.lo, hi = chunks.hi;
  const uint8_t* pa = w.data + ra * row_bytes + k0_bytes + lo;
  const uint8_t* pb = pa + (rb - ra) * row_bytes;
  // FP4: the step's eight 32-value block scales of each row (the lane's are bytes t and 4 + t).
  const uint8_t* sa = w.scale + ra * w.scale_stride + k0 / 32;
  const uint8_t* sb = w.scale + rb * w.scale_stride + k0 / 32;
  extern __shared__ uint4 smem[];
  uint16_t* xh = reinterpret_cast<uint16_t*>(smem);
  float* xinv = reinterpret_cast<float*>(xh + n * slice);
  const int64_t srow = (w.row0 + J.t0) >> 7, scol = k0 >> 7;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  auto step = [&](int kb, const uint4* wv, uint2 sa2, uint2 sb2) {
    float wscale = 0.0f;
    if constexpr (F == DevFormat::FP8) wscale = w.scale_at(srow, scol + kb);
    constexpr int kScalesPerStep = kStepK / 128;
    mma_step<F, kIntDecode>(acc, wv, sa2, sb2, wscale, xh + kb * kStepK, slice,
                            xinv + kb * kScalesPerStep, steps * kScalesPerStep, n, g, t, lo, hi);
  };

  // A ring of 3 K steps ahead in registers (unrolled, so every slot index is a constant).
  uint4 ring[kStages][4];
  uint2 ring_sc[kStages][2];
  const int second = hi - lo;  // the lane's second 16 bytes of a step
  auto issue = [&](int kb, uint4* slot, uint2* sc) {
    if (kb < steps) {
      slot[0] = load_weights(pa + kb * 128);
      slot[1] = load_weights(pa + kb * 128 + second);
      slot[2] = load_weights(pb + kb * 128);
      slot[3] = load_weights(pb + kb * 128 + second);
      if constexpr (F == DevFormat::FP4) {
        sc[0] = __ldg(reinterpret_cast<const uint2*>(sa + kb * 8));
        sc[1] = __ldg(reinterpret_cast<const uint2*>(sb + kb * 8));
      }
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s, ring[s], ring_sc[s]);
  // The weights are constant: their loads may start before the launch before has finished.
  if constexpr (!kExperts) pdl_begin();
  stage_tile_inputs<F>(J, xh, xinv);
  for (int kb0 = 0; kb0 < steps; kb0 += kStages) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      const int kb = kb0 + s;
      issue(kb + kStages - 1, ring[(s + kStages - 1) % kStages],
            ring_sc[(s + kStages - 1) % kStages]);
      if (kb < steps) step(kb, ring[s], ring_sc[s][0], ring_sc[s][1]);
    }
  }
  finish_tile<S>(J, acc);
}

const bool g_on = env_switch("DEEPINFER_CUDA_GEMV_MMA", true);
const bool g_experts_on = env_switch("DEEPINFER_CUDA_EXPERTS_MMA", true);
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}
int g_fp4_int_decode = [] {
  const int d = env_int("DEEPINFER_CUDA_FP4_INT_DECODE", 2);
  return d == 1 || d == 2 ? d : 0;
}();
bool g_fp8_full_sectors = env_switch("DEEPINFER_CUDA_FP8_FULL_SECTORS", false);
bool g_swiglu_fold = env_switch("DEEPINFER_CUDA_EXPERTS_SWIGLU_FOLD", true);
bool g_bulk = env_switch("DEEPINFER_CUDA_GEMV_BULK", false);
// Blocks an FP4 experts launch splits K for (DEEPINFER_CUDA_EXPERTS_MIN_BLOCKS). At 192 (the
// default since 2026-12-07) V4-Flash's one-token w1 + w3 (192 tiles) runs unsplit: H100, 4-layer
// slice at batch 1, three interleaved runs 779.6 / 777.5 / 774.0 tok/s against 760.6 / 758.8 /
// 759.5 at 256 (split 2), 128 and 160 the same as 192; the kernel check 0.0302 vs 0.0320 ms.
// (An H200 kernel check of 2026-12-03 had preferred the split: not rechecked there yet.)
const int g_fp4_min_blocks = std::max(1, env_int("DEEPINFER_CUDA_EXPERTS_MIN_BLOCKS", 192));
const int g_shared_min_blocks = std::max(0, env_int("DEEPINFER_CUDA_SHARED_MIN_BLOCKS", 64));
// Blocks a dense launch splits K for when its caller names none
// (DEEPINFER_CUDA_GEMV_MMA_MIN_BLOCKS, default 128: the H200 kernel check's best for wo_a / wo_b;
// H100 batch 1, 2026-12-07: 64 and 256 ~2 % slower a step).
const int g_dense_min_blocks = std::max(1, env_int("DEEPINFER_CUDA_GEMV_MMA_MIN_BLOCKS", 128));
int g_split = [] {
  const int s = env_int("DEEPINFER_CUDA_GEMV_MMA_SPLIT", 0);
  return s == 1 || s == 2 || s == 4 || s == 8 ? s : 0;
}();

// K slices: the fewest that give the launch ≥ min_blocks (128: H200 kernel check: wq_b best at 256
// tiles unsplit, wo_b / the shared expert / wo_a at 128 blocks, each split further slower), no
// more than the shortest row allows (each block ≥ min_steps K steps when chosen here, ≥ one when
// forced) and no fewer than the inputs' copy in shared memory needs.
int choose_split(int tiles, int64_t n, int64_t min_in, int64_t max_in, int step,
                 int min_blocks = 128, int min_steps = 1) {
  int s = g_split;
  if (s == 0) {
    s = 1;
    while (s < 8 && tiles * s < min_blocks) s *= 2;
  } else {
    min_steps = 1;
  }
  while (s < 8 && static_cast<size_t>(n * max_in / s) * 2 > kMaxInputCopyBytes) s *= 2;
  while (s > 1 && min_in / s < int64_t{step} * min_steps) s /= 2;
  return s;
}

template <DevFormat F, int S, bool kExperts, int kIntDecode>
void launch_shape(Exec& e, const MmaLaunch& L, int tiles, size_t shared) {
  const dim3 grid(static_cast<unsigned>(tiles * S));
  if constexpr (S > 1) {
    e.launch_cluster(gemv_mma_kernel<F, S, kExperts, kIntDecode>, grid, dim3(kThreads), shared,
                     dim3(S, 1, 1), L);
  } else {
    e.launch(gemv_mma_kernel<F, S, kExperts, kIntDecode>, grid, dim3(kThreads), shared, L);
  }
}

template <DevFormat F, bool kExperts, int kIntDecode = 0>
void launch_split(Exec& e, const MmaLaunch& L, int tiles, int split, size_t shared) {
  switch (split) {
    case 1:
      launch_shape<F, 1, kExperts, kIntDecode>(e, L, tiles, shared);
      break;
    case 2:
      launch_shape<F, 2, kExperts, kIntDecode>(e, L, tiles, shared);
      break;
    case 4:
      launch_shape<F, 4, kExperts, kIntDecode>(e, L, tiles, shared);
      break;
    default:
      launch_shape<F, 8, kExperts, kIntDecode>(e, L, tiles, shared);
  }
}

}  // namespace

void set_gemv_mma_split(int split) {
  g_split = split == 1 || split == 2 || split == 4 || split == 8 ? split : 0;
}
int gemv_mma_split() { return g_split; }
void set_fp4_int_decode(int rows) { g_fp4_int_decode = rows == 1 || rows == 2 ? rows : 0; }
int fp4_int_decode() { return g_fp4_int_decode; }
void set_fp8_full_sectors(bool on) { g_fp8_full_sectors = on; }
bool fp8_full_sectors() { return g_fp8_full_sectors; }
bool experts_swiglu_fold() { return g_swiglu_fold; }
void set_experts_swiglu_fold(bool on) { g_swiglu_fold = on; }
int shared_expert_min_blocks() { return g_shared_min_blocks; }
void set_gemv_mma_bulk(bool on) { g_bulk = on; }
bool gemv_mma_bulk() { return g_bulk; }

bool gemv_mma_supported(const DevWeight& w, int64_t n, const float* x, int64_t ldx) {
  return g_on && n >= 1 && n <= kMaxRows && w.format == DevFormat::FP8 && w.block_out == 128 &&
         w.block_in == 128 && w.out > 0 && w.row0 % 128 == 0 && w.in % 1024 == 0 &&
         w.stride % 16 == 0 && aligned16(w.data) && aligned16(x) && ldx % 4 == 0;
}

void gemv_mma(Exec& e, const MmaGemvJob* jobs, int count, int64_t n, int min_blocks) {
  MmaLaunch L{};
  L.count = count;
  L.n = static_cast<int>(n);
  L.full_sectors = g_fp8_full_sectors;
  int tiles = 0;
  int64_t min_in = jobs[0].w->in, max_in = jobs[0].w->in;
  for (int j = 0; j < count; ++j) {
    const MmaGemvJob& src = jobs[j];
    L.job[j] = {*src.w, src.x, src.ldx, src.y, src.ldy, src.round_out, src.yq};
    L.first[j] = tiles;
    tiles += static_cast<int>((src.w->out + kTileRows - 1) / kTileRows);
    min_in = std::min(min_in, src.w->in);
    max_in = std::max(max_in, src.w->in);
  }
  L.first[count] = tiles;
  if (tiles == 0) return;
  const int s =
      choose_split(tiles, n, min_in, max_in, 128, min_blocks > 0 ? min_blocks : g_dense_min_blocks);
  const size_t shared = input_bytes(n, max_in / s, 128);
  bool bulk = g_bulk;
  for (int j = 0; j < count; ++j)
    bulk = bulk && bulk_fits(DevFormat::FP8, jobs[j].w->in / s, L.full_sectors, false, shared);
  if (bulk) return launch_bulk(e, L, DevFormat::FP8, false, 0, tiles, s, shared);
  launch_split<DevFormat::FP8, false>(e, L, tiles, s, shared);
}

bool experts_mma_supported(const DevWeight& w, const float* x, int64_t ldx) {
  if (!g_experts_on || w.out <= 0 || w.row0 != 0 || !aligned16(w.data) || !aligned16(x) ||
      ldx % 4 != 0)
    return false;
  if (w.format == DevFormat::FP8)
    return w.block_out == 128 && w.block_in == 128 && w.in % 1024 == 0 && w.stride % 16 == 0;
  return w.format == DevFormat::FP4 && w.block_in == 32 && !w.scale_f32 && w.in % 2048 == 0 &&
         w.stride % 32 == 0 && w.scale_stride % 8 == 0 &&
         reinterpret_cast<uintptr_t>(w.scale) % 8 == 0;
}

bool experts_bulk_supported(const DevWeight& w) {
  return w.format != DevFormat::FP4 || (w.scale_stride % 16 == 0 && aligned16(w.scale));
}

void experts_mma(Exec& e, const ExpertMmaProducts& p, const int32_t* idx, int slots, int per_token,
                 const float* x, int64_t ldx, bool x_per_slot, int64_t ldy) {
  MmaLaunch L{};
  L.full_sectors = g_fp8_full_sectors;
  ExpertJobs& X = L.ex;
  X = expert_jobs(p, idx, slots, per_token, x, ldx, x_per_slot, ldy);
  const int tiles = X.tiles * slots * p.count;
  if (tiles == 0) return;
  const int step = p.format == DevFormat::FP8 ? 128 : 256;
  // FP4: ≥ g_fp4_min_blocks blocks (FP8 was slower split), each block keeping ≥ 8 K steps: w2
  // (2,048 values a row) unsplit, H200 0.0176 vs 0.0183 ms split 2, H100 0.0189 vs 0.0213.
  const bool fp4 = p.format == DevFormat::FP4;
  const int s = choose_split(tiles, 1, p.in, p.in, step, fp4 ? g_fp4_min_blocks : 128, fp4 ? 8 : 1);
  const size_t shared = input_bytes(1, p.in / s, 128);
  if (g_bulk && bulk_fits(p.format, p.in / s, L.full_sectors, p.scales16, shared))
    return launch_bulk(e, L, p.format, true, g_fp4_int_decode, tiles, s, shared);
  if (p.format == DevFormat::FP8) {
    launch_split<DevFormat::FP8, true>(e, L, tiles, s, shared);
  } else {
    with_int_decode(g_fp4_int_decode, [&](auto decode) {
      launch_split<DevFormat::FP4, true, decltype(decode)::value>(e, L, tiles, s, shared);
    });
  }
}

}  // namespace deepinfer::cuda
