// The grouped routed-expert kernels on the device against the reference body (the model-level
// checks are the CudaDevice.* fixture tests, which run the grouped path by default).
#include <gtest/gtest.h>

#include <cstdio>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/kernel_report.h"
#include "kernel_checks.h"

namespace deepinfer::cuda {
namespace {

TEST(CudaKernels, GroupedExpertsMatchTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  std::vector<KernelCheck> checks = expert_kernel_report();
  EXPECT_EQ(checks.size(), 18u);  // 3 formats × (4 GEMV + 2 tensor-core) checks
  const std::vector<KernelCheck> lt = expert_lt_kernel_report();
  EXPECT_EQ(lt.size(), 24u);  // 3 formats × 4 launches × (fp32, bf16-exact inputs)
  checks.insert(checks.end(), lt.begin(), lt.end());
  expect_within_tolerance(checks);
}

// The decode-sized tensor-core kernel (grouped_experts_dec), skewed and uniform routing.
TEST(CudaKernels, GroupedExpertsDecodeMatchTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = expert_dec_kernel_report();
  EXPECT_EQ(checks.size(), 21u);  // 3 formats × (1 token + 3 batch sizes × skewed, uniform)
  expect_within_tolerance(checks);
}

// The decode kernel's launch shapes change speed only: the same bits in every shape.
TEST(CudaKernels, GroupedExpertsDecodeShapesAgree) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = expert_dec_shape_report();
  EXPECT_EQ(checks.size(), 32u);  // FP4 × 4 batch sizes × 8 shapes
  expect_within_tolerance(checks);
}

}  // namespace
}  // namespace deepinfer::cuda
