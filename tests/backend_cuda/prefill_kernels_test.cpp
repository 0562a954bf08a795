// The prefill kernels on the device against the reference bodies: tensor-core attention, the
// FP8 WMMA tiles' vector loads, the short-output fp32 products (the model-level checks are the
// CudaDevice.* fixture tests; their shapes keep the other attention kernel).
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
  EXPECT_EQ(checks.size(), 2u);
  for (const KernelCheck& k : checks) {
    std::printf("  %s\n", k.line.c_str());
    EXPECT_LE(k.rel_error, k.tolerance) << k.line;
  }
}

}  // namespace
}  // namespace deepinfer::cuda
