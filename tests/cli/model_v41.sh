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
source "$src/tests/cli/lib/v41_fixture.sh"

for fx in official_v41_c_bf16 official_v41_a official_v41_b; do  # c_fp8 has no noise variants: test_model covers it with the bf16 twin's floor
  dir=$src/tests/fixtures/$fx
  [[ -f $dir/config.json ]] || continue
  check_score_generate "$dir" "$fx" --threads 2
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
check_bad_id "$dir"

finish model_v41
