#!/usr/bin/env bash
# Makes the DeepSeek V4.1 reference fixtures (DeepSeek's official V4.1-Flash inference code, run on
# the CPU of the GPU machine) and packs each one as OUTDIR/<name>.tgz for tests/fixtures/.
# Needs the fixture tools and the rebuilt official package in tools/fixtures/ (git-ignored,
# carried to the device; tools/fixtures/fetch_official.md).
#   tools/make_v41_fixtures.sh [OUTDIR]
# The four generators run at once (8 threads each). Unpack into tests/fixtures/ and drop
# inference_config.json and generation_config.json.
set -euo pipefail
cd "$(dirname "$0")/.."
T=tools/fixtures
out=${1:-${OUT:-fx_out}}
work=fx
mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1

v41_fixture() {  # name config seed seq_len [extra args...]
  local name=$1 config=$2 seed=$3 len=$4
  shift 4
  python3 $T/make_official_v41.py --config "$config" --seed "$seed" --seq-len "$len" \
    --out "$work/$name" "$@" > "$out/$name.log" 2>&1
  tar czf "$out/$name.tgz" -C "$work" "$name"
}

# a: bf16; ratios 2, 2, 1, 0, 1 (+1 DSpark stage); KV sources 0, 2; index sources 0, 2, 4
#    (4 reads 2's keys, candidate-filtered); Engram at 2, 3; window 24.
v41_fixture official_v41_a $T/examples/official_v41_a.json 5 300 &
# b: FP8 32x32 + FP4 experts; ratios 1, 0, 2, 2, 0 (+2 DSpark stages); hc_mult 3; Engram at 0, 3.
v41_fixture official_v41_b $T/examples/official_v41_b.json 7 300 &
# c: every feature at once, bf16 and FP8/FP4: ratios 0, 2, 2, 2, 1, 1, 1 (+2 DSpark stages);
#    KV sources 1, 3 (ratio 2) and 4 (ratio 1); index sources 1, 3, 4 (candidate source) and 6
#    (reads 4's keys, candidate-filtered); Engram at 2, 5; window 16, candidate blocks of 6.
v41_fixture official_v41_c_bf16 tools/configs/v41_c_bf16.json 11 240 --prompt-len 40 --gen-len 40 &
# The FP8/FP4 twin skips the fp64 noise variants (too slow through the official FP8 GEMM on the
# CPU); its tests borrow the noise floor of the bf16 twin (same config and seed).
v41_fixture official_v41_c_fp8 tools/configs/v41_c_fp8.json 11 160 --prompt-len 40 --gen-len 24 \
  --no-variants --no-verify &
status=0
for job in $(jobs -p); do wait "$job" || status=1; done
for f in "$out"/*.log; do echo "== $f"; tail -5 "$f"; done
exit $status
