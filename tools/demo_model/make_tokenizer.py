#!/usr/bin/env python3
"""Builds a small byte-level BPE tokenizer.json of exactly --vocab ids for a demo/tiny model.

Layout: ids 0-2 BOS/EOS/pad, then the 256 byte symbols, then merges learned on a built-in English
corpus, then the DeepSeek V4 special tokens of the encoding spec (System, User, Assistant, think
tags, DSML, latest_reminder, image), so the V4/V4.1 prompt encodings work unchanged. The
pre-tokenizer and decoder are the DeepSeek ones, read from the cached V4.1 tokenizer.json.
Deterministic: the same arguments give the same file.
"""
import argparse
import collections
import json
import os
import re

HEAD = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]
TAIL = ["<｜System｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜",
        "<｜latest_reminder｜>", "<｜image｜>"]
CORPUS = """
The weather in Paris is sunny today, with a high of twenty degrees. What is the weather like in
London? Let me check the forecast. I will look it up for you. The answer is forty two. Sure, here
is the result of the calculation: two plus three is five, and ten minus four is six. Thinking about
this problem step by step, first we add the numbers, then we compare them with the expected value.
Hello! How can I help you today? Thank you for asking. The temperature in New York is ten degrees
and it may rain later. Convert five kilometers to miles: one kilometer is about zero point six two
miles, so five kilometers is about three point one miles. Search the web for the latest news about
the city. The tool returned a result, so the final answer is ready. Please provide a valid request.
{"city": "Paris", "days": 3, "unit": "celsius", "query": "news", "expression": "2 + 3"}
"""


def byte_alphabet():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def learn_merges(words, count):
    b2c = byte_alphabet()
    seqs = collections.Counter(tuple(b2c[b] for b in w.encode("utf-8")) for w in words)
    merges = []
    while len(merges) < count:
        pairs = collections.Counter()
        for seq, n in seqs.items():
            for a, b in zip(seq, seq[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        merged = collections.Counter()
        for seq, n in seqs.items():
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and (seq[i], seq[i + 1]) == best:
                    out.append(seq[i] + seq[i + 1])
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            merged[tuple(out)] += n
        seqs = merged
    return merges


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--reference", default=os.path.expanduser(
        os.environ.get("DEEPINFER_CACHE", "~/.cache/deepinfer") + "/tokenizers/deepseek-v41/tokenizer.json"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ref = json.load(open(args.reference, encoding="utf-8"))
    n_merges = args.vocab - len(HEAD) - 256 - len(TAIL)
    assert n_merges >= 0, "vocab too small"
    words = re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", CORPUS)
    merges = learn_merges(words, n_merges)
    vocab = {}
    for t in HEAD:
        vocab[t] = len(vocab)
    b2c = byte_alphabet()
    for b in range(256):
        vocab[b2c[b]] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    while len(vocab) < args.vocab - len(TAIL):  # corpus exhausted: pad with unused ids
        vocab[f"<｜unused_{len(vocab)}｜>"] = len(vocab)
    added = []
    for i, t in enumerate(HEAD):
        added.append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True})
    for t in TAIL:
        added.append({"id": len(vocab), "content": t, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        vocab[t] = len(vocab)
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": ref.get("normalizer"), "pre_tokenizer": ref["pre_tokenizer"],
           "post_processor": ref.get("post_processor"), "decoder": ref["decoder"],
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}
    assert len(vocab) == args.vocab, (len(vocab), args.vocab)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
