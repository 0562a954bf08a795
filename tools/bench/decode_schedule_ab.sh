#!/usr/bin/env bash
# Decode step variants against the default, interleaved in one run on the V4-Flash FP8/FP4 slice
# at 4k context: each variant is a space-free list of VAR=value joined by commas ("-" = the
# defaults), e.g. DEEPINFER_CUDA_ATTN_OVERLAP=0 (the kv norm / compressors / indexer after wq_b
# instead of beside it) or DEEPINFER_CUDA_EXPERTS_SWIGLU_FOLD=0 (the routed SwiGLU its own launch
# before w2). With TRACE_LIB (bench/cuda_kernel_trace.cpp's library) also the kernel trace of
# batch 1 under the last variant (OUT_DIR/trace_schedule.md). Appends to
# OUT_DIR/decode_schedule.txt; RUNS=n interleaved runs (3).
#   tools/bench/decode_schedule_ab.sh BIN_DIR OUT_DIR [LAYERS] [BATCHES] [VARIANTS...]
set -uo pipefail
bin=$1 out=$2 layers=${3:-4} batches=${4:-"1 4"}
shift $(($# < 4 ? $# : 4))
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(- DEEPINFER_CUDA_EXPERTS_SWIGLU_FOLD=0
  DEEPINFER_CUDA_EXPERTS_MIN_BLOCKS=256 DEEPINFER_CUDA_SHARED_MIN_BLOCKS=0
  DEEPINFER_CUDA_EXPERTS_SWIGLU_FOLD=0,DEEPINFER_CUDA_EXPERTS_MIN_BLOCKS=256,DEEPINFER_CUDA_SHARED_MIN_BLOCKS=0)
root=/tmp/deepinfer-slices
shm_free=$(df --output=avail -B1G /dev/shm 2> /dev/null | tail -1 | tr -d ' ')
if [ "${shm_free:-0}" -gt 30 ]; then root=/dev/shm/deepinfer-slices; fi
slice=$root/fp8-$layers
mkdir -p "$root"
if [ ! -e "$slice/config.json" ]; then
  timeout -k 2 200 "$bin/deepinfer" bench --device cuda --slice v4-flash --layers "$layers" \
    --format fp8 --slice-dir "$slice" --prefill none --decode-batch 1 --context 4096 --warmup 1 \
    --steps 4 > "$out/decode_schedule_slice.txt" 2>&1
fi
env_of() { [ "$1" = - ] || tr ',' ' ' <<< "$1"; }
step() {  # BATCH VARIANT: the bench's decode row
  # shellcheck disable=SC2046
  timeout -k 2 120 env $(env_of "$2") "$bin/deepinfer" bench --device cuda --model "$slice" \
    --prefill none --decode-batch "$1" --context 4096 --warmup 3 --steps 30 2>&1 | grep '| decode |'
}
for b in $batches; do
  for run in $(seq "${RUNS:-3}"); do
    for v in "${variants[@]}"; do
      echo "batch $b [$v] run $run: $(step "$b" "$v")" >> "$out/decode_schedule.txt"
    done
  done
done
if [ -n "${TRACE_LIB:-}" ]; then
  last=${variants[${#variants[@]} - 1]}
  # shellcheck disable=SC2046
  env $(env_of "$last") SLICE_DIR="$slice" bash "$(dirname "$0")/kernel_trace.sh" "$out" \
    "$bin/deepinfer" "$TRACE_LIB" 1 "$layers" fp8 schedule > "$out/trace_schedule.md" 2>&1
  rm -f "$out"/trace_schedule.csv "$out"/trace_bench_schedule.txt
fi
