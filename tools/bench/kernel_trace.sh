#!/usr/bin/env bash
# A decode step's kernel timeline on the GPU without Nsight Systems: deepinfer bench on a
# V4-Flash slice with the CUPTI injection library (bench/cuda_kernel_trace.cpp) loaded by the
# driver, then the step's span, idle time between kernels and time per kernel
# (kernel_trace_summary.py, --order: the last step's kernels in order).
#   tools/bench/kernel_trace.sh OUTDIR DEEPINFER LIBTRACE [BATCH (1)] [LAYERS (4)] [FORMAT (fp8)] [LABEL]
# SLICE_DIR=dir reuses (or keeps) a slice there; extra environment (DEEPINFER_CUDA_*) passes on.
set -uo pipefail
out=$1 bin=$2 lib=$3 batch=${4:-1} layers=${5:-4} format=${6:-fp8} label=${7:-b${4:-1}}
here=$(cd "$(dirname "$0")" && pwd)
slice=${SLICE_DIR:-/dev/shm/deepinfer-trace-slice}
src=(--model "$slice")
[ -e "$slice/config.json" ] ||
  src=(--slice v4-flash --layers "$layers" --format "$format" --slice-dir "$slice")
CUDA_INJECTION64_PATH=$lib DEEPINFER_KERNEL_TRACE="$out/trace_$label.csv" timeout 240 \
  "$bin" bench --device cuda "${src[@]}" --prefill none --decode-batch "$batch" --context 4096 \
  --warmup 2 --steps 8 > "$out/trace_bench_$label.txt" 2>&1
echo "trace $label: rc=$? at ${SECONDS}s"
python3 "$here/kernel_trace_summary.py" "$out/trace_$label.csv" "$label" --order
[ -n "${SLICE_DIR:-}" ] || rm -rf "$slice"
