#!/usr/bin/env bash
# One GPU-machine run of the side-by-side benchmark: deepinfer bench on a synthesized V4-Flash
# slice (FP8/FP4 as shipped, then bf16 while time is left), HF transformers on the same config,
# and the ratio tables. Binaries come prebuilt in .devbin-bench/ ($BENCH_BUNDLE): deepinfer and
# its shared libraries, as files or as bundle.tar.xz.
#   tools/bench/device_run.sh OUTDIR COMMIT [LAYERS] [TIME_LIMIT_S] [OURS_MEASURE_S]
# Every step writes its JSON and log to OUTDIR as it goes, so a cut-short run still reports.
set -uo pipefail
out=$1
commit=$2
layers=${3:-4}
limit=${4:-180}  # seconds for the whole script
ours=${5:-40}    # seconds of measurements for deepinfer fp8 (synthesis and upload come on top)
bundle=${BENCH_BUNDLE:-.devbin-bench}
if [ -f "$bundle/bundle.tar.xz" ]; then  # carried compressed (the tree + carry must stay small)
  mkdir -p /tmp/deepinfer-bundle && tar -C /tmp/deepinfer-bundle -xJf "$bundle/bundle.tar.xz"
  bundle=/tmp/deepinfer-bundle
fi
bundle=$(cd "$bundle" && pwd)
export LD_LIBRARY_PATH=$bundle${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
bin=$bundle/deepinfer
# The CUDA runtime and cuBLAS come from the machine's toolkit (or torch's wheels), not the bundle.
# shellcheck source=../device/cuda_libs.sh
. "$(dirname "$0")/../device/cuda_libs.sh"
{
  nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.max.sm --format=csv
  nproc
  free -g
  df -h /dev/shm /tmp
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$bin" | grep -i "not found"
} > "$out/machine.txt" 2>&1

# The slice lives in memory when /dev/shm can hold the bf16 one (~55 GB), else on disk.
shm_free=$(df --output=avail -B1G /dev/shm 2> /dev/null | tail -1 | tr -d ' ')
root=/tmp/deepinfer-slices
if [ "${shm_free:-0}" -gt 60 ]; then root=/dev/shm/deepinfer-slices; fi
mkdir -p "$root"
echo "slices in $root" >> "$out/machine.txt"

common=(--device cuda --slice v4-flash --layers "$layers" --commit "$commit"
        --prefill 1x8192,64x512 --decode-batch 1,16,64,256 --context 4096
        --warmup 1 --reps 2 --steps 6)
left() { echo $((limit - SECONDS)); }
upto() { local v=$(($(left) - $1)); [ "$v" -lt 10 ] && v=10; echo "$v"; }  # seconds, at least 10

# 1. deepinfer, FP8 linears + FP4 experts (the shipped formats)
timeout $((ours + 40)) "$bin" bench "${common[@]}" --format fp8 --slice-dir "$root/fp8" \
  --time-budget "$ours" --json "$out/ours_fp8.json" > "$out/ours_fp8.txt" \
  2> "$out/ours_fp8.log"
echo "ours fp8 rc=$? at ${SECONDS}s" >> "$out/machine.txt"
cp "$root/fp8/config.json" "$out/slice_config.json" 2> /dev/null
rm -rf "$root/fp8"

# 2. HF transformers, bf16, the same config
timeout "$(upto 8)" python3 tools/bench/hf_v4_slice.py --config "$out/slice_config.json" \
  --prefill 1x8192,64x512 --decode-batch 1,16,64,256 --context 4096 --warmup 1 --reps 2 \
  --steps 6 --json "$out/hf.json" > "$out/hf.txt" 2> "$out/hf.log"
echo "hf rc=$? at ${SECONDS}s" >> "$out/machine.txt"

# 3. deepinfer bf16 (the format HF runs), only with enough time left
if [ "$(left)" -gt 75 ]; then
  timeout "$(upto 10)" "$bin" bench "${common[@]}" --format bf16 --slice-dir "$root/bf16" \
    --time-budget "$(upto 55)" --json "$out/ours_bf16.json" > "$out/ours_bf16.txt" \
    2> "$out/ours_bf16.log"
  echo "ours bf16 rc=$? at ${SECONDS}s" >> "$out/machine.txt"
fi
rm -rf "$root"

for f in ours_fp8 ours_bf16; do
  if [ -s "$out/$f.json" ] && [ -s "$out/hf.json" ]; then
    echo "### $f vs HF bf16"
    python3 tools/bench/hf_v4_slice.py --compare-only "$out/$f.json" "$out/hf.json"
    echo
  fi
done > "$out/compare.md" 2>&1
cat "$out/machine.txt" "$out"/ours_*.txt "$out/hf.txt" "$out/compare.md" 2> /dev/null
