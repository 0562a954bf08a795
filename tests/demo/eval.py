#!/usr/bin/env python3
"""Eval of the bundled demo model on its held-out prompts (tests/demo/eval_cases.jsonl).

Each case is a Chat Completions request. It is encoded with `deepinfer recipe encode` (the
server's V4 prompt and special-span tokenization), all cases run greedily in one
`deepinfer generate --batch`, and each output goes through `deepinfer recipe complete`, the
server's output parser and Chat Completions response builder. Checks (issue 8):
  tool      >= 90% of tool-use prompts give a parsable tool call with the expected name and JSON
            arguments that validate against the tool's schema
  add2      >= 80% exact answers on 2-digit additions (the last number of the answer)
  separated >= 95% of all prompts: reasoning and content split as the mode asks (thinking on:
            non-empty reasoning, then content or a tool call; off: no reasoning) with no think
            or DSML markup left in either, and a stop within max_tokens
Other categories are reported (exact match of the expected number / JSON / tool answer), and
tool_args_exact: the arguments equal the expected ones (the right city, query, expression).

  eval.py --deepinfer BIN --model DIR [--cases FILE] [--limit N] [--threads N] [--json OUT]
Exit status 1 when a threshold is missed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
THRESHOLDS = {"tool": 0.90, "add2": 0.80, "separated": 0.95}
MARKUP = ("<think>", "</think>", "｜DSML｜", "<｜end▁of▁sentence｜>")


def run(cmd, stdin):
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({out.returncode}): {out.stdout[:300]} {out.stderr[:300]}")
    return out.stdout


def schema_ok(args, schema):
    """The subset of JSON Schema the demo tools use: object, properties, required, types, enum."""
    if not isinstance(args, dict):
        return False
    props = schema.get("properties", {})
    for k in schema.get("required", []):
        if k not in args:
            return False
    types = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
             "object": dict, "array": list}
    for k, v in args.items():
        if k not in props:
            return False  # the demo schemas list every argument
        p = props[k]
        t = types.get(p.get("type"))
        if t and (not isinstance(v, t) or (p.get("type") == "integer" and isinstance(v, bool))):
            return False
        if "enum" in p and v not in p["enum"]:
            return False
    return True


def last_number(text):
    nums = re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    return float(nums[-1]) if nums else None


def score(case, message, finish):
    """(separated ok, category-specific ok or None, note)."""
    reasoning = message.get("reasoning_content") or ""
    content = message.get("content") or ""
    calls = message.get("tool_calls") or []
    clean = not any(m in reasoning or m in content for m in MARKUP)
    if case["thinking"]:
        sep = bool(reasoning.strip()) and (bool(content.strip()) or bool(calls))
    else:
        sep = not reasoning and (bool(content.strip()) or bool(calls))
    sep = sep and clean and finish in ("stop", "tool_calls")
    exp = case["expect"]
    kind = exp["kind"]
    ok = None
    if kind == "tool":
        ok = False
        if len(calls) >= 1 and calls[0]["function"]["name"] == exp["tool"]:
            try:
                args = json.loads(calls[0]["function"]["arguments"])
                ok = schema_ok(args, exp["schema"])
            except ValueError:
                ok = False
    elif kind == "number":
        n = last_number(content)
        ok = n is not None and abs(n - exp["answer"]) < 1e-9 and not calls
    elif kind == "json":
        try:
            ok = json.loads(content) == exp["answer"]
        except ValueError:
            ok = False
    elif kind == "tool_answer":
        ok = content.strip() == exp["answer"]
    elif kind == "text":
        ok = bool(content.strip()) and not calls
    return sep, ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deepinfer", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--cases", default=os.path.join(HERE, "eval_cases.jsonl"))
    ap.add_argument("--limit", type=int, default=0, help="every k-th case only (quick runs)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--json", help="write per-case results here")
    ap.add_argument("--no-thresholds", action="store_true")
    ap.add_argument("--known-below", default="",
                    help="comma-separated bars the shipped model is known to miss (reported, not failed)")
    a = ap.parse_args()
    cases = [json.loads(l) for l in open(a.cases, encoding="utf-8") if l.strip()]
    if a.limit:
        cases = cases[::a.limit]
    B = a.deepinfer
    with tempfile.TemporaryDirectory() as tmp:
        batch = os.path.join(tmp, "batch.jsonl")
        with open(batch, "w") as f:
            for c in cases:
                env = {"protocol": "chat_completions", "encoding": "v4", "request": c["request"]}
                enc = json.loads(run([B, "recipe", "encode", "--tokenizer", a.model], json.dumps(env)))
                c["prompt_tokens"] = len(enc["token_ids"])
                f.write(json.dumps({"ids": enc["token_ids"], "max_tokens": a.max_tokens,
                                    "temperature": 0}) + "\n")
        out = run([B, "generate", "--model", a.model, "--threads", str(a.threads), "--batch", batch,
                   "--max-num-seqs", "32", "--max-model-len", "4096", "--kv-blocks", "4096"], "")
    results = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert len(results) == len(cases), (len(results), len(cases))
    totals = {}
    rows = []
    for c, r in zip(cases, results):
        if "error" in r:
            raise SystemExit(f"{c['id']}: {r['error']}")
        text = r["text"]
        if text.endswith("<｜end▁of▁sentence｜>"):
            text = text[:-len("<｜end▁of▁sentence｜>")]
        finish = "stop" if r["finish_reason"] == "stop" else "length"
        env = {"protocol": "chat_completions", "encoding": "v4", "request": c["request"],
               "chunks": [{"kind": "ready"}, {"kind": "text", "content": text},
                          {"kind": "finish", "finish_reason": finish}]}
        resp = json.loads(run([B, "recipe", "complete"], json.dumps(env)))["response"]
        choice = resp["choices"][0]
        sep, ok = score(c, choice["message"], choice["finish_reason"])
        cat = c["category"]
        t = totals.setdefault(cat, [0, 0])
        t[1] += 1
        t[0] += bool(ok)
        s = totals.setdefault("separated", [0, 0])
        s[0] += sep
        s[1] += 1
        if c["expect"]["kind"] == "tool":
            tt = totals.setdefault("tool", [0, 0])
            tt[0] += bool(ok)
            tt[1] += 1
            calls = choice["message"].get("tool_calls") or []
            try:
                exact = bool(calls) and json.loads(calls[0]["function"]["arguments"]) == c["expect"]["args"]
            except ValueError:
                exact = False
            te = totals.setdefault("tool_args_exact", [0, 0])
            te[0] += exact
            te[1] += 1
        rows.append({"id": c["id"], "ok": ok, "separated": sep, "text": text,
                     "message": choice["message"], "finish": choice["finish_reason"]})
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    failed = []
    known = {k for k in a.known_below.split(",") if k}
    print(f"demo model eval: {len(cases)} held-out prompts")
    for k in sorted(totals):
        ok, n = totals[k]
        bar = THRESHOLDS.get(k)
        mark = ""
        if bar is not None:
            mark = f"  (bar {bar:.0%})"
            if ok < bar * n - 1e-9:
                mark += " below (known)" if k in known else " FAIL"
                if k not in known:
                    failed.append(k)
            elif k in known:
                mark += " met: drop it from --known-below"
        print(f"  {k:14s} {ok:4d}/{n:<4d} {ok / n:6.1%}{mark}")
    if failed and not a.no_thresholds:
        print("FAIL: " + ", ".join(failed))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
