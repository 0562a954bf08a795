#!/usr/bin/env bash
# Where a decode step's time goes, per kernel, on the GPU: deepinfer bench on a V4-Flash slice
# with only the decode steps of one batch size between cudaProfilerStart/Stop
# (DEEPINFER_CUDA_PROFILE_BATCH), timed by Nsight Compute, summed per kernel call site.
#   tools/bench/profile_decode.sh OUTDIR DEEPINFER [BATCHES (1,16)] [LAYERS (4)] [FORMAT (fp8)]
set -uo pipefail
out=$1 bin=$2 batches=${3:-1,16} layers=${4:-4} format=${5:-fp8}
slice=/dev/shm/deepinfer-profile-slice
here=$(cd "$(dirname "$0")" && pwd)
first=1
for b in ${batches//,/ }; do
  src=(--model "$slice")
  [ $first = 1 ] && src=(--slice v4-flash --layers "$layers" --format "$format" --slice-dir "$slice")
  first=0
  DEEPINFER_CUDA_PROFILE_BATCH=$b timeout 240 ncu --profile-from-start off \
    --metrics gpu__time_duration.sum --csv --page raw --log-file "$out/ncu_b$b.csv" \
    "$bin" bench --device cuda "${src[@]}" --prefill none --decode-batch "$b" --context 4096 \
    --warmup 1 --steps 2 > "$out/bench_b$b.txt" 2>&1
  echo "batch $b: rc=$? at ${SECONDS}s"
  python3 "$here/ncu_summary.py" "$out/ncu_b$b.csv" 3 "batch $b"
done
rm -rf "$slice"
