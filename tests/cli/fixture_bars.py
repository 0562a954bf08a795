"""Request bodies and noise-floor bars for the official-code fixtures (V4 and V4.1), used by the
CLI contract tests: score's logits at the fixture rows meet the fixture README's bar (median/max
of per-row max-abs vs the alt2 variant, argmax agreement); greedy generate equals the
reference's greedy ids for the steps whose top-2 margin exceeds twice the decode noise. Pure
Python (no numpy). Usage: fixture_bars.py score_request|generate_request|check_score|
check_generate FIXTURE_DIR (check_* read deepinfer's JSON output on stdin)."""
import json
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, m in header.items():
        if name == "__metadata__":
            continue
        s, e = m["data_offsets"]
        code = {"F32": "f", "I32": "i"}[m["dtype"]]
        out[name] = (list(struct.unpack("<%d%s" % ((e - s) // 4, code), data[s:e])), m["shape"])
    return out


def rows_of(vals, shape):
    v = shape[-1]
    return [vals[i * v:(i + 1) * v] for i in range(len(vals) // v)]


def stats(got, ref):
    d = sorted(max(abs(a - b) for a, b in zip(g, r)) for g, r in zip(got, ref))
    agree = sum(g.index(max(g)) == r.index(max(r)) for g, r in zip(got, ref))
    return d[(len(d) - 1) // 2], d[-1], agree


def safe_steps(ref, want, noise):
    """Greedy steps whose reference top-2 margin exceeds 2x noise (V4 fixtures store the
    margins; V4.1 fixtures store the teacher-forced prefill logits they come from)."""
    safe = 0
    if "greedy_margins" in ref:
        margins = ref["greedy_margins"][0]
        while safe < len(want) and margins[safe] >= 2 * noise:
            safe += 1
        return safe
    tf = rows_of(*ref["teacher_forced_prefill_logits"])
    while safe < len(want):
        row = sorted(tf[safe], reverse=True)
        if row[0] - row[1] < 2 * noise or tf[safe].index(max(tf[safe])) != want[safe]:
            break
        safe += 1
    return safe


def main():
    cmd, fx = sys.argv[1], sys.argv[2]
    ref = load(fx + "/reference.safetensors")
    if cmd == "score_request":
        print(json.dumps({"ids": ref["input_ids"][0], "rows": ref["rows"][0]}))
    elif cmd == "generate_request":
        print(json.dumps({"ids": ref["greedy_prompt"][0], "max_tokens": len(ref["greedy_out"][0]),
                          "temperature": 0, "ignore_eos": True}))
    elif cmd == "check_score":
        got = json.load(sys.stdin)["logits"]
        want = rows_of(*ref["logits"])
        med, mx, agree = stats(got, want)
        nmed, nmx, _ = stats(rows_of(*ref["alt2_logits"]), want)
        ok = med <= 1.5 * nmed + 0.01 and mx <= 2 * nmx + 0.01 and agree >= len(want) - 2
        print("score %s: median %.4f (bar %.4f) max %.4f (bar %.4f) argmax %d/%d" % (
            "ok" if ok else "FAIL", med, 1.5 * nmed + 0.01, mx, 2 * nmx + 0.01, agree, len(want)))
        sys.exit(0 if ok else 1)
    elif cmd == "check_generate":
        got = json.load(sys.stdin)["ids"]
        want = ref["greedy_out"][0]
        _, noise, _ = stats(rows_of(*ref["alt2_decode_logits"]), rows_of(*ref["decode_logits"]))
        safe = safe_steps(ref, want, noise)
        ok = len(got) == len(want) and got[:safe] == want[:safe]
        print("generate %s: %d tokens, the first %d (margin > 2x noise) equal the reference" % (
            "ok" if ok else "FAIL", len(got), safe))
        sys.exit(0 if ok else 1)
    else:
        sys.exit("fixture_bars.py: unknown command " + cmd)


if __name__ == "__main__":
    main()
