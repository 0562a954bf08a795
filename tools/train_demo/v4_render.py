"""DeepSeek V4 prompt rendering of Chat Completions requests, for building training text.

A Python mirror of the subset of the encoding spec the demo data uses (system, user, assistant
with reasoning and tool calls, tool results, tools, JSON mode, thinking on/off and the V4
effort prefixes). `gen_data.py --check` compares it byte for byte with `deepinfer recipe render`.

The template writes `<think>` / `</think>` as special tokens, but the V4 tool prompt also spells
them as plain prose. To tokenize a rendered text in one pass with added-token recognition, the
renderer can write the template's think tags with stand-in spellings (`think_open`,
`think_close`) that a data-only copy of the tokenizer maps to the same ids.
"""
import json

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK = "<think>"
END_THINK = "</think>"
DSML = "｜DSML｜"

EFFORT_HIGH = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n")
EFFORT_MAX = (
    "Reasoning Effort: Beyond maximum \u2014 exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: "
    "exhaustively decompose the problem into its most fundamental components, trace every causal "
    "chain to its root, and resolve the underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple "
    "angles and are certain that no assumption remains unchecked and no error remains "
    "undiscovered.\n\n")

TOOL_PROMPT = (
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools "
    "by writing a \"<{D}tool_calls>\" block like the following:\n\n"
    "<{D}tool_calls>\n"
    "<{D}invoke name=\"$TOOL_NAME\">\n"
    "<{D}parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{D}parameter>\n"
    "...\n"
    "</{D}invoke>\n"
    "<{D}invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</{D}invoke>\n"
    "</{D}tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n"
    "{SCHEMAS}\n\n"
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
    "calls.\n")
JSON_FORMAT = ("\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to "
               "reply:\n{\"type\": \"json_object\"}")

EFFORTS = {"minimal": "low", "low": "low", "medium": "high", "high": "high", "xhigh": "xhigh",
           "max": "max"}


def pyjson(v):
    return json.dumps(v, ensure_ascii=False)


def thinking_of(req):
    """(thinking on, effort) of a Chat Completions request."""
    effort = req.get("reasoning_effort")
    thinking = True
    if effort == "none":
        thinking, effort = False, None
    elif effort is not None:
        effort = EFFORTS[effort]
    if "thinking" in req:
        thinking = req["thinking"]["type"] != "disabled"
    if not thinking:
        effort = None
    return thinking, effort


def dsml_block(calls):
    invokes = []
    for c in calls:
        args = json.loads(c["function"]["arguments"])
        params = []
        for k, v in args.items():
            s = isinstance(v, str)
            params.append(f"<{DSML}parameter name=\"{k}\" string=\"{'true' if s else 'false'}\">"
                          + (v if s else pyjson(v)) + f"</{DSML}parameter>")
        invokes.append(f"<{DSML}invoke name=\"{c['function']['name']}\">\n" + "\n".join(params)
                       + f"\n</{DSML}invoke>")
    return f"<{DSML}tool_calls>\n" + "\n".join(invokes) + f"\n</{DSML}tool_calls>"


def render(req, think_open=THINK, think_close=END_THINK, generation_suffix=True):
    """V4 prompt of a Chat Completions request (no tool_choice other than auto)."""
    thinking, effort = thinking_of(req)
    tools = req.get("tools") or []
    json_mode = (req.get("response_format") or {}).get("type") == "json_object"
    msgs = []
    seen_other = False
    for m in req["messages"]:
        role, content = m["role"], m.get("content") or ""
        if role == "system":
            if not seen_other and msgs and msgs[-1]["role"] == "system":
                prev = msgs[-1]["content"]
                msgs[-1]["content"] = prev + "\n\n" + content if prev and content else prev + content
            elif not seen_other:
                msgs.append({"role": "system", "content": content})
            elif content:
                msgs.append({"role": "user", "content": content})
            continue
        seen_other = True
        if role == "user" and msgs and msgs[-1]["role"] == "user":
            msgs[-1]["content"] += "\n\n" + content
            continue
        msgs.append(dict(m, content=content))
    if tools or json_mode:
        if not msgs or msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "system", "content": ""})
        if tools:
            schemas = "\n".join(pyjson({"name": t["function"]["name"],
                                        "description": t["function"].get("description", ""),
                                        "parameters": t["function"].get("parameters", {})})
                                for t in tools)
            msgs[0]["content"] += "\n\n" + TOOL_PROMPT.replace("{D}", DSML).replace("{SCHEMAS}", schemas)
        if json_mode:
            msgs[0]["content"] += JSON_FORMAT
    out = BOS
    for i, m in enumerate(msgs):
        if i == 0 and thinking:
            out += {"low": "", "max": EFFORT_MAX}.get(effort, EFFORT_HIGH)
        prev = msgs[i - 1]["role"] if i > 0 else None
        role = m["role"]
        if role == "system":
            out += m["content"]
        elif role == "user":
            out += ("\n\n" if prev in ("user", "tool") else USER) + m["content"]
        elif role == "tool":
            out += ("\n\n" if prev in ("user", "tool") else USER)
            out += "<tool_result>" + m["content"] + "</tool_result>"
        elif role == "assistant":
            out += ASSISTANT
            if thinking and i > 0:
                out += think_open + (m.get("reasoning_content") or "") + think_close
            else:
                out += think_close
            out += m["content"]
            if m.get("tool_calls"):
                out += "\n\n" + dsml_block(m["tool_calls"])
            out += EOS
        else:
            raise ValueError(f"role {role}")
    if generation_suffix:
        out += ASSISTANT + (think_open if thinking else think_close)
    return out
