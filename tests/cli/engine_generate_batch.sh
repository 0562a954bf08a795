#!/usr/bin/env bash
# Contract test of `deepinfer generate --model DIR --batch FILE.jsonl` on the tiny HF fixture:
# one JSON result per input line in input order; greedy ids equal HF's greedy continuation
# (reference.safetensors greedy_out); bad lines give an error object in their place; the output
# does not change with --max-num-seqs 1 (one by one) or --no-prefix-cache.
# Usage: engine_generate_batch.sh <path-to-deepinfer> <source-dir>
set -u
bin=$1
src=$2
model=$src/tests/fixtures/hf_v4_a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

prompt='[803,236,59,334,894,642,383,1221,509,958,1034,871,740,754,65,1041,361,484,472,835,1159,650,74,1014,158,191,836,312,1031,708,226,977,1126,306,585,751,951,682,417,640,987,466,1004,262,972,183,554,29,507,361,680,515,268,569,333,983,305,1259,475,725,1125,307,943,301]'
greedy='[171,823,810,43,238,878,305,244,639,552,665,304,1216,285,294,1075,1141,163,828,648,1246,81,21,813,114,133,2,934,357,848,763,1043,378,620,902,1165,1044,859,1135,116,106,171,823,810,43,238,878,305]'
greedy5='[171,823,810,43,238]'

cat > "$tmp/in.jsonl" <<JSONL
{"ids":$prompt,"max_tokens":48,"ignore_eos":true}
{"ids":[1,2,
{"ids":$prompt,"max_tokens":5,"temperature":0}
{"ids":[]}
{"ids":[5,6,7,8,9],"max_tokens":12,"temperature":0.9,"top_p":0.9,"seed":7,"ignore_eos":true}
{"ids":[5,6,7,8,9],"max_tokens":12,"temperature":0.9,"top_p":0.9,"seed":7,"ignore_eos":true}
JSONL

"$bin" generate --model "$model" --threads 1 --batch "$tmp/in.jsonl" --block-size 16 \
  > "$tmp/out.jsonl" 2> "$tmp/err.txt"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL exit status $rc"; cat "$tmp/err.txt"; exit 1
fi
mapfile -t out < "$tmp/out.jsonl"
expect() {  # expect NAME ACTUAL PATTERN (bash regex)
  if [[ ! "$2" =~ $3 ]]; then
    echo "FAIL $1"; echo "  got:  $2"; echo "  want: $3"; fails=$((fails + 1))
  fi
}
[[ ${#out[@]} -eq 6 ]] || { echo "FAIL want 6 result lines, got ${#out[@]}"; fails=$((fails + 1)); }
esc() { printf '%s' "$1" | sed 's/[][]/\\&/g'; }
expect "greedy 48 = HF" "${out[0]}" "^\{\"ids\":$(esc "$greedy"),\"text\":null,\"finish_reason\":\"length\",\"usage\":\{\"prompt_tokens\":64,\"completion_tokens\":48,"
expect "bad JSON line" "${out[1]}" '^\{"error":\{"type":"invalid_request_error","message":"line 2: .+"\}\}$'
expect "greedy 5" "${out[2]}" "^\{\"ids\":$(esc "$greedy5"),\"text\":null,\"finish_reason\":\"length\""
expect "empty prompt" "${out[3]}" '^\{"error":\{"type":"invalid_request_error","message":"line 4: .*empty.*"\}\}$'
expect "seeded sampling runs" "${out[4]}" '^\{"ids":\[[0-9]+(,[0-9]+){11}\],'
[[ "${out[4]%%,\"usage\"*}" == "${out[5]%%,\"usage\"*}" ]] || { echo "FAIL same seed, different ids"; fails=$((fails + 1)); }

# Same results one request at a time and without the prefix cache (usage's hit count aside).
strip() { sed 's/"prompt_cache_hit_tokens":[0-9]*//' "$1"; }
"$bin" generate --model "$model" --threads 1 --batch "$tmp/in.jsonl" --max-num-seqs 1 \
  > "$tmp/one.jsonl" 2>/dev/null
"$bin" generate --model "$model" --threads 1 --batch "$tmp/in.jsonl" --no-prefix-cache \
  --max-batched-tokens 32 > "$tmp/cold.jsonl" 2>/dev/null
cmp -s <(strip "$tmp/out.jsonl") <(strip "$tmp/one.jsonl") || { echo "FAIL --max-num-seqs 1 differs"; fails=$((fails + 1)); }
cmp -s <(strip "$tmp/out.jsonl") <(strip "$tmp/cold.jsonl") || { echo "FAIL --no-prefix-cache differs"; fails=$((fails + 1)); }

# A missing batch file is a clear error with exit 1.
"$bin" generate --model "$model" --batch "$tmp/missing.jsonl" > /dev/null 2> "$tmp/err2.txt"
[[ $? -eq 1 ]] && grep -q "batch" "$tmp/err2.txt" || { echo "FAIL missing file"; fails=$((fails + 1)); }

[[ $fails -eq 0 ]] && echo "engine_generate_batch: all passed"
exit $((fails > 0))
