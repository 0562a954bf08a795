// cuBLASLt products (see gemm_lt.cuh). In cuBLASLt's column-major terms every product is TN:
// A = the weight [out, in] row-major read as a K×M matrix and transposed, B = the packed
// activations [n, K] row-major (a K×N matrix), D = y [n, out] row-major (M×N, leading dim ldy).
// FP8 scale tensors: A (BLK128x128_32F) one fp32 per 128×128 block, the K blocks of an output
// block contiguous and padded to a multiple of 4; B (VEC128_32F) one fp32 per row and 128-wide
// K block, the rows of a K block contiguous.
#include <cublasLt.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/gemm_lt.cuh"
#include "backend/cuda/row_reduce.cuh"

namespace deepinfer::cuda {

namespace {

bool g_lt = env_switch("DEEPINFER_CUDA_LT", true);
bool g_invariant = env_switch("DEEPINFER_BATCH_INVARIANT", false);
const bool g_verbose =
    env_switch("DEEPINFER_CUDA_LT_VERBOSE", false);  // why a product was declined

// The WMMA tiles' products on cuBLASLt (DEEPINFER_CUDA_LT_DEQUANT): 0 off, 1 the weight view
// dequantized into scratch per launch, 2 a bf16 copy of each view kept after its first launch.
LtDequant g_dequant = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_LT_DEQUANT");
  if (!v || !*v) return LtDequant::PerLaunch;
  return *v == '0' ? LtDequant::Off : *v == '2' ? LtDequant::Kept : LtDequant::PerLaunch;
}();

// bf16 products of fp32 inputs at decode sizes: the hi and lo halves as one product of 2n
// columns, so the weights are read once (DEEPINFER_CUDA_LT_STACK_HALVES=0: two products), while
// its fp32 D fits in this much scratch. And whether decode-sized FP8 products may split K.
const bool g_stack_halves = env_switch("DEEPINFER_CUDA_LT_STACK_HALVES", true);
const bool g_fp8_splitk = env_switch("DEEPINFER_CUDA_LT_FP8_SPLITK", true);
const bool g_early_scratch = env_switch("DEEPINFER_CUDA_LT_EARLY_SCRATCH", false);
constexpr size_t kStackedMaxBytes = size_t{128} << 20;
constexpr int64_t kStackedMaxRows = 256;  // decode batches: prefill keeps its two products

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr size_t kMinScratchBytes = size_t{32} << 20;  // a 256-row decode batch of K = 16384 halves
constexpr size_t kMinScaleBytes = size_t{1} << 20;

enum class Kind : int { Fp8 = 0, Bf16 = 1 };

// One product shape: the descriptors and the chosen algorithm.
struct PlanKey {
  int kind;
  int64_t m, n, k, lda, ldd;
  bool d_bf16, invariant;
  auto operator<=>(const PlanKey&) const = default;
};

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
  bool checked = false;  // FP8: its first product was compared with a recomputation
};

void destroy(Plan& p) {
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  p = Plan{};
}

}  // namespace

struct BlasState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  void* act = nullptr;  // e4m3 codes, or the bf16 halves hi | lo
  size_t act_bytes = 0;
  void* act_scales = nullptr;  // fp32 activation scales
  size_t scale_bytes = 0;
  void* out16 = nullptr;  // bf16 D when the fp32 D has no algorithm
  size_t out16_bytes = 0;
  void* wdeq = nullptr;  // a quantized weight view dequantized to bf16 for one launch
  size_t wdeq_bytes = 0;
  void* stacked = nullptr;  // the fp32 D of a bf16 product of both halves at once [2n, M]
  size_t stacked_bytes = 0;
  float* probe = nullptr;  // the FP8 check's outputs
  std::map<PlanKey, Plan> plans;
  // Batch-invariant mode: the algorithm of each shape (n = kInvariantReferenceRows), or none.
  std::map<PlanKey, std::pair<bool, cublasLtMatmulAlgo_t>> fixed;
  // Weight scales in cuBLASLt's block layout, by (scale tensor, first row, rows).
  std::map<std::tuple<const uint8_t*, int64_t, int64_t>, float*> weight_scales;
  // LtDequant::Kept: the bf16 copies of quantized weight views, by (data, first row, rows).
  std::map<std::tuple<const uint8_t*, int64_t, int64_t>, uint16_t*> weight_copies;
  // Outgrown scratch buffers: CUDA graphs captured earlier may still read them.
  std::vector<void*> retired;
  bool warned = false;

  ~BlasState() {
    for (auto& [k, p] : plans) destroy(p);
    for (auto& [k, s] : weight_scales) cudaFree(s);
    for (auto& [k, c] : weight_copies) cudaFree(c);
    cudaFree(wdeq);
    cudaFree(stacked);
    cudaFree(workspace);
    cudaFree(act);
    cudaFree(act_scales);
    cudaFree(out16);
    cudaFree(probe);
    for (void* r : retired) cudaFree(r);
    if (handle) cublasLtDestroy(handle);
  }
};

namespace {

bool capturing(const Exec& e) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(e.stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

// Grows a scratch buffer to at least twice `need` (never while a graph is being captured:
// allocations would break it). The old one is kept until the state goes.
bool reserve(BlasState& s, void*& p, size_t& have, size_t need, size_t floor, bool in_capture) {
  if (need <= have) return true;
  if (in_capture) return false;
  if (p) s.retired.push_back(p);
  p = nullptr;
  have = 0;
  const size_t bytes = std::max(floor, 2 * need);
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  have = bytes;
  return true;
}

BlasState* state(Exec& e, bool in_capture) {
  if (e.blas) return e.blas.get();
  if (in_capture) return nullptr;
  auto s = std::make_shared<BlasState>();
  if (cublasLtCreate(&s->handle) != CUBLAS_STATUS_SUCCESS) return nullptr;
  if (cudaMalloc(&s->workspace, kWorkspaceBytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  // DEEPINFER_CUDA_LT_EARLY_SCRATCH=1 (off until measured): the bf16-D and stacked-halves
  // scratch made here, before any graph is captured. Products first seen in capture cannot grow
  // them: FP8 ones without an fp32-D algorithm (wo_b at decode sizes on the H200) then fall to the
  // WMMA tiles, and bf16 ones keep their two products.
  if (g_early_scratch) {
    reserve(*s, s->out16, s->out16_bytes, kMinScratchBytes / 2, kMinScratchBytes, false);
    reserve(*s, s->stacked, s->stacked_bytes, kStackedMaxBytes / 2, 0, false);  // 128 MiB
  }
  e.blas = s;
  return s.get();
}

bool make_descs(BlasState& s, const PlanKey& key, Plan& p) {
  const bool fp8 = key.kind == static_cast<int>(Kind::Fp8);
  const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  const cudaDataType_t out_type = key.d_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  if (cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
    return false;
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (fp8) {
    const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode);
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode);
    // Placeholders until each call sets its own scale tensors.
    const void* any = s.workspace;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &any, sizeof any);
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &any, sizeof any);
  }
  return cublasLtMatrixLayoutCreate(&p.a, in_type, static_cast<uint64_t>(key.k),
                                    static_cast<uint64_t>(key.m),
                                    key.lda) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatrixLayoutCreate(&p.b, in_type, static_cast<uint64_t>(key.k),
                                    static_cast<uint64_t>(key.n), key.k) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatrixLayoutCreate(&p.d, out_type, static_cast<uint64_t>(key.m),
                                    static_cast<uint64_t>(key.n), key.ldd) == CUBLAS_STATUS_SUCCESS;
}

int32_t algo_config(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t what) {
  int32_t v = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, what, &v, sizeof v, &written);
  return v;
}

// The best algorithm for p that keeps each output's K reduction in one CTA (no split-K, no
// reduction scheme): the batch-invariant mode needs that, and the FP8 block-scaled products
// are kept to it too.
bool heuristic(BlasState& s, const Plan& p, bool one_cta, cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return false;
  const uint64_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof ws);
  constexpr int kWant = 16;
  cublasLtMatmulHeuristicResult_t res[kWant] = {};
  int got = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(s.handle, p.op, p.a, p.b, p.d, p.d, pref, kWant, res, &got);
  cublasLtMatmulPreferenceDestroy(pref);
  if (g_verbose && (st != CUBLAS_STATUS_SUCCESS || got == 0))
    std::fprintf(stderr, "deepinfer: cuBLASLt heuristic: status %d, %d algorithms\n",
                 static_cast<int>(st), got);
  if (st != CUBLAS_STATUS_SUCCESS) return false;
  for (int i = 0; i < got; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    const int32_t splits = algo_config(res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
    const int32_t scheme = algo_config(res[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
    if (g_verbose)
      std::fprintf(stderr, "  algorithm %d: id %d tile %d stages %d split-K %d reduction %d%s\n", i,
                   algo_config(res[i].algo, CUBLASLT_ALGO_CONFIG_ID),
                   algo_config(res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                   algo_config(res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID), splits, scheme,
                   one_cta && (splits > 1 || scheme != 0) ? " (skipped)" : "");
    if (one_cta && (splits > 1 || scheme != CUBLASLT_REDUCTION_SCHEME_NONE)) continue;
    algo = res[i].algo;
    return true;
  }
  return false;
}

// The plan for key: cached; in batch-invariant mode the algorithm is the one chosen for this
// shape at kInvariantReferenceRows rows, whatever key.n is.
Plan* plan(BlasState& s, const PlanKey& key) {
  auto it = s.plans.find(key);
  if (it != s.plans.end()) return it->second.ok ? &it->second : nullptr;
  Plan& p = s.plans[key];
  if (g_verbose)
    std::fprintf(stderr, "deepinfer: cuBLASLt plan %s M=%lld N=%lld K=%lld lda=%lld ldd=%lld%s%s\n",
                 key.kind == static_cast<int>(Kind::Fp8) ? "fp8" : "bf16",
                 static_cast<long long>(key.m), static_cast<long long>(key.n),
                 static_cast<long long>(key.k), static_cast<long long>(key.lda),
                 static_cast<long long>(key.ldd), key.d_bf16 ? " (bf16 D)" : "",
                 key.invariant ? " (invariant)" : "");
  if (!make_descs(s, key, p)) return nullptr;
  if (!key.invariant) {
    // FP8 products keep their K in one CTA, except decode-sized ones (few output tiles: split-K
    // fills the GPU; cuBLASLt's reduction schemes add the parts in a fixed order).
    // DEEPINFER_CUDA_LT_FP8_SPLITK=0 keeps those in one CTA too.
    const bool fp8 = key.kind == static_cast<int>(Kind::Fp8);
    p.ok = heuristic(s, p, fp8 && !(g_fp8_splitk && key.n <= 256), p.algo);
    return p.ok ? &p : nullptr;
  }
  PlanKey ref = key;
  ref.n = kInvariantReferenceRows;
  auto f = s.fixed.find(ref);
  if (f == s.fixed.end()) {
    Plan rp;
    std::pair<bool, cublasLtMatmulAlgo_t> pick{false, {}};
    if (make_descs(s, ref, rp)) pick.first = heuristic(s, rp, true, pick.second);
    destroy(rp);
    f = s.fixed.emplace(ref, pick).first;
  }
  if (!f->second.first) return nullptr;
  p.algo = f->second.second;
  cublasLtMatmulHeuristicResult_t check{};
  p.ok = cublasLtMatmulAlgoCheck(s.handle, p.op, p.a, p.b, p.d, p.d, &p.algo, &check) ==
             CUBLAS_STATUS_SUCCESS &&
         check.workspaceSize <= kWorkspaceBytes;
  if (!p.ok && !s.warned) {
    s.warned = true;
    std::fprintf(stderr,
                 "deepinfer: batch-invariant: no fixed cuBLASLt algorithm for %lld rows of a "
                 "%lldx%lld product; its GEMV passes are used instead\n",
                 static_cast<long long>(key.n), static_cast<long long>(key.m),
                 static_cast<long long>(key.k));
  }
  return p.ok ? &p : nullptr;
}

bool run(BlasState& s, Exec& e, Plan& p, const void* a, const void* b, void* d, float beta) {
  const float alpha = 1.0f;
  const cublasStatus_t st = cublasLtMatmul(s.handle, p.op, &alpha, a, p.a, b, p.b, &beta, d, p.d, d,
                                           p.d, &p.algo, s.workspace, kWorkspaceBytes, e.stream);
  if (g_verbose && st != CUBLAS_STATUS_SUCCESS)
    std::fprintf(stderr, "deepinfer: cublasLtMatmul: status %d\n", static_cast<int>(st));
  return st == CUBLAS_STATUS_SUCCESS;
}

// x (n rows of K, stride ldx) → e4m3 codes [n, K] and per-1×128 scales [K/128, n], a warp per
// block of 128 (4 values a lane): the rounding of fp8_quant_rows (scale 2^ceil(log2(amax/448)),
// e4m3 nearest-even of x / scale), whose bf16(e4m3 · scale) these codes reproduce exactly.
__global__ void quantize_fp8_kernel(const float* __restrict__ x, int64_t ldx, int64_t n, int64_t K,
                                    uint8_t* __restrict__ q, float* __restrict__ s) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t blocks = K / 128;
  if (warp >= n * blocks) return;  // uniform across the warp
  const int64_t r = warp / blocks, b = warp % blocks;
  const float* src = x + r * ldx + b * 128 + lane * 4;
  float v[4];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = src[i];
    amax = fmaxf(amax, fabsf(v[i]));
  }
  amax = warp_max(amax);
  const float sc = fp8_act_scale(amax);
  uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // round_e4m3 is the reference rounding; the conversion of its (representable) result is exact.
    const __nv_fp8_storage_t c =
        __nv_cvt_float_to_fp8(round_e4m3(v[i] / sc), __NV_SATFINITE, __NV_E4M3);
    packed |= static_cast<uint32_t>(c) << (8 * i);
  }
  reinterpret_cast<uint32_t*>(q + r * K + b * 128)[lane] = packed;
  if (lane == 0) s[b * n + r] = sc;
}

constexpr int kProbeCols = 64;

// Once per FP8 plan, outside graph capture: 2 rows × 64 columns spread over the outputs of its
// first product recomputed from the same e4m3 codes and scales in fp32 (the reference body's
// sum, then bf16). An algorithm that reads the block scales otherwise than laid out here is
// dropped (the caller's kernels take the product), not trusted.
bool probe_ok(BlasState& s, Exec& e, const uint8_t* q, const float* xs, int64_t n,
              const DevWeight& w, const float* y, int64_t ldy) {
  constexpr int kProbes = 2 * kProbeCols;
  if (!s.probe && cudaMalloc(&s.probe, 2 * kProbes * sizeof(float)) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  float* ref = s.probe;
  float* got = s.probe + kProbes;
  const int64_t M = w.out, K = w.in;
  const DevWeight wv = w;
  e.each(kProbes, [=] DI_HD(int64_t i) {
    const int64_t r = i < kProbeCols ? 0 : n - 1;
    const int64_t o = (i % kProbeCols) * (M - 1) / (kProbeCols - 1);
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k)
      acc += e4m3_to_float(q[r * K + k]) * xs[(k / 128) * n + r] * wv.at(o, k);
    ref[i] = bf16r(acc);
    got[i] = y[r * ldy + o];
  });
  float h[2 * kProbes];
  e.to_host(h, s.probe, sizeof h);
  if (cudaStreamSynchronize(e.stream) != cudaSuccess) return false;
  float diff = 0.0f, mag = 0.0f;
  for (int i = 0; i < kProbes; ++i) {
    diff = fmaxf(diff, fabsf(h[i] - h[kProbes + i]));
    mag = fmaxf(mag, fabsf(h[i]));
  }
  const bool ok = diff <= 1e-2f * mag;  // bf16 outputs: a last-bit difference is ~0.4 %
  if (!ok || g_verbose)
    std::fprintf(stderr,
                 "deepinfer: cuBLASLt FP8 %lldx%lld, %lld rows: check max diff %.3g of %.3g%s\n",
                 static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(n),
                 diff, mag, ok ? "" : ": algorithm dropped");
  return ok;
}

bool fp8_eligible(const DevWeight& w, const float* y, int64_t ldy, bool official) {
  return official && w.format == DevFormat::FP8 && w.quantize_input && w.block_out == 128 &&
         w.block_in == 128 && w.in % 128 == 0 && w.row0 % 128 == 0 && w.stride % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && ldy % 4 == 0 &&
         reinterpret_cast<uintptr_t>(y) % 16 == 0;
}

bool bf16_eligible(const DevWeight& w, const float* y, int64_t ldy) {
  return w.format == DevFormat::BF16 && w.in % 8 == 0 && w.stride % 8 == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && ldy % 4 == 0 &&
         reinterpret_cast<uintptr_t>(y) % 16 == 0;
}

// The weight's block scales as fp32 in cuBLASLt's layout, converted once per weight view.
const float* weight_scales(BlasState& s, Exec& e, const DevWeight& w, bool in_capture) {
  const auto key = std::make_tuple(w.scale, w.row0, w.out);
  auto it = s.weight_scales.find(key);
  if (it != s.weight_scales.end()) return it->second;
  if (in_capture) return nullptr;  // the conversion must run before any graph replays it
  const int64_t mb = (w.out + 127) / 128, kb = w.in / 128, ld = (kb + 3) / 4 * 4;
  float* dst = nullptr;
  if (cudaMalloc(&dst, static_cast<size_t>(mb * ld) * sizeof(float)) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  const DevWeight wv = w;
  const int64_t srow0 = w.row0 / 128;
  e.each(mb * ld, [=] DI_HD(int64_t i) {
    const int64_t ob = i / ld, b = i % ld;
    dst[i] = b < kb ? wv.scale_at(srow0 + ob, b) : 0.0f;
  });
  s.weight_scales.emplace(key, dst);
  return dst;
}

bool fp8_linear(BlasState& s, Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w,
                float* y, int64_t ldy, bool in_capture) {
  const int64_t K = w.in, M = w.out;
  PlanKey key{static_cast<int>(Kind::Fp8), M, n, K, w.stride, ldy, false, g_invariant};
  Plan* p = plan(s, key);
  bool d_bf16 = false;
  if (!p) {  // no fp32-output algorithm: bf16 D (the same rounding as bf16r), widened after
    key.d_bf16 = true;
    key.ldd = M;
    p = plan(s, key);
    d_bf16 = true;
  }
  if (!p) return false;
  const float* wscale = weight_scales(s, e, w, in_capture);
  if (!wscale) return false;
  if (!reserve(s, s.act, s.act_bytes, static_cast<size_t>(n * K), kMinScratchBytes, in_capture) ||
      !reserve(s, s.act_scales, s.scale_bytes, static_cast<size_t>(n * (K / 128)) * sizeof(float),
               kMinScaleBytes, in_capture) ||
      (d_bf16 && !reserve(s, s.out16, s.out16_bytes, static_cast<size_t>(n * M) * 2,
                          kMinScratchBytes, in_capture)))
    return false;
  auto* q = static_cast<uint8_t*>(s.act);
  const int64_t threads = n * (K / 128) * 32;
  constexpr int kThreads = 256;
  quantize_fp8_kernel<<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0,
                        e.stream>>>(x, ldx, n, K, q, static_cast<float*>(s.act_scales));
  e.note(cudaGetLastError());
  const void* as = wscale;
  const void* bs = s.act_scales;
  cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &as, sizeof as);
  cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bs, sizeof bs);
  const uint8_t* a = w.data + w.row0 * w.stride;
  if (!run(s, e, *p, a, q, d_bf16 ? s.out16 : static_cast<void*>(y), 0.0f)) return false;
  if (d_bf16) {
    const auto* h = static_cast<const uint16_t*>(s.out16);
    e.each(n * M, [=] DI_HD(int64_t i) {
      const int64_t r = i / M, o = i % M;
      y[r * ldy + o] = bf16_bits_to_float(h[i]);
    });
  } else {
    e.each(n * M, [=] DI_HD(int64_t i) {
      float* v = y + (i / M) * ldy + i % M;
      *v = bf16r(*v);
    });
  }
  if (!p->checked && !in_capture) {
    p->checked = true;
    p->ok = probe_ok(s, e, q, static_cast<const float*>(s.act_scales), n, w, y, ldy);
    return p->ok;
  }
  return true;
}

bool bf16_linear(BlasState& s, Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w,
                 float* y, int64_t ldy, bool in_capture) {
  const int64_t K = w.in, M = w.out;
  Plan* p =
      plan(s, PlanKey{static_cast<int>(Kind::Bf16), M, n, K, w.stride, ldy, false, g_invariant});
  if (!p) return false;
  if (!reserve(s, s.act, s.act_bytes, static_cast<size_t>(n * K) * 4, kMinScratchBytes, in_capture))
    return false;
  // x = hi + lo with both halves bf16: 16 of fp32's 24 significand bits, the products of each
  // exact in the fp32 accumulation.
  auto* hi = static_cast<uint16_t*>(s.act);
  uint16_t* lo = hi + n * K;
  if (K % 4 == 0 && ldx % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    const int64_t per_row = K / 4;  // four values a thread, one float4 load
    e.each(n * per_row, [=] DI_HD(int64_t i) {
      const int64_t r = i / per_row, k = i % per_row * 4;
      const float4 v = *reinterpret_cast<const float4*>(x + r * ldx + k);
      const float h[4] = {bf16r(v.x), bf16r(v.y), bf16r(v.z), bf16r(v.w)};
      const float l[4] = {bf16r(v.x - h[0]), bf16r(v.y - h[1]), bf16r(v.z - h[2]),
                          bf16r(v.w - h[3])};
      *reinterpret_cast<uint2*>(hi + r * K + k) =
          uint2{(f2u(h[0]) >> 16) | (f2u(h[1]) & 0xffff0000u),
                (f2u(h[2]) >> 16) | (f2u(h[3]) & 0xffff0000u)};
      *reinterpret_cast<uint2*>(lo + r * K + k) =
          uint2{(f2u(l[0]) >> 16) | (f2u(l[1]) & 0xffff0000u),
                (f2u(l[2]) >> 16) | (f2u(l[3]) & 0xffff0000u)};
    });
  } else {
    e.each(n * K, [=] DI_HD(int64_t i) {
      const float v = x[(i / K) * ldx + i % K];
      const float h = bf16r(v);
      hi[i] = static_cast<uint16_t>(f2u(h) >> 16);
      lo[i] = static_cast<uint16_t>(f2u(bf16r(v - h)) >> 16);
    });
  }
  const void* a = reinterpret_cast<const uint16_t*>(w.data) + w.row0 * w.stride;
  // Outside the batch-invariant mode (whose algorithm is fixed per shape) both halves in one
  // product into scratch, then y = its hi rows + its lo rows: the same fp32 addition as the
  // second product's beta = 1 does.
  const size_t stacked_bytes = static_cast<size_t>(2 * n * M) * sizeof(float);
  if (g_stack_halves && !g_invariant && n <= kStackedMaxRows && stacked_bytes <= kStackedMaxBytes) {
    Plan* p2 =
        plan(s, PlanKey{static_cast<int>(Kind::Bf16), M, 2 * n, K, w.stride, M, false, false});
    if (p2 && reserve(s, s.stacked, s.stacked_bytes, stacked_bytes, 0, in_capture) &&
        run(s, e, *p2, a, hi, s.stacked, 0.0f)) {
      const float* d = static_cast<const float*>(s.stacked);
      e.each(n * M, [=] DI_HD(int64_t i) {
        const int64_t r = i / M, o = i % M;
        y[r * ldy + o] = d[i] + d[n * M + i];
      });
      return true;
    }
  }
  return run(s, e, *p, a, hi, y, 0.0f) && run(s, e, *p, a, lo, y, 1.0f);
}

// The weight view as bf16 bits [out, in], row-major: eight FP8 codes a thread (one block scale)
// where the view allows, else one element a thread through at() (FP4, odd shapes).
void dequantize_bf16(Exec& e, const DevWeight& w, uint16_t* dst) {
  const DevWeight wv = w;
  const int64_t K = w.in;
  const bool vec8 = w.format == DevFormat::FP8 && K % 8 == 0 && w.block_in % 8 == 0 &&
                    w.stride % 8 == 0 && reinterpret_cast<uintptr_t>(w.data) % 8 == 0;
  if (vec8) {
    const int64_t per_row = K / 8;
    e.each(w.out * per_row, [=] DI_HD(int64_t i) {
      const int64_t o = i / per_row, k = i % per_row * 8, r = o + wv.row0;
      const uint2 codes = *reinterpret_cast<const uint2*>(wv.data + r * wv.stride + k);
      const float sc = wv.scale_at(r / wv.block_out, k / wv.block_in);
      uint32_t packed[4];
      for (int j = 0; j < 4; ++j) {
        const uint32_t word = j < 2 ? codes.x : codes.y;
        const int sh = 16 * (j % 2);
        const float a = e4m3_to_float(static_cast<uint8_t>(word >> sh)) * sc;
        const float b = e4m3_to_float(static_cast<uint8_t>(word >> (sh + 8))) * sc;
        packed[j] = (f2u(bf16r(a)) >> 16) | (f2u(bf16r(b)) & 0xffff0000u);
      }
      *reinterpret_cast<uint4*>(dst + o * K + k) =
          uint4{packed[0], packed[1], packed[2], packed[3]};
    });
    return;
  }
  e.each(w.out * K, [=] DI_HD(int64_t i) {
    dst[i] = static_cast<uint16_t>(f2u(bf16r(wv.at(i / K, i % K))) >> 16);
  });
}

// x (n rows of K, stride ldx) rounded to bf16 bits [n, K]: four values a thread where aligned.
void round_rows_bf16(Exec& e, const float* x, int64_t ldx, int64_t n, int64_t K, uint16_t* dst) {
  if (K % 4 == 0 && ldx % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    const int64_t per_row = K / 4;
    e.each(n * per_row, [=] DI_HD(int64_t i) {
      const int64_t r = i / per_row, k = i % per_row * 4;
      const float4 v = *reinterpret_cast<const float4*>(x + r * ldx + k);
      const uint2 packed{(f2u(bf16r(v.x)) >> 16) | (f2u(bf16r(v.y)) & 0xffff0000u),
                         (f2u(bf16r(v.z)) >> 16) | (f2u(bf16r(v.w)) & 0xffff0000u)};
      *reinterpret_cast<uint2*>(dst + r * K + k) = packed;
    });
    return;
  }
  e.each(n * K, [=] DI_HD(int64_t i) {
    dst[i] = static_cast<uint16_t>(f2u(bf16r(x[(i / K) * ldx + i % K])) >> 16);
  });
}

// The bf16 weight view for a launch: the kept copy (made on first use, outside capture), or
// dequantized into the scratch now.
const uint16_t* bf16_view(BlasState& s, Exec& e, const DevWeight& w, LtDequant mode,
                          bool in_capture) {
  const size_t bytes = static_cast<size_t>(w.out * w.in) * 2;
  if (mode == LtDequant::Kept) {
    const auto key = std::make_tuple(w.data, w.row0, w.out);
    auto it = s.weight_copies.find(key);
    if (it != s.weight_copies.end()) return it->second;
    if (in_capture) return nullptr;
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    auto* dst = static_cast<uint16_t*>(p);
    dequantize_bf16(e, w, dst);
    s.weight_copies.emplace(key, dst);
    return dst;
  }
  if (!reserve(s, s.wdeq, s.wdeq_bytes, bytes, kMinScratchBytes, in_capture)) return nullptr;
  auto* dst = static_cast<uint16_t*>(s.wdeq);
  dequantize_bf16(e, w, dst);
  return dst;
}
}  // namespace

void set_lt_gemm(bool on) { g_lt = on; }
bool lt_gemm() { return g_lt; }
void set_batch_invariant(bool on) { g_invariant = on; }
bool batch_invariant() { return g_invariant; }

LtDequant lt_dequant() { return g_dequant; }

bool lt_dequant_linear(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w,
                       float* y, int64_t ldy, LtDequant mode) {
  if (e.emulate || n <= 0 || mode == LtDequant::Off || !w.quantized() || w.in % 8 != 0 ||
      ldy % 4 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0)
    return false;
  const bool in_capture = capturing(e);
  BlasState* s = state(e, in_capture);
  if (!s) return false;
  const int64_t K = w.in, M = w.out;
  Plan* p = plan(*s, PlanKey{static_cast<int>(Kind::Bf16), M, n, K, K, ldy, false, false});
  if (!p || !reserve(*s, s->act, s->act_bytes, static_cast<size_t>(n * K) * 2, kMinScratchBytes,
                     in_capture))
    return false;
  const uint16_t* a = bf16_view(*s, e, w, mode, in_capture);
  if (!a) return false;
  auto* b = static_cast<uint16_t*>(s->act);
  round_rows_bf16(e, x, ldx, n, K, b);
  if (!run(*s, e, *p, a, b, y, 0.0f)) return false;
  e.each(n * M, [=] DI_HD(int64_t i) {
    float* v = y + (i / M) * ldy + i % M;
    *v = bf16r(*v);
  });
  return true;
}

bool lt_linear(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
               int64_t ldy, bool official) {
  if (e.emulate || n <= 0) return false;
  const bool fp8 = fp8_eligible(w, y, ldy, official);
  if (!fp8 && !bf16_eligible(w, y, ldy)) return false;
  const bool in_capture = capturing(e);
  BlasState* s = state(e, in_capture);
  if (!s) return false;
  return fp8 ? fp8_linear(*s, e, x, ldx, n, w, y, ldy, in_capture)
             : bf16_linear(*s, e, x, ldx, n, w, y, ldy, in_capture);
}

}  // namespace deepinfer::cuda
