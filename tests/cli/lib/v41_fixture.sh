# Shared by the `deepinfer score` / `generate` tests on the DeepSeek V4.1 fixtures (source it after
# setting bin and src): a temp dir $tmp, a failure count $fails, and
#   check_score_generate DIR LABEL ARGS...  score's logits meet the fixture's noise-floor bars and
#       greedy generate equals the reference's ids on the margin-safe steps
#       (tests/cli/fixture_bars.py); ARGS go to both commands;
#   check_bad_id DIR ARGS...  an id outside the vocabulary gives the error object and exit status 1;
#   finish NAME  exits 1 naming the number of failures, else prints "NAME: ok".
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
py=/usr/bin/python3
bars="$src/tests/cli/fixture_bars.py"  # request bodies and noise-floor bars

check_score_generate() {
  local dir=$1 label=$2
  shift 2
  $py "$bars" score_request "$dir" > "$tmp/score.json"
  if ! "$bin" score --model "$dir" "$@" < "$tmp/score.json" > "$tmp/logits.json" 2> "$tmp/err.txt"; then
    echo "FAIL $label: score exited non-zero"; cat "$tmp/err.txt"; fails=$((fails + 1))
  else
    $py "$bars" check_score "$dir" < "$tmp/logits.json" || fails=$((fails + 1))
  fi
  $py "$bars" generate_request "$dir" > "$tmp/gen.json"
  if ! "$bin" generate --model "$dir" "$@" < "$tmp/gen.json" > "$tmp/out.json" 2> "$tmp/err.txt"; then
    echo "FAIL $label: generate exited non-zero"; cat "$tmp/err.txt"; fails=$((fails + 1))
  else
    $py "$bars" check_generate "$dir" < "$tmp/out.json" || fails=$((fails + 1))
  fi
}

check_bad_id() {
  local dir=$1
  shift
  echo '{"ids":[3, 999999]}' | "$bin" score --model "$dir" "$@" > "$tmp/e.json" 2> /dev/null
  local rc=$?
  if [[ $rc -ne 1 ]] || ! grep -q '"error"' "$tmp/e.json"; then
    echo "FAIL bad id: rc $rc, $(cat "$tmp/e.json")"; fails=$((fails + 1))
  fi
}

finish() {
  if [[ $fails -ne 0 ]]; then
    echo "$fails failure(s)"
    exit 1
  fi
  echo "$1: ok"
}
