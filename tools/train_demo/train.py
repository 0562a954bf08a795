#!/usr/bin/env python3
"""Trains the bundled demo model on the GPU machine: HF transformers `DeepseekV4ForCausalLM`
(every V4 layer type) plus an MTP block of the official layout, then exports the published
checkpoint (FP8 e4m3 128x128 block weights with UE8M0 scales, FP4 e2m1 experts with per-32
UE8M0 scales).

  train.py --data train.bin.gz --out DIR --minutes 5 [--resume CKPT_DIR | --resume-published DIR]
           [--smoke]

The MTP block (spec §6.10) is trained jointly but on detached inputs (the main model's final
hyper-connection streams, the shared embedding and head), so it never changes the main model.
Score-routed MoE layers are balanced without an auxiliary loss (gate.bias nudged towards even
load, as DeepSeek V3/V4 do). The last part of training runs with fake quantization of the
shipped formats (straight-through), so the exported FP8/FP4 weights are the trained ones.
Outputs in --out: model.safetensors (published layout), config.json, ckpt-*.safetensors (bf16
master weights of the HF model and the MTP block, for --resume), metrics.json, and the log.
"""
import argparse
import gzip
import json
import math
import os
import re
import struct
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_v4 as X  # noqa: E402

CONFIG = {  # the published config.json (legacy V4-Flash keys), without quantization_config
    "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 1,
    "compress_ratios": [4, 0, 128, 4, 0, 4, 0], "compress_rope_theta": 160000,
    "hc_eps": 1e-06, "hc_mult": 4, "hc_sinkhorn_iters": 20, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 256, "index_head_dim": 32, "index_n_heads": 2, "index_topk": 128,
    "initializer_range": 0.02, "max_position_embeddings": 1048576, "moe_intermediate_size": 256,
    "n_routed_experts": 8, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 8, "num_experts_per_tok": 2, "num_hash_layers": 2,
    "num_hidden_layers": 6, "num_key_value_heads": 1, "num_nextn_predict_layers": 1,
    "o_groups": 2, "o_lora_rank": 64, "q_lora_rank": 128, "qk_rope_head_dim": 32,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16,
                     "original_max_position_embeddings": 65536, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus",
    "sliding_window": 128, "swiglu_limit": 10.0, "tie_word_embeddings": False,
    "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 4096,
}
QUANT = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
         "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------
class Data:
    def __init__(self, path, val_frac=0.01, seed=0):
        raw = gzip.open(path, "rb").read()
        assert raw[:5] == b"DEMO1"
        n, nt = struct.unpack("<II", raw[5:13])
        o = 13
        self.offsets = np.frombuffer(raw, np.uint32, n + 1, o).astype(np.int64)
        o += 4 * (n + 1)
        self.loss_start = np.frombuffer(raw, np.uint32, n, o).astype(np.int64)
        o += 4 * n
        self.tokens = np.frombuffer(raw, np.uint16, nt, o).astype(np.int64)
        self.lengths = self.offsets[1:] - self.offsets[:-1]
        rng = np.random.default_rng(seed)
        perm = rng.permutation(n)
        n_val = max(8, int(n * val_frac))
        self.val, self.train = perm[:n_val], perm[n_val:]
        self.rng = rng
        log(f"data: {n} samples, {nt} tokens, {len(self.train)} train / {len(self.val)} val")

    def batches(self, token_budget, pad_to=16):
        """Endless length-bucketed batches of train indices (each ~token_budget padded tokens)."""
        while True:
            idx = self.train[np.argsort(self.lengths[self.train] + self.rng.random(len(self.train)))]
            groups, cur = [], []
            for i in idx:
                L = -(-int(self.lengths[i]) // pad_to) * pad_to
                if cur and L * (len(cur) + 1) > token_budget:
                    groups.append(cur)
                    cur = []
                cur.append(i)
            if cur:
                groups.append(cur)
            self.rng.shuffle(groups)
            yield from groups

    def tensors(self, idx, device, pad_to=16):
        L = max(int(self.lengths[i]) for i in idx)
        L = -(-L // pad_to) * pad_to
        ids = np.full((len(idx), L), 2, np.int64)  # pad id
        mask = np.zeros((len(idx), L), np.float32)  # 1 where the token is a training target
        for r, i in enumerate(idx):
            s, e = self.offsets[i], self.offsets[i + 1]
            ids[r, :e - s] = self.tokens[s:e]
            mask[r, self.loss_start[i]:e - s] = 1
        return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)


# ---------------------------------------------------------------------------------------------
# Fake quantization (straight-through) of the shipped formats
# ---------------------------------------------------------------------------------------------
def pow2_scale(amax, qmax):
    s = amax.float() * (1.0 / qmax)
    return torch.exp2(torch.ceil(torch.log2(s)))


def fq_fp8_blocks(w, block=128):
    rows, cols = w.shape
    p = F.pad(w.float(), (0, -cols % block, 0, -rows % block))
    t = p.unflatten(0, (-1, block)).unflatten(-1, (-1, block))
    s = pow2_scale(t.abs().amax(dim=(1, 3)).clamp_min(1e-4), 448.0)[:, None, :, None]
    q = ((t / s).clamp(-448, 448).to(torch.float8_e4m3fn).float() * s)
    return q.flatten(2, 3).flatten(0, 1)[:rows, :cols]


def e2m1_round(x):
    return X.e2m1_round(x)


def fq_fp4_rows(w, block=32):
    g = w.float().unflatten(-1, (-1, block))
    s = pow2_scale(g.abs().amax(-1, keepdim=True).clamp_min(6 * 2.0 ** -126), 6.0)
    v, _ = e2m1_round(g / s)
    return (v * s).flatten(-2)


def fq_act_fp8(x, block=128):
    shape = x.shape
    n = shape[-1]
    p = F.pad(x.float(), (0, -n % block)).unflatten(-1, (-1, block))
    s = pow2_scale(p.abs().amax(-1, keepdim=True).clamp_min(1e-4), 448.0)
    q = ((p / s).clamp(-448, 448).to(torch.float8_e4m3fn).float() * s).flatten(-2)[..., :n]
    return q.to(x.dtype)


def ste(x, q):
    return x + (q - x).detach()


class FakeQuant(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, w):
        return ste(w, fq_fp8_blocks(w) if self.kind == "fp8" else fq_fp4_rows(w))


FP8_LINEARS = re.compile(r"(self_attn\.(q_a_proj|q_b_proj|kv_proj|o_a_proj|o_b_proj)|"
                         r"self_attn\.compressor\.indexer\.q_b_proj|"
                         r"mlp\.shared_experts\.(gate_proj|up_proj|down_proj)|(^|\.)e_proj|(^|\.)h_proj)$")


def _act_hook(mod, args):
    return (ste(args[0], fq_act_fp8(args[0])),) + tuple(args[1:])


def enable_qat(modules, opt):
    """Fake-quantize every FP8 linear and FP4 expert tensor; FP8 activations into FP8 linears.
    The optimizer keeps training the same master tensors (checked, swapped if torch moved them)."""
    from torch.nn.utils import parametrize
    n8 = n4 = swapped = 0

    def register(m, pname, fq):
        nonlocal swapped
        old = getattr(m, pname)
        parametrize.register_parametrization(m, pname, fq)
        new = m.parametrizations[pname].original
        if new is not old:
            for g in opt.param_groups:
                g["params"] = [new if p is old else p for p in g["params"]]
            if old in opt.state:
                opt.state[new] = opt.state.pop(old)
            swapped += 1

    for root in modules:
        for name, m in list(root.named_modules()):
            if isinstance(m, nn.Linear) and FP8_LINEARS.search(name):
                register(m, "weight", FakeQuant("fp8"))
                if not name.endswith("o_a_proj"):  # wo_a keeps bf16 activations
                    m.register_forward_pre_hook(_act_hook)
                n8 += 1
            for pname in ("gate_up_proj", "down_proj"):
                p = getattr(m, pname, None)
                if isinstance(p, nn.Parameter) and p.dim() == 3:
                    register(m, pname, FakeQuant("fp4"))
                    n4 += 1
    log(f"QAT on: {n8} FP8 linears, {n4} FP4 expert tensors ({swapped} optimizer swaps)")
    return n8, n4


# ---------------------------------------------------------------------------------------------
# Model: HF V4 + MTP block
# ---------------------------------------------------------------------------------------------
def hf_config(cfg):
    from transformers import DeepseekV4Config
    import copy
    kw = copy.deepcopy({k: v for k, v in cfg.items() if k not in ("architectures", "quantization_config")})
    return DeepseekV4Config(**kw)


def mtp_config(cfg):
    c = dict(cfg, num_hidden_layers=1, compress_ratios=[0, 0], num_hash_layers=0)
    return c


class MTP(nn.Module):
    """mtp.0 of the published layout: e/h projections, one SWA + score-MoE block, own hc_head/norm."""

    def __init__(self, cfg):
        super().__init__()
        from transformers.models.deepseek_v4 import modeling_deepseek_v4 as M
        from transformers import DeepseekV4ForCausalLM
        self.hcfg = hf_config(mtp_config(cfg))
        shell = DeepseekV4ForCausalLM(self.hcfg)  # for HF's own init of one block
        self.block = shell.model.layers[0]
        self.hc_head = shell.model.hc_head
        self.norm = shell.model.norm
        d = cfg["hidden_size"]
        self.e_proj = nn.Linear(d, d, bias=False)
        self.h_proj = nn.Linear(d, d, bias=False)
        nn.init.normal_(self.e_proj.weight, std=cfg["initializer_range"])
        nn.init.normal_(self.h_proj.weight, std=cfg["initializer_range"])
        self.enorm = M.DeepseekV4RMSNorm(d, eps=cfg["rms_norm_eps"])
        self.hnorm = M.DeepseekV4RMSNorm(d, eps=cfg["rms_norm_eps"])
        self.window = cfg["sliding_window"]

    def forward(self, streams, next_ids, embed_w, head_w, rotary, position_ids):
        e = self.enorm(F.embedding(next_ids, embed_w))
        h = self.hnorm(streams)
        x = self.e_proj(e).unsqueeze(2) + self.h_proj(h)
        S = next_ids.shape[1]
        i = torch.arange(S, device=x.device)
        ok = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.window)
        mask = torch.zeros(S, S, device=x.device).masked_fill(~ok, float("-inf"))[None, None]
        pe = {"main": rotary(e, position_ids=position_ids, layer_type="main"),
              "compress": rotary(e, position_ids=position_ids, layer_type="compress")}
        out = self.block(x, input_ids=None, position_embeddings=pe, position_ids=position_ids,
                         attention_mask=mask, past_key_values=None)
        if isinstance(out, tuple):
            out = out[0]
        return F.linear(self.norm(self.hc_head(out)), head_w)


def init_hash_tables(model, vocab, n_experts, k, seed):
    g = torch.Generator().manual_seed(seed)
    n = 0
    for m in model.modules():
        t = getattr(m, "tid2eid", None)
        if isinstance(t, torch.Tensor):
            table = torch.stack([torch.randperm(n_experts, generator=g)[:k] for _ in range(vocab)])
            t.copy_(table.to(t.device, t.dtype))
            n += 1
    return n


class BiasBalancer:
    """Aux-loss-free balancing: after each step gate.bias += rate * sign(mean load - load)."""

    def __init__(self, modules, n_experts, rate=1e-3):
        self.routers = [m for root in modules for m in root.modules()
                        if isinstance(getattr(m, "e_score_correction_bias", None), torch.Tensor)]
        self.loads = {}
        self.n, self.rate = n_experts, rate
        for r in self.routers:
            r.register_forward_hook(self._hook)

    def _hook(self, mod, args, out):
        idx = out[2] if isinstance(out, tuple) and len(out) >= 3 else None
        if idx is None:
            return
        c = torch.bincount(idx.reshape(-1), minlength=self.n).float()
        self.loads[id(mod)] = self.loads.get(id(mod), 0) + c

    @torch.no_grad()
    def step(self):
        imb = []
        for r in self.routers:
            c = self.loads.pop(id(r), None)
            if c is None:
                continue
            r.e_score_correction_bias += self.rate * torch.sign(c.mean() - c)
            imb.append((c.max() / c.mean().clamp_min(1)).item())
        return max(imb) if imb else 0.0


class Trainer:
    def __init__(self, cfg, device, seed=0):
        from transformers import DeepseekV4ForCausalLM
        torch.manual_seed(seed)
        self.cfg, self.device = cfg, device
        self.hcfg = hf_config(cfg)
        self.model = DeepseekV4ForCausalLM(self.hcfg).to(device)
        try:
            self.model.set_attn_implementation("eager")
        except Exception:  # older API
            self.model.config._attn_implementation = "eager"
        n_hash = init_hash_tables(self.model, cfg["vocab_size"], cfg["n_routed_experts"],
                                  cfg["num_experts_per_tok"], seed + 1)
        self.mtp = MTP(cfg).to(device)
        self.streams = None
        self.model.model.layers[-1].register_forward_hook(self._grab)
        self.balancer = BiasBalancer([self.model, self.mtp], cfg["n_routed_experts"])
        n_main = sum(p.numel() for p in self.model.parameters())
        n_mtp = sum(p.numel() for p in self.mtp.parameters())
        log(f"model: {n_main / 1e6:.2f}M params (+ MTP {n_mtp / 1e6:.2f}M), {n_hash} hash tables, "
            f"{len(self.balancer.routers)} score routers, layer types {self.hcfg.layer_types}")

    def _grab(self, mod, args, out):
        self.streams = out[0] if isinstance(out, tuple) else out

    def parameters(self):
        return list(self.model.parameters()) + list(self.mtp.parameters())

    def losses(self, ids, mask):
        out = self.model(input_ids=ids, use_cache=False)
        logits = out.logits[:, :-1].float()
        tgt, m = ids[:, 1:], mask[:, 1:]
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none")
        main = (ce * m.reshape(-1)).sum() / m.sum().clamp_min(1)
        # MTP at position p: streams[p] and token p+1 predict token p+2.
        S = ids.shape[1]
        pos = torch.arange(S - 1, device=ids.device)[None].expand(ids.shape[0], -1)
        mlog = self.mtp(self.streams[:, :-1].detach(), ids[:, 1:],
                        self.model.model.embed_tokens.weight.detach(),
                        self.model.lm_head.weight.detach(), self.model.model.rotary_emb, pos)
        mlog = mlog[:, :-1].float()
        mt, mm = ids[:, 2:], mask[:, 2:]
        mce = F.cross_entropy(mlog.reshape(-1, mlog.shape[-1]), mt.reshape(-1), reduction="none")
        mtp = (mce * mm.reshape(-1)).sum() / mm.sum().clamp_min(1)
        with torch.no_grad():
            main_pred = logits.argmax(-1)            # [B, S-1]: prediction of token t+1
            mtp_pred = mlog.argmax(-1)               # [B, S-2]: prediction of token t+2
            agree = (mtp_pred == main_pred[:, 1:]).float()
            stats = {"acc": ((main_pred == tgt).float() * m).sum() / m.sum().clamp_min(1),
                     "mtp_acc": ((mtp_pred == mt).float() * mm).sum() / mm.sum().clamp_min(1),
                     "mtp_accept": (agree * mm).sum() / mm.sum().clamp_min(1),
                     "n": m.sum()}
        return main, mtp, stats


def evaluate(tr, data, max_batches=20, budget=16384):
    tr.model.eval()
    tr.mtp.eval()
    tot = {"main": 0.0, "mtp": 0.0, "acc": 0.0, "mtp_acc": 0.0, "mtp_accept": 0.0, "n": 0.0}
    idx = sorted(data.val, key=lambda i: data.lengths[i])
    groups, cur = [], []
    for i in idx:
        if cur and (len(cur) + 1) * int(data.lengths[i]) > budget:
            groups.append(cur)
            cur = []
        cur.append(i)
    groups.append(cur)
    with torch.no_grad():
        for g in groups[:max_batches]:
            ids, mask = data.tensors(g, tr.device)
            main, mtp, st = tr.losses(ids, mask)
            n = st["n"].item()
            tot["main"] += main.item() * n
            tot["mtp"] += mtp.item() * n
            for k in ("acc", "mtp_acc", "mtp_accept"):
                tot[k] += st[k].item() * n
            tot["n"] += n
    tr.model.train()
    tr.mtp.train()
    n = max(tot.pop("n"), 1)
    return {k: v / n for k, v in tot.items()}


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------
def master_state(tr):
    from torch.nn.utils import parametrize
    out = {}
    for prefix, mod in (("main.", tr.model), ("mtp.", tr.mtp)):
        for k, v in mod.state_dict().items():
            k = k.replace("parametrizations.", "").replace(".original", "")
            out[prefix + k] = v.detach()
    return out


def save_ckpt(tr, out_dir, step, max_bytes=15 * 2 ** 20):
    from safetensors.torch import save_file
    state = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous().cpu()
             for k, v in master_state(tr).items()}
    shard, size, files = {}, 0, []
    for k in sorted(state):
        nb = state[k].numel() * state[k].element_size()
        if shard and size + nb > max_bytes:
            files.append(shard)
            shard, size = {}, 0
        shard[k] = state[k]
        size += nb
    files.append(shard)
    for i, s in enumerate(files):
        save_file(s, os.path.join(out_dir, f"ckpt-{i}.safetensors"), metadata={"step": str(step)})
    log(f"checkpoint: {len(files)} files, step {step}")


def load_ckpt(tr, ckpt_dir):
    from safetensors.torch import load_file
    state = {}
    for fn in sorted(os.listdir(ckpt_dir)):
        if fn.startswith("ckpt-") and fn.endswith(".safetensors"):
            state.update(load_file(os.path.join(ckpt_dir, fn)))
    for prefix, mod in (("main.", tr.model), ("mtp.", tr.mtp)):
        sub = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        own = mod.state_dict()
        missing = [k for k in own if k not in sub]
        if missing:
            raise SystemExit(f"checkpoint lacks {missing[:5]}")
        with torch.no_grad():
            for k, v in own.items():
                v.copy_(sub[k].to(v.dtype))
    log(f"resumed from {ckpt_dir}")


# ---------------------------------------------------------------------------------------------
def train(a):
    device = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    cfg = dict(CONFIG)
    if a.smoke and not a.resume_published:
        cfg.update(num_hidden_layers=3, compress_ratios=[4, 0, 128, 0], num_hash_layers=1)
    data = Data(a.data, seed=a.seed)
    tr = Trainer(cfg, device, a.seed)
    if a.resume:
        load_ckpt(tr, a.resume)
    if a.resume_published:
        X.resume_published(tr, a.resume_published)
        ev = evaluate(tr, data, max_batches=2 if a.smoke else 8)
        log(f"eval of the resumed weights: {json.dumps(ev)}")
        if ev["acc"] < 0.5:
            raise SystemExit("resume check failed: the resumed weights do not predict the data")
    params = tr.parameters()
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    total = a.minutes * 60.0
    t0 = time.time()
    qat_on = False
    step, hist = 0, []
    batches = data.batches(a.batch_tokens)
    os.makedirs(a.out, exist_ok=True)
    while True:
        el = time.time() - t0
        prog = el / total
        if prog >= 1.0 or (a.max_steps and step >= a.max_steps):
            break
        if not qat_on and (prog >= a.qat_from or (a.smoke and step == 2)):
            enable_qat([tr.model, tr.mtp], opt)
            params = tr.parameters()
            qat_on = True
        warm = min(1.0, (step + 1) / a.warmup)
        lr = a.lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(prog, 1.0))))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, mask = data.tensors(next(batches), device)
        try:
            main, mtp, st = tr.losses(ids, mask)
            loss = main + a.mtp_weight * mtp
            opt.zero_grad(set_to_none=True)
            loss.backward()
        except torch.cuda.OutOfMemoryError:
            opt.zero_grad(set_to_none=True)
            main = mtp = loss = st = None
            torch.cuda.empty_cache()
            a.batch_tokens //= 2
            batches = data.batches(a.batch_tokens)
            log(f"out of memory at {tuple(ids.shape)}: batch budget now {a.batch_tokens} tokens")
            continue
        gn = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        imb = tr.balancer.step()
        step += 1
        if step == 3:
            log(f"GPU memory peak {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB")
        if step % a.log_every == 0 or step <= 3:
            log(f"step {step} t {el:.0f}s lr {lr:.2e} loss {main.item():.4f} mtp {mtp.item():.4f} "
                f"acc {st['acc'].item():.3f} mtp_acc {st['mtp_acc'].item():.3f} "
                f"accept {st['mtp_accept'].item():.3f} gn {gn.item():.2f} imb {imb:.2f} "
                f"B {ids.shape[0]}x{ids.shape[1]} qat {int(qat_on)}")
        if a.eval_every and step % a.eval_every == 0:
            ev = evaluate(tr, data, max_batches=8)
            hist.append(dict(ev, step=step, t=el))
            log(f"eval step {step}: {json.dumps({k: round(v, 4) for k, v in ev.items()})}")
    log(f"trained {step} steps in {time.time() - t0:.0f}s")
    ev = evaluate(tr, data, max_batches=4 if a.smoke else 40)
    log(f"final eval: {json.dumps(ev)}")
    save_ckpt(tr, a.out, step)
    try:
        pub = X.export(tr, cfg, QUANT, a.out)
        X.check_published(pub, dict(cfg, quantization_config=QUANT))
        exported = True
    except BaseException as e:  # keep the checkpoint and the metrics; the export can be redone
        import traceback
        traceback.print_exc()
        exported = False
        if a.smoke:
            raise SystemExit(f"smoke: export failed: {e}")
    with open(os.path.join(a.out, "metrics.json"), "w") as f:
        json.dump({"steps": step, "seconds": time.time() - t0, "final": ev, "history": hist,
                   "qat": qat_on, "exported": exported, "config": cfg}, f, indent=1)
    log("done")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--resume", help="folder with ckpt-*.safetensors (bf16 master weights)")
    ap.add_argument("--resume-published", help="published checkpoint folder (e.g. models/default)")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--batch-tokens", type=int, default=49152)
    ap.add_argument("--mtp-weight", type=float, default=1.0)
    ap.add_argument("--qat-from", type=float, default=0.7)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    train(ap.parse_args())


if __name__ == "__main__":
    main()
