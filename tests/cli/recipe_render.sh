#!/usr/bin/env bash
# Contract test of `deepinfer recipe render`: stdin envelope → {"prompt","image_sources"} or the
# error object with exit 1. Expected prompts are the worked examples of the encoding spec §3.11.
# Usage: recipe_render.sh <path-to-deepinfer> <source-dir>
set -u
bin=$1
fails=0

# check NAME STDIN EXPECTED_STDOUT EXPECTED_RC
check() {
  local out rc
  out=$(printf '%s' "$2" | "$bin" recipe render)
  rc=$?
  if [[ "$out" != "$3" || $rc -ne $4 ]]; then
    echo "FAIL $1: rc=$rc (want $4)"
    echo "  got:  $out"
    echo "  want: $3"
    fails=$((fails + 1))
  fi
}

# check_error NAME STDIN TYPE: exit 1 and an {"error":{"type":TYPE,"message":<non-empty>}} object.
check_error() {
  local out rc
  out=$(printf '%s' "$2" | "$bin" recipe render)
  rc=$?
  if [[ $rc -ne 1 || ! "$out" =~ ^\{\"error\":\{\"type\":\"$3\",\"message\":\"[^\"].*\"\}\}$ ]]; then
    echo "FAIL $1: rc=$rc out=$out"
    fails=$((fails + 1))
  fi
}

effort75='Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n'
v4high='Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\nExplicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n'

check example1_v41 \
  '{"protocol":"chat_completions","request":{"model":"m","messages":[{"role":"user","content":"Hello"}]}}' \
  '{"prompt":"<｜begin▁of▁sentence｜><｜System｜>'"$effort75"'<｜User｜>Hello<｜Assistant｜><think>","image_sources":[]}' 0

check example1_v4 \
  '{"protocol":"chat_completions","encoding":"v4","request":{"model":"m","messages":[{"role":"user","content":"Hello"}]}}' \
  '{"prompt":"<｜begin▁of▁sentence｜>'"$v4high"'<｜User｜>Hello<｜Assistant｜><think>","image_sources":[]}' 0

check example2_v41 \
  '{"protocol":"chat_completions","encoding":"v41","request":{"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hello"}]}}' \
  '{"prompt":"<｜begin▁of▁sentence｜><｜System｜>You are helpful.<｜User｜>Hello<｜Assistant｜></think>","image_sources":[]}' 0

check example2_v4 \
  '{"protocol":"chat_completions","encoding":"v4","request":{"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hello"}]}}' \
  '{"prompt":"<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hello<｜Assistant｜></think>","image_sources":[]}' 0

check example3_max \
  '{"protocol":"chat_completions","request":{"model":"m","reasoning_effort":"max","messages":[{"role":"system","content":"sys"},{"role":"user","content":"Hi"}]}}' \
  '{"prompt":"<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 100 (range 1-100, the higher the value, the more thorough the reasoning)\n\nsys<｜User｜>Hi<｜Assistant｜><think>","image_sources":[]}' 0

check example7_images \
  '{"protocol":"chat_completions","request":{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]}]}}' \
  '{"prompt":"<｜begin▁of▁sentence｜><｜System｜>'"$effort75"'<｜User｜>What is this?\n\n<｜image｜>\n\n<｜image｜><｜Assistant｜><think>","image_sources":[{"type":"url","url":"https://example.com/a.png","detail":"high"},{"type":"data_url","url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}]}' 0

check example8_json \
  '{"protocol":"chat_completions","request":{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"system","content":"Answer with json."},{"role":"user","content":"Give me a number"}]}}' \
  '{"prompt":"<｜begin▁of▁sentence｜><｜System｜>'"$effort75"'Answer with json.\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n{\"type\": \"json_object\"}<｜User｜>Give me a number<｜Assistant｜><think>","image_sources":[]}' 0

# Example 5 (history with reasoning, a tool call and its result), through Chat Completions.
out=$(printf '%s' '{"protocol":"chat_completions","request":{"model":"m","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}}}}}],"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":"","reasoning_content":"Need tool.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"20C"}]}}' | "$bin" recipe render)
want_tail='<｜User｜>Weather?<｜Assistant｜><think>Need tool.</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"location\" string=\"true\">Paris</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls><｜end▁of▁sentence｜><｜User｜><tool_result>20C</tool_result><｜Assistant｜><think>","image_sources":[]}'
if [[ "$out" != *"$want_tail" || "$out" != '{"prompt":"<｜begin▁of▁sentence｜><｜System｜>'"$effort75"'\n\n## Tools\n\n'* ]]; then
  echo "FAIL example5_history: $out"
  fails=$((fails + 1))
fi

# Example 5 verbatim from the spec: the Messages API form of the same history.
out=$(printf '%s' '{"protocol":"messages","request":{"model":"m","max_tokens":64,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"location":{"type":"string"}}}}],"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":[{"type":"thinking","thinking":"Need tool.","signature":"s"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"20C"}]}]}}' | "$bin" recipe render)
if [[ "$out" != *"$want_tail" || "$out" != '{"prompt":"<｜begin▁of▁sentence｜><｜System｜>'"$effort75"'\n\n## Tools\n\n'* ]]; then
  echo "FAIL example5_messages: $out"
  fails=$((fails + 1))
fi

# Responses API, V4, thinking off through reasoning.effort "none".
check responses_v4 \
  '{"protocol":"responses","encoding":"v4","request":{"model":"m","reasoning":{"effort":"none"},"instructions":"Be terse.","input":"Hello"}}' \
  '{"prompt":"<｜begin▁of▁sentence｜>Be terse.<｜User｜>Hello<｜Assistant｜></think>","image_sources":[]}' 0

# Errors: request errors from the conversion, malformed envelopes.
check empty_messages '{"protocol":"chat_completions","request":{"model":"m","messages":[]}}' \
  '{"error":{"type":"invalid_request_error","message":"Empty input messages"}}' 1
check_error bad_json '{"protocol":' invalid_request_error
check_error not_object '[1,2]' invalid_request_error
check_error empty_stdin '' invalid_request_error
check_error missing_protocol '{"request":{}}' invalid_request_error
check_error unknown_protocol '{"protocol":"completions","request":{}}' invalid_request_error
check_error missing_request '{"protocol":"chat_completions"}' invalid_request_error
check_error unknown_encoding '{"protocol":"chat_completions","encoding":"v3","request":{"model":"m","messages":[{"role":"user","content":"x"}]}}' invalid_request_error
check_error request_not_object '{"protocol":"chat_completions","request":"hi"}' invalid_request_error

if [[ $fails -ne 0 ]]; then
  echo "$fails recipe render check(s) failed"
  exit 1
fi
echo "recipe render: all checks passed"
