#!/usr/bin/env bash
# CLI contract of `deepinfer bench` on the CPU with the tiny slice: the markdown table and the JSON
# (machine, commit, prefill/decode numbers), the synthesized checkpoint in the published layout
# (bf16, and FP8 128x128 + FP4 experts), the same bytes for a seed whatever the thread count, the
# decode byte count a single token implies (dense weights + k experts per layer + one embedding
# row), and bad flags exiting non-zero with a message.
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

common=(bench --device cpu --slice tiny --layers 4 --prefill 1x48,2x16 --decode-batch 1,3
        --context 260 --warmup 1 --reps 1 --steps 2)

"$bin" "${common[@]}" --format bf16 --slice-dir "$tmp/bf16" --json "$tmp/bf16.json" --threads 2 \
  > "$tmp/bf16.txt" 2> "$tmp/bf16.err" || { cat "$tmp/bf16.err"; exit 1; }
"$bin" "${common[@]}" --format fp8 --slice-dir "$tmp/fp8" --json "$tmp/fp8.json" --threads 1 \
  > "$tmp/fp8.txt" 2> "$tmp/fp8.err" || { cat "$tmp/fp8.err"; exit 1; }
# The same seed with another thread count: the same file.
"$bin" bench --device cpu --slice tiny --layers 4 --format fp8 --slice-dir "$tmp/fp8b" \
  --prefill none --decode-batch none --threads 2 > /dev/null 2>&1
cmp "$tmp/fp8/model.safetensors" "$tmp/fp8b/model.safetensors"

for f in bf16 fp8; do
  grep -q '^| phase | shape | tokens/s | time | work | roofline |$' "$tmp/$f.txt"
  grep -q '^| prefill | 1x48 | ' "$tmp/$f.txt"
  grep -q '^| prefill | 2x16 | ' "$tmp/$f.txt"
  grep -q '^| decode | batch 1 | ' "$tmp/$f.txt"
  grep -q '^| decode | batch 3 | ' "$tmp/$f.txt"
done

/usr/bin/python3 - "$tmp" <<'PY'
import json, struct, sys
tmp = sys.argv[1]

def header(path):
    b = open(path, "rb").read(1 << 20)
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return h

for fmt in ("bf16", "fp8"):
    r = json.load(open(f"{tmp}/{fmt}.json"))
    cfg = json.load(open(f"{tmp}/{fmt}/config.json"))
    h = header(f"{tmp}/{fmt}/model.safetensors")
    assert r["tool"] == "deepinfer bench" and r["commit"], r
    assert r["device"] == "cpu" and r["machine"]["device"].startswith("cpu"), r["machine"]
    assert r["model"]["format"] == fmt and r["model"]["layers"] == 4, r["model"]
    # the release layer pattern: SWA, SWA, CSA, HCA; hash routing in layers 0-2
    assert cfg["compress_ratios"] == [0, 0, 4, 128] and cfg["num_hash_layers"] == 3, cfg
    assert ("quantization_config" in cfg) == (fmt == "fp8")
    assert "layers.2.ffn.gate.tid2eid" in h and "layers.3.ffn.gate.bias" in h
    assert "layers.2.attn.indexer.wq_b.weight" in h and "layers.3.attn.indexer.wq_b.weight" not in h
    w1 = h["layers.0.ffn.experts.0.w1.weight"]
    if fmt == "fp8":
        assert h["layers.0.attn.wq_b.weight"]["dtype"] == "F8_E4M3"
        assert h["layers.0.attn.wq_b.scale"]["dtype"] == "F8_E8M0"
        assert h["layers.0.attn.wq_b.scale"]["shape"] == [4, 1]  # [512, 128] in 128x128 blocks
        assert w1["dtype"] == "I8" and w1["shape"] == [128, 128]  # FP4 pairs of [128, 256]
        assert h["layers.0.ffn.experts.0.w1.scale"]["shape"] == [128, 8]  # one per 32
    else:
        assert w1["dtype"] == "BF16" and w1["shape"] == [128, 256]
        assert all(v["dtype"] in ("BF16", "F32", "I64") for v in h.values())
    nbytes = {k: v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items()}
    expert = {l: sum(b for k, b in nbytes.items() if k.startswith(f"layers.{l}.ffn.experts.0."))
              for l in range(4)}
    dense = sum(b for k, b in nbytes.items()
                if ".ffn.experts." not in k and not k.endswith("tid2eid") and k != "embed.weight")
    embed_row = nbytes["embed.weight"] // cfg["vocab_size"]
    assert len(r["prefill"]) == 2 and len(r["decode"]) == 2
    for p in r["prefill"]:
        assert p["tokens_per_s"] > 0 and p["linear_flops"] > 0 and p["roofline_fraction"] > 0, p
    d1 = r["decode"][0]
    assert d1["batch"] == 1 and d1["context"] == 260 and d1["tokens_per_s"] > 0, d1
    # one token: exactly top-k experts in every layer
    assert d1["experts_touched_per_layer"] == 6, d1
    want = dense + 6 * sum(expert.values()) + embed_row
    assert abs(d1["weight_bytes_per_step"] - want) < 1e-6 * want, (d1["weight_bytes_per_step"], want)
    d3 = r["decode"][1]
    assert d3["batch"] == 3 and 6 <= d3["experts_touched_per_layer"] <= 16, d3
    assert r["memory"]["total_bytes"] > 0 and r["memory"]["checkpoint_bytes"] == sum(nbytes.values())
print("bench json ok")
PY

# Bad flags: non-zero exit and a message naming the problem.
expect_fail() {
  local want=$1
  shift
  if "$bin" bench "$@" > "$tmp/out" 2> "$tmp/err"; then
    echo "expected failure: bench $*"
    exit 1
  fi
  grep -q -- "$want" "$tmp/err" || { echo "no \"$want\" in:"; cat "$tmp/err"; exit 1; }
}
expect_fail "fp16" --device cpu --slice tiny --format fp16
expect_fail "--prefill" --device cpu --slice tiny --prefill 0x5
expect_fail "--prefill" --device cpu --slice tiny --prefill 12
expect_fail "--decode-batch" --device cpu --slice tiny --decode-batch 1,x
expect_fail "exactly one of --model and --slice" --device cpu
expect_fail "exactly one of --model and --slice" --device cpu --slice tiny --model "$tmp/bf16"
expect_fail "--slice must be" --device cpu --slice v5
expect_fail "--device must be cpu or cuda" --device tpu --slice tiny
expect_fail "--layers" --device cpu --slice tiny --layers 0
expect_fail "config.json" --device cpu --model "$tmp/missing"
if ! command -v nvidia-smi > /dev/null; then
  expect_fail "CUDA" --device cuda --slice tiny --layers 1 --prefill none --decode-batch none
fi
# The CUDA bench path with the kernel bodies run on the host (builds with the CUDA backend): the
# decode slots of batch 3 are filled by one prefill and device-side slot copies.
if DEEPINFER_CUDA_EMULATE=1 "$bin" bench --device cuda --slice tiny --layers 1 --prefill 1x16 \
    --reps 1 --decode-batch 1,3 --context 64 --warmup 1 --steps 2 --json "$tmp/cuda.json" \
    > "$tmp/cuda.txt" 2> "$tmp/cuda.err"; then
  grep -q '^| decode | batch 3 | ' "$tmp/cuda.txt"
  /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); d=r["decode"][1]
assert d["batch"] == 3 and d["tokens_per_s"] > 0 and "error" not in d, d' "$tmp/cuda.json"
elif ! grep -q "no CUDA backend" "$tmp/cuda.err"; then
  echo "emulated CUDA bench failed:"; cat "$tmp/cuda.err"; exit 1
fi
echo "bench cli ok"
