#!/usr/bin/env bash
# Where a prefill chunk's time goes, per kernel, on the GPU: deepinfer bench on a V4-Flash slice
# prefilling one LEN-token prompt, with only the chunks starting at the positions STARTS between
# cudaProfilerStart/Stop (DEEPINFER_CUDA_PROFILE_PREFILL; the warm-up prefill is not profiled),
# timed by Nsight Compute, summed per kernel call site.
#   tools/bench/profile_prefill.sh OUTDIR DEEPINFER [LEN (8192)] [STARTS (0,7680)] [LAYERS (4)]
#                                  [FORMAT (fp8)] [CHUNK (512)]
# NCU_CLOCKS=none times at the GPU's own clocks (ncu locks them to base by default).
set -uo pipefail
out=$1 bin=$2 len=${3:-8192} starts=${4:-0,7680} layers=${5:-4} format=${6:-fp8} chunk=${7:-512}
slice=/dev/shm/deepinfer-profile-slice
here=$(cd "$(dirname "$0")" && pwd)
src=(--slice v4-flash --layers "$layers" --format "$format" --slice-dir "$slice")
[ -f "$slice/config.json" ] && src=(--model "$slice")
n=$(echo "${starts//,/ }" | wc -w)
DEEPINFER_CUDA_PROFILE_PREFILL=$starts timeout 240 ncu --profile-from-start off --clock-control "${NCU_CLOCKS:-base}" \
  --metrics gpu__time_duration.sum --csv --page raw --log-file "$out/ncu_prefill_$len.csv" \
  "$bin" bench --device cuda "${src[@]}" --prefill "1x$len" --decode-batch none \
  --chunk-tokens "$chunk" --warmup 1 --reps 1 > "$out/bench_prefill_$len.txt" 2>&1
echo "prefill 1x$len, chunks at $starts: rc=$? at ${SECONDS}s"
python3 "$here/ncu_summary.py" "$out/ncu_prefill_$len.csv" "$n" "prefill 1x$len, chunks at $starts"
