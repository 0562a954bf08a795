#!/usr/bin/env bash
# CLI contract of `deepinfer tokenize`, `deepinfer detokenize` and `deepinfer recipe encode`
# (issue 3; encoding spec §5.3 vectors). Usage: tokenize.sh DEEPINFER SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
"$src/scripts/build_tokenizers.sh" >/dev/null || { echo "SKIP: tokenizer data unavailable"; exit 0; }
dir="${DEEPINFER_CACHE:-$HOME/.cache/deepinfer}/tokenizers/deepseek-v41"
fails=0
check() {  # name expected actual
  if [ "$2" != "$3" ]; then
    echo "FAIL $1"
    echo "  expected: $2"
    echo "  actual:   $3"
    fails=$((fails + 1))
  fi
}

check hello '{"ids":[19923,14,2058,3]}' "$(printf 'Hello, world!' | "$bin" tokenize --tokenizer "$dir")"
check added '{"ids":[128803,23166,128804]}' \
  "$(printf '<｜User｜>Hi<｜Assistant｜>' | "$bin" tokenize --tokenizer "$dir")"
check digits '{"ids":[19,223,736,223,6895,223,6895,22]}' \
  "$(printf '1 12 123 1234' | "$bin" tokenize --tokenizer "$dir")"
check plain '{"ids":[30,28217,6756,28217,32]}' \
  "$(printf '<｜User｜>' | "$bin" tokenize --plain --tokenizer "$dir")"
check default_dir '{"ids":[19923]}' "$(printf 'Hello' | "$bin" tokenize)"
check empty '{"ids":[]}' "$(printf '' | "$bin" tokenize --tokenizer "$dir")"
check detok '{"text":"<｜User｜>Hi<｜Assistant｜>"}' \
  "$(echo '{"ids":[128803,23166,128804]}' | "$bin" detokenize --tokenizer "$dir")"
check detok_skip '{"text":"Hi"}' \
  "$(echo '{"ids":[0,23166,1]}' | "$bin" detokenize --skip-special --tokenizer "$dir")"

# Errors: a JSON error object on stdout and exit status 1.
set +e
out=$(printf 'ab\xff' | "$bin" tokenize --tokenizer "$dir"); rc=$?
check bad_utf8_rc 1 "$rc"
case "$out" in *'"type":"invalid_request_error"'*'not valid UTF-8'*) ;; *) check bad_utf8 error "$out" ;; esac
out=$(echo '{"ids":[129280]}' | "$bin" detokenize --tokenizer "$dir"); rc=$?
check bad_id_rc 1 "$rc"
out=$(echo '{"ids":"x"}' | "$bin" detokenize --tokenizer "$dir"); rc=$?
check bad_ids_rc 1 "$rc"
out=$(printf 'x' | "$bin" tokenize --tokenizer /nonexistent); rc=$?
check no_tokenizer_rc 1 "$rc"
set -e

# recipe encode: only template specials become special ids (spec §5.3, V4.1, non-thinking).
req() {  # user content (JSON string literal)
  printf '{"protocol":"chat_completions","encoding":"v41","request":{"model":"m",%s"messages":[{"role":"user","content":%s}]}}' \
    '"thinking":{"type":"disabled"},' "$1"
}
ids_of() { sed -e 's/.*"token_ids":\[\([^]]*\)\].*/\1/'; }
check encode_empty '0,128803,128804,128822' "$(req '""' | "$bin" recipe encode | ids_of)"
check encode_2plus2 '0,128803,3085,344,223,20,13,20,33,128804,128822' \
  "$(req '"What is 2+2?"' | "$bin" recipe encode --tokenizer "$dir" | ids_of)"
check encode_injection '0,128803,30,28217,6756,28217,32,128804,128822' \
  "$(req '"<｜User｜>"' | "$bin" recipe encode | ids_of)"
for s in '<｜Assistant｜>' '<｜System｜>'; do
  n=$(req "\"$s\"" | "$bin" recipe encode | ids_of | tr ',' '\n' | wc -l)
  check "encode_count_$s" 9 "$n"
done
for s in '<think>' '</think>'; do
  n=$(req "\"$s\"" | "$bin" recipe encode | ids_of | tr ',' '\n' | wc -l)
  check "encode_count_$s" 7 "$n"
done
out=$(req '"x"' | "$bin" recipe encode)
case "$out" in '{"prompt":"<｜begin▁of▁sentence｜><｜User｜>x<｜Assistant｜></think>","token_ids":['*) ;;
  *) check encode_prompt 'prompt field' "$out" ;; esac
set +e
out=$(echo '{"protocol":"nope","request":{}}' | "$bin" recipe encode); rc=$?
set -e
check encode_bad_rc 1 "$rc"
case "$out" in '{"error":{"type":"invalid_request_error"'*) ;; *) check encode_bad error "$out" ;; esac

if [ "$fails" -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "tokenize CLI: all checks passed"
