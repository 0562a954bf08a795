// The one-token routed experts with every resident block busy to the end (the K-split launches
// put 6 experts' w1 + w3, 384 blocks, on the 264 slots of 132 SMs: 1.45 waves). Two schedules:
// - static (stream-K): a grid of the resident blocks, each streaming an equal share of the
//   launch's (tile, K step) sequence, crossing tiles with its ring of loads in flight; a tile's
//   parts held by several blocks are added in block order by its last block to arrive.
// - dynamic: the launch's tiles in units of 4 K steps that blocks take from a counter as they
//   finish (other kernels beside it delay some blocks' start, which a static share cannot
//   absorb); each unit's sums go to scratch and the tile's last unit to finish adds them in unit
//   order.
// Either way a part's place in the sum is fixed by the launch's shape, so the bits do not depend
// on timing (they are not the K-split launches' bits).
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/gemv_mma_step.cuh"

namespace deepinfer::cuda {
namespace {

using namespace mma;

constexpr int kStages = 4;                     // the ring's K steps; a dynamic unit's too
constexpr size_t kMaxStreamInput = 48 * 1024;  // the staged input rows and scales, bytes

struct StreamLaunch {
  ExpertJobs ex;
  int steps_per_tile;  // K steps of a tile
  int tiles;           // the launch's: jobs × tiles a job
  int64_t steps;       // tiles × steps_per_tile
  int grid;
  int max_parts;  // static: scratch slots a tile (dynamic: steps_per_tile / kStages)
  int rows;       // input rows staged: the static share's first and last job's, or every slot's
  bool full_sectors;
  float* partials;    // [tile][part][kTileRows]
  int32_t* arrivals;  // [tile]: parts done, back to 0 by the tile's last
  int32_t* counters;  // dynamic: [0] units handed out past the grid, [1] blocks done; back to 0
};

// Static: block b streams steps [first_step(b), first_step(b + 1)); block_of(i) holds step i.
__host__ __device__ inline int64_t first_step(int b, int64_t steps, int grid) {
  return static_cast<int64_t>(b) * steps / grid;
}
__host__ __device__ inline int block_of(int64_t i, int64_t steps, int grid) {
  return static_cast<int>(((i + 1) * grid - 1) / steps);
}

// A job's input row (job = product · slots + slot), as an index of the dynamic kernel's staged
// rows (every slot's row, or every token's).
__device__ __forceinline__ int input_index(const ExpertJobs& X, int job) {
  const int s = job % X.slots;
  return X.x_per_slot ? s : s / X.per_token;
}
__device__ __forceinline__ const DevWeight& tile_weight(const ExpertJobs& X, int tile) {
  const int job = tile / X.tiles;
  return X.experts[job / X.slots][X.idx[job % X.slots]];
}

// The lane's rows g and g + 8 of a tile: row g's weight bytes at K step 0 and, FP4, its scales;
// row g + 8's as offsets from them (fewer registers: the ring holds 80).
struct Rows {
  const uint8_t *pa, *sa;
  int32_t b_off, sb_off;
};
template <DevFormat F>
__device__ __forceinline__ Rows rows_of(const ExpertJobs& X, int tile, int warp, int g, int lo) {
  const DevWeight& w = tile_weight(X, tile);
  const int64_t t0 = static_cast<int64_t>(tile % X.tiles) * kTileRows;
  const int64_t ra = min(t0 + warp * 16 + g, w.out - 1) + w.row0;
  const int64_t rb = min(t0 + warp * 16 + g + 8, w.out - 1) + w.row0;
  const int64_t row_bytes = F == DevFormat::FP8 ? w.stride : w.stride / 2;
  return Rows{w.data + ra * row_bytes + lo, w.scale + ra * w.scale_stride,
              static_cast<int32_t>((rb - ra) * row_bytes),
              static_cast<int32_t>((rb - ra) * w.scale_stride)};
}

// K step kb of rows r into a ring slot.
template <DevFormat F>
__device__ __forceinline__ void issue_step(const Rows& r, int kb, int second, uint4* slot,
                                           uint2* sc) {
  const int off = kb * 128;
  slot[0] = load_weights(r.pa + off);
  slot[1] = load_weights(r.pa + off + second);
  slot[2] = load_weights(r.pa + r.b_off + off);
  slot[3] = load_weights(r.pa + r.b_off + off + second);
  if constexpr (F == DevFormat::FP4) {
    sc[0] = __ldg(reinterpret_cast<const uint2*>(r.sa + kb * 8));
    sc[1] = __ldg(reinterpret_cast<const uint2*>(r.sa + r.sb_off + kb * 8));
  }
}

// FP8: a tile's row of 128×128 weight scales (the tile is one scale row).
struct ScaleRow {
  const uint8_t* p = nullptr;
  bool f32 = false;
  __device__ float at(int kb) const {
    return f32 ? reinterpret_cast<const float*>(p)[kb] : ue8m0_to_float(p[kb]);
  }
};
__device__ __forceinline__ ScaleRow scale_row(const ExpertJobs& X, int tile) {
  const DevWeight& w = tile_weight(X, tile);
  const int64_t srow = (w.row0 + static_cast<int64_t>(tile % X.tiles) * kTileRows) >> 7;
  return {w.scale + srow * w.scale_stride * (w.scale_f32 ? 4 : 1), w.scale_f32};
}

// A tile's part `part` of `parts` (lanes t = 0 hold rows g, g + 8 in acc[0], acc[2]) into
// scratch; the tile's last part to arrive adds them in part order into its outputs. Every thread
// of the block calls it.
__device__ void finish_part(const StreamLaunch& L, int tile, int part, int parts, int stride,
                            const float acc[4], int warp, int g, int t, int* last) {
  const ExpertJobs& X = L.ex;
  float* slots = L.partials + static_cast<int64_t>(tile) * stride * kTileRows;
  const int r = warp * 16 + g;
  if (t == 0) {
    __stcg(slots + part * kTileRows + r, acc[0]);
    __stcg(slots + part * kTileRows + r + 8, acc[2]);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) *last = atomicAdd(&L.arrivals[tile], 1) == parts - 1;
  __syncthreads();
  if (!*last) return;
  __threadfence();
  const int job = tile / X.tiles;
  const int64_t t0 = static_cast<int64_t>(tile % X.tiles) * kTileRows;
  const int64_t out = tile_weight(X, tile).out;
  if (threadIdx.x < kTileRows && t0 + threadIdx.x < out) {
    float v = 0.0f;
    for (int k = 0; k < parts; ++k) v += __ldcg(slots + k * kTileRows + threadIdx.x);
    X.y[job / X.slots][(job % X.slots) * X.ldy + t0 + threadIdx.x] = bf16r(v);
  }
  if (threadIdx.x == 0) L.arrivals[tile] = 0;
}

template <DevFormat F, int kIntDecode>
__global__ void __launch_bounds__(kThreads, 2)
    experts_stream_kernel(const __grid_constant__ StreamLaunch L) {
  constexpr int kStepK = F == DevFormat::FP8 ? 128 : 256;
  constexpr int kScalesPerStep = kStepK / 128;
  pdl_begin();  // the slots' expert ids come from the routing launch before
  const ExpertJobs& X = L.ex;
  const int b = static_cast<int>(blockIdx.x), kt = L.steps_per_tile, in = kt * kStepK;
  const int64_t s0 = first_step(b, L.steps, L.grid), s1 = first_step(b + 1, L.steps, L.grid);
  const int count = static_cast<int>(s1 - s0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const LaneChunks chunks = lane_chunks<F>(t, L.full_sectors);
  const int lo = chunks.lo, hi = chunks.hi;
  // A block spans at most two jobs (the launcher keeps its share ≤ a job's steps): their input
  // rows are shared rows 0 and 1 (one where they are the same row).
  const int job_steps = X.tiles * kt;
  const int in0 = input_index(X, static_cast<int>(s0 / job_steps));
  const int in1 = input_index(X, static_cast<int>((s1 - 1) / job_steps));

  // The ring's loads run ahead of the sums through the same steps, across tiles.
  int issue_tile = static_cast<int>(s0 / kt), issue_kb = static_cast<int>(s0 % kt);
  Rows ir = rows_of<F>(X, issue_tile, warp, g, lo);
  uint4 ring[kStages][4];
  uint2 ring_sc[kStages][2];
  auto issue = [&](uint4* slot, uint2* sc) {
    if (issue_kb == kt) ir = rows_of<F>(X, ++issue_tile, warp, g, lo), issue_kb = 0;
    issue_step<F>(ir, issue_kb++, hi - lo, slot, sc);
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    if (s < count) issue(ring[s], ring_sc[s]);

  extern __shared__ uint4 smem[];
  uint16_t* xh = reinterpret_cast<uint16_t*>(smem);
  const int scales = in / 128;  // the inputs' per row
  float* xinv = reinterpret_cast<float*>(xh + 2 * in);
  stage_inputs<F>(X.x + in0 * X.ldx, X.ldx, 1, 0, in, xh, xinv);
  if (in1 != in0) stage_inputs<F>(X.x + in1 * X.ldx, X.ldx, 1, 0, in, xh + in, xinv + scales);
  __syncthreads();

  // The tile being summed: its input row in shared memory and, FP8, its weight scale row.
  int tile = static_cast<int>(s0 / kt);
  int kb = static_cast<int>(s0 % kt), part_begin = kb, xrow = 0;
  ScaleRow ws;
  const auto enter = [&](int tl) {
    xrow = input_index(X, tl / X.tiles) == in0 ? 0 : 1;
    if constexpr (F == DevFormat::FP8) ws = scale_row(X, tl);
  };
  enter(tile);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  __shared__ int last_arrival;
  // The tile's sums over steps [part_begin, kb): its outputs when that is the whole tile, else
  // a part for scratch.
  const auto finish = [&]() {
    if (part_begin == 0 && kb == kt) {
      const int job = tile / X.tiles;
      float* y = X.y[job / X.slots] + (job % X.slots) * X.ldy;
      const int64_t out = tile_weight(X, tile).out;
      const int64_t r = static_cast<int64_t>(tile % X.tiles) * kTileRows + warp * 16 + g;
      if (t == 0) {
        if (r < out) y[r] = bf16r(acc[0]);
        if (r + 8 < out) y[r + 8] = bf16r(acc[2]);
      }
    } else {
      const int64_t first = static_cast<int64_t>(tile) * kt;
      const int lo_b = block_of(first, L.steps, L.grid);
      const int parts = block_of(first + kt - 1, L.steps, L.grid) - lo_b + 1;
      finish_part(L, tile, b - lo_b, parts, L.max_parts, acc, warp, g, t, &last_arrival);
    }
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
  };

  for (int i0 = 0; i0 < count; i0 += kStages) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      const int i = i0 + s;
      if (i + kStages - 1 < count)
        issue(ring[(s + kStages - 1) % kStages], ring_sc[(s + kStages - 1) % kStages]);
      if (i < count) {
        float wscale = 0.0f;
        if constexpr (F == DevFormat::FP8) wscale = ws.at(kb);
        mma_step<F, kIntDecode>(
            acc, ring[s], ring_sc[s][0], ring_sc[s][1], wscale, xh + xrow * in + kb * kStepK, in,
            xinv + xrow * scales + kb * kScalesPerStep, scales, 1, g, t, lo, hi);
        ++kb;
        if (kb == kt || i == count - 1) {
          finish();
          if (i < count - 1) enter(++tile), kb = 0, part_begin = 0;
        }
      }
    }
  }
}

template <DevFormat F, int kIntDecode>
__global__ void __launch_bounds__(kThreads, 2)
    experts_dynamic_kernel(const __grid_constant__ StreamLaunch L) {
  constexpr int kStepK = F == DevFormat::FP8 ? 128 : 256;
  constexpr int kScalesPerStep = kStepK / 128;
  pdl_begin();  // the slots' expert ids come from the routing launch before
  const ExpertJobs& X = L.ex;
  const int kt = L.steps_per_tile, in = kt * kStepK, per_tile = kt / kStages;
  const int units = L.tiles * per_tile, grid = static_cast<int>(gridDim.x);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const LaneChunks chunks = lane_chunks<F>(t, L.full_sectors);
  const int lo = chunks.lo, hi = chunks.hi;
  // Units handed out: block b's first is b, the rest come from the counter, each one unit ahead
  // of its use (its loads start during the unit before), through two shared slots by parity.
  __shared__ int handed[2];
  __shared__ int last_arrival;
  if (threadIdx.x == 0) handed[0] = grid + atomicAdd(&L.counters[0], 1);
  int cur = static_cast<int>(blockIdx.x);
  Rows rc = rows_of<F>(X, cur / per_tile, warp, g, lo);
  int kc = cur % per_tile * kStages;
  uint4 ring[kStages][4];
  uint2 ring_sc[kStages][2];
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue_step<F>(rc, kc + s, hi - lo, ring[s], ring_sc[s]);

  extern __shared__ uint4 smem[];
  uint16_t* xh = reinterpret_cast<uint16_t*>(smem);
  const int scales = in / 128;
  float* xinv = reinterpret_cast<float*>(xh + L.rows * in);
  stage_inputs<F>(X.x, X.ldx, L.rows, 0, in, xh, xinv);
  __syncthreads();

  int nxt = handed[0];
  Rows rn = nxt < units ? rows_of<F>(X, nxt / per_tile, warp, g, lo) : rc;
  int kn = nxt % per_tile * kStages;
  for (int it = 0; cur < units; ++it) {
    if (threadIdx.x == 0)
      handed[(it + 1) & 1] = nxt < units ? grid + atomicAdd(&L.counters[0], 1) : units;
    const int tile = cur / per_tile, xrow = input_index(X, tile / X.tiles);
    ScaleRow ws;
    if constexpr (F == DevFormat::FP8) ws = scale_row(X, tile);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      // Step 3 of this unit into the slot step 3 of the unit before left, then the next unit's
      // steps 0 … 2 into the slots this one's steps 0 … 2 leave.
      if (s == 0) {
        issue_step<F>(rc, kc + kStages - 1, hi - lo, ring[kStages - 1], ring_sc[kStages - 1]);
      } else if (nxt < units) {
        issue_step<F>(rn, kn + s - 1, hi - lo, ring[s - 1], ring_sc[s - 1]);
      }
      float wscale = 0.0f;
      if constexpr (F == DevFormat::FP8) wscale = ws.at(kc + s);
      mma_step<F, kIntDecode>(
          acc, ring[s], ring_sc[s][0], ring_sc[s][1], wscale, xh + xrow * in + (kc + s) * kStepK,
          in, xinv + xrow * scales + (kc + s) * kScalesPerStep, scales, 1, g, t, lo, hi);
    }
    finish_part(L, tile, cur % per_tile, per_tile, per_tile, acc, warp, g, t, &last_arrival);
    cur = nxt, rc = rn, kc = kn;
    nxt = handed[(it + 1) & 1];  // written before finish_part's barriers
    if (nxt < units) rn = rows_of<F>(X, nxt / per_tile, warp, g, lo), kn = nxt % per_tile * kStages;
  }
  // Every block has taken its last unit once all are done: the last one resets the counters.
  if (threadIdx.x == 0 && atomicAdd(&L.counters[1], 1) == grid - 1) {
    L.counters[0] = 0;
    L.counters[1] = 0;
  }
}

int g_stream = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_EXPERTS_STREAM");
  const int m = v && *v ? std::atoi(v) : 0;  // off until a device has timed both
  return m == 1 || m == 2 ? m : 0;
}();

// Resident blocks of a kernel per SM (registers; the most shared memory it is launched with),
// asked once.
template <auto kKernel>
int blocks_per_sm() {
  static const int n = [] {
    int v = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kKernel, kThreads, kMaxStreamInput) !=
        cudaSuccess) {
      cudaGetLastError();
      return 1;
    }
    return std::max(v, 1);
  }();
  return n;
}

template <DevFormat F, int kIntDecode>
bool launch_stream(Exec& e, StreamLaunch& L, const ExpertStreamScratch& scratch, int jobs) {
  const size_t in = static_cast<size_t>(L.steps_per_tile) * (F == DevFormat::FP8 ? 128 : 256);
  const ExpertJobs& X = L.ex;
  const bool dynamic = g_stream == 2;
  L.rows = dynamic ? (X.x_per_slot ? X.slots : (X.slots + X.per_token - 1) / X.per_token) : 2;
  const size_t shared = static_cast<size_t>(L.rows) * (in * 2 + in / 128 * 4);
  if (shared > kMaxStreamInput || L.tiles > scratch.tiles) return false;
  const auto kernel =
      dynamic ? experts_dynamic_kernel<F, kIntDecode> : experts_stream_kernel<F, kIntDecode>;
  const int resident = (dynamic ? blocks_per_sm<experts_dynamic_kernel<F, kIntDecode>>()
                                : blocks_per_sm<experts_stream_kernel<F, kIntDecode>>()) *
                       sm_count();
  if (dynamic) {
    const int units = L.tiles * (L.steps_per_tile / kStages);
    if (L.steps_per_tile % kStages != 0 || L.steps_per_tile / kStages > kExpertStreamParts)
      return false;
    L.grid = std::min(units, resident);
    L.max_parts = L.steps_per_tile / kStages;
  } else {
    // Every resident block, but ≥ one a job, so that a block's share spans at most two jobs.
    L.grid = static_cast<int>(std::min<int64_t>(L.steps, std::max(resident, jobs)));
    int max_parts = 1;
    for (int tl = 0; tl < L.tiles; ++tl) {
      const int64_t first = static_cast<int64_t>(tl) * L.steps_per_tile;
      max_parts = std::max(max_parts, block_of(first + L.steps_per_tile - 1, L.steps, L.grid) -
                                          block_of(first, L.steps, L.grid) + 1);
    }
    if (max_parts > kExpertStreamParts) return false;
    L.max_parts = max_parts;
  }
  e.launch(kernel, dim3(static_cast<unsigned>(L.grid)), dim3(kThreads), shared, L);
  return true;
}

}  // namespace

void set_experts_stream(int mode) { g_stream = mode == 1 || mode == 2 ? mode : 0; }
int experts_stream_mode() { return g_stream; }

bool experts_stream(Exec& e, const ExpertMmaProducts& p, const int32_t* idx, int slots,
                    int per_token, const float* x, int64_t ldx, bool x_per_slot, int64_t ldy,
                    const ExpertStreamScratch& scratch) {
  if (g_stream == 0 || !scratch.partials || !scratch.arrivals || !scratch.counters || slots <= 0)
    return false;
  StreamLaunch L{};
  ExpertJobs& X = L.ex;
  X = expert_jobs(p, idx, slots, per_token, x, ldx, x_per_slot, ldy);
  const bool fp4 = p.format == DevFormat::FP4;
  L.steps_per_tile = static_cast<int>(p.in / (fp4 ? 256 : 128));
  const int jobs = slots * p.count;
  L.tiles = X.tiles * jobs;
  L.steps = static_cast<int64_t>(L.tiles) * L.steps_per_tile;
  L.full_sectors = fp8_full_sectors();
  L.partials = scratch.partials;
  L.arrivals = scratch.arrivals;
  L.counters = scratch.counters;
  if (L.tiles == 0) return true;
  if (!fp4) return launch_stream<DevFormat::FP8, 0>(e, L, scratch, jobs);
  return with_int_decode(fp4_int_decode(), [&](auto decode) {
    return launch_stream<DevFormat::FP4, decltype(decode)::value>(e, L, scratch, jobs);
  });
}

}  // namespace deepinfer::cuda
