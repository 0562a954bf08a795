#!/usr/bin/env bash
# One decode step's timeline on the GPU as it runs (CUDA graph nodes traced by Nsight Systems, no
# cache flushes or serialization as under Nsight Compute): deepinfer bench on a V4-Flash slice with
# the decode steps of one batch size between cudaProfilerStart/Stop.
#   tools/bench/timeline_decode.sh OUTDIR DEEPINFER [BATCH (1)] [LAYERS (4)] [FORMAT (fp8)]
set -uo pipefail
out=$1 bin=$2 batch=${3:-1} layers=${4:-4} format=${5:-fp8}
slice=/dev/shm/deepinfer-timeline-slice
here=$(cd "$(dirname "$0")" && pwd)
command -v nsys > /dev/null || { echo "no nsys on this machine"; exit 0; }
DEEPINFER_CUDA_PROFILE_BATCH=$batch timeout 240 nsys profile --capture-range=cudaProfilerApi \
  --cuda-graph-trace=node --trace=cuda -o "$out/timeline_b$batch" --force-overwrite true \
  "$bin" bench --device cuda --slice v4-flash --layers "$layers" --format "$format" \
  --slice-dir "$slice" --prefill none --decode-batch "$batch" --context 4096 --warmup 1 --steps 3 \
  > "$out/timeline_bench_b$batch.txt" 2>&1
echo "batch $batch: rc=$? at ${SECONDS}s"
nsys export --type sqlite -o "$out/timeline_b$batch.sqlite" --force-overwrite true \
  "$out/timeline_b$batch.nsys-rep" > /dev/null 2>&1
python3 "$here/timeline_summary.py" "$out/timeline_b$batch.sqlite" "batch $batch" \
  "$out/timeline_b$batch.txt"
rm -rf "$slice" "$out/timeline_b$batch.sqlite"
