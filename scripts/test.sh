#!/usr/bin/env bash
# The test command: installs dependencies, builds the release tree and the ASan/UBSan tree, runs
# every test in both (GPU tests skip without a GPU; fuzz targets run a few seconds each).
set -euo pipefail
cd "$(dirname "$0")/.."
phase() {  # prints how long each phase took, so that CI logs show where the time goes
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - start)) s"
}
phase setup scripts/setup.sh
phase "release build" scripts/build.sh build
phase "release tests" ctest --test-dir build --output-on-failure -j"$(nproc)"
phase "sanitizer build" scripts/build.sh build-asan -DDEEPINFER_SANITIZE=ON -DDEEPINFER_CUDA=OFF \
  -DDEEPINFER_BENCH=OFF
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
phase "sanitizer tests" ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -LE "slow"
