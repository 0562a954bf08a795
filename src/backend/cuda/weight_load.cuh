// Loading eight consecutive weights of a row in any shipped format, block scales applied: the
// decode GEMVs (gemv.cu) and the narrow products (gemm_narrow.cu) read weights through it.
#pragma once

#include <cstdint>

#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

// 8 consecutive weights (o, k … k+7) of a row, scales applied; k a multiple of 8.
__device__ __forceinline__ void load8(const DevWeight& w, int64_t o, int64_t k, float* v) {
  const int64_t r = o + w.row0;
  switch (w.format) {
    case DevFormat::F32: {
      const float4* p = reinterpret_cast<const float4*>(reinterpret_cast<const float*>(w.data) +
                                                        r * w.stride + k);
      const float4 a = __ldg(p), b = __ldg(p + 1);
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
      v[7] = b.w;
      break;
    }
    case DevFormat::BF16: {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(
          reinterpret_cast<const uint16_t*>(w.data) + r * w.stride + k));
      const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[2 * i] = __uint_as_float(u[i] << 16);
        v[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
      }
      break;
    }
    case DevFormat::FP8: {
      const uint2 q = __ldg(reinterpret_cast<const uint2*>(w.data + r * w.stride + k));
      const float s = w.scale_at(r / w.block_out, k / w.block_in) * 0x1p120f;
      const uint32_t u[2] = {q.x, q.y};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int32_t c =
            static_cast<int32_t>(static_cast<int8_t>((u[i / 4] >> (8 * (i % 4))) & 0xff));
        const uint32_t bits = (static_cast<uint32_t>(c) << 20) & 0x87f00000u;
        v[i] = __uint_as_float(bits) * s;
      }
      break;
    }
    case DevFormat::FP4: {
      const uint32_t q =
          __ldg(reinterpret_cast<const uint32_t*>(w.data + ((r * w.stride + k) >> 1)));
      const float s = w.scale_at(r, k / w.block_in);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t nib = (q >> (4 * i)) & 0xf;
        const uint32_t e = (nib >> 1) & 3, m = nib & 1;
        uint32_t bits = e ? ((e + 126) << 23) | (m << 22) : (m ? 0x3f000000u : 0u);
        bits |= (nib & 8) << 28;
        v[i] = __uint_as_float(bits) * s;
      }
      break;
    }
  }
}

}  // namespace deepinfer::cuda
