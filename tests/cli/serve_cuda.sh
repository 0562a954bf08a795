#!/usr/bin/env bash
# `deepinfer serve --device cuda` on the bundled model: the engine runs on the CUDA runner (a
# device block pool sized from --kv-cache-memory, logged), /health turns 200, a chat request
# answers 200 in the Chat Completions shape and /metrics reports the pool's KV blocks. Skips when the build
# has no CUDA backend; without a GPU it runs the kernel bodies on the host
# (DEEPINFER_CUDA_EMULATE=1).
# Usage: serve_cuda.sh <deepinfer> <source-dir>
set -euo pipefail
bin=$1
src=$2
test_name=serve_cuda
source "$src/tests/cli/lib/cuda.sh"
fail_label="$mode"
source "$src/tests/cli/lib/serve.sh"

start_serve --model "$src/models/default" --device cuda --threads 1 --max-num-seqs 4 \
  --max-model-len 1024 --kv-cache-memory 64M --served-model-name tiny
line=$(grep -o "deepinfer serve: cuda: 4 sequence slots, [0-9]* KV blocks of 16 positions" "$tmp/log") ||
  fail "no line describing the CUDA KV blocks"
blocks=$(sed 's/.*slots, \([0-9]*\) KV blocks.*/\1/' <<<"$line")

reply=$(curl -s -w '\n%{http_code}' "$base/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"tiny","max_tokens":4,"seed":1,"messages":[{"role":"user","content":"Hello"}]}')
[[ $(tail -n1 <<<"$reply") == 200 ]] || fail "chat answered: $reply"
grep -q '"object":"chat.completion"' <<<"$reply" || fail "not a chat.completion: $reply"
grep -q '"finish_reason":' <<<"$reply" || fail "no finish_reason: $reply"

# The engine's pool is the device's: the logged block count, none in use now.
metrics=$(curl -s "$base/metrics")
grep -q "^deepinfer_kv_blocks_total $blocks\$" <<<"$metrics" || fail "kv blocks: $(grep kv_blocks <<<"$metrics")"
grep -q '^deepinfer_kv_blocks_used 0$' <<<"$metrics" || fail "kv blocks used: $(grep kv_blocks <<<"$metrics")"

stop_serve
grep "sequence slots" "$tmp/log"
echo "serve_cuda: ok ($mode)"
