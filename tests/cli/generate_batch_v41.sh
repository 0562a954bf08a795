#!/usr/bin/env bash
# `deepinfer generate --batch --device cpu` on the DeepSeek V4.1 fixture runs through the engine's
# V4.1 CPU runner (the one with a prefix cache):
# one JSON result per input line in input order; a request sharing a 40-token prefix with an
# earlier one (run one at a time) reuses two cached blocks of 16 and answers exactly what it
# answers with the prefix cache off; a text prompt is tokenized and decoded; a bad id gives that
# line an error object.
# Usage: generate_batch_v41.sh <deepinfer> <source-dir>
set -euo pipefail
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=$src/tests/fixtures/official_v41_c_bf16
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
shared = [(7 * i + 11) % 500 + 3 for i in range(40)]
lines = [
    {"ids": shared + [5, 6, 7], "max_tokens": 6, "temperature": 0, "ignore_eos": True},
    {"ids": shared + [9, 8, 7, 6, 5, 4, 3], "max_tokens": 8, "temperature": 0, "ignore_eos": True},
    {"ids": [3, 99999], "max_tokens": 2},
    {"prompt": "hello world, this is a test", "max_tokens": 4, "temperature": 0, "ignore_eos": True},
]
with open(tmp + "/in.jsonl", "w") as f:
    for l in lines:
        f.write(json.dumps(l) + "\n")
with open(tmp + "/second.jsonl", "w") as f:
    f.write(json.dumps(lines[1]) + "\n")
PY
"$bin" generate --model "$dir" --device cpu --threads 1 --max-num-seqs 1 --batch "$tmp/in.jsonl" \
  >"$tmp/out.jsonl" 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: generate --batch"; exit 1; }
"$bin" generate --model "$dir" --device cpu --threads 1 --no-prefix-cache --batch "$tmp/second.jsonl" \
  >"$tmp/cold.jsonl" 2>>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: cold run"; exit 1; }
/usr/bin/python3 - "$tmp" <<'PY' || { cat "$tmp/out.jsonl" "$tmp/cold.jsonl"; exit 1; }
import json, sys
tmp = sys.argv[1]
out = [json.loads(l) for l in open(tmp + "/out.jsonl")]
cold = [json.loads(l) for l in open(tmp + "/cold.jsonl")]
assert len(out) == 4, out
a, b, bad, text = out
assert len(a["ids"]) == 6 and a["finish_reason"] == "length", a
assert a["usage"] == {"prompt_tokens": 43, "completion_tokens": 6, "prompt_cache_hit_tokens": 0}, a
assert b["usage"]["prompt_cache_hit_tokens"] == 32, b
assert cold[0]["usage"]["prompt_cache_hit_tokens"] == 0, cold
assert b["ids"] == cold[0]["ids"] and len(b["ids"]) == 8, (b, cold)
assert "error" in bad and "line 3" in bad["error"]["message"], bad
assert len(text["ids"]) == 4 and isinstance(text["text"], str), text
print("generate_batch_v41: ok")
PY
