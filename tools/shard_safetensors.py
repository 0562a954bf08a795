#!/usr/bin/env python3
"""Splits DIR/model.safetensors into shards of at most --max-mb (the HF layout: model-0000i-of-0000n
.safetensors + model.safetensors.index.json) so that no fixture file is large; tensors are laid out
aligned to their element size, as the safetensors library writes them. Pure Python.

  tools/shard_safetensors.py tests/fixtures/official_v4_a --max-mb 1.9
"""
import argparse
import json
import os
import struct


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    return header, data, meta


DTYPE_SIZE = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
              "U16": 2}


def write(path, tensors, meta):
    """Data in the order of the safetensors library (dtype size descending, then name), so every
    tensor starts aligned to its element size."""
    header, blobs, off = {}, [], 0
    order = sorted(tensors.items(), key=lambda kv: (-DTYPE_SIZE.get(kv[1][0]["dtype"], 1), kv[0]))
    for name, (info, raw) in order:
        header[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if meta:
        header["__metadata__"] = meta
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for raw in blobs:
            f.write(raw)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--max-mb", type=float, default=1.9)
    a = p.parse_args()
    src = os.path.join(a.dir, "model.safetensors")
    header, data, meta = read(src)
    limit = int(a.max_mb * 1e6) - 64 * 1024          # room for the header
    shards, cur, size = [], {}, 0
    for name in sorted(header):
        s, e = header[name]["data_offsets"]
        if cur and size + (e - s) > limit:
            shards.append(cur)
            cur, size = {}, 0
        cur[name] = (header[name], data[s:e])
        size += e - s
    shards.append(cur)
    n = len(shards)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        write(os.path.join(a.dir, fname), shard, meta)
        for name, (_, raw) in shard.items():
            weight_map[name] = fname
            total += len(raw)
    with open(os.path.join(a.dir, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=1)
        f.write("\n")
    os.remove(src)
    print(json.dumps({"shards": n, "tensors": len(weight_map), "bytes": total}))


if __name__ == "__main__":
    main()
