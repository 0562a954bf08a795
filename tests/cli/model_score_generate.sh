#!/usr/bin/env bash
# CLI contract of `deepinfer score` / `deepinfer generate` on the HF fixtures: score logits match
# the reference within 1e-3 at every recorded row, greedy generate reproduces the reference ids,
# a folder without tokenizer.json omits "text", a prompt needs tokenizer.json, errors are JSON.
set -euo pipefail
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$bin" "$src" "$tmp" <<'PY'
import array, json, os, struct, subprocess, sys
bin, src, tmp = sys.argv[1:4]

def reference(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    out = {}
    for k, v in json.loads(b[8:8 + n]).items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        a = array.array("f" if v["dtype"] == "F32" else "i")
        a.frombytes(b[8 + n + s:8 + n + e])
        out[k] = (a.tolist(), v["shape"])
    return out

def run(args, request):
    p = subprocess.run([bin] + args, input=json.dumps(request), capture_output=True, text=True)
    return p.returncode, json.loads(p.stdout)

for fx in ("hf_v4_a", "hf_v4_b"):
    d = os.path.join(src, "tests/fixtures", fx)
    r = reference(os.path.join(d, "reference.safetensors"))
    rows, V = r["rows"][0], r["logits"][1][1]
    rc, out = run(["score", "--model", d, "--threads", "2"], {"ids": r["input_ids"][0], "rows": rows})
    assert rc == 0, out
    assert len(out["logits"]) == len(rows) and all(len(x) == V for x in out["logits"])
    err = max(abs(out["logits"][i][j] - r["logits"][0][i * V + j]) for i in range(len(rows)) for j in range(V))
    assert err <= 1e-3, (fx, err)
    rc, out = run(["generate", "--model", d],
                  {"ids": r["greedy_prompt"][0], "max_tokens": len(r["greedy_out"][0]), "temperature": 0})
    assert rc == 0 and out["ids"] == r["greedy_out"][0], (fx, out)
    assert "text" not in out, out
    print(f"{fx}: score max-abs {err:.2e}, greedy ids identical")

# A folder with extra files and a tokenizer: prompt in, text out.
d = os.path.join(tmp, "m")
os.makedirs(os.path.join(d, "extra/sub"))
b = os.path.join(src, "tests/fixtures/hf_v4_b")
for f in ("config.json", "model.safetensors", "reference.safetensors", "README.md"):
    os.symlink(os.path.join(b, f), os.path.join(d, f))
rc, out = run(["generate", "--model", d], {"prompt": "time"})
assert rc == 1 and "tokenizer.json" in out["error"]["message"], out
os.symlink(os.path.join(src, "tests/fixtures/hf_tiny_tokenizer/tokenizer.json"), os.path.join(d, "tokenizer.json"))
rc, out = run(["generate", "--model", d], {"prompt": "the time of day", "max_tokens": 4, "temperature": 0})
assert rc == 0 and len(out["ids"]) == 4 and isinstance(out["text"], str), out
rc, out = run(["score", "--model", d], {"ids": [5, 6], "rows": [-1]})
assert rc == 0 and len(out["logits"]) == 1, out

# Errors are JSON objects with a message.
for req in ({"ids": [5, 6], "rows": [2]}, {"ids": [5, 99999], "rows": [0]}, {"rows": [0]}, {"ids": "x"}):
    rc, out = run(["score", "--model", d], req)
    assert rc == 1 and out["error"]["message"], (req, out)
rc, out = run(["score", "--model", os.path.join(tmp, "nowhere")], {"ids": [1]})
assert rc == 1 and "config.json" in out["error"]["message"], out
print("cli model: ok")
PY
