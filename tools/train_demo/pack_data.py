#!/usr/bin/env python3
"""Packs tokenized training text into the file train.py reads.

Input: the {"ids":[...]} of `deepinfer tokenize --tokenizer <data tokenizer>` over the text of
`gen_data.py --train` (every sample starts with BOS and ends with the EOS of its last assistant
turn). The loss covers the last assistant turn: everything after its `<｜Assistant｜>` and the
`<think>` / `</think>` the prompt already ends with.

Output (gzip): b"DEMO1", u32 n, u32 n_tokens, n+1 u32 offsets, n u32 loss starts, u16 tokens.

  pack_data.py --ids corpus_ids.json --tokenizer DIR --max-len 768 --out train.bin.gz
"""
import argparse
import gzip
import json
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--max-len", type=int, default=768)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    tok = json.load(open(a.tokenizer + "/tokenizer.json", encoding="utf-8"))
    special = {t["content"]: t["id"] for t in tok["added_tokens"]}
    bos, eos = special["<｜begin▁of▁sentence｜>"], special["<｜end▁of▁sentence｜>"]
    asst = special["<｜Assistant｜>"]
    opens = {i for c, i in special.items() if "think" in c}
    ids = json.load(open(a.ids))["ids"]
    starts = [i for i, t in enumerate(ids) if t == bos] + [len(ids)]
    offsets, loss_starts, tokens, dropped = [0], [], [], 0
    lengths = []
    for s, e in zip(starts, starts[1:]):
        sample = ids[s:e]
        assert sample[-1] == eos, "a sample must end with EOS"
        k = len(sample) - 1 - sample[::-1].index(asst)
        assert sample[k + 1] in opens, "the last assistant turn must open with a think tag"
        if len(sample) > a.max_len:
            dropped += 1
            continue
        tokens += sample
        loss_starts.append(k + 2)
        offsets.append(len(tokens))
        lengths.append(len(sample))
    n = len(loss_starts)
    with gzip.open(a.out, "wb", compresslevel=9) as f:
        f.write(b"DEMO1" + struct.pack("<II", n, len(tokens)))
        f.write(struct.pack(f"<{n + 1}I", *offsets))
        f.write(struct.pack(f"<{n}I", *loss_starts))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))
    lengths.sort()
    print(f"{n} samples ({dropped} longer than {a.max_len} dropped), {len(tokens)} tokens, "
          f"length median {lengths[n // 2]} p90 {lengths[n * 9 // 10]} max {lengths[-1]}, "
          f"loss tokens {sum(len(tokens) for _ in [0]) and sum(offsets[i + 1] - offsets[i] - loss_starts[i] for i in range(n))}")


if __name__ == "__main__":
    main()
