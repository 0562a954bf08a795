#!/usr/bin/env bash
# `deepinfer serve` on the bundled model: it listens at once (503 while loading), /health turns
# 200, a chat request with a tool definition answers in the Chat Completions shape, and SIGTERM
# while a stream runs ends that stream cleanly (final chunk + [DONE]) and exits 0 quickly.
# Usage: serve_shutdown.sh <deepinfer> <source-dir>
set -euo pipefail
bin=$1
src=$2
source "$src/tests/cli/lib/serve.sh"

start_serve --model "$src/models/default" --threads 1 --max-model-len 8192 \
  --served-model-name tiny

# A complete chat request with a tool definition.
reply=$(curl -s -w '\n%{http_code}' "$base/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"tiny","max_tokens":16,"seed":1,"messages":[{"role":"user","content":"Weather in Paris?"}],
       "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
       "properties":{"city":{"type":"string"}},"required":["city"]}}}]}')
[[ $(tail -n1 <<<"$reply") == 200 ]] || fail "chat answered: $reply"
grep -q '"object":"chat.completion"' <<<"$reply" || fail "not a chat.completion: $reply"
grep -q '"finish_reason":' <<<"$reply" || fail "no finish_reason: $reply"

# A long stream, then SIGTERM while it runs.
curl -sN "$base/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"tiny","stream":true,"max_tokens":7000,"ignore_eos":true,"messages":[{"role":"user","content":"Count"}]}' \
  >"$tmp/stream" &
curl_pid=$!
for _ in $(seq 200); do
  [[ $(grep -c '^data: ' "$tmp/stream" || true) -ge 3 ]] && break
  sleep 0.05
done
[[ $(grep -c '^data: ' "$tmp/stream" || true) -ge 3 ]] || fail "the stream did not start"
start=$(date +%s%N)
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$curl_pid" || fail "curl failed: the stream did not end cleanly"
[[ $rc == 0 ]] || fail "serve exited $rc after SIGTERM"
(( elapsed_ms < 5000 )) || fail "serve took ${elapsed_ms} ms to exit"
last=$(grep '^data: ' "$tmp/stream" | tail -n1)
[[ $last == "data: [DONE]" ]] || fail "the stream did not end with [DONE]: $last"
grep '^data: ' "$tmp/stream" | tail -n2 | head -n1 | grep -q '"finish_reason":"' ||
  fail "no final chunk with a finish_reason"
grep -q "shutting down" "$tmp/log" || fail "no shutdown line"
echo "serve_shutdown: ok (exit in ${elapsed_ms} ms)"
