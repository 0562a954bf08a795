#!/usr/bin/env bash
# `deepinfer score` / `generate --device cuda` on the DeepSeek V4.1 fixture official_v41_c_bf16:
# the CUDA V4.1 model (CudaV41Model) answers with the same JSON as the CPU path; score's logits
# meet the fixture's noise-floor bars and greedy generate equals the reference's ids on the
# margin-safe steps (tests/cli/fixture_bars.py, as model_v41.sh for the CPU); `generate --batch
# --device cuda` (the engine on the V4.1 CUDA runner) gives each request the ids it gets alone.
# Skips when the build has no CUDA backend; without a GPU the kernel bodies run on the host
# (DEEPINFER_CUDA_EMULATE=1; tests/cli/lib/cuda.sh).
# Usage: model_v41_cuda.sh <path-to-deepinfer> <source-dir>
set -u
bin=$1
src=$2
test_name=model_v41_cuda
source "$src/tests/cli/lib/cuda.sh"
source "$src/tests/cli/lib/v41_fixture.sh"
dir=$src/tests/fixtures/official_v41_c_bf16
[[ -f $dir/config.json ]] || { echo "model_v41_cuda: no fixture; skipping"; exit 0; }

check_score_generate "$dir" "official_v41_c_bf16 ($mode)" --device cuda
# The engine on the V4.1 CUDA runner (generate --batch --device cuda): every request's greedy ids
# equal `generate --device cuda` on it alone (row-independent bodies, chunking-invariant prefill).
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
with open(sys.argv[1] + "/batch.jsonl", "w") as f:
    for n in (9, 23, 40):
        f.write(json.dumps({"ids": [(7 * i + 11) % 500 + 3 for i in range(n)], "max_tokens": 6,
                            "temperature": 0, "ignore_eos": True}) + "\n")
PY
if ! "$bin" generate --model "$dir" --device cuda --max-num-seqs 3 --batch "$tmp/batch.jsonl" \
    > "$tmp/batch_out.jsonl" 2> "$tmp/err.txt"; then
  echo "FAIL generate --batch exited non-zero"; cat "$tmp/err.txt"; fails=$((fails + 1))
else
  grep -q "cuda: V4.1, 3 sequence slots" "$tmp/err.txt" || { echo "FAIL no CUDA runner line"; cat "$tmp/err.txt"; fails=$((fails + 1)); }
  k=0
  while read -r line; do
    k=$((k + 1))
    echo "$line" | "$bin" generate --model "$dir" --device cuda > "$tmp/one.json" 2>/dev/null
    if ! /usr/bin/python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=[json.loads(l) for l in open(sys.argv[2])][int(sys.argv[3])]; assert a["ids"] == b["ids"], (a, b)' \
        "$tmp/one.json" "$tmp/batch_out.jsonl" $((k - 1)); then
      echo "FAIL batch request $k differs from generate alone"; fails=$((fails + 1))
    fi
  done < "$tmp/batch.jsonl"
fi
# An id outside the vocabulary: the error object and exit status 1.
check_bad_id "$dir" --device cuda

finish model_v41_cuda
