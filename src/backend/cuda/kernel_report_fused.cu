// Device self-check of the fused per-row kernels of the decode step against what they replace:
// the float4 RMSNorm and sums of squares against the reference bodies (fp32 rounding), the fused
// MoE routing against its reference launches (bitwise), and the mHC pre + norm, KV row,
// SwiGLU + FP8 copy, inverse RoPE + rounding and combine + mHC post kernels against the separate
// launches (bitwise). Outputs are NaN-poisoned before checked runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_ctx.cuh"
#include "backend/cuda/moe.cuh"

namespace deepinfer::cuda {
namespace {

// One line for a fused kernel against the separate launches it replaces: every value the same
// bits (fused: it ran), no NaN.
void same_bits(Ctx& c, std::vector<KernelCheck>& out, const std::string& what,
               const std::vector<float>& ref, const std::vector<float>& got, bool fused,
               double ms_fused, double ms_separate) {
  const int64_t differ = c.e.sync().ok() && fused && nans(ref) == 0 && ref.size() == got.size()
                             ? differing(ref, got)
                             : -1;
  char line[320];
  std::snprintf(line, sizeof line,
                "%-52s fused %8.4f ms  separate %8.4f ms  %lld of %zu values differ", what.c_str(),
                ms_fused, ms_separate, static_cast<long long>(differ), ref.size());
  KernelCheck kc;
  kc.line = line;
  kc.rel_error = differ != 0 ? 1.0 : 0.0;
  kc.tolerance = 0;
  out.push_back(kc);
}

// RMSNorm and the mHC sums of squares: the block-per-row kernels sum in another order than the
// reference body's one thread, so they are held to fp32 rounding (largest |fast − ref| over the
// largest |ref| ≤ 2e-5: the serial sum's own rounding is ~√n · 2⁻²⁴ ≈ 8e-6 at 16,384 values;
// measured ≤ 3.9e-6 on the H200), every value written; at the V4 widths (q / kv / hidden / mHC
// rows) and one not a multiple of 4 (the scalar kernel).
void norm_checks(Ctx& c, std::vector<KernelCheck>& out) {
  constexpr double kBar = 2e-5;
  for (const int64_t dim :
       {int64_t{512}, int64_t{1024}, int64_t{4096}, int64_t{16384}, int64_t{4098}}) {
    for (const int64_t n : {int64_t{1}, int64_t{64}}) {
      DeviceArray<float> x, w, y, ss;
      x.upload(c.e, normal(c, static_cast<size_t>(n * dim), 2.0f));
      w.upload(c.e, normal(c, static_cast<size_t>(dim), 1.0f));
      y.allocate(c.e, static_cast<size_t>(n * dim));
      ss.allocate(c.e, static_cast<size_t>(n));
      const auto run = [&] {
        rms_norm(c.e, x.ptr, n, dim, w.ptr, 1e-6f, y.ptr, true, false);
        if (!c.e.emulate) sum_squares_fast(c.e, x.ptr, n, dim, ss.ptr);
      };
      const auto outputs = [&] {
        std::vector<float> v = to_host(c, y), t = to_host(c, ss);
        v.insert(v.end(), t.begin(), t.end());
        return v;
      };
      set_fast_kernels(false);
      poison(c, y);
      rms_norm(c.e, x.ptr, n, dim, w.ptr, 1e-6f, y.ptr, true, false);
      std::vector<float> ref = to_host(c, y);
      {  // the reference's sum of squares: a host loop over the same values
        const std::vector<float> hx = to_host(c, x);
        for (int64_t r = 0; r < n; ++r) {
          float t = 0.0f;
          for (int64_t i = 0; i < dim; ++i) t += hx[r * dim + i] * hx[r * dim + i];
          ref.push_back(t);
        }
      }
      const double ms_ref = time_ms(c, 3, run);
      set_fast_kernels(true);
      poison(c, y);
      poison(c, ss);
      run();
      const std::vector<float> fast = outputs();
      double worst = 0, top = 0;
      bool ok = c.e.sync().ok() && nans(fast) == 0 && fast.size() == ref.size();
      for (size_t i = 0; ok && i < ref.size(); ++i) {
        const bool is_ss = i >= static_cast<size_t>(n * dim);
        const double scale = is_ss ? std::fabs(ref[i]) : 1.0;
        worst = std::max(worst, std::fabs(static_cast<double>(fast[i]) - ref[i]) / scale);
        if (!is_ss) top = std::max(top, static_cast<double>(std::fabs(ref[i])));
      }
      const double rel = ok ? worst / std::max(top, 1e-30) : 1.0;
      const double ms_fast = time_ms(c, 20, run);
      // The norm with its FP8 copy in one launch: y the norm's bits, yq those of the separate
      // quantization of that y.
      int64_t quant_differ = 0;
      double ms_quant = 0;
      if (dim % 128 == 0) {
        DeviceArray<float> yq, yq2;
        yq.allocate(c.e, static_cast<size_t>(n * dim));
        yq2.allocate(c.e, static_cast<size_t>(n * dim));
        poison(c, y);
        poison(c, yq);
        rms_norm_quant(c.e, x.ptr, n, dim, w.ptr, 1e-6f, y.ptr, true, true, yq.ptr);
        fp8_quant_rows_from(c.e, y.ptr, dim, n, dim, 128, yq2.ptr);
        const std::vector<float> a = to_host(c, yq), b = to_host(c, yq2);
        quant_differ = c.e.sync().ok() && nans(a) == 0 ? differing(a, b) : -1;
        ms_quant = time_ms(c, 20, [&] {
          rms_norm_quant(c.e, x.ptr, n, dim, w.ptr, 1e-6f, y.ptr, true, true, yq.ptr);
        });
      }
      char line[360];
      std::snprintf(line, sizeof line,
                    "rms norm + sum of squares, %5lld wide, %2lld row(s)    fast %8.4f ms  "
                    "reference %8.4f ms  rel %.2g (bar %.0g); with FP8 copy %8.4f ms, %lld differ",
                    static_cast<long long>(dim), static_cast<long long>(n), ms_fast, ms_ref, rel,
                    kBar, ms_quant, static_cast<long long>(quant_differ));
      KernelCheck kc;
      kc.line = line;
      kc.rel_error = quant_differ != 0 ? 1.0 : rel;
      kc.tolerance = kBar;
      out.push_back(kc);
    }
  }
}

// The MoE routing (moe_fast.cu) against the reference's three launches, bitwise: V4-Flash's
// 256 experts top-6, score + bias ranked (repeated large logits on the softplus cut-off) and
// hashed.
void route_checks(Ctx& c, std::vector<KernelCheck>& out) {
  constexpr int E = 256, K = 6;
  for (const bool hash : {false, true}) {
    for (const int64_t n : {int64_t{1}, int64_t{64}}) {
      std::vector<float> hz = normal(c, static_cast<size_t>(n * E), 2.0f);
      for (size_t i = 0; i < hz.size(); i += 17) hz[i] = 25.0f + static_cast<float>(i % 3);
      std::vector<float> hb = normal(c, E, 0.5f);
      std::vector<int32_t> hid(static_cast<size_t>(n)), htab(static_cast<size_t>(50 * K));
      for (size_t i = 0; i < hid.size(); ++i) hid[i] = static_cast<int32_t>((i * 7) % 50);
      for (size_t i = 0; i < htab.size(); ++i) htab[i] = static_cast<int32_t>((i * 37) % E);
      DeviceArray<float> z, bias, w;
      DeviceArray<int32_t> ids, tab, idx;
      z.upload(c.e, hz);
      bias.upload(c.e, hb);
      ids.upload(c.e, hid);
      tab.upload(c.e, htab);
      w.allocate(c.e, static_cast<size_t>(n * K));
      idx.allocate(c.e, static_cast<size_t>(n * K));
      RouteArgs a;
      a.E = E;
      a.K = K;
      a.hash = hash;
      a.tid2eid = tab.ptr;
      a.bias = bias.ptr;
      a.routed_scale = 1.5f;
      check(
          c, out,
          std::string("moe route ") + (hash ? "hash" : "top-6 of 256") + ", " + std::to_string(n) +
              " row(s)",
          [&](bool, bool reset) {
            if (reset) {
              c.e.to_device(z.ptr, hz.data(), z.bytes());
              poison(c, w);
              poison(c, idx);
            }
            moe_route(c.e, a, ids.ptr, n, z.ptr, idx.ptr, w.ptr);
          },
          [&] {
            std::vector<float> v = to_host(c, z), t = to_host(c, w);
            const std::vector<int32_t> i = to_host(c, idx);
            v.insert(v.end(), t.begin(), t.end());
            v.insert(v.end(), i.begin(), i.end());
            return v;
          });
    }
  }
}

// The fused mHC pre + RMSNorm (+ FP8 copy) of mhc_pre_fused.cu against hc_pre, then
// rms_norm_quant, both on the fast kernels: bitwise, at V4-Flash's hc 4 × 4096.
void hc_pre_norm_checks(Ctx& c, std::vector<KernelCheck>& out) {
  constexpr int hc = 4;
  constexpr int64_t d = 4096;
  for (const int64_t n : {int64_t{1}, int64_t{16}}) {
    DeviceArray<float> X, mix, base, scale, w, ss, pre, post, comb, u, xn, xnq;
    X.upload(c.e, normal(c, static_cast<size_t>(n * hc * d), 1.0f));
    mix.upload(c.e, normal(c, static_cast<size_t>(n * (2 + hc) * hc), 40.0f));
    base.upload(c.e, normal(c, static_cast<size_t>((2 + hc) * hc)));
    scale.upload(c.e, normal(c, 3, 0.05f));
    w.upload(c.e, normal(c, static_cast<size_t>(d), 1.0f));
    ss.allocate(c.e, static_cast<size_t>(n));
    pre.allocate(c.e, static_cast<size_t>(n * hc));
    post.allocate(c.e, static_cast<size_t>(n * hc));
    comb.allocate(c.e, static_cast<size_t>(n * hc * hc));
    for (auto* a : {&u, &xn, &xnq}) a->allocate(c.e, static_cast<size_t>(n * d));
    const HcParams p{hc, 20, d, 1e-6f, 1e-6f, base.ptr, scale.ptr};
    const auto outputs = [&] {
      std::vector<float> v;
      for (auto* a : {&pre, &post, &comb, &u, &xn, &xnq}) {
        const std::vector<float> h = to_host(c, *a);
        v.insert(v.end(), h.begin(), h.end());
      }
      return v;
    };
    const auto poison_all = [&] {
      for (auto* a : {&pre, &post, &comb, &u, &xn, &xnq}) poison(c, *a);
    };
    const auto separate = [&] {
      hc_pre(c.e, p, X.ptr, mix.ptr, n, pre.ptr, post.ptr, comb.ptr, u.ptr, ss.ptr);
      rms_norm_quant(c.e, u.ptr, n, d, w.ptr, 1e-6f, xn.ptr, true, true, xnq.ptr);
    };
    bool fused = false;
    const auto together = [&] {
      fused = hc_pre_norm_fused(c.e, p, X.ptr, mix.ptr, n, pre.ptr, post.ptr, comb.ptr, u.ptr,
                                ss.ptr, w.ptr, 1e-6f, xn.ptr, true, true, xnq.ptr);
    };
    poison_all();
    separate();
    const std::vector<float> ref = outputs();
    poison_all();
    together();
    const std::vector<float> got = outputs();
    same_bits(c, out, "mHC pre + RMSNorm + FP8 copy fused, " + std::to_string(n) + " row(s)", ref,
              got, fused, time_ms(c, 20, together), time_ms(c, 20, separate));
  }
}

// The official KV row's norm, RoPE and roundings in one launch (kv_norm_rope_official) against
// the three fast launches, bitwise, at V4-Flash's 512 (64 rotated) for 1 and 16 rows.
void kv_norm_rope_checks(Ctx& c, std::vector<KernelCheck>& out) {
  constexpr int D = 512, R = 64;
  for (const int64_t n : {int64_t{1}, int64_t{16}}) {
    const std::vector<float> hkv = normal(c, static_cast<size_t>(n * D), 2.0f);
    const std::vector<float> hinv = rope_inv_freq(R), hw = normal(c, static_cast<size_t>(D));
    std::vector<int32_t> hpos(static_cast<size_t>(n));
    for (size_t i = 0; i < hpos.size(); ++i) hpos[i] = static_cast<int32_t>(4095 - 53 * i);
    DeviceArray<float> kv, inv, w;
    DeviceArray<int32_t> pos;
    kv.upload(c.e, hkv);
    inv.upload(c.e, hinv);
    w.upload(c.e, hw);
    pos.upload(c.e, hpos);
    const RopeRows rr{inv.ptr, 1.25f, pos.ptr, 1, R / 2};
    bool fused = false;
    const auto separate = [&] {
      rms_norm(c.e, kv.ptr, n, D, w.ptr, 1e-6f, kv.ptr, false, true);
      rope(c.e, kv.ptr, n, 1, D, R / 2, inv.ptr, 1.25f, pos.ptr, false);
      kv_rows_official(c.e, kv.ptr, n, D, R);
    };
    const auto together = [&] {
      fused = kv_norm_rope_official_fast(c.e, kv.ptr, n, D, R, w.ptr, 1e-6f, rr);
    };
    c.e.to_device(kv.ptr, hkv.data(), kv.bytes());
    separate();
    const std::vector<float> ref = to_host(c, kv);
    c.e.to_device(kv.ptr, hkv.data(), kv.bytes());
    together();
    const std::vector<float> got = to_host(c, kv);
    same_bits(c, out, "kv norm + rope + rows official fused, " + std::to_string(n) + " row(s)", ref,
              got, fused, time_ms(c, 20, together), time_ms(c, 20, separate));
  }
}

// The SwiGLU with w2's FP8 copy (swiglu_quant) against swiglu() and fp8_quant_rows_from,
// bitwise, at V4-Flash's 2,048 with the clamp of 10: the shared expert's (no row weights) and the
// routed slots' (each row times its routing weight).
void swiglu_quant_checks(Ctx& c, std::vector<KernelCheck>& out) {
  constexpr int64_t inter = 2048;
  for (const int64_t n : {int64_t{1}, int64_t{6}, int64_t{16}}) {
    const bool routed = n == 6;
    const std::vector<float> h1 = normal(c, static_cast<size_t>(n * inter), 4.0f);
    DeviceArray<float> a, b, q, rw;
    a.upload(c.e, h1);
    b.upload(c.e, normal(c, static_cast<size_t>(n * inter), 4.0f));
    rw.upload(c.e, normal(c, static_cast<size_t>(n), 0.3f));
    q.allocate(c.e, static_cast<size_t>(n * inter));
    const float* row_w = routed ? rw.ptr : nullptr;
    bool fused = false;
    const auto separate = [&] {
      swiglu(c.e, a.ptr, b.ptr, n, inter, 10.0f, row_w, true);
      fp8_quant_rows_from(c.e, a.ptr, inter, n, inter, 128, q.ptr);
    };
    const auto together = [&] {
      fused = swiglu_quant(c.e, a.ptr, b.ptr, n, inter, 10.0f, true, q.ptr, row_w);
    };
    const auto outputs = [&] {
      std::vector<float> v = to_host(c, a), w = to_host(c, q);
      v.insert(v.end(), w.begin(), w.end());
      return v;
    };
    c.e.to_device(a.ptr, h1.data(), a.bytes());
    poison(c, q);
    separate();
    const std::vector<float> ref = outputs();
    c.e.to_device(a.ptr, h1.data(), a.bytes());
    poison(c, q);
    together();
    const std::vector<float> got = outputs();
    const auto reset_then = [&](auto f) {
      return [&, f] {
        c.e.to_device(a.ptr, h1.data(), a.bytes());
        f();
      };
    };
    same_bits(c, out,
              std::string(routed ? "routed slots'" : "shared expert") +
                  " SwiGLU + FP8 copy fused, " + std::to_string(n) + " row(s)",
              ref, got, fused, time_ms(c, 20, reset_then(together)),
              time_ms(c, 20, reset_then(separate)));
  }
}

// The attention output's inverse RoPE and bf16 rounding in one launch (rope_round_bf16) against
// rope() then round_bf16, bitwise, at V4-Flash's 64 heads × 512 (64 rotated).
void rope_round_checks(Ctx& c, std::vector<KernelCheck>& out) {
  constexpr int H = 64, D = 512, R = 64;
  for (const int64_t n : {int64_t{1}, int64_t{16}}) {
    const std::vector<float> h = normal(c, static_cast<size_t>(n * H * D), 2.0f);
    const std::vector<float> hinv = rope_inv_freq(R);
    std::vector<int32_t> hpos(static_cast<size_t>(n));
    for (size_t i = 0; i < hpos.size(); ++i) hpos[i] = static_cast<int32_t>(4095 - 29 * i);
    DeviceArray<float> o, inv;
    DeviceArray<int32_t> pos;
    o.upload(c.e, h);
    inv.upload(c.e, hinv);
    pos.upload(c.e, hpos);
    const auto separate = [&] {
      rope(c.e, o.ptr, n, H, D, R / 2, inv.ptr, 1.25f, pos.ptr, true);
      round_bf16(c.e, o.ptr, n * H * D);
    };
    const auto together = [&] {
      rope_round_bf16(c.e, o.ptr, n, H, D, R / 2, inv.ptr, 1.25f, pos.ptr, true);
    };
    c.e.to_device(o.ptr, h.data(), o.bytes());
    separate();
    const std::vector<float> ref = to_host(c, o);
    c.e.to_device(o.ptr, h.data(), o.bytes());
    together();
    const std::vector<float> got = to_host(c, o);
    same_bits(c, out, "inverse rope + bf16 rounding fused, " + std::to_string(n) + " row(s)", ref,
              got, true, time_ms(c, 20, together), time_ms(c, 20, separate));
  }
}

// The routed experts' combine joined to hc_post (moe_combine_hc_post) against moe_combine then
// hc_post, bitwise, at V4-Flash's top-6 of 4096-wide rows and hc 4.
void combine_post_checks(Ctx& c, std::vector<KernelCheck>& out) {
  constexpr int K = 6, hc = 4;
  constexpr int64_t d = 4096;
  for (const int64_t n : {int64_t{1}, int64_t{16}}) {
    const std::vector<float> hy = normal(c, static_cast<size_t>(n * d));
    DeviceArray<float> rout, wts, y, X, post, comb, X2;
    rout.upload(c.e, normal(c, static_cast<size_t>(n * K * d)));
    wts.upload(c.e, normal(c, static_cast<size_t>(n * K), 0.3f));
    y.upload(c.e, hy);
    X.upload(c.e, normal(c, static_cast<size_t>(n * hc * d)));
    post.upload(c.e, normal(c, static_cast<size_t>(n * hc)));
    comb.upload(c.e, normal(c, static_cast<size_t>(n * hc * hc), 0.5f));
    X2.allocate(c.e, static_cast<size_t>(n * hc * d));
    HcParams p;
    p.hc = hc;
    p.d = d;
    const auto separate = [&] {
      moe_combine(c.e, rout.ptr, wts.ptr, n, K, d, false, true, y.ptr);
      hc_post(c.e, p, X.ptr, post.ptr, comb.ptr, y.ptr, n, X2.ptr, true);
    };
    const auto together = [&] {
      moe_combine_hc_post(c.e, rout.ptr, wts.ptr, K, false, true, y.ptr, p, X.ptr, post.ptr,
                          comb.ptr, n, X2.ptr, true);
    };
    const auto run = [&](auto f) {
      c.e.to_device(y.ptr, hy.data(), y.bytes());
      poison(c, X2);
      f();
      std::vector<float> v = to_host(c, X2), t = to_host(c, y);
      v.insert(v.end(), t.begin(), t.end());
      return v;
    };
    const std::vector<float> ref = run(separate), got = run(together);
    same_bits(c, out, "moe combine + mHC post fused, " + std::to_string(n) + " row(s)", ref, got,
              true, time_ms(c, 20, together), time_ms(c, 20, separate));
  }
}

}  // namespace

std::vector<KernelCheck> fused_kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  const bool fast0 = fast_kernels(), fused0 = fused_rows();
  set_fused_rows(true);
  ReportDevice dev(17);
  Ctx& c = dev.c;
  set_fast_kernels(true);
  norm_checks(c, out);
  route_checks(c, out);
  set_fast_kernels(true);
  hc_pre_norm_checks(c, out);
  kv_norm_rope_checks(c, out);
  swiglu_quant_checks(c, out);
  rope_round_checks(c, out);
  combine_post_checks(c, out);
  dev.finish(out, "fused kernel checks");
  set_fast_kernels(fast0);
  set_fused_rows(fused0);
  return out;
}

}  // namespace deepinfer::cuda
