// The prefill kernels against the reference bodies: tensor-core attention, wo_a on the FP8 WMMA
// tiles and on cuBLASLt after dequantization, the short-output fp32 products, the parallel
// compressor push (also emulated on the host). The model-level checks are the CudaDevice.*
// fixture tests; their shapes keep the other attention kernel.
#include <gtest/gtest.h>

#include <cstdio>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/kernel_report.h"

namespace deepinfer::cuda {
namespace {

TEST(CudaKernels, AttentionTcMatchesTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = attention_tc_kernel_report();
  EXPECT_EQ(checks.size(), 12u);  // 3 launches × CSA / HCA × official / exact
  for (const KernelCheck& k : checks) {
    std::printf("  %s\n", k.line.c_str());
    EXPECT_LE(k.rel_error, k.tolerance) << k.line;
  }
}

TEST(CudaKernels, PrefillProductsMatchTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = prefill_kernel_report();
  EXPECT_EQ(checks.size(), 8u);  // {512, 8192} rows × (wo_a × {WMMA, Lt, Lt copy}, mHC)
  for (const KernelCheck& k : checks) {
    std::printf("  %s\n", k.line.c_str());
    EXPECT_LE(k.rel_error, k.tolerance) << k.line;
  }
}

TEST(CudaKernels, CompressorPushMatchesTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = compressor_kernel_report(false);
  EXPECT_EQ(checks.size(), 5u);
  for (const KernelCheck& k : checks) {
    std::printf("  %s\n", k.line.c_str());
    EXPECT_EQ(k.rel_error, 0.0) << k.line;
  }
}

// The same comparison on the host (Exec::emulate): no device needed.
TEST(CudaEmulatedKernels, CompressorPushMatchesTheReference) {
  const std::vector<KernelCheck> checks = compressor_kernel_report(true);
  EXPECT_EQ(checks.size(), 2u);
  for (const KernelCheck& k : checks) EXPECT_EQ(k.rel_error, 0.0) << k.line;
}

}  // namespace
}  // namespace deepinfer::cuda
