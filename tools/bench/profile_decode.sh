#!/usr/bin/env bash
# Where a decode step's time goes, per kernel, on the GPU: deepinfer bench on a V4-Flash slice
# with only the decode steps of one batch size between cudaProfilerStart/Stop
# (DEEPINFER_CUDA_PROFILE_BATCH), timed by Nsight Compute, summed per kernel call site.
#   tools/bench/profile_decode.sh OUTDIR DEEPINFER [BATCHES (1,16)] [LAYERS (4)] [FORMAT (fp8)]
# NCU_CLOCKS=none profiles at the clocks the GPU runs at (ncu locks base clocks by default);
# NCU_BYTES=1 also collects the DRAM bytes each kernel reads (a TB/s column per call site).
set -uo pipefail
out=$1 bin=$2 batches=${3:-1,16} layers=${4:-4} format=${5:-fp8}
slice=/dev/shm/deepinfer-profile-slice
here=$(cd "$(dirname "$0")" && pwd)
first=1
for b in ${batches//,/ }; do
  src=(--model "$slice")
  [ $first = 1 ] && src=(--slice v4-flash --layers "$layers" --format "$format" --slice-dir "$slice")
  first=0
  metrics=gpu__time_duration.sum
  [ "${NCU_BYTES:-0}" = 1 ] && metrics=$metrics,dram__bytes_read.sum
  DEEPINFER_CUDA_PROFILE_BATCH=$b timeout 240 ncu --profile-from-start off \
    --clock-control "${NCU_CLOCKS:-base}" --metrics "$metrics" --csv --page raw --log-file "$out/ncu_b$b.csv" \
    "$bin" bench --device cuda "${src[@]}" --prefill none --decode-batch "$b" --context 4096 \
    --warmup 1 --steps 2 > "$out/bench_b$b.txt" 2>&1
  echo "batch $b: rc=$? at ${SECONDS}s"
  python3 "$here/ncu_summary.py" "$out/ncu_b$b.csv" 3 "batch $b"
done
rm -rf "$slice"
