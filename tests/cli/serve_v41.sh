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
if ! command -v curl >/dev/null; then
  echo "curl is not installed; skipping"
  exit 0
fi
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- server log"
  cat "$tmp/log" || true
  exit 1
}

"$bin" serve --model "$src/tests/fixtures/official_v41_c_bf16" --host 127.0.0.1 --port 0 \
  --threads 1 --max-model-len 256 --kv-cache-memory 8M --served-model-name v41 2>"$tmp/log" &
pid=$!

port=""
for _ in $(seq 100); do
  port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$tmp/log")
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || fail "no 'listening on' line"
base="http://127.0.0.1:$port"

code=""
for _ in $(seq 600); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$base/health" || true)
  [[ $code == 200 ]] && break
  [[ $code == 503 || $code == 000 ]] || fail "/health answered $code"
  sleep 0.1
done
[[ $code == 200 ]] || fail "/health never turned 200"
grep -q "encoding v41" "$tmp/log" || fail "the ready line does not name the v41 encoding"

# The fixture's tiny tokenizer has no <｜System｜> token: requests turn thinking off, so the V4.1
# encoding renders no system span.
body='{"model":"v41","max_tokens":12,"temperature":0,"ignore_eos":true,"thinking":{"type":"disabled"},
       "messages":[{"role":"user","content":"Hello there, how are you today? Please tell me a story about a cat."}]}'
reply=$(curl -s -w '\n%{http_code}' "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$body")
[[ $(tail -n1 <<<"$reply") == 200 ]] || fail "chat answered: $reply"
head -n -1 <<<"$reply" >"$tmp/first.json"
again=$(curl -s -w '\n%{http_code}' "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$body")
[[ $(tail -n1 <<<"$again") == 200 ]] || fail "second chat answered: $again"
head -n -1 <<<"$again" >"$tmp/again.json"
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

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc == 0 ]] || fail "serve exited $rc after SIGTERM"
echo "serve_v41: ok"
