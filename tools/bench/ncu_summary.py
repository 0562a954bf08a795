"""Sums an Nsight Compute raw CSV (gpu__time_duration.sum, and dram__bytes_read.sum where it was
collected) per kernel call site and prints the table for one decode step. Lambda kernels (Exec::each) are named by their enclosing function
and lambda number, the others by their kernel name.
  ncu_summary.py NCU.csv STEPS TITLE"""
import csv
import re
import sys
from collections import defaultdict


def site(name):
    tag = re.search(r"__nv_(?:h)?dl_tag<[^&]*&([\w:]+), (\d+)u>", name)
    if tag:
        return f"{tag.group(1).split('::')[-1]} lambda {tag.group(2)}"
    return re.sub(r"^void\s+", "", name).split("(")[0][:90]


def main():
    path, steps, title = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        print(f"{title}: no kernel rows in {path}")
        print("\n".join(lines[-15:]))
        return
    rows = list(csv.DictReader(lines[start:]))
    total, count, read = defaultdict(float), defaultdict(int), defaultdict(float)
    byte_scale = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
    read_units = byte_scale.get(rows[0].get("dram__bytes_read.sum", "byte"), 1.0) if rows else 1.0
    for r in rows:
        v = r.get("gpu__time_duration.sum", "").replace(",", "")
        try:
            t = float(v)
        except ValueError:
            continue  # the units row
        k = site(r.get("Kernel Name", "?"))
        total[k] += t
        count[k] += 1
        try:
            read[k] += float(r.get("dram__bytes_read.sum", "").replace(",", "")) * read_units
        except ValueError:
            pass
    units = rows[0].get("gpu__time_duration.sum", "ns") if rows else "ns"
    scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0}.get(units, 1e-6)
    all_ms = sum(total.values()) * scale / steps
    print(f"\n### {title}: {all_ms:.3f} ms of kernel time per step ({steps} steps)\n")
    print("| kernel | ms/step | share | launches/step | MB read/step | TB/s |\n|---|---|---|---|---|---|")
    for k in sorted(total, key=total.get, reverse=True)[:40]:
        ms = total[k] * scale / steps
        mb = read[k] / steps / 1e6
        rate = f"{mb / ms / 1e3:.2f}" if read[k] and ms else "-"
        print(f"| {k} | {ms:.3f} | {100 * ms / all_ms:.1f} % | {count[k] / steps:.0f} | {mb:.1f} | {rate} |")


if __name__ == "__main__":
    main()
