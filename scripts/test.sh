#!/usr/bin/env bash
# The test command: installs dependencies, builds the release tree and the ASan/UBSan tree, runs
# every test in both (GPU tests skip without a GPU; fuzz targets run a few seconds each).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build
ctest --test-dir build --output-on-failure -j"$(nproc)"
scripts/build.sh build-asan -DDEEPINFER_SANITIZE=ON -DDEEPINFER_CUDA=OFF -DDEEPINFER_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -LE "slow"
