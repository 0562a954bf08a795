#!/usr/bin/env bash
# Contract test of `deepinfer score` / `generate` on the DeepSeek V4.1 fixtures (the official V4.1
# code's numerics; config.json architectures ["DeepseekV41ForCausalLM"] picks the V4.1 model):
# score's logits at the fixture rows meet the noise-floor bar of the fixture README (median/max
# of per-row max-abs vs alt2, argmax agreement); greedy generate equals the reference's greedy ids
# for the steps whose top-2 margin (one official prefill of the same tokens) exceeds twice the
# decode noise; a text prompt goes through the fixture's tokenizer; bad ids give the error object.
# Usage: model_v41.sh <path-to-deepinfer> <source-dir>
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
py=/usr/bin/python3

cat > "$tmp/ref.py" <<'PY'
import json, struct, sys

def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, m in header.items():
        if name == "__metadata__":
            continue
        s, e = m["data_offsets"]
        code = {"F32": "f", "I32": "i"}[m["dtype"]]
        vals = list(struct.unpack("<%d%s" % ((e - s) // 4, code), data[s:e]))
        out[name] = (vals, m["shape"])
    return out

def rows_of(vals, shape):
    v = shape[-1]
    return [vals[i * v:(i + 1) * v] for i in range(len(vals) // v)]

def stats(got, ref):
    d = sorted(max(abs(a - b) for a, b in zip(g, r)) for g, r in zip(got, ref))
    agree = sum(g.index(max(g)) == r.index(max(r)) for g, r in zip(got, ref))
    return d[(len(d) - 1) // 2], d[-1], agree

cmd, fx = sys.argv[1], sys.argv[2]
ref = load(fx + "/reference.safetensors")
if cmd == "score_request":
    print(json.dumps({"ids": ref["input_ids"][0], "rows": ref["rows"][0]}))
elif cmd == "generate_request":
    print(json.dumps({"ids": ref["greedy_prompt"][0], "max_tokens": len(ref["greedy_out"][0]),
                      "temperature": 0, "ignore_eos": True}))
elif cmd == "check_score":
    got = json.load(sys.stdin)["logits"]
    want = rows_of(*ref["logits"])
    med, mx, agree = stats(got, want)
    nmed, nmx, _ = stats(rows_of(*ref["alt2_logits"]), want)
    ok = med <= 1.5 * nmed + 0.01 and mx <= 2 * nmx + 0.01 and agree >= len(want) - 2
    print("score %s: median %.4f (bar %.4f) max %.4f (bar %.4f) argmax %d/%d" % (
        "ok" if ok else "FAIL", med, 1.5 * nmed + 0.01, mx, 2 * nmx + 0.01, agree, len(want)))
    sys.exit(0 if ok else 1)
elif cmd == "check_generate":
    got = json.load(sys.stdin)["ids"]
    want = ref["greedy_out"][0]
    tf = rows_of(*ref["teacher_forced_prefill_logits"])
    _, noise, _ = stats(rows_of(*ref["alt2_decode_logits"]), rows_of(*ref["decode_logits"]))
    safe = 0
    while safe < len(want):
        row = sorted(tf[safe], reverse=True)
        if row[0] - row[1] < 2 * noise or tf[safe].index(max(tf[safe])) != want[safe]:
            break
        safe += 1
    ok = len(got) == len(want) and got[:safe] == want[:safe]
    print("generate %s: %d tokens, the first %d (margin > 2x noise) equal the reference" % (
        "ok" if ok else "FAIL", len(got), safe))
    sys.exit(0 if ok else 1)
PY

for fx in official_v41_c_bf16 official_v41_a official_v41_b; do  # c_fp8 has no noise variants: test_model covers it with the bf16 twin's floor
  dir=$src/tests/fixtures/$fx
  [[ -f $dir/config.json ]] || continue
  $py "$tmp/ref.py" score_request "$dir" > "$tmp/score.json"
  if ! "$bin" score --model "$dir" --threads 2 < "$tmp/score.json" > "$tmp/logits.json" 2> "$tmp/err.txt"; then
    echo "FAIL $fx: score exited non-zero"; cat "$tmp/err.txt"; fails=$((fails + 1))
  else
    $py "$tmp/ref.py" check_score "$dir" < "$tmp/logits.json" || fails=$((fails + 1))
  fi
  $py "$tmp/ref.py" generate_request "$dir" > "$tmp/gen.json"
  if ! "$bin" generate --model "$dir" --threads 2 < "$tmp/gen.json" > "$tmp/out.json" 2> "$tmp/err.txt"; then
    echo "FAIL $fx: generate exited non-zero"; cat "$tmp/err.txt"; fails=$((fails + 1))
  else
    $py "$tmp/ref.py" check_generate "$dir" < "$tmp/out.json" || fails=$((fails + 1))
  fi
done

dir=$src/tests/fixtures/official_v41_c_bf16
# A text prompt through the fixture's tokenizer: 4 new ids and their text.
if ! echo '{"prompt":"hello world","max_tokens":4}' | "$bin" generate --model "$dir" --threads 1 \
    > "$tmp/p.json" 2> "$tmp/err.txt"; then
  echo "FAIL prompt: generate exited non-zero"; cat "$tmp/err.txt"; fails=$((fails + 1))
elif ! $py -c 'import json,sys; o=json.load(open(sys.argv[1])); assert len(o["ids"]) == 4 and isinstance(o["text"], str)' "$tmp/p.json"; then
  echo "FAIL prompt: $(cat "$tmp/p.json")"; fails=$((fails + 1))
fi
# An id outside the vocabulary: the error object and exit status 1.
echo '{"ids":[3, 999999]}' | "$bin" score --model "$dir" > "$tmp/e.json" 2> /dev/null
rc=$?
if [[ $rc -ne 1 ]] || ! grep -q '"error"' "$tmp/e.json"; then
  echo "FAIL bad id: rc $rc, $(cat "$tmp/e.json")"; fails=$((fails + 1))
fi

if [[ $fails -ne 0 ]]; then
  echo "$fails failure(s)"
  exit 1
fi
echo "model_v41: ok"
