#!/usr/bin/env bash
# Makes the model reference fixtures on the GPU machine and packs them for tests/fixtures/.
# Needs the fixture tools in tools/fixtures/ (git-ignored; carried to the device).
#   tools/make_fixtures.sh hf OUTDIR     HF transformers exact-fp32 fixtures (hf_v4_*)
#   tools/make_fixtures.sh official OUTDIR
#                                        DeepSeek's official V4-Flash code on FP8/FP4 checkpoints
#                                        (official_v4_*; needs tools/fixtures/official/v4_flash,
#                                        see fetch_official.md) and the FP8/FP4 format values (quant)
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
    # b in HF's own save_pretrained layout (model.* names, HF config keys), shorter. Only its
    # config.json and its tensor list (tensors.json: name -> [dtype, shape] of the header) are
    # kept; the test rebuilds that layout from hf_v4_b's weights.
    hf_fixture hf_v4_b_hflayout $T/examples/hf_v4_b.json 7 300 --hf-layout --no-variants
    ;;
  official)
    # --- official numerics (quantized checkpoints) -----------------------------------------
    # Unpack each tarball into tests/fixtures/, drop inference_config.json and
    # generation_config.json, and split model.safetensors with tools/shard_safetensors.py (no
    # committed file over 2 MB).
    official_fixture() {  # name config seed seq_len
      python3 $T/make_official_v4.py --config "$2" --seed "$3" --seq-len "$4" --out "$work/$1"
      # MTP noise floor (keep only alt2_mtp_logits when committing)
      python3 tools/make_mtp_noise.py --tools $T --fixture "$work/$1" --out "$work/$1/mtp_noise.safetensors"
      tar czf "$out/$1.tgz" -C "$work" "$1"
    }
    # a: CSA+hash, HCA+hash, SWA, CSA, HCA + MTP; heads 8 x 96 (RoPE 32); window 24; YaRN 4.
    official_fixture official_v4_a $T/examples/official_v4_a.json 11 520
    # c: SWA+hash, CSA, HCA, CSA + MTP; dim 128, hc_mult 3, index_head_dim = RoPE dims (64).
    official_fixture official_v4_c tools/configs/official_v4_c.json 23 300
    # b (not committed, size): HCA, CSA, CSA (all hashed), SWA + MTP; hc_mult 2; o_groups 3.
    official_fixture official_v4_b $T/examples/official_v4_b.json 5 480
    python3 tools/make_quant_fixture.py --tools $T --out "$work/quant"
    tar czf "$out/quant.tgz" -C "$work" quant
    ;;
  *)
    echo "usage: tools/make_fixtures.sh hf|official [OUTDIR]" >&2
    exit 2
    ;;
esac
