#!/usr/bin/env bash
# `deepinfer serve --device cuda` on the DeepSeek V4.1 fixture: the engine runs on the V4.1 CUDA
# runner (fixed device slots sized from --kv-cache-memory, logged), a greedy chat completion
# answers 200 in the Chat Completions shape and the same request again answers the same tokens;
# /metrics reports the slots' KV blocks. Skips when the build has no CUDA backend; without a GPU
# it runs the kernel bodies on the host (DEEPINFER_CUDA_EMULATE=1).
# Usage: serve_v41_cuda.sh <deepinfer> <source-dir>
set -euo pipefail
bin=$1
src=$2
test_name=serve_v41_cuda
source "$src/tests/cli/lib/cuda.sh"
fail_label="$mode"
source "$src/tests/cli/lib/serve.sh"

start_serve --model "$src/tests/fixtures/official_v41_c_bf16" --device cuda --threads 1 \
  --max-num-seqs 2 --max-model-len 256 --kv-cache-memory 64M --served-model-name v41
grep -q "deepinfer serve: cuda: V4.1, 2 sequence slots x 256 positions" "$tmp/log" ||
  fail "no line describing the CUDA slots"

body='{"model":"v41","max_tokens":6,"temperature":0,"ignore_eos":true,"thinking":{"type":"disabled"},
       "messages":[{"role":"user","content":"Hello there, how are you today?"}]}'
chat_twice "$body"
/usr/bin/python3 - "$tmp/first.json" "$tmp/again.json" <<'PY' || fail "bad answers: $(cat "$tmp/first.json" "$tmp/again.json")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    assert r["object"] == "chat.completion", r
    assert r["usage"]["completion_tokens"] == 6, r
assert a["choices"][0]["message"] == b["choices"][0]["message"], (a, b)
PY

# The block pool covers the slots' positions: 2 x ceil(256 / 16) blocks, none in use now.
metrics=$(curl -s "$base/metrics")
grep -q '^deepinfer_kv_blocks_total 32$' <<<"$metrics" || fail "kv blocks: $(grep kv_blocks <<<"$metrics")"

stop_serve
echo "serve_v41_cuda: ok ($mode)"
