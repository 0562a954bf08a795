// The prefill kernels against the reference bodies: tensor-core attention, wo_a on the FP8 WMMA
// tiles and on cuBLASLt after dequantization, the short-output fp32 products, the parallel
// compressor push (also emulated on the host). The model-level checks are the CudaDevice.*
// fixture tests; their shapes keep the other attention kernel.
#include <gtest/gtest.h>

#include <cstdio>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/kernel_report.h"
#include "kernel_checks.h"

namespace deepinfer::cuda {
namespace {

TEST(CudaKernels, AttentionTcMatchesTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = attention_tc_kernel_report();
  // 7 launches × CSA / HCA × official / exact × (against the reference, decode variants at 64 and
  // 16 heads a block bitwise), + 7 × 2 official: the P·V's inverse RoPE bitwise
  EXPECT_EQ(checks.size(), 98u);
  expect_within_tolerance(checks);
}

TEST(CudaKernels, IndexerTcMatchesTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = indexer_tc_kernel_report();
  EXPECT_EQ(checks.size(), 9u);  // 3 launches × scores / top-k / top-k by rank counting
  expect_within_tolerance(checks);
}

TEST(CudaKernels, PrefillProductsMatchTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = prefill_kernel_report();
  EXPECT_EQ(checks.size(), 8u);  // {512, 8192} rows × (wo_a × {WMMA, Lt, Lt copy}, mHC)
  expect_within_tolerance(checks);
}

TEST(CudaKernels, CompressorPushMatchesTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = compressor_kernel_report(false);
  EXPECT_EQ(checks.size(), 8u);  // 5 pushes, 3 finishes
  expect_exact(checks);
}

// The same comparison on the host (Exec::emulate): no device needed.
TEST(CudaEmulatedKernels, CompressorPushMatchesTheReference) {
  const std::vector<KernelCheck> checks = compressor_kernel_report(true);
  EXPECT_EQ(checks.size(), 2u);
  expect_exact(checks, false);
}

}  // namespace
}  // namespace deepinfer::cuda
