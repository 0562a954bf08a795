#!/usr/bin/env bash
# `deepinfer serve` on the DeepSeek V4.1 fixture (config.json architectures
# ["DeepseekV41ForCausalLM"] picks the V4.1 model and its engine runner, encoding auto → v41): the
# ready line names the v41 encoding, a chat completion answers 200 in the Chat Completions shape
# with usage, a second identical greedy request answers the same tokens, and a streamed one sends
# chunks and ends with [DONE].
# Usage: serve_v41.sh <deepinfer> <source-dir>
set -euo pipefail
bin=$1
src=$2
source "$src/tests/cli/lib/serve.sh"

start_serve --model "$src/tests/fixtures/official_v41_c_bf16" --host 127.0.0.1 --threads 1 \
  --max-model-len 256 --kv-cache-memory 8M --served-model-name v41
grep -q "encoding v41" "$tmp/log" || fail "the ready line does not name the v41 encoding"

# The fixture's tiny tokenizer has no <｜System｜> token: requests turn thinking off, so the V4.1
# encoding renders no system span.
body='{"model":"v41","max_tokens":12,"temperature":0,"ignore_eos":true,"thinking":{"type":"disabled"},
       "messages":[{"role":"user","content":"Hello there, how are you today? Please tell me a story about a cat."}]}'
chat_twice "$body"
# Chat Completions shape, 12 tokens, finish length; the same greedy request again answers the
# same tokens.
/usr/bin/python3 - "$tmp/first.json" "$tmp/again.json" <<'PY' || fail "bad answers: $(cat "$tmp/first.json" "$tmp/again.json")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    assert r["object"] == "chat.completion", r
    assert r["choices"][0]["finish_reason"] == "length", r
    assert r["choices"][0]["message"]["role"] == "assistant", r
    assert r["usage"]["completion_tokens"] == 12, r
assert a["usage"]["prompt_tokens"] > 16, a
assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"], (a, b)
PY

# Streamed.
curl -sN "$base/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"v41","stream":true,"max_tokens":8,"ignore_eos":true,"seed":3,
       "thinking":{"type":"disabled"},"messages":[{"role":"user","content":"Count to five."}]}' -w '\n%{http_code}' >"$tmp/stream"
[[ $(tail -n1 "$tmp/stream") == 200 ]] || fail "stream answered: $(cat "$tmp/stream")"
[[ $(grep -c '^data: {' "$tmp/stream" || true) -ge 2 ]] || fail "too few chunks: $(cat "$tmp/stream")"
grep -q '"object":"chat.completion.chunk"' "$tmp/stream" || fail "no chunk objects"
[[ $(grep '^data: ' "$tmp/stream" | tail -n1) == "data: [DONE]" ]] || fail "no [DONE]"
grep '^data: ' "$tmp/stream" | tail -n2 | head -n1 | grep -q '"finish_reason":"' ||
  fail "no final chunk with a finish_reason"

stop_serve
echo "serve_v41: ok"
