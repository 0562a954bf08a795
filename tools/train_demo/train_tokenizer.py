#!/usr/bin/env python3
"""Trains the demo model's byte-level BPE tokenizer (HF tokenizer.json) on the training text.

Layout: ids 0-2 BOS/EOS/pad, the 256 byte symbols, the learned merges, then the DeepSeek V4
special tokens of the encoding spec (System, User, Assistant, think tags, DSML, latest_reminder,
image) as added tokens, so the V4/V4.1 prompt encodings work unchanged. The pre-tokenizer is the
DeepSeek V3/V4 one (digits split in runs of at most 3, then the V3 split pattern, byte level).
Digits are never merged: every digit stays its own token, which keeps column arithmetic easy
for a small model. Merges are learned on an ASCII approximation of the split pattern (only
merge quality depends on it; encoding always uses the real pattern).

  train_tokenizer.py --corpus train.txt --vocab 4096 --out DIR [--data-out DIR2]

--data-out also writes a copy whose two think-tag added tokens are spelled as the stand-ins of
gen_data.py, for tokenizing training text in one pass (see v4_render.py).
"""
import argparse
import collections
import heapq
import json
import os
import re

HEAD = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]
TAIL = ["<｜System｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜",
        "<｜latest_reminder｜>", "<｜image｜>"]
DATA_SPELLING = {"<think>": "<｜think_open｜>", "</think>": "<｜think_close｜>"}

SPLIT_V3 = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
            "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
PRE_TOKENIZER = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[一-龥぀-ゟ゠-ヿ]+"}, "behavior": "Isolated",
     "invert": False},
    {"type": "Split", "pattern": {"Regex": SPLIT_V3}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
POST = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}

# Python approximation of SPLIT_V3 (letters = [^\W\d_], punctuation/symbols = [^\w\s] or _).
_PS = r"(?:[^\w\s]|_)"
_APPROX = re.compile(r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\S\r\n]?[^\W\d_]+| ?"
                     + _PS + r"+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_DIGITS = re.compile(r"(\d{1,3})")


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


def word_counts(text, specials):
    pattern = re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))
    counts = collections.Counter()
    for piece in pattern.split(text):
        for part in _DIGITS.split(piece):
            if not part or part.isdigit():
                continue  # digits stay single tokens
            counts.update(_APPROX.findall(part))
    return counts


def learn_merges(counts, n_merges):
    b2c = byte_alphabet()
    words = [[b2c[b] for b in w.encode("utf-8")] for w in counts]
    freq = list(counts.values())
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] += freq[i]
            where[(a, b)].add(i)
    heap = [(-n, p) for p, n in pairs.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        n, best = heapq.heappop(heap)
        if -n != pairs.get(best, 0) or -n <= 0:
            continue  # stale entry
        merges.append(best)
        merged = best[0] + best[1]
        changed = collections.Counter()
        for i in list(where[best]):
            w, f = words[i], freq[i]
            for a, b in zip(w, w[1:]):
                changed[(a, b)] -= f
            out, k = [], 0
            while k < len(w):
                if k + 1 < len(w) and w[k] == best[0] and w[k + 1] == best[1]:
                    out.append(merged)
                    k += 2
                else:
                    out.append(w[k])
                    k += 1
            words[i] = out
            for a, b in zip(out, out[1:]):
                changed[(a, b)] += f
                where[(a, b)].add(i)
        for p, d in changed.items():
            if d:
                pairs[p] += d
                if pairs[p] > 0:
                    heapq.heappush(heap, (-pairs[p], p))
        pairs.pop(best, None)
        where.pop(best, None)
    return merges


def tokenizer_json(merges, vocab_size, spelling):
    b2c = byte_alphabet()
    vocab = {}
    for t in HEAD:
        vocab[t] = len(vocab)
    for b in range(256):
        vocab[b2c[b]] = len(vocab)
    for a, b in merges:
        assert a + b not in vocab, f"merge result {a + b!r} already in the vocabulary"
        vocab[a + b] = len(vocab)
    while len(vocab) < vocab_size - len(TAIL):
        vocab[f"<｜unused_{len(vocab)}｜>"] = len(vocab)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(HEAD)]
    for t in TAIL:
        t = spelling.get(t, t)
        assert t not in vocab, f"special token {t!r} collides with a learned token"
        added.append({"id": len(vocab), "content": t, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        vocab[t] = len(vocab)
    assert len(vocab) == vocab_size
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": []}, "pre_tokenizer": PRE_TOKENIZER,
            "post_processor": POST, "decoder": DECODER,
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}


def write(path, tok):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data-out")
    ap.add_argument("--max-bytes", type=int, default=20_000_000, help="corpus prefix to learn on")
    a = ap.parse_args()
    with open(a.corpus, encoding="utf-8") as f:
        text = f.read(a.max_bytes)
    counts = word_counts(text, HEAD + TAIL + list(DATA_SPELLING.values()))
    merges = learn_merges(counts, a.vocab - len(HEAD) - 256 - len(TAIL))
    write(a.out, tokenizer_json(merges, a.vocab, {}))
    if a.data_out:
        write(a.data_out, tokenizer_json(merges, a.vocab, DATA_SPELLING))
    print(f"{len(counts)} distinct words, {len(merges)} merges")


if __name__ == "__main__":
    main()
