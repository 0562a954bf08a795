#!/usr/bin/env bash
# Contract test of `deepinfer score` / `generate` on the quantized official fixtures (FP8/FP4,
# DeepSeek's own numerics): score's logits at the fixture rows meet the noise-floor bar of the
# fixture README (median/max of per-row max-abs vs alt2, argmax agreement), and greedy generate
# reproduces the reference's greedy ids for the steps whose top-2 margin exceeds the noise.
# Usage: model_official.sh <path-to-deepinfer> <source-dir>
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
py=/usr/bin/python3

bars="$src/tests/cli/fixture_bars.py"  # request bodies and noise-floor bars

for fx in official_v4_a official_v4_c; do
  dir=$src/tests/fixtures/$fx
  $py "$bars" score_request "$dir" > "$tmp/score.json"
  if ! "$bin" score --model "$dir" --threads 2 < "$tmp/score.json" > "$tmp/logits.json" 2> "$tmp/err.txt"; then
    echo "FAIL $fx: score exited non-zero"; cat "$tmp/err.txt"; fails=$((fails + 1))
  else
    $py "$bars" check_score "$dir" < "$tmp/logits.json" || fails=$((fails + 1))
  fi
  $py "$bars" generate_request "$dir" > "$tmp/gen.json"
  if ! "$bin" generate --model "$dir" --threads 2 < "$tmp/gen.json" > "$tmp/out.json" 2> "$tmp/err.txt"; then
    echo "FAIL $fx: generate exited non-zero"; cat "$tmp/err.txt"; fails=$((fails + 1))
  else
    $py "$bars" check_generate "$dir" < "$tmp/out.json" || fails=$((fails + 1))
  fi
done

if [[ $fails -ne 0 ]]; then
  echo "$fails failure(s)"
  exit 1
fi
echo "model_official: ok"
