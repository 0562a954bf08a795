// Routed experts grouped by expert (device only; linear_experts in ops.cu is the reference body):
// the (token, k) slots are permuted by expert on the device, and each expert's packed weights are
// streamed once per step for all the slots routed to it.
//
// moe_plan: per-expert slot counts, their prefix sums, the slot ids sorted by expert (stable: by
// slot id within an expert) and a list of work chunks (expert, first sorted index, ≤ kChunkSlots
// slots) — all in device kernels of fixed launch size (from n_slots and E), so a decode step
// stays capturable in a CUDA graph.
//
// grouped_experts: a block per (column tile, chunk) streams the tile's weight rows of the chunk's
// expert once per pass of up to R slots (the slots' activation rows staged in shared memory),
// FP4 (e2m1, ×32 UE8M0), FP8 (e4m3, block scales) and bf16 / fp32 weights. One or two products
// that share their input (w1 and w3) run in one launch.
//
// Batch invariance: a slot's output is the same sum in the same order (each lane's 32-element
// chunks, the chunk's scale applied to its partial sum, then a fixed warp reduction) whichever
// slots share its expert, however many slots run per pass, and whatever the batch size. It
// differs in its last bits from linear_experts' reference body (another summation order).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/gemv_mma.cuh"

namespace deepinfer::cuda {

// Slots per work chunk: an expert with more slots is split over several blocks along y.
constexpr int kExpertChunkSlots = 64;

// The most chunks n_slots slots over E experts can give: min(E, n) nonempty experts, each at most
// one chunk more than its slots / kExpertChunkSlots.
inline int64_t expert_max_chunks(int64_t n_slots, int E) {
  return (n_slots < E ? n_slots : E) + n_slots / kExpertChunkSlots;
}

// Device arrays of a plan (sized by ExpertPlanBuffers::allocate for at most max_slots slots).
struct ExpertPlan {
  int32_t* offsets = nullptr;   // [E + 1] first sorted index of each expert; offsets[E] = n
  int32_t* sorted = nullptr;    // [n_slots] slot ids, by expert then slot id
  int32_t* chunks = nullptr;    // [max_chunks × 3] expert, first sorted index, slot count
  int32_t* n_chunks = nullptr;  // [1]
};

struct ExpertPlanBuffers {
  DeviceArray<int32_t> offsets, sorted, chunks, n_chunks;
  void allocate(Exec& e, int64_t max_slots, int E);
  ExpertPlan plan() const { return {offsets.ptr, sorted.ptr, chunks.ptr, n_chunks.ptr}; }
  size_t bytes() const {
    return offsets.bytes() + sorted.bytes() + chunks.bytes() + n_chunks.bytes();
  }
};

// idx [n_slots] expert per slot (values in [0, E)) → plan. One block; device only.
void moe_plan(Exec& e, const int32_t* idx, int64_t n_slots, int E, const ExpertPlan& plan);

// One product over the routed slots: expert matrices [E] (a device array) and its output rows
// y[slot · ldy + o].
struct ExpertProduct {
  const DevWeight* experts = nullptr;
  float* y = nullptr;
};

// What each grouped-expert kernel is handed (grouped_experts' arguments; tiles: the column tiles
// per product its launcher picks). round_out: official numerics round quantized experts' outputs.
struct ExpertLaunchArgs {
  ExpertPlan plan;
  const float* x = nullptr;
  bool x_per_slot = false;
  int K = 0;
  ExpertProduct a, b;
  int tiles = 0;
  int64_t ldy = 0, out = 0, in = 0;
  bool round_out = false;
};
inline ExpertLaunchArgs expert_launch_args(const ExpertPlan& plan, const float* x, bool x_per_slot,
                                           int K, const ExpertProduct& a, const ExpertProduct& b,
                                           int64_t ldy, int64_t out, int64_t in, bool official,
                                           DevFormat format) {
  ExpertLaunchArgs g;
  g.plan = plan;
  g.x = x;
  g.x_per_slot = x_per_slot;
  g.K = K;
  g.a = a;
  g.b = b;
  g.ldy = ldy;
  g.out = out;
  g.in = in;
  g.round_out = official && format != DevFormat::BF16 && format != DevFormat::F32;
  return g;
}

// Whether grouped_experts runs these shapes (fast kernels on, `in` a multiple of 32, the
// formats' block scales 32-aligned, rows short enough to stage in shared memory).
bool grouped_experts_supported(int64_t in, DevFormat format);

// y = x · Wᵉᵀ for every slot s of expert e: x row s (x_per_slot) or s / K; one or two products
// (b.experts may be null) with the same out / in / format. Outputs bf16-rounded when official and
// the format is quantized.
void grouped_experts(Exec& e, const ExpertPlan& plan, int64_t n_slots, int E, const float* x,
                     bool x_per_slot, int K, const ExpertProduct& a, const ExpertProduct& b,
                     int64_t ldy, int64_t out, int64_t in, bool official, DevFormat format);

// The tensor-core variant (moe_grouped_tc.cu): WMMA bf16 → fp32 over a 64-slot × 64-column tile
// per chunk, activations and scaled weights rounded to bf16 — exact only where they are
// bf16-exact (official numerics: FP8-quantized activations, FP8/FP4 experts), so routed_grouped
// takes it only there, and only for prefill-sized launches (≥ kTcMinSlotsPerExpert · E slots):
// decode batches keep the CUDA-core kernel, so their bits do not depend on the batch size.
constexpr int kTcMinSlotsPerExpert = 8;
bool grouped_experts_tc_supported(int64_t in, DevFormat format);
void grouped_experts_tc(Exec& e, const ExpertPlan& plan, int64_t n_slots, int E, const float* x,
                        bool x_per_slot, int K, const ExpertProduct& a, const ExpertProduct& b,
                        int64_t ldy, int64_t out, int64_t in, bool official, DevFormat format);
// On by default; false keeps every launch on the CUDA-core kernel (env
// DEEPINFER_CUDA_GROUPED_TC=0 too).
void set_grouped_tensor_cores(bool on);
bool grouped_tensor_cores();

// The decode-sized tensor-core variant (moe_grouped_dec.cu): mma.sync m16n8k16 with the
// expert's weight rows as the 16-row side and 8 slots per pass as the 8-wide side, activations
// and scaled weights rounded to bf16 — exact only where they are bf16-exact (official numerics:
// FP8-quantized activations, FP8/FP4 experts), so routed_grouped takes it only there, below the
// prefill-sized launches and from experts_decode_tc_min_slots(E, format) slots up (FP4 E / 8 by
// default: on the H200, 256 experts, the CUDA-core kernel is faster at 6 slots and on par at 24,
// the mma kernel 8–12 % faster at 96 and 126; FP8 / bf16 E / 2, not measured between; env
// DEEPINFER_CUDA_EXPERTS_DECODE_TC_MIN_SLOTS sets it for all). A slot's
// sum does not depend on the other slots of the launch, but differs in its last bits from the
// CUDA-core kernel's, so a token's bits change where a decode batch crosses the threshold;
// batch-invariant mode keeps the CUDA-core kernel. On by default; false (or env
// DEEPINFER_CUDA_EXPERTS_DECODE_TC=0) keeps decode on the CUDA-core kernel.
void set_experts_decode_tc(bool on);
bool experts_decode_tc();
// The FP4 decode mma kernel's launch shape: tiles 16-row tiles a warp (1 or 2), depth 128-k
// steps of weights in registers (2, 4 or 8 with one tile; 2 or 4 with two), warps a block (0:
// halved from 8 while the grid would leave SMs idle), pass slots staged per pass (1–8). Speed
// only: a slot's bits are the same in every shape. By default experts_dec_shape gives {1, 2, 4, 2}
// below E / 2 slots and {2, 2, 0, 8} from there; set_experts_dec_shape (a shape the kernel runs,
// or {} for the default; env DEEPINFER_CUDA_EXPERTS_DECODE_SHAPE="T,D,W,P") sets one for every
// FP4 launch. FP8 and bf16 keep one shape ({2 (bf16 1), 2, 0, 8}).
struct ExpertDecShape {
  int tiles = 0, depth = 0, warps = 0, pass = 0;
};
void set_experts_dec_shape(const ExpertDecShape& s);
ExpertDecShape experts_dec_shape(int64_t n_slots, int E, DevFormat format);
int64_t experts_decode_tc_min_slots(int E, DevFormat format);
bool grouped_experts_dec_supported(int64_t in, DevFormat format);
void grouped_experts_dec(Exec& e, const ExpertPlan& plan, int64_t n_slots, int E, const float* x,
                         bool x_per_slot, int K, const ExpertProduct& a, const ExpertProduct& b,
                         int64_t ldy, int64_t out, int64_t in, bool official, DevFormat format);

// The cuBLAS variant (moe_grouped_lt.cu) for prefill-sized launches, outside graph capture: the
// plan's offsets read to the host once (read_plan_offsets: one stream sync), the slots' rows
// gathered by expert as bf16 (hi + lo, two products summed in fp32, unless x_bf16: the inputs are
// bf16-exact), the experts with slots dequantized to bf16 (exact) a bounded chunk at a time,
// cuBLAS batched GEMMs per bucket of experts of equal padded rows (bf16 → fp32), results scattered
// to the slots' rows (bf16-rounded as grouped_experts rounds them). Deterministic for a given
// launch (no atomics); the sums differ from the other kernels' in order only. Returns false,
// leaving the outputs alone, when it cannot run (scratch or cuBLAS refused); the caller then
// takes another kernel.
// On by default; false (or env DEEPINFER_CUDA_EXPERTS_LT=0) keeps prefill on the other kernels.
void set_experts_lt(bool on);
bool experts_lt();
bool grouped_experts_lt_supported(int64_t in, DevFormat format);
bool read_plan_offsets(Exec& e, const ExpertPlan& plan, int E, std::vector<int32_t>& offsets);
// Whether the cuBLAS path beats the WMMA kernel (against_wmma) on a launch of these offsets: its
// dequantization writes and rereads every active expert in bf16, which pays once the experts
// average kLtMinRowsPerExpert rows (H200, FP4: 24 rows an expert 5.7 ms vs WMMA 4.6 ms, 96 rows
// 6.5 ms vs 8.2 ms); against the CUDA-core kernel it always pays.
constexpr int kLtMinRowsPerExpert = 64;
bool experts_lt_pays(const std::vector<int32_t>& offsets, int E, bool against_wmma);
bool grouped_experts_lt(Exec& e, const ExpertPlan& plan, const std::vector<int32_t>& offsets,
                        int64_t n_slots, int E, const float* x, bool x_per_slot, int K,
                        const ExpertProduct& a, const ExpertProduct& b, int64_t ldy, int64_t out,
                        int64_t in, bool official, DevFormat format, bool x_bf16);

// The routed half of a MoE sublayer on the grouped kernels (moe_sublayer's reference path is
// linear_experts): plan the slots of idx [n·K], h1 / h3 [n·K, inter] = x · W1ᵀ / x · W3ᵀ, the
// clamped SwiGLU (with the slot weights when official), out [n·K, d] = h · W2ᵀ. xq: scratch for
// the FP8-quantized inputs (n·K·inter floats).
struct RoutedExperts {
  const DevWeight *r1 = nullptr, *r2 = nullptr, *r3 = nullptr;  // device arrays [E]
  DevFormat f1 = DevFormat::F32, f2 = DevFormat::F32, f3 = DevFormat::F32;
  bool quantized = false;  // all three quantized (official numerics quantize their inputs)
  // Host copies of one expert of each product where all E are alike (shape, format, scales),
  // else null: what the one-token tensor-core path (gemv_mma.cuh) checks.
  const DevWeight *h1 = nullptr, *h2 = nullptr, *h3 = nullptr;
};
// On by default; false (or env DEEPINFER_CUDA_GROUPED_EXPERTS=0) keeps moe_sublayer on the
// per-slot path (linear_experts), to compare.
void set_grouped_experts(bool on);
bool grouped_experts_on();
bool routed_grouped_supported(const RoutedExperts& r, int64_t d, int64_t inter);
void routed_grouped(Exec& e, const ExpertPlan& plan, const RoutedExperts& r, const float* x,
                    int64_t n, int E, int K, int64_t d, int64_t inter, float limit,
                    const float* weights, bool official, float* h1, float* h3, float* out,
                    float* xq, const int32_t* idx, const float* xq_ready = nullptr);

}  // namespace deepinfer::cuda
