#!/usr/bin/env bash
# Makes the model reference fixtures on the GPU machine and packs them for tests/fixtures/.
# Needs the fixture tools in tools/fixtures/ (git-ignored; carried to the device).
#   tools/make_fixtures.sh hf OUTDIR     HF transformers exact-fp32 fixtures (hf_v4_*)
# Each fixture folder is tarred to OUTDIR/<name>.tgz; unpack into tests/fixtures/ and keep only
# config.json, model.safetensors, reference.safetensors, README.md and meta.json.
set -euo pipefail
cd "$(dirname "$0")/.."
T=tools/fixtures
what=${1:-hf}
out=${2:-${OUT:-fx_out}}
work=fx
mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1

hf_fixture() {  # name config seed seq_len [extra args...]
  local name=$1 config=$2 seed=$3 len=$4
  shift 4
  python3 $T/make_hf_v4.py --config "$config" --seed "$seed" --seq-len "$len" --out "$work/$name" "$@"
  rm -f "$work/$name/generation_config.json"
  tar czf "$out/$name.tgz" -C "$work" "$name"
}

case "$what" in
  hf)
    # a: 7 layers (HCA, SWA, CSA, CSA, SWA, HCA, CSA), 3 hash layers, hc_mult 2, odd dims.
    hf_fixture hf_v4_a $T/examples/hf_v4_a.json 3 520
    # b: SWA, CSA, HCA, CSA; the release's RoPE/YaRN numbers; hc_mult 4.
    hf_fixture hf_v4_b $T/examples/hf_v4_b.json 5 560
    # b in HF's own save_pretrained layout (model.* names, HF config keys), shorter.
    hf_fixture hf_v4_b_hflayout $T/examples/hf_v4_b.json 7 300 --hf-layout --no-variants
    ;;
  *)
    echo "usage: tools/make_fixtures.sh hf [OUTDIR]" >&2
    exit 2
    ;;
esac
