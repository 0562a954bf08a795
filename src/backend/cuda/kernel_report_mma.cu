// Device check of the tensor-core FP8 GEMV (gemv_mma.cuh) on the V4-Flash slice's decode shapes
// (wq_b, wo_b, the shared expert's w1 + w3 as one launch and w2, wo_a's eight groups as one
// launch) at 1, 3 and 8 rows against the reference body (fp32 outputs, ≤ 1e-4 of the largest),
// and its time with the weights cold in L2 at each K split (and in the other FP8 lane layout,
// set_fp8_full_sectors) beside the CUDA-core kernels', the bulk-copy ring against the register
// ring bitwise; and the
// one-token routed experts (FP4 and FP8, V4-Flash sizes; the K-split launches, SwiGLU folded into
// w2 or not) against the reference body and the grouped path's outputs, with every
// path's times.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_group.cuh"
#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_launch.cuh"
#include "backend/cuda/kernel_report_matrix.cuh"
#include "backend/cuda/kernel_report_measure.cuh"
#include "backend/cuda/moe_grouped.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {
namespace {

constexpr double kTol = 1e-4;

// The bytes of up to 12 weight regions (128-row tiles of rows × row_bytes each), streamed with no
// products: each lane in the tensor-core GEMV's order (32 bytes of rows g and g + 8 of its warp's
// 16 per 128-byte K step) or the block's tile linearly (16 KB a step); 3 steps in flight a warp
// either way. Against the GEMV's own time it tells the products' cost from the access order's.
struct StreamRegions {
  const uint8_t* base[12];
  int count, tiles;  // tiles per region
  int64_t row_bytes;
};

template <bool kLinear>
__global__ void __launch_bounds__(256, 2)
    stream_probe_kernel(const __grid_constant__ StreamRegions R, uint32_t* sink) {
  constexpr int kStages = 4;
  const int region = static_cast<int>(blockIdx.x) / R.tiles;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x % R.tiles) * 128;
  const uint8_t* tile = R.base[region] + t0 * R.row_bytes;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int steps = static_cast<int>(R.row_bytes / 128);
  const uint8_t* pa = tile + (warp * 16 + g) * R.row_bytes + t * 32;
  const uint8_t* pb = pa + 8 * R.row_bytes;
  auto addr = [&](int kb, int u) {
    if constexpr (kLinear)
      return tile + (static_cast<int64_t>(kb) * 1024 + u * 256 + threadIdx.x) * 16;
    return (u < 2 ? pa : pb) + kb * 128 + (u & 1) * 16;
  };
  uint4 ring[kStages][4];
  auto issue = [&](int kb, uint4* slot) {
    if (kb < steps) {
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        uint4 v;
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(addr(kb, u)));
        slot[u] = v;
      }
    }
  };
  uint32_t acc = 0;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s, ring[s]);
  for (int kb0 = 0; kb0 < steps; kb0 += kStages) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      issue(kb0 + s + kStages - 1, ring[(s + kStages - 1) % kStages]);
      if (kb0 + s < steps) {
#pragma unroll
        for (int u = 0; u < 4; ++u)
          acc ^= ring[s][u].x ^ ring[s][u].y ^ ring[s][u].z ^ ring[s][u].w;
      }
    }
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;  // keeps the loads; (almost) never taken
}

struct Product {
  const char* name;
  int jobs;
  int64_t out, in;
  bool own_x;   // each job its own slice of the input row (wo_a), else one shared input
  bool fp8_in;  // inputs FP8-quantized per 1×128 (else bf16-rounded, as wo_a's)
};

// One token's K = 6 routed experts of E = 16 (V4-Flash sizes: d 4096, inter 2048): the w1 + w3
// launch and the w2 launch against the reference body per slot (bf16 outputs: ≤ 1e-2), the whole
// routed sublayer (w1 + w3, SwiGLU, FP8, w2) against the grouped CUDA-core path, and both paths'
// times with the slots cycling over the experts (≥ 200 MB between two reads of one).
void expert_checks(Exec& e, DevFormat f, std::mt19937& rng, std::vector<KernelCheck>& out) {
  constexpr int E = 16, K = 6;
  constexpr int64_t d = 4096, inter = 2048;
  std::vector<Matrix> m1, m2, m3;
  std::vector<DevWeight> w1, w2, w3;
  for (int i = 0; i < E; ++i) {
    m1.push_back(random_matrix(e, f, inter, d, rng));
    m3.push_back(random_matrix(e, f, inter, d, rng));
    m2.push_back(random_matrix(e, f, d, inter, rng));
    w1.push_back(m1.back().w), w2.push_back(m2.back().w), w3.push_back(m3.back().w);
  }
  const auto upload = [&](const std::vector<DevWeight>& ws) {
    DeviceArray<uint8_t> a;
    a.upload(e, reinterpret_cast<const uint8_t*>(ws.data()), ws.size() * sizeof(DevWeight));
    return a;
  };
  DeviceArray<uint8_t> d1 = upload(w1), d2 = upload(w2), d3 = upload(w3);
  RoutedExperts re;
  re.r1 = reinterpret_cast<const DevWeight*>(d1.ptr);
  re.r2 = reinterpret_cast<const DevWeight*>(d2.ptr);
  re.r3 = reinterpret_cast<const DevWeight*>(d3.ptr);
  re.f1 = re.f2 = re.f3 = f;
  re.quantized = true;
  // Slot sets cycling over the experts: set c is experts 6c … 6c + 5 (mod E).
  constexpr int kSets = 8;
  std::vector<int32_t> hidx(static_cast<size_t>(kSets * K));
  for (int c = 0; c < kSets; ++c)
    for (int k = 0; k < K; ++k) hidx[static_cast<size_t>(c * K + k)] = (c * K + k * 5) % E;
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> hx(d), hw(K);
  for (auto& v : hx) v = gauss(rng);
  for (auto& v : hw) v = 0.1f + 0.2f * std::fabs(gauss(rng));
  DeviceArray<int32_t> idx;
  idx.upload(e, hidx);
  DeviceArray<float> x, wts, h1, h3, y, y_old, xq, r1, r3, r2;
  x.upload(e, hx);
  wts.upload(e, hw);
  fp8_quant_rows(e, x.ptr, 1, d, 128);
  for (auto* a : {&h1, &h3, &r1, &r3, &xq}) a->allocate(e, static_cast<size_t>(K * inter));
  for (auto* a : {&y, &y_old, &r2}) a->allocate(e, static_cast<size_t>(K * d));
  ExpertPlanBuffers pb;
  pb.allocate(e, K, E);
  const char* fname = f == DevFormat::FP4 ? "FP4" : "FP8";
  const auto line = [&](const std::string& what, double rel, double tol) {
    KernelCheck kc;
    kc.tolerance = tol;
    kc.rel_error = e.sync().ok() ? rel : 1.0;
    char buf[320];
    std::snprintf(buf, sizeof buf, "mma experts %s, 1 token: %s, rel.err %.2e", fname, what.c_str(),
                  kc.rel_error);
    kc.line = buf;
    out.push_back(kc);
  };
  // The products alone against the reference body, slot by slot (set 0); w2's inputs from the
  // first.
  const bool ok =
      experts_mma_supported(w1[0], x.ptr, d) && experts_mma_supported(w2[0], h1.ptr, inter);
  experts_mma(e, {{re.r1, re.r3}, {h1.ptr, h3.ptr}, 2, f, inter, d}, idx.ptr, K, K, x.ptr, d, false,
              inter);
  e.note(cudaMemcpyAsync(xq.ptr, h1.ptr, h1.bytes(), cudaMemcpyDeviceToDevice, e.stream));
  fp8_quant_rows(e, xq.ptr, K, inter, 128);  // bf16-exact FP8 inputs for w2
  const auto products = [&] {
    experts_mma(e, {{re.r1, re.r3}, {h1.ptr, h3.ptr}, 2, f, inter, d}, idx.ptr, K, K, x.ptr, d,
                false, inter);
    experts_mma(e, {{re.r2, nullptr}, {y.ptr, nullptr}, 1, f, d, inter}, idx.ptr, K, K, xq.ptr,
                inter, true, d);
  };
  const bool fast0 = fast_kernels();
  set_fast_kernels(false);
  for (int k = 0; k < K; ++k) {
    const int ex = hidx[static_cast<size_t>(k)];
    // The inputs are FP8-quantized already (xq_ready: no scratch needed).
    linear(e, x.ptr, d, 1, w1[static_cast<size_t>(ex)], r1.ptr + k * inter, inter, true, nullptr,
           x.ptr);
    linear(e, x.ptr, d, 1, w3[static_cast<size_t>(ex)], r3.ptr + k * inter, inter, true, nullptr,
           x.ptr);
    linear(e, xq.ptr + k * inter, inter, 1, w2[static_cast<size_t>(ex)], r2.ptr + k * d, d, true,
           nullptr, xq.ptr + k * inter);
  }
  set_fast_kernels(fast0);
  const auto host = [&](const DeviceArray<float>& a) {
    std::vector<float> v(a.count);
    e.to_host(v.data(), a.ptr, a.bytes());
    return v;
  };
  const std::vector<float> want1 = host(r1), want3 = host(r3), want2 = host(r2);
  products();
  const double e13 =
      std::max(max_rel_error(want1, host(h1)).rel, max_rel_error(want3, host(h3)).rel);
  line("w1 + w3 launch vs the reference body", ok ? e13 : 1.0, 1e-2);
  line("w2 launch vs the reference body", ok ? max_rel_error(want2, host(y)).rel : 1.0, 1e-2);
  {  // twice: the same bits
    const std::vector<float> a1 = host(h1), a3 = host(h3), a2 = host(y);
    products();
    line("launches twice: the same bits",
         host(h1) == a1 && host(h3) == a3 && host(y) == a2 ? 0.0 : 1.0, 0.5);
  }
  if (f == DevFormat::FP4) {
    // Block scales outside the f16 decode's range take the exact fp32 steps: rows [0, 64) at
    // u = 100, [64, 128) at u = 150 (whole tiles), and one 32-value block of row 130 at u = 100
    // (a step whose lanes disagree); each range against the reference on its own magnitude.
    Matrix mx = random_matrix(e, f, inter, d, rng);
    std::vector<uint8_t> sc(mx.scale.count);
    e.to_host(sc.data(), mx.scale.ptr, mx.scale.bytes());
    const int64_t ss = mx.w.scale_stride;
    for (int64_t r = 0; r < 128; ++r)
      for (int64_t k = 0; k < ss; ++k) sc[static_cast<size_t>(r * ss + k)] = r < 64 ? 100 : 150;
    sc[static_cast<size_t>(130 * ss + 5)] = 100;
    mx.scale.upload(e, sc);
    mx.w.scale = mx.scale.ptr;
    const DeviceArray<uint8_t> dx = upload({mx.w});
    DeviceArray<int32_t> idx0;
    idx0.upload(e, std::vector<int32_t>{0});
    DeviceArray<float> hx_out, rx;
    hx_out.allocate(e, static_cast<size_t>(inter));
    rx.allocate(e, static_cast<size_t>(inter));
    experts_mma(e,
                {{reinterpret_cast<const DevWeight*>(dx.ptr), nullptr},
                 {hx_out.ptr, nullptr},
                 1,
                 f,
                 inter,
                 d},
                idx0.ptr, 1, 1, x.ptr, d, false, inter);
    const bool fast_was = fast_kernels();
    set_fast_kernels(false);
    linear(e, x.ptr, d, 1, mx.w, rx.ptr, inter, true, nullptr, x.ptr);
    set_fast_kernels(fast_was);
    std::vector<float> want(static_cast<size_t>(inter)), got(want.size());
    e.to_host(want.data(), rx.ptr, rx.bytes());
    e.to_host(got.data(), hx_out.ptr, hx_out.bytes());
    double worst = 0;
    for (const auto& [lo, hi] : {std::pair{0, 64}, std::pair{64, 128}, std::pair{128, 2048}}) {
      const std::vector<float> w_(want.begin() + lo, want.begin() + hi);
      const std::vector<float> g_(got.begin() + lo, got.begin() + hi);
      worst = std::max(worst, max_rel_error(w_, g_).rel);
    }
    line("w1 launch, block scales 2^-27 / 2^23 (exact steps), vs the reference body", worst, 1e-2);
  }
  // The routed sublayer through routed_grouped: with the host shapes (one-token path) or without
  // (the grouped CUDA-core kernels).
  int set = 0;
  const auto sublayer = [&](bool mma, DeviceArray<float>& dst) {
    re.h1 = mma ? &w1[0] : nullptr;
    re.h2 = mma ? &w2[0] : nullptr;
    re.h3 = mma ? &w3[0] : nullptr;
    routed_grouped(e, pb.plan(), re, x.ptr, 1, E, K, d, inter, 10.0f, wts.ptr, true, h1.ptr, h3.ptr,
                   dst.ptr, xq.ptr, idx.ptr + set * K, x.ptr);
  };
  sublayer(false, y_old);
  sublayer(true, y);
  line("routed sublayer vs the grouped kernels", max_rel_error(host(y_old), host(y)).rel, 1e-2);
  // w2 with its SwiGLU folded in: the bits of the separate launches.
  const bool fold0 = experts_swiglu_fold();
  set_experts_swiglu_fold(false);
  sublayer(true, y);
  const std::vector<float> unfolded = host(y);
  set_experts_swiglu_fold(true);
  sublayer(true, y);
  line("routed sublayer, SwiGLU folded into w2: the same bits as its own launch",
       host(y) == unfolded ? 0.0 : 1.0, 0.5);
  double bytes = 0;
  for (int k = 0; k < K; ++k) {
    const int ex = hidx[static_cast<size_t>(k)];
    for (const std::vector<Matrix>* ms : {&m1, &m2, &m3}) {
      const Matrix& m = (*ms)[static_cast<size_t>(ex)];
      bytes += static_cast<double>(m.data.bytes() + m.scale.bytes());
    }
  }
  const int split0 = gemv_mma_split();
  for (const int v : {0, 1, 2}) {  // grouped, one-token mma, the same with SwiGLU its own launch
    const bool mma = v > 0;
    set_experts_swiglu_fold(v == 1);
    const double ms = time_ms(e, 40, [&] {
      sublayer(mma, mma ? y : y_old);
      set = (set + 1) % kSets;
    });
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    char what[200];
    std::snprintf(what, sizeof what, "%s %.4f ms, %.0f GB/s of weights (%.1f%% of 4.8 TB/s)",
                  v == 2 ? "one-token mma path, SwiGLU its own launch"
                  : mma  ? "one-token mma path (SwiGLU folded into w2)"
                         : "grouped CUDA-core path",
                  ms, gbs, gbs / 48.0);
    line(what, 0.0, 1e-2);
  }
  set_experts_swiglu_fold(fold0);

  // The w1 + w3 launch and the w2 launch alone, and the same bytes streamed without products.
  const auto slot_bytes = [&](const std::vector<Matrix>& ms, int c) {
    double b = 0;
    for (int k = 0; k < K; ++k) {
      const Matrix& m = ms[static_cast<size_t>(hidx[static_cast<size_t>(c * K + k)])];
      b += static_cast<double>(m.data.bytes() + m.scale.bytes());
    }
    return b;
  };
  const double b13 = slot_bytes(m1, 0) + slot_bytes(m3, 0), b2 = slot_bytes(m2, 0);
  const auto timed_line = [&](const char* what, double b, auto&& f) {
    const double ms = time_ms(e, 40, [&] {
      f();
      set = (set + 1) % kSets;
    });
    const double gbs = b / (ms * 1e-3) / 1e9;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s %.4f ms, %.0f GB/s (%.1f%% of 4.8 TB/s)", what, ms, gbs,
                  gbs / 48.0);
    line(buf, 0.0, 1e-2);
  };
  // The w1 + w3 launch and the w2 launch of index set `at` (scales16 as routed_grouped sets it).
  const auto w13 = [&](int at) {
    ExpertMmaProducts p{{re.r1, re.r3}, {h1.ptr, h3.ptr}, 2, f, inter, d};
    p.scales16 = experts_bulk_supported(w1[0]) && experts_bulk_supported(w3[0]);
    experts_mma(e, p, idx.ptr + at * K, K, K, x.ptr, d, false, inter);
  };
  const auto w2only = [&](int at) {
    ExpertMmaProducts p{{re.r2, nullptr}, {y.ptr, nullptr}, 1, f, d, inter};
    p.scales16 = experts_bulk_supported(w2[0]);
    experts_mma(e, p, idx.ptr + at * K, K, K, xq.ptr, inter, true, d);
  };
  for (const int split : {0, 1}) {
    set_gemv_mma_split(split);
    const std::string how = split == 0 ? " (split auto)" : " (split 1)";
    timed_line(("w1 + w3 launch alone" + how).c_str(), b13, [&] { w13(set); });
    timed_line(("w2 launch alone" + how).c_str(), b2, [&] { w2only(set); });
  }
  set_gemv_mma_split(split0);
  if (f == DevFormat::FP4) {
    // The decode on the integer pipe for one row a lane and for both: the conversions' bits.
    const int decode0 = fp4_int_decode();
    set_fp4_int_decode(0);
    w13(0);
    w2only(0);
    const std::vector<float> conv1 = host(h1), conv3 = host(h3), conv2 = host(y);
    for (const int rows : {1, 2}) {
      set_fp4_int_decode(rows);
      w13(0);
      w2only(0);
      const bool same = host(h1) == conv1 && host(h3) == conv3 && host(y) == conv2;
      char what[120];
      std::snprintf(what, sizeof what, "integer decode of %d row(s) a lane: the conversions' bits",
                    rows);
      line(what, same ? 0.0 : 1.0, 0.5);
      std::snprintf(what, sizeof what, "w1 + w3 launch alone (default path, integer decode %d)",
                    rows);
      timed_line(what, b13, [&] { w13(set); });
      std::snprintf(what, sizeof what, "w2 launch alone (default path, integer decode %d)", rows);
      timed_line(what, b2, [&] { w2only(set); });
    }
    set_fp4_int_decode(decode0);
  }
  {  // The bulk-copy ring (gemv_bulk.cuh): the register ring's bits in both launches; times.
    const bool bulk0 = gemv_mma_bulk();
    set_gemv_mma_bulk(false);
    w13(0);
    w2only(0);
    const std::vector<float> reg1 = host(h1), reg3 = host(h3), reg2 = host(y);
    set_gemv_mma_bulk(true);
    for (auto* a : {&h1, &h3, &y}) e.note(cudaMemsetAsync(a->ptr, 0xFF, a->bytes(), e.stream));
    w13(0);
    w2only(0);
    line("bulk ring: the register ring's bits",
         host(h1) == reg1 && host(h3) == reg3 && host(y) == reg2 ? 0.0 : 1.0, 0.5);
    timed_line("w1 + w3 launch alone (bulk ring)", b13, [&] { w13(set); });
    timed_line("w2 launch alone (bulk ring)", b2, [&] { w2only(set); });
    set_gemv_mma_bulk(bulk0);
  }
  DeviceArray<uint32_t> sink;
  sink.allocate(e, 1);
  const auto regions = [&](bool w13, int c) {
    StreamRegions R{};
    for (int k = 0; k < K; ++k) {
      const size_t ex = static_cast<size_t>(hidx[static_cast<size_t>(c * K + k)]);
      if (w13) {
        R.base[R.count++] = m1[ex].data.ptr;
        R.base[R.count++] = m3[ex].data.ptr;
      } else {
        R.base[R.count++] = m2[ex].data.ptr;
      }
    }
    const Matrix& m0 = w13 ? m1[0] : m2[0];
    R.tiles = static_cast<int>(m0.w.out / 128);
    R.row_bytes = f == DevFormat::FP4 ? m0.w.stride / 2 : m0.w.stride;
    return R;
  };
  for (const bool w13 : {true, false}) {
    for (const bool linear_order : {false, true}) {
      char what[120];
      std::snprintf(what, sizeof what, "%s bytes streamed, no products, %s", w13 ? "w1 + w3" : "w2",
                    linear_order ? "linear" : "the launch's order");
      timed_line(what, w13 ? b13 : b2, [&] {
        const StreamRegions R = regions(w13, set);
        const auto kernel = linear_order ? stream_probe_kernel<true> : stream_probe_kernel<false>;
        kernel<<<R.count * R.tiles, 256, 0, e.stream>>>(R, sink.ptr);
      });
    }
  }
}

// The device bytes of `a` and `b` (device pointers of `bytes` each) are equal.
bool same_device_bits(Exec& e, const void* a, const void* b, size_t bytes) {
  std::vector<unsigned char> ha(bytes), hb(bytes);
  e.to_host(ha.data(), a, bytes);
  e.to_host(hb.data(), b, bytes);
  return ha == hb;
}

// A bitwise check's line: passes when the launches ran without error, were taken (ok) and gave
// the same bits.
void push_bits_check(Exec& e, bool ok, bool same, const std::string& line,
                     std::vector<KernelCheck>& out) {
  KernelCheck kc;
  kc.tolerance = 0;
  kc.rel_error = e.sync().ok() && ok && same ? 0.0 : 1.0;
  kc.line = line;
  out.push_back(kc);
}

// wo_b's one-row launch with hc_post inside (gemv_row_hc_post) against gemv (linear) and then
// hc_post's launch: y and the hc outputs bitwise.
void hc_post_check(Exec& e, std::mt19937& rng, const DevWeight& w, const float* x,
                   std::vector<KernelCheck>& out) {
  constexpr int kHc = 4;
  const int64_t d = w.out;
  DeviceArray<float> X, post, comb, y, X2, yr, X2r;
  X.upload(e, normal_values(rng, static_cast<size_t>(kHc * d), 1.0f, true));
  post.upload(e, normal_values(rng, kHc, 1.0f, false));
  comb.upload(e, normal_values(rng, kHc * kHc, 1.0f, false));
  for (auto* a : {&y, &yr}) a->allocate(e, static_cast<size_t>(d));
  for (auto* a : {&X2, &X2r}) a->allocate(e, static_cast<size_t>(kHc * d));
  HcParams hp;
  hp.hc = kHc, hp.d = d;
  const HcPostArgs args{X.ptr, post.ptr, comb.ptr, X2.ptr, kHc, d, true};
  const int64_t min_out = gemv_mma_min_out();
  set_gemv_mma_min_out(w.out + 1);  // the row kernels' path, wherever the default puts wo_b
  const bool took = gemv_row_hc_post(e, x, w, y.ptr, true, args);
  linear(e, x, w.in, 1, w, yr.ptr, d, true, nullptr, x);
  set_gemv_mma_min_out(min_out);
  hc_post(e, hp, X.ptr, post.ptr, comb.ptr, yr.ptr, 1, X2r.ptr, true);
  const bool same = same_device_bits(e, y.ptr, yr.ptr, y.bytes()) &&
                    same_device_bits(e, X2.ptr, X2r.ptr, X2.bytes());
  push_bits_check(e, took, same,
                  std::string("row kernel 4096x8192 FP8, 1 row, hc_post in the launch vs gemv "
                              "then hc_post: ") +
                      (!took  ? "not taken"
                       : same ? "the same bits"
                              : "bits differ"),
                  out);
}

// The dense launch (run) on the bulk-copy ring against the register ring, bitwise, at the auto
// split and at 1 and 2 (a cluster), with the bulk ring's time (timed) beside it.
template <class Run, class Timed>
void bulk_check(Exec& e, const char* name, int64_t n, const DeviceArray<float>& y, double bytes,
                Run run, Timed timed, bool ok, std::vector<KernelCheck>& out) {
  const bool bulk0 = gemv_mma_bulk();
  const int split0 = gemv_mma_split();
  for (const int s : {0, 1, 2}) {
    set_gemv_mma_split(s);
    std::vector<float> reg(y.count), got(y.count);
    set_gemv_mma_bulk(false);
    e.note(cudaMemsetAsync(y.ptr, 0xFF, y.bytes(), e.stream));
    run();
    e.to_host(reg.data(), y.ptr, y.bytes());
    set_gemv_mma_bulk(true);
    e.note(cudaMemsetAsync(y.ptr, 0xFF, y.bytes(), e.stream));
    run();
    e.to_host(got.data(), y.ptr, y.bytes());
    const bool same = std::memcmp(reg.data(), got.data(), y.bytes()) == 0;
    const double ms = timed();
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    char line[320];
    std::snprintf(line, sizeof line,
                  "mma %-26s %lld row(s) bulk ring, split %s: %s, %8.4f ms %6.0f GB/s (%5.1f%% of "
                  "4.8 TB/s)",
                  name, static_cast<long long>(n), s == 0 ? "auto" : std::to_string(s).c_str(),
                  same ? "the register ring's bits" : "bits differ", ms, gbs, gbs / 48.0);
    push_bits_check(e, ok, same, line, out);
  }
  set_gemv_mma_bulk(bulk0);
  set_gemv_mma_split(split0);
}

}  // namespace

std::vector<KernelCheck> gemv_mma_kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  Exec e;
  cudaStreamCreate(&e.stream);
  const int split0 = gemv_mma_split();
  std::mt19937 rng(53);
  const std::vector<Product> products = {
      {"wq_b 32768x1024", 1, 32768, 1024, false, true},
      {"wo_b 4096x8192", 1, 4096, 8192, false, true},
      {"shared w1+w3 2x2048x4096", 2, 2048, 4096, false, true},
      {"shared w2 4096x2048", 1, 4096, 2048, false, true},
      {"wo_a group 8x1024x4096", 8, 1024, 4096, true, false},
  };
  for (const Product& p : products) {
    const int nj = p.jobs;
    std::vector<Matrix> ms;
    for (int j = 0; j < nj; ++j) ms.push_back(random_matrix(e, DevFormat::FP8, p.out, p.in, rng));
    double bytes = 0;
    for (const Matrix& m : ms) bytes += static_cast<double>(m.data.bytes() + m.scale.bytes());
    const int64_t xw = p.own_x ? nj * p.in : p.in;  // an input row's width
    const int64_t total_out = nj * p.out;
    constexpr int64_t kRows = 8;
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::vector<float> hx(static_cast<size_t>(kRows * xw));
    for (auto& v : hx) v = p.fp8_in ? gauss(rng) : bf16r(gauss(rng));
    DeviceArray<float> x, y, ref;
    x.upload(e, hx);
    if (p.fp8_in) fp8_quant_rows(e, x.ptr, kRows, xw, 128);
    y.allocate(e, static_cast<size_t>(kRows * total_out));
    ref.allocate(e, static_cast<size_t>(kRows * total_out));
    // Copies of the weights, so that cycling through them reads ≥ 200 MB between two reads of one.
    const int copies = static_cast<int>(std::min(32.0, std::ceil(200e6 / bytes)));
    std::vector<DeviceArray<uint8_t>> clones(static_cast<size_t>((copies - 1) * nj));
    std::vector<std::vector<DevWeight>> views(static_cast<size_t>(copies));
    for (int k = 0; k < copies; ++k) {
      for (int j = 0; j < nj; ++j) {
        DevWeight v = ms[static_cast<size_t>(j)].w;
        if (k > 0) {
          DeviceArray<uint8_t>& c = clones[static_cast<size_t>((k - 1) * nj + j)];
          c.allocate(e, ms[static_cast<size_t>(j)].data.count);
          e.note(cudaMemcpyAsync(c.ptr, v.data, c.bytes(), cudaMemcpyDeviceToDevice, e.stream));
          v.data = c.ptr;
        }
        views[static_cast<size_t>(k)].push_back(v);
      }
    }
    const auto x_of = [&](int j) { return x.ptr + (p.own_x ? j * p.in : 0); };
    // The tensor-core launch (mma) or the CUDA-core kernels it replaces, over copy k.
    const auto run = [&](int k, int64_t n, bool mma) {
      const std::vector<DevWeight>& ws = views[static_cast<size_t>(k)];
      if (mma) {
        MmaGemvJob jobs[kMaxGemvJobs];
        for (int j = 0; j < nj; ++j)
          jobs[j] = {&ws[static_cast<size_t>(j)], x_of(j), xw, y.ptr + j * p.out, total_out, false};
        gemv_mma(e, jobs, nj, n);
      } else if (p.own_x) {
        GemvJob jobs[kMaxGemvJobs];
        for (int j = 0; j < nj; ++j)
          jobs[j] = {&ws[static_cast<size_t>(j)], x_of(j), y.ptr + j * p.out, total_out, false};
        gemv_split_row_group(e, x.ptr, xw, n, jobs, nj);
      } else {
        for (int j = 0; j < nj; ++j)
          linear(e, x_of(j), xw, n, ws[static_cast<size_t>(j)], y.ptr + j * p.out, total_out, false,
                 nullptr);
      }
    };
    const bool fast0 = fast_kernels();
    set_fast_kernels(false);
    for (int j = 0; j < nj; ++j)
      linear(e, x_of(j), xw, kRows, ms[static_cast<size_t>(j)].w, ref.ptr + j * p.out, total_out,
             false, nullptr);
    set_fast_kernels(fast0);
    std::vector<float> want(ref.count), got(y.count);
    e.to_host(want.data(), ref.ptr, ref.bytes());
    for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{8}}) {
      bool ok = true;
      for (int j = 0; j < nj; ++j)
        ok = ok && gemv_mma_supported(ms[static_cast<size_t>(j)].w, n, x_of(j), xw);
      const std::vector<float> want_n(want.begin(), want.begin() + n * total_out);
      const auto check = [&](const std::string& what, bool mma, double ms_call) {
        e.note(cudaMemsetAsync(y.ptr, 0xFF, y.bytes(), e.stream));
        run(0, n, mma);
        e.to_host(got.data(), y.ptr, y.bytes());
        const std::vector<float> got_n(got.begin(), got.begin() + n * total_out);
        const OutputError err = max_rel_error(want_n, got_n);
        KernelCheck kc;
        kc.tolerance = kTol;
        kc.rel_error = e.sync().ok() && ok ? err.rel : 1.0;
        const double gbs = bytes / (ms_call * 1e-3) / 1e9;
        char line[320];
        std::snprintf(line, sizeof line,
                      "mma %-26s %6.1f MB %lld row(s) %-22s %8.4f ms %6.0f GB/s (%5.1f%% of 4.8 "
                      "TB/s), rel.err %.2e",
                      p.name, bytes / 1e6, static_cast<long long>(n), what.c_str(), ms_call, gbs,
                      gbs / 48.0, kc.rel_error);
        kc.line = line;
        out.push_back(kc);
      };
      int next = 0;
      const auto timed = [&](bool mma) {
        return time_ms(e, 2 * copies > 20 ? 2 * copies : 20, [&] {
          run(next, n, mma);
          next = (next + 1) % copies;
        });
      };
      check("CUDA cores", false, timed(false));
      for (const int s : {0, 1, 2, 4, 8}) {
        set_gemv_mma_split(s);
        check(s == 0 ? std::string("mma, split auto") : "mma, split " + std::to_string(s), true,
              timed(true));
      }
      // The output's FP8 copy written by the launch (MmaGemvJob::yq, bf16 outputs as wo_a's)
      // against the same launch without it and fp8_quant_rows_from over its rows: both bitwise.
      for (const int s : {0, 2}) {
        set_gemv_mma_split(s);
        DeviceArray<float> yq, yref, yqref;
        yq.allocate(e, y.count);
        yref.allocate(e, y.count);
        yqref.allocate(e, y.count);
        MmaGemvJob jobs[kMaxGemvJobs];
        for (int j = 0; j < nj; ++j)
          jobs[j] = {&ms[static_cast<size_t>(j)].w,
                     x_of(j),
                     xw,
                     y.ptr + j * p.out,
                     total_out,
                     true,
                     yq.ptr + j * p.out};
        e.note(cudaMemsetAsync(y.ptr, 0xFF, y.bytes(), e.stream));
        e.note(cudaMemsetAsync(yq.ptr, 0xFF, yq.bytes(), e.stream));
        gemv_mma(e, jobs, nj, n);
        for (int j = 0; j < nj; ++j) jobs[j].y = yref.ptr + j * p.out, jobs[j].yq = nullptr;
        gemv_mma(e, jobs, nj, n);
        fp8_quant_rows_from(e, yref.ptr, total_out, n, total_out, 128, yqref.ptr);
        const size_t len = static_cast<size_t>(n * total_out) * sizeof(float);
        const bool same = same_device_bits(e, y.ptr, yref.ptr, len) &&
                          same_device_bits(e, yq.ptr, yqref.ptr, len);
        char line[320];
        std::snprintf(line, sizeof line,
                      "mma %-26s %lld row(s) split %s: the FP8 copy of the output in the launch "
                      "vs fp8_quant_rows_from: %s",
                      p.name, static_cast<long long>(n), s == 0 ? "auto" : "2",
                      same ? "the same bits" : "bits differ");
        push_bits_check(e, ok, same, line, out);
      }
      set_gemv_mma_split(split0);
      if (n == 1 && p.jobs == 1 && p.out == 4096 && p.in == 8192)
        hc_post_check(e, rng, ms[0].w, x.ptr, out);
      const bool sectors0 = fp8_full_sectors();
      set_fp8_full_sectors(!sectors0);
      check(sectors0 ? "mma, auto, half sectors" : "mma, auto, full sectors", true, timed(true));
      set_fp8_full_sectors(sectors0);
      bulk_check(
          e, p.name, n, y, bytes, [&] { run(0, n, true); }, [&] { return timed(true); }, ok, out);
    }
  }
  for (const DevFormat f : {DevFormat::FP4, DevFormat::FP8}) expert_checks(e, f, rng, out);
  if (e.error != cudaSuccess) {
    KernelCheck kc;
    kc.line = std::string("CUDA error in the mma GEMV checks: ") + cudaGetErrorString(e.error);
    kc.rel_error = 1;
    out.push_back(kc);
  }
  cudaStreamDestroy(e.stream);
  return out;
}

}  // namespace deepinfer::cuda
