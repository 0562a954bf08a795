#!/usr/bin/env bash
# One device session for the CUDA backend (run from the repository root on the GPU machine, with
# the bundle .devbin/bundle.tar.xz = stripped test_backend_cuda + deepinfer + their shared
# libraries, made by `tools/device/bundle.sh .devbin/bundle.tar.xz SOURCE_DIR BUILD/src/cli/deepinfer
# BUILD/tests/test_backend_cuda`): the GPU tests (model, kernels, the engine's CUDA runner), score/generate and
# generate --batch with --device cuda against --device cpu on every fixture, `serve --device cuda`
# (tests/cli/serve_cuda.sh), and the kernel timings. Logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/devbin
tar -xJf .devbin/bundle.tar.xz -C /tmp/devbin
export LD_LIBRARY_PATH=/tmp/devbin
bin=/tmp/devbin
src_dir=$(cat /tmp/devbin/source_dir)  # the test binary's DEEPINFER_SOURCE_DIR
[ -e "$src_dir" ] || { mkdir -p "$(dirname "$src_dir")"; ln -s "$PWD" "$src_dir"; }
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm,clocks.mem \
  --format=csv 2>&1 | tee "$out/gpu.txt"
timeout 300 "$bin/test_backend_cuda" --gtest_filter="${FILTER:-CudaDevice*:CudaKernels*:CudaRunnerDevice*}" 2>&1 |
  tee "$out/test.log"
for f in hf_v4_a hf_v4_b official_v4_a official_v4_c; do
  dir=tests/fixtures/$f
  python3 - "$dir" > /tmp/req.json <<'PY'
import json, sys
from safetensors.numpy import load_file
r = load_file(sys.argv[1] + "/reference.safetensors")
print(json.dumps({"ids": r["greedy_prompt"].tolist(), "max_tokens": 32, "temperature": 0}))
PY
  # The engine: the fixture's greedy prompt and shorter prefixes of it, batched (CUDA runner).
  python3 - /tmp/req.json > /tmp/batch.jsonl <<'PY'
import json, sys
ids = json.load(open(sys.argv[1]))["ids"]
for n in (len(ids), 9, 23, 40):
    print(json.dumps({"ids": ids[:n], "max_tokens": 32, "temperature": 0, "ignore_eos": True}))
PY
  for dev in cuda cpu; do
    timeout 60 "$bin/deepinfer" generate --model "$dir" --device $dev < /tmp/req.json \
      > "/tmp/gen_$dev.json" 2>> "$out/cli.log"
    timeout 60 "$bin/deepinfer" score --model "$dir" --device $dev < /tmp/req.json \
      > "/tmp/score_$dev.json" 2>> "$out/cli.log"
    timeout 120 "$bin/deepinfer" generate --model "$dir" --device $dev --batch /tmp/batch.jsonl \
      > "/tmp/batch_$dev.jsonl" 2>> "$out/cli.log"
  done
  python3 - "$f" >> "$out/cli.log" 2>&1 <<'PY'
import json, sys
import numpy as np
g = [json.load(open(f"/tmp/gen_{d}.json")).get("ids") for d in ("cuda", "cpu")]
s = [np.array(json.load(open(f"/tmp/score_{d}.json"))["logits"], dtype=np.float64) for d in ("cuda", "cpu")]
same = 0
while same < min(len(g[0]), len(g[1])) and g[0][same] == g[1][same]:
    same += 1
print(f"{sys.argv[1]}: generate --device cuda vs cpu: first {same} of {len(g[1])} ids identical;"
      f" score max-abs {np.abs(s[0] - s[1]).max():.3g} over {s[0].shape[0]} rows,"
      f" argmax agree {(s[0].argmax(1) == s[1].argmax(1)).sum()}/{s[0].shape[0]}")
b = [[json.loads(l).get("ids") for l in open(f"/tmp/batch_{d}.jsonl")] for d in ("cuda", "cpu")]
print(f"{sys.argv[1]}: generate --batch (engine) --device cuda vs cpu: "
      f"{sum(x == y for x, y in zip(*b))} of {len(b[1])} requests' ids identical")
PY
done
timeout 120 bash tests/cli/serve_cuda.sh "$bin/deepinfer" "$PWD" > "$out/serve_cuda.log" 2>&1
echo "serve_cuda.sh exit $?" >> "$out/serve_cuda.log"
tail -3 "$out/serve_cuda.log"
grep -E "vs cpu" "$out/cli.log" | tail -8
