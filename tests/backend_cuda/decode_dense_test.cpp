// The dense products at decode batch sizes against the reference body, both sides of the GEMV
// crossover (kernel_report_decode.cu): GEMV passes of 8 rows and the default cuBLASLt / narrow
// kernels, with their GB/s.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/kernel_report.h"
#include "kernel_checks.h"

namespace deepinfer::cuda {
namespace {

TEST(CudaKernels, DecodeDenseProductsMatchTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = decode_dense_kernel_report();
  EXPECT_EQ(checks.size(), 32u);  // 16 (shape, rows) pairs × {GEMV passes, default}
  expect_within_tolerance(checks);
}

TEST(CudaKernels, OneRowGemvMatchesTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = gemv_row1_kernel_report();
  EXPECT_EQ(checks.size(), 24u);  // 4 products × (old kernels, 4 tunings, a copy)
  expect_within_tolerance(checks);
}

TEST(CudaKernels, MmaGemvMatchesTheReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<KernelCheck> checks = gemv_mma_kernel_report();
  // 5 products × 3 row counts × (CUDA cores, 5 splits, the other FP8 lane layout, the output's FP8
  // copy at 2 splits), wo_b's row kernel with hc_post; FP4 experts × 23 lines, FP8 × 16
  EXPECT_EQ(checks.size(), 175u);
  expect_within_tolerance(checks);
}

}  // namespace
}  // namespace deepinfer::cuda
