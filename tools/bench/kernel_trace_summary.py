#!/usr/bin/env python3
"""Where a CUDA-graph decode step's time goes, from a kernel timeline (bench/cuda_kernel_trace.cpp).

  kernel_trace_summary.py TRACE.csv [TITLE] [--order]

Takes the graph replays with the most kernels (the decode steps of the largest graph), drops the
first, and prints per step: the span from the first kernel's start to the last one's end, the time
some kernel runs (the union of their intervals) and the idle time between kernels; then per kernel
name the in-graph time, launches, and the idle time just before its launches (the gap after the
kernel before it ended), most first. --order also lists the last step's kernels in order (start,
duration and idle gap before each, in µs).
"""
import collections
import csv
import re
import sys


def short(name):
    name = name.replace("deepinfer::cuda::", "").replace("(anonymous namespace)::", "")
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"\(.*$", "", name)  # drop the parameter list
    return name[:70]


def union_length(intervals):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def main():
    args = [a for a in sys.argv[1:] if a != "--order"]
    order = "--order" in sys.argv[1:]
    path = args[0]
    title = args[1] if len(args) > 1 else path
    launches = collections.defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["graph_id"] == "0":
                continue
            launches[(row["graph_id"], row["correlation"])].append(
                (int(row["start_ns"]), int(row["end_ns"]), short(row["name"]), row["stream"]))
    if not launches:
        print(f"{title}: no graph kernels in the trace")
        return 1
    most = max(len(k) for k in launches.values())
    steps = sorted((k for k in launches.values() if len(k) == most), key=lambda k: min(r[0] for r in k))
    if len(steps) > 1:
        steps = steps[1:]
    spans, busy, sums = [], [], []
    per_name = collections.defaultdict(lambda: [0, 0, 0])  # ns running, launches, ns idle before
    for kernels in steps:
        kernels.sort()
        t0 = kernels[0][0]
        t1 = max(r[1] for r in kernels)
        spans.append(t1 - t0)
        busy.append(union_length([(s, e) for s, e, _, _ in kernels]))
        sums.append(sum(e - s for s, e, _, _ in kernels))
        last_end = t0
        for s, e, name, _ in kernels:
            entry = per_name[name]
            entry[0] += e - s
            entry[1] += 1
            entry[2] += max(0, s - last_end)
            last_end = max(last_end, e)
    n = len(steps)
    mean = lambda v: sum(v) / len(v) / 1e6  # ms
    streams = len({r[3] for k in steps for r in k})
    print(f"### {title}: {n} graph replays of {most} kernels on {streams} stream(s)\n")
    print(f"- step span {mean(spans):.3f} ms (min {min(spans) / 1e6:.3f}); some kernel running "
          f"{mean(busy):.3f} ms; idle between kernels {mean(spans) - mean(busy):.3f} ms; "
          f"kernel times summed {mean(sums):.3f} ms\n")
    print("| kernel | ms/step running | launches/step | µs each | ms/step idle before |")
    print("|---|---|---|---|---|")
    for name, (run, count, idle) in sorted(per_name.items(), key=lambda kv: -(kv[1][0] + kv[1][2])):
        print(f"| {name} | {run / n / 1e6:.4f} | {count / n:g} | {run / count / 1e3:.2f} | "
              f"{idle / n / 1e6:.4f} |")
    if order:
        kernels = steps[-1]
        t0, last_end = kernels[0][0], kernels[0][0]
        print("\n| start µs | µs | idle before µs | stream | kernel |")
        print("|---|---|---|---|---|")
        for s, e, name, stream in kernels:
            print(f"| {(s - t0) / 1e3:.1f} | {(e - s) / 1e3:.2f} | {max(0, s - last_end) / 1e3:.2f} | "
                  f"{stream} | {name} |")
            last_end = max(last_end, e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
