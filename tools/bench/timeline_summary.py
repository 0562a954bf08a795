"""Reads an Nsight Systems export (sqlite) of decode steps and prints, per step, the span from the
first kernel's start to the last one's end, the time some kernel ran (the union of the kernels'
intervals), the idle rest, the kernels summed per name, and one step's timeline kernel by kernel.
Steps are split where no kernel runs for more than 50 µs.
  timeline_summary.py EXPORT.sqlite TITLE [TIMELINE_OUT]"""
import os
import re
import sqlite3
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncu_summary import site  # noqa: E402  (the lambda kernels' call-site names)


def short(name):
    if "__nv_dl_tag<" in (name or ""):
        return site(name)
    name = re.sub(r"^void\s+", "", name or "?")
    name = re.sub(r"deepinfer::cuda::|\(anonymous namespace\)::|_GLOBAL__N__\w+::", "", name)
    return re.sub(r"\(.*$", "", name)[:80]


def main():
    path, title = sys.argv[1], sys.argv[2]
    db = sqlite3.connect(path)
    names = dict(db.execute("select id, value from StringIds"))
    rows = db.execute(
        "select start, end, streamId, demangledName from CUPTI_ACTIVITY_KIND_KERNEL order by start"
    ).fetchall()
    if not rows:
        print(f"{title}: no kernels")
        return
    steps, cur = [], [rows[0]]
    for r in rows[1:]:
        if r[0] - max(x[1] for x in cur[-8:]) > 50_000:
            steps.append(cur)
            cur = []
        cur.append(r)
    steps.append(cur)
    print(f"### {title}: {len(steps)} step(s), {len(rows)} kernels\n")
    print("| step | kernels | span ms | busy ms | idle ms | streams |")
    print("|---|---|---|---|---|---|")
    for i, s in enumerate(steps):
        span = (max(r[1] for r in s) - s[0][0]) / 1e6
        busy, end = 0, s[0][0]
        for r in s:
            if r[1] > end:
                busy += r[1] - max(r[0], end)
                end = r[1]
        print(f"| {i} | {len(s)} | {span:.3f} | {busy / 1e6:.3f} | {span - busy / 1e6:.3f} | "
              f"{len(set(r[2] for r in s))} |")
    last = steps[-1]
    total, count = defaultdict(float), defaultdict(int)
    for r in last:
        n = short(names.get(r[3], str(r[3])))
        total[n] += (r[1] - r[0]) / 1e3
        count[n] += 1
    print(f"\nLast step, per kernel (µs, in the graph):\n")
    print("| kernel | launches | µs | µs each |")
    print("|---|---|---|---|")
    for n, t in sorted(total.items(), key=lambda kv: -kv[1])[:40]:
        print(f"| {n} | {count[n]} | {t:.1f} | {t / count[n]:.1f} |")
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            t0 = last[0][0]
            f.write("start_us end_us dur_us gap_us stream kernel\n")
            prev_end = t0
            for r in last:
                f.write(f"{(r[0] - t0) / 1e3:.2f} {(r[1] - t0) / 1e3:.2f} {(r[1] - r[0]) / 1e3:.2f} "
                        f"{(r[0] - prev_end) / 1e3:.2f} {r[2]} {short(names.get(r[3], str(r[3])))}\n")
                prev_end = max(prev_end, r[1])


if __name__ == "__main__":
    main()
