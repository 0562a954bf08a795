# Shared by the `deepinfer serve` CLI tests (source it after setting bin, src and optionally
# fail_label): skips (exit 0) without curl; a temp dir, a server that is killed on exit, fail()
# with the server log, start_serve ARGS... (port 0, waits for the "listening on" line and /health
# 200, sets $pid and $base), chat_twice BODY (posts a chat completion twice, both must answer 200;
# the replies go to $tmp/first.json and $tmp/again.json) and stop_serve (SIGTERM, the exit status
# must be 0).
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
  echo "FAIL${fail_label:+ ($fail_label)}: $*"
  echo "--- server log"
  cat "$tmp/log" || true
  exit 1
}

start_serve() {
  : >"$tmp/log"  # exists before the first read below (the background job may not have opened it)
  "$bin" serve --port 0 "$@" 2>>"$tmp/log" &
  pid=$!
  local port=""
  for _ in $(seq 100); do
    port=$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$tmp/log")
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || fail "no 'listening on' line"
  base="http://127.0.0.1:$port"
  local code=""
  for _ in $(seq 600); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$base/health" || true)
    [[ $code == 200 ]] && break
    [[ $code == 503 || $code == 000 ]] || fail "/health answered $code"
    kill -0 "$pid" 2>/dev/null || fail "serve exited"
    sleep 0.1
  done
  [[ $code == 200 ]] || fail "/health never turned 200"
}

chat_twice() {
  local reply again
  reply=$(curl -s -w '\n%{http_code}' "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$1")
  [[ $(tail -n1 <<<"$reply") == 200 ]] || fail "chat answered: $reply"
  head -n -1 <<<"$reply" >"$tmp/first.json"
  again=$(curl -s -w '\n%{http_code}' "$base/v1/chat/completions" -H 'Content-Type: application/json' -d "$1")
  [[ $(tail -n1 <<<"$again") == 200 ]] || fail "second chat answered: $again"
  head -n -1 <<<"$again" >"$tmp/again.json"
}

stop_serve() {
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  pid=""
  [[ $rc == 0 ]] || fail "serve exited $rc after SIGTERM"
}
