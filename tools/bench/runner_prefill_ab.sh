#!/usr/bin/env bash
# The engine's CUDA prefill path, batched vs one prefill per sequence, in one run: synthesizes the
# V4-Flash slice (through `deepinfer bench`, which also prefills 1x512 on it as an anchor), then
# `deepinfer generate --batch` of B prompts x L random ids (max_tokens 1) with the CUDA runner's
# prefill_batch on and with DEEPINFER_CUDA_BATCH_PREFILL=0. Wall times include the load + upload,
# which both runs share; generate --batch prints its own prefill time nowhere, so the difference is
# the prefill difference.
#   tools/bench/runner_prefill_ab.sh BIN_DIR OUT_DIR [B L BLOCK LAYERS]
set -uo pipefail
bin=$1 out=$2 B=${3:-64} L=${4:-512} block=${5:-128} layers=${6:-4}
root=/tmp/deepinfer-slices
shm_free=$(df --output=avail -B1G /dev/shm 2> /dev/null | tail -1 | tr -d ' ')
if [ "${shm_free:-0}" -gt 30 ]; then root=/dev/shm/deepinfer-slices; fi
mkdir -p "$root"
t0=$SECONDS
timeout -k 2 45 "$bin/deepinfer" bench --device cuda --slice v4-flash --layers "$layers" \
  --format fp8 --slice-dir "$root/fp8" --prefill 1x512 --decode-batch none --warmup 0 --reps 1 \
  > "$out/slice_bench.txt" 2> "$out/slice_bench.log"
echo "slice rc=$? in $((SECONDS - t0)) s" | tee -a "$out/ab.txt"
python3 - "$B" "$L" > /tmp/ab_batch.jsonl << 'PY'
import json, random, sys
B, L = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(7)
for _ in range(B):
    ids = [rng.randrange(3, 129000) for _ in range(L)]
    print(json.dumps({"ids": ids, "max_tokens": 1, "temperature": 0, "ignore_eos": True}))
PY
for mode in 1 0; do
  start=$(date +%s.%N)
  DEEPINFER_CUDA_BATCH_PREFILL=$mode timeout -k 2 40 "$bin/deepinfer" generate \
    --model "$root/fp8" --device cuda --batch /tmp/ab_batch.jsonl --block-size "$block" \
    --max-num-seqs "$B" --max-batched-tokens 8192 --max-model-len $((L + 2)) \
    > "$out/gen_batch$mode.jsonl" 2> "$out/gen_batch$mode.log"
  rc=$?
  end=$(date +%s.%N)
  echo "batch_prefill=$mode ${B}x${L} block $block rc=$rc wall $(python3 -c "print(round($end - $start, 2))") s" |
    tee -a "$out/ab.txt"
done
# The first (and only) token of each request: the two runs should agree.
python3 - "$out/gen_batch1.jsonl" "$out/gen_batch0.jsonl" >> "$out/ab.txt" 2>&1 << 'PY'
import json, sys
a = [json.loads(l).get("ids") for l in open(sys.argv[1])]
b = [json.loads(l).get("ids") for l in open(sys.argv[2])]
print(f"requests {len(a)} / {len(b)}, same first ids: {sum(x == y for x, y in zip(a, b))}")
PY
rm -rf "$root/fp8"
