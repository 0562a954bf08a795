#!/usr/bin/env bash
# Contract test of `deepinfer recipe stream` / `recipe complete` on the api spec §10 worked example
# (reasoning + text + two tool calls) for all three APIs, plus the error object with exit 1.
# Usage: recipe_stream.sh <path-to-deepinfer> <source-dir>
set -u
exec python3 - "$1" <<'PY'
import json, subprocess, sys

BIN = sys.argv[1]
fails = 0

def fail(name, msg):
    global fails
    fails += 1
    print(f"FAIL {name}: {msg}")

def run(op, envelope, raw=None):
    data = raw if raw is not None else json.dumps(envelope, ensure_ascii=False)
    p = subprocess.run([BIN, "recipe", op], input=data.encode(), capture_output=True)
    return p.returncode, p.stdout.decode()

TEXT = ("Let me check both.</think>I'll look them up.\n\n<｜DSML｜ calls>\n"
        "<｜DSML｜ invoke name=\"get_weather\">\n"
        "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n"
        "</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"get_time\">\n"
        "<｜DSML｜ parameter name=\"tz\" string=\"true\">CET</｜DSML｜ parameter>\n"
        "</｜DSML｜ invoke>\n</｜DSML｜ calls>")
CHUNKS = [{"kind": "ready", "system_fingerprint": "fp-1", "prompt_tokens": 100,
           "prompt_cache_hit_tokens": 0},
          {"kind": "text", "content": TEXT, "content_tokens": 40},
          {"kind": "finish", "finish_reason": "stop"}]
def schema(p):
    return {"type": "object", "properties": {p: {"type": "string"}}, "required": [p]}
USER = [{"role": "user", "content": "Weather in Paris and the time in CET?"}]
REQUESTS = {
    "chat_completions": {"model": "deepseek-flash", "messages": USER, "stream": True,
                         "stream_options": {"include_usage": True},
                         "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": schema("city")}},
                                   {"type": "function", "function": {"name": "get_time", "parameters": schema("tz")}}]},
    "responses": {"model": "deepseek-flash", "input": USER[0]["content"], "stream": True,
                  "tools": [{"type": "function", "name": "get_weather", "parameters": schema("city")},
                            {"type": "function", "name": "get_time", "parameters": schema("tz")}]},
    "messages": {"model": "deepseek-flash", "max_tokens": 1000, "messages": USER, "stream": True,
                 "tools": [{"name": "get_weather", "input_schema": schema("city")},
                           {"name": "get_time", "input_schema": schema("tz")}]},
}
def envelope(protocol):
    return {"protocol": protocol, "request": REQUESTS[protocol], "chunks": CHUNKS,
            "id": "resp-1", "created": 1700000000}

ARGS = [['{"', 'city', '": ', '"', 'Paris', '"', '}'], ['{"', 'tz', '": ', '"', 'CET', '"', '}']]
NAMES = ["get_weather", "get_time"]
ARGUMENTS = ['{"city": "Paris"}', '{"tz": "CET"}']

# --- Chat Completions (§10.1) ---
def chat_chunk(delta, finish=None, usage=None):
    c = {"id": "resp-1", "object": "chat.completion.chunk", "created": 1700000000,
         "model": "deepseek-flash", "system_fingerprint": "fp-1",
         "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
         "usage": usage}
    return c
CHAT_USAGE = {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140,
              "prompt_tokens_details": {"cached_tokens": 0}, "prompt_cache_hit_tokens": 0,
              "prompt_cache_miss_tokens": 100}
want = [chat_chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        chat_chunk({"content": None, "reasoning_content": "Let me check both."}),
        chat_chunk({"content": "I'll look them up.", "reasoning_content": None})]
for k in range(2):
    want.append(chat_chunk({"tool_calls": [{"index": k, "id": f"call_resp-1_{k}", "type": "function",
                                            "function": {"name": NAMES[k], "arguments": ""}}]}))
    want += [chat_chunk({"tool_calls": [{"index": k, "function": {"arguments": a}}]}) for a in ARGS[k]]
want.append(chat_chunk({"content": "", "reasoning_content": None}, "tool_calls", CHAT_USAGE))
rc, out = run("stream", envelope("chat_completions"))
if rc != 0 or out != json.dumps({"events": want}, separators=(",", ":"), ensure_ascii=False) + "\n":
    fail("chat_stream", f"rc={rc} out={out[:400]}")
rc, out = run("complete", envelope("chat_completions"))
want_complete = {"response": {
    "id": "resp-1", "object": "chat.completion", "created": 1700000000, "model": "deepseek-flash",
    "system_fingerprint": "fp-1",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "I'll look them up.",
                                         "reasoning_content": "Let me check both.",
                                         "tool_calls": [{"id": f"call_resp-1_{k}", "type": "function",
                                                         "function": {"name": NAMES[k], "arguments": ARGUMENTS[k]}}
                                                        for k in range(2)]},
                 "logprobs": None, "finish_reason": "tool_calls"}],
    "usage": CHAT_USAGE}}
if rc != 0 or out != json.dumps(want_complete, separators=(",", ":"), ensure_ascii=False) + "\n":
    fail("chat_complete", f"rc={rc} out={out[:400]}")

# --- Responses (§10.2) ---
rc, out = run("stream", envelope("responses"))
events = json.loads(out)["events"] if rc == 0 else []
types = [e["type"] for e in events]
want_types = (["response.created", "response.in_progress"] +
              ["response.output_item.added", "response.content_part.added",
               "response.reasoning_text.delta", "response.reasoning_text.done",
               "response.content_part.done", "response.output_item.done",
               "response.output_item.added", "response.content_part.added",
               "response.output_text.delta", "response.output_text.done",
               "response.content_part.done", "response.output_item.done"] +
              (["response.output_item.added"] + ["response.function_call_arguments.delta"] * 7 +
               ["response.function_call_arguments.done", "response.output_item.done"]) * 2 +
              ["response.completed"])
if types != want_types:
    fail("responses_stream_types", f"rc={rc} {types}")
elif [e["sequence_number"] for e in events] != list(range(35)):
    fail("responses_stream_seq", "sequence numbers")
else:
    items = [
        {"type": "reasoning", "id": "rs_resp-1_0", "status": "completed",
         "content": [{"type": "reasoning_text", "text": "Let me check both."}], "summary": []},
        {"type": "message", "id": "msg_resp-1_1", "status": "completed", "role": "assistant",
         "phase": "commentary", "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                                             "text": "I'll look them up."}]}] + [
        {"type": "function_call", "id": f"fc_resp-1_{k + 2}", "status": "completed",
         "call_id": f"call_resp-1_{k}", "name": NAMES[k], "arguments": ARGUMENTS[k]} for k in range(2)]
    response = {"id": "resp-1", "object": "response", "created_at": 1700000000,
                "model": "deepseek-flash", "status": "completed", "completed_at": 1700000000,
                "error": None, "incomplete_details": None, "output": items,
                "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 140}}
    checks = {
        2: {"type": "response.output_item.added", "item": {"type": "reasoning", "id": "rs_resp-1_0",
            "status": "in_progress", "content": [], "summary": []}, "output_index": 0, "sequence_number": 2},
        8: {"type": "response.output_item.added", "item": {"type": "message", "id": "msg_resp-1_1",
            "status": "in_progress", "role": "assistant", "phase": "final_answer", "content": []},
            "output_index": 1, "sequence_number": 8},
        13: {"type": "response.output_item.done", "item": items[1], "output_index": 1, "sequence_number": 13},
        14: {"type": "response.output_item.added", "item": {"type": "function_call", "id": "fc_resp-1_2",
             "status": "in_progress", "call_id": "call_resp-1_0", "name": "get_weather", "arguments": ""},
             "output_index": 2, "sequence_number": 14},
        22: {"type": "response.function_call_arguments.done", "arguments": ARGUMENTS[0],
             "item_id": "fc_resp-1_2", "output_index": 2, "sequence_number": 22},
        34: {"type": "response.completed", "response": response, "sequence_number": 34},
    }
    for i, e in checks.items():
        if json.dumps(events[i]) != json.dumps(e):
            fail(f"responses_stream_{i}", json.dumps(events[i]))
    if [e["delta"] for e in events[25:32]] != ARGS[1]:
        fail("responses_stream_args", "deltas")
    rc, out = run("complete", envelope("responses"))
    if rc != 0 or out != json.dumps({"response": response}, separators=(",", ":"), ensure_ascii=False) + "\n":
        fail("responses_complete", f"rc={rc} out={out[:400]}")

# --- Messages (§10.3) ---
def delta(i, d):
    return {"type": "content_block_delta", "index": i, "delta": d}
MSG_USAGE = {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
             "output_tokens": 40, "service_tier": "standard"}
want = [{"type": "message_start", "message": {"id": "resp-1", "type": "message", "role": "assistant",
         "model": "deepseek-flash", "content": [], "stop_reason": None, "stop_sequence": None,
         "usage": dict(MSG_USAGE, output_tokens=0)}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "ping"},
        delta(0, {"type": "thinking_delta", "thinking": "Let me check both."}),
        delta(0, {"type": "signature_delta", "signature": "resp-1"}),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        delta(1, {"type": "text_delta", "text": "I'll look them up."}),
        {"type": "content_block_stop", "index": 1}]
for k in range(2):
    want.append({"type": "content_block_start", "index": k + 2, "content_block": {
        "type": "tool_use", "id": f"toolu_resp-1_{k}", "name": NAMES[k], "input": {}}})
    want += [delta(k + 2, {"type": "input_json_delta", "partial_json": a}) for a in ARGS[k]]
    want.append({"type": "content_block_stop", "index": k + 2})
want += [{"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": MSG_USAGE},
         {"type": "message_stop"}]
rc, out = run("stream", envelope("messages"))
if rc != 0 or out != json.dumps({"events": want}, separators=(",", ":"), ensure_ascii=False) + "\n":
    fail("messages_stream", f"rc={rc} out={out[:400]}")
rc, out = run("complete", envelope("messages"))
want_complete = {"response": {"id": "resp-1", "type": "message", "role": "assistant", "model": "deepseek-flash",
    "content": [{"type": "thinking", "thinking": "Let me check both.", "signature": "resp-1"},
                {"type": "text", "text": "I'll look them up."},
                {"type": "tool_use", "id": "toolu_resp-1_0", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_resp-1_1", "name": "get_time", "input": {"tz": "CET"}}],
    "stop_reason": "tool_use", "stop_sequence": None, "usage": MSG_USAGE}}
if rc != 0 or out != json.dumps(want_complete, separators=(",", ":"), ensure_ascii=False) + "\n":
    fail("messages_complete", f"rc={rc} out={out[:400]}")

# --- defaults: model from the request, generated id; streaming without include_usage → usage
# omitted until the final chunk (a non-streaming request has include_usage on) ---
env = {"protocol": "chat_completions", "request": {"model": "m1", "messages": USER, "stream": True},
       "chunks": [{"kind": "text", "content": "hi", "content_tokens": 1}]}
rc, out = run("stream", env)
ev = json.loads(out)["events"] if rc == 0 else []
if (len(ev) != 3 or ev[0]["model"] != "m1" or not ev[0]["id"] or "usage" in ev[0] or
        ev[2]["choices"][0]["finish_reason"] != "stop" or ev[2]["usage"]["completion_tokens"] != 1):
    fail("chat_defaults", out[:400])
env["chunks"].append({"kind": "finish", "finish_reason": "length"})
env["protocol"], env["request"] = "responses", {"model": "m1", "input": "x"}
rc, out = run("complete", env)
r = json.loads(out)["response"] if rc == 0 else {}
if r.get("status") != "incomplete" or r.get("incomplete_details") != {"reason": "max_output_tokens"}:
    fail("responses_length", out[:400])

# --- errors: stdout {"error":{"type":"invalid_request_error",...}}, exit 1 ---
def check_error(name, op, env=None, raw=None):
    rc, out = run(op, env, raw)
    try:
        err = json.loads(out)["error"]
        ok = rc == 1 and err["type"] == "invalid_request_error" and err["message"]
    except Exception:
        ok = False
    if not ok:
        fail(name, f"rc={rc} out={out[:300]}")
check_error("bad_json", "stream", raw="{")
check_error("missing_chunks", "stream", {"protocol": "messages", "request": REQUESTS["messages"]})
check_error("bad_kind", "complete", dict(envelope("messages"), chunks=[{"kind": "token", "id": 3}]))
check_error("bad_finish", "stream", dict(envelope("messages"), chunks=[{"kind": "finish", "finish_reason": "x"}]))
check_error("bad_request", "stream", dict(envelope("chat_completions"), request={"model": "m", "messages": []}))

if fails:
    print(f"{fails} failure(s)")
    sys.exit(1)
print("recipe_stream: all checks passed")
PY
