#!/usr/bin/env bash
# Decode with weights asked into L2 ahead of their products (DEEPINFER_CUDA_L2_AHEAD, a mask of
# l2_ahead.cuh's points: 1 attention start, 2 wo_a / wo_b after wq_b, 4 FFN start, 8 the next
# layer's attention beside the routed experts) against none, interleaved in one run on the
# V4-Flash FP8/FP4 slice at 4k context; with TRACE_LIB (bench/cuda_kernel_trace.cpp's library),
# also the kernel trace of batch 1 with every point on (OUT_DIR/trace_l2_ahead15.md, whose
# timeline shows the prefetch launches on their own stream). Appends to OUT_DIR/l2_ahead.txt.
#   tools/bench/l2_ahead_ab.sh BIN_DIR OUT_DIR [LAYERS] [MASKS] [BATCHES] [BUDGETS_MB]
set -uo pipefail
bin=$1 out=$2 layers=${3:-4} masks=${4:-"0 1 2 4 8 15"} batches=${5:-"1 4"} budgets=${6:-""}
root=/tmp/deepinfer-slices
shm_free=$(df --output=avail -B1G /dev/shm 2> /dev/null | tail -1 | tr -d ' ')
if [ "${shm_free:-0}" -gt 30 ]; then root=/dev/shm/deepinfer-slices; fi
slice=$root/fp8-$layers
mkdir -p "$root"
if [ ! -e "$slice/config.json" ]; then
  timeout -k 2 200 "$bin/deepinfer" bench --device cuda --slice v4-flash --layers "$layers" \
    --format fp8 --slice-dir "$slice" --prefill none --decode-batch 1 --context 4096 --warmup 1 \
    --steps 4 > "$out/l2_ahead_slice.txt" 2>&1
fi
step() {  # BATCH MASK [MB]: the bench's decode row
  timeout -k 2 120 env DEEPINFER_CUDA_L2_AHEAD="$2" ${3:+DEEPINFER_CUDA_L2_AHEAD_MB=$3} \
    "$bin/deepinfer" bench --device cuda --model "$slice" --prefill none --decode-batch "$1" \
    --context 4096 --warmup 3 --steps 30 2>&1 | grep '| decode |'
}
for b in $batches; do
  for run in 1 2 3; do
    for m in $masks; do echo "batch $b mask $m run $run: $(step "$b" "$m")" >> "$out/l2_ahead.txt"; done
  done
done
for mb in $budgets; do
  for run in 1 2; do
    echo "batch 1 mask 15 budget $mb MB run $run: $(step 1 15 "$mb")" >> "$out/l2_ahead.txt"
  done
done
if [ -n "${TRACE_LIB:-}" ]; then
  SLICE_DIR=$slice DEEPINFER_CUDA_L2_AHEAD=15 bash "$(dirname "$0")/kernel_trace.sh" "$out" \
    "$bin/deepinfer" "$TRACE_LIB" 1 "$layers" fp8 l2_ahead15 > "$out/trace_l2_ahead15.md" 2>&1
  rm -f "$out"/trace_l2_ahead15.csv "$out"/trace_bench_l2_ahead15.txt
fi
