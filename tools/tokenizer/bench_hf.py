"""Side-by-side tokenizer run on the GPU machine: HF `tokenizers` (Rust, via python) and the
deepinfer bench binary on the same texts and the same DeepSeek V4.1 tokenizer.json.

Usage: python3 bench_hf.py DIR   (DIR holds tokenizer.json, text_1mb.txt, text_10mb.txt,
corpus.jsonl, bench_tokenizer_encode_bench and lib/); writes results.json to $OUT.
Also checks that both produce identical ids on the texts and encodes the differential corpus
and a few whitespace edge cases with HF, so the JS reference can be cross-checked."""
import json
import os
import subprocess
import sys
import time
from array import array

import tokenizers
from tokenizers import Tokenizer

d = sys.argv[1]
out = os.environ.get("OUT", ".")
tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
ncpu = os.cpu_count()
res = {"tokenizers_version": tokenizers.__version__, "ncpu": ncpu}
try:
    res["cpu"] = [l for l in open("/proc/cpuinfo") if l.startswith("model name")][0].split(":")[1].strip()
except Exception:  # noqa: BLE001
    res["cpu"] = "?"

env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(d, "lib"))
binary = os.path.join(d, "bench_tokenizer_encode_bench")


def ours(path, threads, ids_out=None):
    cmd = [binary, f"--encode={path}", f"--threads={threads}"]
    if ids_out:
        cmd.append(f"--ids-out={ids_out}")
    r = subprocess.run(cmd, env=dict(env, DEEPINFER_TOKENIZER=d), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout)


def chunks(text, n):
    size = max(1, len(text) // n)
    parts, start = [], 0
    while start < len(text):
        end = text.find("\n\n", start + size)
        end = len(text) if end < 0 else end + 2
        parts.append(text[start:end])
        start = end
    return parts


# HF ids for the differential corpus and whitespace edge cases.
corpus = [json.loads(l)["text"] for l in open(os.path.join(d, "corpus.jsonl"), encoding="utf-8")]
edge = ["a \u0085", "a \u0085b", " \u0085\u0085", "a \u180e", "a \u180eb", "a \ufeff", "a \ufeffb",
        "x\u3000\u3000", "x \u2028", "\u0085", "\u180e", "\ufeff", "a\n\u0085b", "a  \ufeff  b"]
with open(os.path.join(out, "hf_corpus.jsonl"), "w", encoding="utf-8") as f:
    for t in corpus + edge:
        f.write(json.dumps({"text": t, "ids": tok.encode(t, add_special_tokens=False).ids},
                           ensure_ascii=False) + "\n")
for name in ["1mb", "10mb"]:
    path = os.path.join(d, f"text_{name}.txt")
    text = open(path, encoding="utf-8").read()
    nbytes = len(text.encode("utf-8"))
    reps = 2 if name == "1mb" else 1
    tok.encode(text[:200000], add_special_tokens=False)
    best, ids = 1e9, None
    for _ in range(reps):
        t0 = time.perf_counter()
        enc = tok.encode(text, add_special_tokens=False)
        best = min(best, time.perf_counter() - t0)
        ids = enc.ids
    parts = chunks(text, ncpu * 4)
    best_b, nb = 1e9, 0
    for _ in range(reps):
        t0 = time.perf_counter()
        encs = tok.encode_batch(parts, add_special_tokens=False)
        best_b = min(best_b, time.perf_counter() - t0)
        nb = sum(len(e.ids) for e in encs)
    ids_path = os.path.join(out, f"ours_{name}.bin")
    o1 = min((ours(path, 1, ids_path if i == 0 else None) for i in range(reps)),
             key=lambda r: r["seconds"])
    ids_all = os.path.join(out, f"ours_all_{name}.bin")
    on = min((ours(path, ncpu, ids_all if i == 0 else None) for i in range(reps)),
             key=lambda r: r["seconds"])
    mine = array("i")
    with open(ids_path, "rb") as f:
        mine.frombytes(f.read())
    mine = mine.tolist()
    mine_all = array("i")
    with open(ids_all, "rb") as f:
        mine_all.frombytes(f.read())
    os.remove(ids_all)
    first = next((i for i, (a, b) in enumerate(zip(mine, ids)) if a != b), None)
    res[name] = {
        "bytes": nbytes, "hf_tokens": len(ids), "hf_single_s": best,
        "hf_batch_tokens": nb, "hf_batch_s": best_b, "hf_batch_chunks": len(parts),
        "ours_tokens": o1["tokens"], "ours_single_s": o1["seconds"],
        "ours_all_s": on["seconds"], "ids_identical": mine == ids,
        "ids_identical_all_cores": mine_all.tolist() == ids,
        "first_mismatch": first,
    }
    os.remove(ids_path)
    print(name, json.dumps(res[name]), flush=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)

with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(res, f, indent=1)
print(json.dumps(res))
