#!/usr/bin/env bash
# One GPU-machine run of a decode round: unpacks the bundle (tools/device/bundle.sh of deepinfer,
# test_backend_cuda and the CUPTI trace library), runs the device tests, then the interleaved
# decode A/B (decode_schedule_ab.sh) and the kernel trace of the last variant. Results in $OUT_DIR.
#   BUNDLE=.devbin-a/bundle.tar.xz MODE=all|tests|ab RUNS=3 TRACE=1 TEST_TIMEOUT=300
#   FILTER='CudaKernels.*' VARIANTS="DEEPINFER_CUDA_X=0 -" tools/bench/device_ab.sh
set -uo pipefail
bundle=${BUNDLE:-.devbin-a/bundle.tar.xz} out=${OUT_DIR:-/tmp/out} mode=${MODE:-all}
mkdir -p "$out" /tmp/devbin
tar -xJf "$bundle" -C /tmp/devbin
bin=/tmp/devbin
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# shellcheck source=../device/cuda_libs.sh
. "$(dirname "$0")/../device/cuda_libs.sh"
src_dir=$(cat "$bin/source_dir")  # the test binary's DEEPINFER_SOURCE_DIR
[ -e "$src_dir" ] || { mkdir -p "$(dirname "$src_dir")"; ln -s "$PWD" "$src_dir"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
if [ "$mode" = all ] || [ "$mode" = tests ]; then
  timeout "${TEST_TIMEOUT:-300}" "$bin/test_backend_cuda" \
    --gtest_filter="${FILTER:-CudaDevice*:CudaKernels*:CudaRunnerDevice*}" > "$out/test.log" 2>&1
  echo "tests rc=$? at ${SECONDS}s"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$out/test.log" | tail -12
fi
if [ "$mode" = all ] || [ "$mode" = ab ]; then
  trace=()
  [ "${TRACE:-0}" = 1 ] && trace=(TRACE_LIB="$bin/libdeepinfer_kernel_trace.so")
  # shellcheck disable=SC2086
  env "${trace[@]}" bash tools/bench/decode_schedule_ab.sh "$bin" "$out" 4 1 ${VARIANTS:--}
  echo "a/b done at ${SECONDS}s"
  cat "$out/decode_schedule.txt"
  [ -f "$out/trace_schedule.md" ] && head -60 "$out/trace_schedule.md"
fi
if [ -n "${NCU_KERNELS:-}" ]; then
  # Nsight Compute's details (throughput, warp stalls, occupancy) of the decode kernels whose names
  # match NCU_KERNELS, on the A/B's slice, batch 1, the kernels of about one step.
  slice=$(ls -d /dev/shm/deepinfer-slices/fp8-4 /tmp/deepinfer-slices/fp8-4 2> /dev/null | head -1)
  DEEPINFER_CUDA_PROFILE_BATCH=1 timeout 200 ncu --profile-from-start off --clock-control none \
    -k "regex:${NCU_KERNELS}" --launch-count "${NCU_COUNT:-16}" --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats "$bin/deepinfer" bench --device cuda \
    --model "$slice" --prefill none --decode-batch 1 --context 4096 --warmup 1 --steps 2 \
    > "$out/ncu_details.txt" 2>&1
  echo "ncu rc=$? at ${SECONDS}s"
fi
