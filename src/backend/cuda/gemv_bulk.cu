#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/gemv_bulk.cuh"

namespace deepinfer::cuda::mma {
namespace {

// A warp's ring: kStages stages of kSteps K steps (128 bytes of a row each) of its 16 rows, and
// FP4's 32-value scales of those rows beside them (16 bytes a row a stage).
template <DevFormat F>
struct BulkRing {
  static constexpr int kSteps = 2;
  // FP8 keeps two stages in flight while it multiplies the third; FP4's larger inputs (a whole
  // 4,096-value row staged) leave room for two stages at two blocks an SM.
  static constexpr int kStages = F == DevFormat::FP8 ? 3 : 2;
  // A row's bytes in a stage, padded so that a quarter-warp's 16-byte reads of rows g and g + 1
  // fall in distinct banks: FP8 lanes read [32t, 32t + 32) of a step (16 bytes of pad move row
  // g + 1 by four banks), FP4 [16t, 16t + 16) and [64 + 16t, 80 + 16t) (64 bytes: sixteen banks).
  static constexpr int kPitch = kSteps * 128 + (F == DevFormat::FP8 ? 16 : 64);
  static constexpr int kScaleBytes = F == DevFormat::FP4 ? kSteps * 8 : 0;
  static constexpr int kStageBytes = 16 * kPitch + 16 * kScaleBytes;
  static constexpr int kWarpBytes = kStages * kStageBytes;
  static constexpr uint32_t kStageTx = 16 * (kSteps * 128 + kScaleBytes);  // bytes a stage copies
  static constexpr size_t kRingBytes =
      static_cast<size_t>(kWarps) * kWarpBytes + static_cast<size_t>(kWarps) * kStages * 8;
  static_assert(kStageBytes % 16 == 0 && kWarpBytes % 16 == 0, "copies land 16-byte aligned");
};

// gemv_mma_kernel's tile with the warp's rows streamed through BulkRing: lane r < 16 copies row r
// of the warp's 16 a stage (FP4: lane 16 + r its scales), lane 0 arms the stage's mbarrier with
// the bytes they bring; the lanes then read mma_step's fragments from shared memory.
template <DevFormat F, int S, bool kExperts, int kIntDecode>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_bulk_kernel(const __grid_constant__ MmaLaunch L) {
  using R = BulkRing<F>;
  constexpr int kStepK = F == DevFormat::FP8 ? 128 : 256;
  constexpr int kScalesPerStep = kStepK / 128;
  const TileJob J = tile_job<S, kExperts>(L);
  const DevWeight& w = J.w;
  const int n = J.n, slice = J.slice, steps = slice / kStepK;
  const int64_t k0 = J.k0;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int stages = steps / R::kSteps;
  extern __shared__ uint4 smem[];
  uint8_t* base = reinterpret_cast<uint8_t*>(smem);
  uint8_t* ring = base + warp * R::kWarpBytes;
  uint64_t* bar = reinterpret_cast<uint64_t*>(base + kWarps * R::kWarpBytes) + warp * R::kStages;
  uint16_t* xh = reinterpret_cast<uint16_t*>(base + R::kRingBytes);
  float* xinv = reinterpret_cast<float*>(xh + n * slice);
  if (lane == 0) {
    for (int s = 0; s < R::kStages; ++s) mbarrier_init(&bar[s], 1);
    mbarrier_init_fence();
  }
  __syncwarp();

  // Rows past the last one copy a valid row; their sums are never written.
  const int r = lane & 15;
  const int64_t row = min(J.t0 + warp * 16 + r, w.out - 1) + w.row0;
  const bool scale_lane = F == DevFormat::FP4 && lane >= 16;
  const bool copier = lane < 16 || scale_lane;
  const uint32_t bytes = scale_lane ? R::kScaleBytes : R::kSteps * 128;
  const int64_t row_bytes = F == DevFormat::FP8 ? w.stride : w.stride / 2;
  const int64_t k0_bytes = F == DevFormat::FP8 ? k0 : k0 / 2;
  const uint8_t* src =
      scale_lane ? w.scale + row * w.scale_stride + k0 / 32 : w.data + row * row_bytes + k0_bytes;
  const int dst = scale_lane ? 16 * R::kPitch + r * R::kScaleBytes : r * R::kPitch;
  auto issue = [&](int c) {  // stage c into slot c % kStages; c is the same in every lane
    if (c >= stages) return;
    uint64_t* b = &bar[c % R::kStages];
    if (lane == 0) mbarrier_arrive_expect(b, R::kStageTx);
    __syncwarp();
    if (copier)
      bulk_copy_to_shared(ring + (c % R::kStages) * R::kStageBytes + dst,
                          src + static_cast<int64_t>(c) * bytes, bytes, b);
  };
  for (int c = 0; c < R::kStages; ++c) issue(c);
  // The weights are constant: their copies may start before the launch before has finished.
  if constexpr (!kExperts) pdl_begin();
  stage_tile_inputs<F>(J, xh, xinv);

  const LaneChunks chunks = lane_chunks<F>(t, false);
  const int lo = chunks.lo, hi = chunks.hi;
  const int64_t srow = (w.row0 + J.t0) >> 7, scol = k0 >> 7;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int c = 0; c < stages; ++c) {
    const int slot = c % R::kStages;
    float wscale[R::kSteps] = {};  // FP8: the steps' 128 × 128 scales, asked before the wait
    if constexpr (F == DevFormat::FP8) {
#pragma unroll
      for (int j = 0; j < R::kSteps; ++j) wscale[j] = w.scale_at(srow, scol + c * R::kSteps + j);
    }
    mbarrier_wait(&bar[slot], static_cast<uint32_t>(c / R::kStages) & 1u);
    const uint8_t* st = ring + slot * R::kStageBytes;
#pragma unroll
    for (int j = 0; j < R::kSteps; ++j) {
      const int kb = c * R::kSteps + j;
      const uint8_t* a = st + g * R::kPitch + j * 128;
      const uint8_t* b = a + 8 * R::kPitch;
      const uint4 wv[4] = {
          *reinterpret_cast<const uint4*>(a + lo), *reinterpret_cast<const uint4*>(a + hi),
          *reinterpret_cast<const uint4*>(b + lo), *reinterpret_cast<const uint4*>(b + hi)};
      uint2 sa2 = make_uint2(0, 0), sb2 = make_uint2(0, 0);
      if constexpr (F == DevFormat::FP4) {
        const uint8_t* sc = st + 16 * R::kPitch + j * 8;
        sa2 = *reinterpret_cast<const uint2*>(sc + g * R::kScaleBytes);
        sb2 = *reinterpret_cast<const uint2*>(sc + (g + 8) * R::kScaleBytes);
      }
      mma_step<F, kIntDecode>(acc, wv, sa2, sb2, wscale[j], xh + kb * kStepK, slice,
                              xinv + kb * kScalesPerStep, steps * kScalesPerStep, n, g, t, lo, hi);
    }
    __syncwarp();  // every lane has read the slot before it is refilled
    issue(c + R::kStages);
  }
  finish_tile<S>(J, acc);
}

template <DevFormat F, int S, bool kExperts, int kIntDecode>
void launch_shape(Exec& e, const MmaLaunch& L, int tiles, size_t shared) {
  const auto kernel = gemv_bulk_kernel<F, S, kExperts, kIntDecode>;
  // Past the default 48 KB of dynamic shared memory, and the SM's largest shared carve-out.
  static const cudaError_t set = [&] {
    const int most = static_cast<int>(BulkRing<F>::kRingBytes + kMaxInputBytes);
    cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most);
    if (err == cudaSuccess)
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared);
    return err;
  }();
  e.note(set);
  const dim3 grid(static_cast<unsigned>(tiles * S));
  if constexpr (S > 1) {
    e.launch_cluster(kernel, grid, dim3(kThreads), shared, dim3(S, 1, 1), L);
  } else {
    e.launch(kernel, grid, dim3(kThreads), shared, L);
  }
}

template <DevFormat F, bool kExperts, int kIntDecode>
void launch_split(Exec& e, const MmaLaunch& L, int tiles, int split, size_t shared) {
  switch (split) {
    case 1:
      return launch_shape<F, 1, kExperts, kIntDecode>(e, L, tiles, shared);
    case 2:
      return launch_shape<F, 2, kExperts, kIntDecode>(e, L, tiles, shared);
    case 4:
      return launch_shape<F, 4, kExperts, kIntDecode>(e, L, tiles, shared);
    default:
      return launch_shape<F, 8, kExperts, kIntDecode>(e, L, tiles, shared);
  }
}

}  // namespace

bool bulk_fits(DevFormat f, int64_t slice, bool full_sectors, bool scales16, size_t input_bytes) {
  if (input_bytes > kMaxInputBytes) return false;
  if (f == DevFormat::FP8) return !full_sectors && slice > 0 && slice % 256 == 0;
  return f == DevFormat::FP4 && scales16 && slice > 0 && slice % 512 == 0;
}

void launch_bulk(Exec& e, const MmaLaunch& L, DevFormat f, bool experts, int int_decode, int tiles,
                 int split, size_t input_bytes) {
  const size_t inputs = (input_bytes + 15) / 16 * 16;
  if (f == DevFormat::FP8) {
    const size_t shared = BulkRing<DevFormat::FP8>::kRingBytes + inputs;
    if (experts) return launch_split<DevFormat::FP8, true, 0>(e, L, tiles, split, shared);
    return launch_split<DevFormat::FP8, false, 0>(e, L, tiles, split, shared);
  }
  const size_t shared = BulkRing<DevFormat::FP4>::kRingBytes + inputs;
  with_int_decode(int_decode, [&](auto decode) {
    launch_split<DevFormat::FP4, true, decltype(decode)::value>(e, L, tiles, split, shared);
  });
}

}  // namespace deepinfer::cuda::mma
