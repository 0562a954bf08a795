#!/usr/bin/env python3
"""HF transformers `deepseek_v4` on a V4-Flash-shaped slice, measured like `deepinfer bench`.

The model is DeepseekV4ForCausalLM built from the slice's config.json (the one `deepinfer bench
--slice v4-flash --keep-slice` writes; its quantization_config is dropped: HF runs bf16), with
HF's own random initialisation (std 0.02) in bf16 on the GPU, hash tables drawn as distinct
experts per token, eager attention (the only one HF's V4 supports). Timing: torch.cuda.synchronize
around each measured call, --warmup untimed calls first, median of the rest.

  prefill BxL  one forward of input_ids [B, L] from position 0, no cache, logits of the last row
  decode B     a cache filled by one prefill of --context tokens, copied to B rows; then steps of
               input_ids [B, 1] through that cache (median step latency over --steps)

The roofline columns use the same counts as deepinfer bench: decode = bytes read per step (every
dense weight, the experts the tokens touch: exact for hash layers, the uniform-routing expectation
elsewhere, KV rows as HF stores them in bf16) / --hbm-gbps; prefill = (linear + attention FLOPs) /
--peak-tflops.

  hf_v4_slice.py --config DIR/config.json --json hf.json [--prefill 1x8192,64x512]
                 [--decode-batch 1,16,64,256] [--context 4096] [--compare ours.json]
  hf_v4_slice.py --compare-only ours.json hf.json      # the ratio table alone (no torch needed)
"""
import argparse
import copy
import json
import math
import os
import platform
import statistics
import sys
import time


def parse_shapes(text):
    if not text or text == "none":
        return []
    out = []
    for item in text.split(","):
        b, l = item.split("x")
        if int(b) <= 0 or int(l) <= 0:
            raise SystemExit(f"bad prefill shape {item!r}")
        out.append((int(b), int(l)))
    return out


def parse_batches(text):
    if not text or text == "none":
        return []
    return sorted({int(x) for x in text.split(",")})


def token_at(i, vocab):
    return 3 + (i * 7919) % (vocab - 3)


def ratios(cfg):
    n = cfg["num_hidden_layers"]
    return list(cfg["compress_ratios"])[:n]


def kind(cfg, layer):
    r = ratios(cfg)[layer]
    return "swa" if r == 0 else ("csa" if r == 4 else "hca")


# ---- the cost model (same counts as src/cli/bench_cost.cpp) ---------------------------------------
def prefill_flops(cfg, dense_elems, expert_elems, head_elems, length):
    per_token = dense_elems + cfg["num_experts_per_tok"] * sum(expert_elems)
    linear = 2.0 * per_token * length + 2.0 * head_elems
    qk_pv = 4.0 * cfg["num_attention_heads"] * cfg["head_dim"]
    index = 2.0 * cfg["index_n_heads"] * cfg["index_head_dim"]
    win, topk = cfg["sliding_window"], cfg["index_topk"]
    attn = 0.0
    for layer, r in enumerate(ratios(cfg)):
        for p in range(length):
            keys = min(p + 1, win)
            if r > 0:
                n = (p + 1) // r
                if kind(cfg, layer) == "csa":
                    keys += min(n, topk)
                    attn += index * n
                else:
                    keys += n
            attn += qk_pv * keys
    return linear, attn


def decode_bytes(cfg, dense_bytes, expert_bytes, embed_row, tid2eid, tokens, context, kv):
    B = len(tokens)
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    uniform = E * (1.0 - (1.0 - k / E) ** B)
    weights = dense_bytes + B * embed_row
    kv_bytes, touched_sum = 0.0, 0.0
    keys = context + 1
    for layer, r in enumerate(ratios(cfg)):
        t = tid2eid.get(layer)
        touched = len({e for tok in tokens for e in t[tok]}) if t is not None else uniform
        touched_sum += touched
        weights += touched * expert_bytes[layer]
        per = min(keys, cfg["sliding_window"]) * kv["window"]
        if r > 0:
            n = keys // r
            per += (min(n, cfg["index_topk"]) * kv["entry"] + n * kv["index_key"]) if r == 4 else n * kv["entry"]
        kv_bytes += B * per
    return weights, kv_bytes, touched_sum / len(ratios(cfg))


# ---- the comparison table ---------------------------------------------------------------------------
def compare(ours, hf):
    lines = ["| phase | shape | deepinfer tok/s | HF tok/s | ratio | deepinfer time | HF time | "
             "deepinfer roofline | HF roofline |", "|---|---|---|---|---|---|---|---|---|"]
    hp = {(p["batch"], p["length"]): p for p in hf.get("prefill", [])}
    for p in ours.get("prefill", []):
        h = hp.get((p["batch"], p["length"]))
        shape = f"{p['batch']}x{p['length']}"
        if "tokens_per_s" not in p:  # ours skipped it (time budget) or failed
            lines.append(f"| prefill | {shape} | {p.get('skipped', p.get('error', 'not run'))} | "
                         f"{h['tokens_per_s']:.0f} | | | | | |" if h and "tokens_per_s" in h else
                         f"| prefill | {shape} | {p.get('skipped', p.get('error', 'not run'))} | | | | | | |")
            continue
        if h is None or "tokens_per_s" not in h:
            why = (h or {}).get("error", "not run")
            lines.append(f"| prefill | {shape} | {p['tokens_per_s']:.0f} | {why} | | "
                         f"{p['seconds_median'] * 1e3:.1f} ms | | {100 * p['roofline_fraction']:.1f} % | |")
            continue
        lines.append(f"| prefill | {shape} | {p['tokens_per_s']:.0f} | {h['tokens_per_s']:.0f} | "
                     f"{p['tokens_per_s'] / h['tokens_per_s']:.2f}x | {p['seconds_median'] * 1e3:.1f} ms | "
                     f"{h['seconds_median'] * 1e3:.1f} ms | {100 * p['roofline_fraction']:.1f} % | "
                     f"{100 * h['roofline_fraction']:.1f} % |")
    hd = {d["batch"]: d for d in hf.get("decode", [])}
    for d in ours.get("decode", []):
        h = hd.get(d["batch"])
        shape = f"batch {d['batch']} @ {d['context']}"
        if "step_ms_median" not in d:
            lines.append(f"| decode | {shape} | {d.get('skipped', d.get('error', 'not run'))} | | | | | | |")
            continue
        if h is None or "step_ms_median" not in h:
            why = (h or {}).get("error", "not run")
            lines.append(f"| decode | {shape} | {d['tokens_per_s']:.1f} | {why} | | {d['step_ms_median']:.2f} ms"
                         f" | | {100 * d['roofline_fraction']:.1f} % | |")
            continue
        lines.append(f"| decode | {shape} | {d['tokens_per_s']:.1f} | {h['tokens_per_s']:.1f} | "
                     f"{h['step_ms_median'] / d['step_ms_median']:.2f}x | {d['step_ms_median']:.2f} ms | "
                     f"{h['step_ms_median']:.2f} ms | {100 * d['roofline_fraction']:.1f} % | "
                     f"{100 * h['roofline_fraction']:.1f} % |")
    return "\n".join(lines)


# ---- HF --------------------------------------------------------------------------------------------
def build(cfg, experts_impl):
    import torch
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    kw = copy.deepcopy({k: v for k, v in cfg.items()
                        if k not in ("architectures", "quantization_config", "expert_dtype")})
    hf_cfg = DeepseekV4Config(**kw)
    hf_cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    # Built in place on the GPU in bf16 (HF's own initialisation runs there, in seconds).
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = DeepseekV4ForCausalLM(hf_cfg)
    finally:
        torch.set_default_dtype(torch.float32)
    model = model.to("cuda").eval()
    if experts_impl:
        if hasattr(model, "set_experts_implementation"):
            model.set_experts_implementation(experts_impl)
        else:
            model.config._experts_implementation = experts_impl
    impl = (model.get_experts_implementation() if hasattr(model, "get_experts_implementation")
            else getattr(model.config, "_experts_implementation", None))
    # HF zero-initialises the hash tables (every token to expert 0): draw distinct experts instead.
    g = torch.Generator(device="cuda").manual_seed(1)
    tid2eid = {}
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    for i, layer in enumerate(model.model.layers):
        router = layer.mlp.gate
        if hasattr(router, "tid2eid"):
            t = torch.rand(cfg["vocab_size"], E, device="cuda", generator=g).argsort(dim=1)[:, :k]
            router.tid2eid.copy_(t.to(router.tid2eid.dtype))
            tid2eid[i] = router.tid2eid.cpu().tolist()
    return model, tid2eid, impl


def counts(model, cfg):
    """dense bytes/elements, per-layer expert bytes/elements, embed row, head elements."""
    dense_bytes, dense_elems, head_elems = 0, 0.0, 0.0
    expert_bytes = [0] * cfg["num_hidden_layers"]
    expert_elems = [0.0] * cfg["num_hidden_layers"]
    embed_row = 0
    E = cfg["n_routed_experts"]
    for name, p in list(model.named_parameters()) + list(model.named_buffers()):
        nb = p.numel() * p.element_size()
        if "rotary_emb" in name or name.endswith("tid2eid"):
            continue
        if name.endswith("embed_tokens.weight"):
            embed_row = nb // cfg["vocab_size"]
            continue
        if name.startswith("lm_head"):
            dense_bytes += nb
            head_elems = float(p.numel())
            continue
        if ".mlp.experts." in name:
            layer = int(name.split(".layers.")[1].split(".")[0])
            expert_bytes[layer] += nb // E
            expert_elems[layer] += p.numel() / E
            continue
        dense_bytes += nb
        if p.dim() == 2:
            dense_elems += p.numel()
    return dense_bytes, dense_elems, expert_bytes, expert_elems, embed_row, head_elems


def timed(fn, warmup, reps):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return out


def replicate_cache(base, B):
    import torch
    cache = base() if callable(base) else copy.deepcopy(base)

    def rep(v):
        if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == 1 and B > 1:
            return v.repeat(B, *([1] * (v.dim() - 1)))
        if isinstance(v, dict):
            return {k: rep(x) for k, x in v.items()}
        return v

    for layer in cache.layers:
        for name, v in list(vars(layer).items()):
            setattr(layer, name, rep(v))
        if hasattr(layer, "keys") and hasattr(layer, "values") and isinstance(layer.keys, torch.Tensor):
            layer.values = layer.keys  # K = V in V4
    return cache


def run_hf(a):
    import torch
    import transformers
    cfg = json.load(open(a.config))
    vocab = cfg["vocab_size"]
    out = {"tool": "tools/bench/hf_v4_slice.py", "transformers": transformers.__version__,
           "torch": torch.__version__, "device": "cuda",
           "machine": {"gpu": torch.cuda.get_device_name(0), "host": platform.node(),
                       "cpu_threads": os.cpu_count()},
           "roofline": {"hbm_gbps": a.hbm_gbps, "peak_tflops": a.peak_tflops},
           "settings": {"warmup": a.warmup, "reps": a.reps, "steps": a.steps},
           "prefill": [], "decode": []}
    t0 = time.time()
    model, tid2eid, impl = build(cfg, a.experts_impl)
    torch.cuda.synchronize()
    out["build_s"] = time.time() - t0
    out["experts_implementation"] = impl
    out["attn_implementation"] = model.config._attn_implementation
    dense_bytes, dense_elems, expert_bytes, expert_elems, embed_row, head_elems = counts(model, cfg)
    out["memory"] = {"weights_bytes": torch.cuda.memory_allocated()}
    print(f"HF built in {out['build_s']:.1f} s, {out['memory']['weights_bytes'] / 1e9:.2f} GB, experts "
          f"implementation {impl}", file=sys.stderr, flush=True)
    peak, hbm = a.peak_tflops * 1e12, a.hbm_gbps * 1e9

    with torch.no_grad():
        for B, L in parse_shapes(a.prefill):
            rec = {"batch": B, "length": L}
            try:
                ids = torch.tensor([[token_at(i + 131 * b, vocab) for i in range(L)] for b in range(B)],
                                   device="cuda")
                times = timed(lambda: model(input_ids=ids, use_cache=False, logits_to_keep=1),
                              a.warmup, a.reps)
                t = statistics.median(times)
                lin, att = prefill_flops(cfg, dense_elems, expert_elems, head_elems, L)
                rec.update(seconds_median=t, seconds=times, tokens_per_s=B * L / t,
                           linear_flops=lin * B, attention_flops=att * B,
                           linear_tflops=lin * B / t / 1e12, total_tflops=(lin + att) * B / t / 1e12,
                           roofline_fraction=(lin + att) * B / t / peak,
                           roofline_fraction_linear=lin * B / t / peak,
                           peak_memory_bytes=torch.cuda.max_memory_allocated())
                print(f"HF prefill {B}x{L}: {B * L / t:.0f} tok/s", file=sys.stderr, flush=True)
            except Exception as e:  # an OOM or an HF limitation is a result too
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                print(f"HF prefill {B}x{L}: {rec['error']}", file=sys.stderr, flush=True)
            out["prefill"].append(rec)
            torch.cuda.empty_cache()

        batches = parse_batches(a.decode_batch)
        base = None
        if batches:
            try:
                prompt = torch.tensor([[token_at(i, vocab) for i in range(a.context)]], device="cuda")
                t0 = time.time()
                r = model(input_ids=prompt, use_cache=True, logits_to_keep=1)
                torch.cuda.synchronize()
                base = r.past_key_values
                out["decode_fill_s"] = time.time() - t0
                del r
            except Exception as e:
                out["decode_fill_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        kv = {"window": cfg["head_dim"] * 2, "entry": cfg["head_dim"] * 2, "index_key": cfg["index_head_dim"] * 2}
        for B in batches:
            rec = {"batch": B, "context": a.context}
            if base is None:
                rec["error"] = out.get("decode_fill_error", "no cache")
                out["decode"].append(rec)
                continue
            try:
                try:
                    cache = replicate_cache(base, B)
                except Exception:  # a cache that does not deep-copy: prefill it again
                    cache = replicate_cache(lambda: model(input_ids=prompt, use_cache=True,
                                                          logits_to_keep=1).past_key_values, B)
                step = [0]

                def one():
                    toks = [token_at(a.context + step[0] + 977 * b, vocab) for b in range(B)]
                    step[0] += 1
                    ids = torch.tensor(toks, device="cuda").view(B, 1)
                    model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)

                times = timed(one, a.warmup, a.steps)
                t = statistics.median(times)
                toks = [token_at(a.context + 977 * b, vocab) for b in range(B)]
                w, kvb, touched = decode_bytes(cfg, dense_bytes, expert_bytes, embed_row, tid2eid, toks,
                                               a.context, kv)
                rec.update(step_ms_median=t * 1e3, step_ms=[x * 1e3 for x in times], tokens_per_s=B / t,
                           weight_bytes_per_step=w, kv_bytes_per_step=kvb, experts_touched_per_layer=touched,
                           bytes_per_s=(w + kvb) / t, roofline_fraction=(w + kvb) / t / hbm,
                           roofline_fraction_weights=w / t / hbm,
                           peak_memory_bytes=torch.cuda.max_memory_allocated())
                print(f"HF decode batch {B}: {t * 1e3:.2f} ms/step", file=sys.stderr, flush=True)
                del cache
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                print(f"HF decode batch {B}: {rec['error']}", file=sys.stderr, flush=True)
            out["decode"].append(rec)
            torch.cuda.empty_cache()
    out["memory"]["peak_bytes"] = torch.cuda.max_memory_allocated()
    return out


def table(res):
    lines = [f"HF transformers {res.get('transformers')} — {res['machine'].get('gpu')}, experts "
             f"{res.get('experts_implementation')}, attention {res.get('attn_implementation')}",
             "", "| phase | shape | tokens/s | time | roofline |", "|---|---|---|---|---|"]
    for p in res["prefill"]:
        s = f"{p['batch']}x{p['length']}"
        if "error" in p:
            lines.append(f"| prefill | {s} | {p['error'][:60]} | | |")
        else:
            lines.append(f"| prefill | {s} | {p['tokens_per_s']:.0f} | {p['seconds_median'] * 1e3:.1f} ms | "
                         f"{100 * p['roofline_fraction']:.1f} % |")
    for d in res["decode"]:
        s = f"batch {d['batch']}"
        if "error" in d:
            lines.append(f"| decode | {s} | {d['error'][:60]} | | |")
        else:
            lines.append(f"| decode | {s} | {d['tokens_per_s']:.1f} | {d['step_ms_median']:.2f} ms/step | "
                         f"{100 * d['roofline_fraction']:.1f} % |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="config.json of the slice (published layout)")
    ap.add_argument("--prefill", default="1x8192,64x512")
    ap.add_argument("--decode-batch", default="1,16,64,256")
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--experts-impl", default=None, help="HF experts backend (default: HF's choice)")
    ap.add_argument("--hbm-gbps", type=float, default=4800)
    ap.add_argument("--peak-tflops", type=float, default=989)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--compare", nargs="*", default=[], help="deepinfer bench JSON files to put beside HF")
    ap.add_argument("--compare-only", nargs=2, metavar=("OURS", "HF"), help="print the ratio table and exit")
    a = ap.parse_args()
    if a.compare_only:
        ours, hf = (json.load(open(p)) for p in a.compare_only)
        print(compare(ours, hf))
        return
    if not a.config:
        ap.error("--config is required")
    res = run_hf(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print(table(res))
    for path in a.compare:
        ours = json.load(open(path))
        print(f"\n### deepinfer ({ours.get('model', {}).get('format')}, {ours.get('machine', {}).get('device')}) "
              f"vs HF (bf16) — ratio = deepinfer speed / HF speed\n")
        print(compare(ours, res))


if __name__ == "__main__":
    main()
