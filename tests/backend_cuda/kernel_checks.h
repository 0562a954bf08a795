// The kernel checks' common assertion: every KernelCheck printed (its line carries the timings)
// and held to its tolerance, or to the reference's exact bits.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "backend/cuda/kernel_report.h"

namespace deepinfer::cuda {

inline void expect_within_tolerance(const std::vector<KernelCheck>& checks) {
  for (const KernelCheck& k : checks) {
    std::printf("  %s\n", k.line.c_str());
    EXPECT_LE(k.rel_error, k.tolerance) << k.line;
  }
}

inline void expect_exact(const std::vector<KernelCheck>& checks, bool print = true) {
  for (const KernelCheck& k : checks) {
    if (print) std::printf("  %s\n", k.line.c_str());
    EXPECT_EQ(k.rel_error, 0.0) << k.line;
  }
}

}  // namespace deepinfer::cuda
