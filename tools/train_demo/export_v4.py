"""Exports a trained demo model (HF DeepseekV4ForCausalLM + the MTP block of train.py) to the
published DeepSeek V4 checkpoint layout that `src/model` loads.

Names: HF's own save_pretrained layout mapped to the published names (`model.` prefix dropped,
`attn.norm` -> `attn.kv_norm`, embed/head/hc_head renamed); the MTP block as `mtp.0.*`.
Formats (as the V4-Flash release): FP8 e4m3 with one UE8M0 scale per 128x128 block for the
attention projections, the indexer query projection, the shared experts and the MTP e/h
projections; FP4 e2m1 pairs (even element in the low nibble) with one UE8M0 scale per 32 inputs
for the routed experts; F32 for hc_*, attn_sink, ape and gate.bias; I64 hash tables; BF16 for
the rest. The quantizers are the ones train.py fake-quantizes with, so QAT-trained weights land
exactly on their grid.
"""
import json
import os
import re
import struct
import tempfile

import torch

PUBLISHED = [re.compile(p) for p in (
    r"(embed|head|norm)\.weight", r"hc_head_(fn|base|scale)",
    r"layers\.\d+\.(hc_(attn|ffn)_(fn|base|scale)|attn_norm\.weight|ffn_norm\.weight)",
    r"layers\.\d+\.attn\.(attn_sink|(wq_a|q_norm|wq_b|wkv|kv_norm|wo_a|wo_b)\.weight)",
    r"layers\.\d+\.attn\.(indexer\.)?compressor\.((wkv|wgate|norm)\.weight|ape)",
    r"layers\.\d+\.attn\.indexer\.(wq_b|weights_proj)\.weight",
    r"layers\.\d+\.ffn\.gate\.(weight|bias|tid2eid)",
    r"layers\.\d+\.ffn\.(shared_experts|experts\.\d+)\.w[123]\.weight")]
FP8 = re.compile(r"(attn\.(wq_a|wq_b|wkv|wo_a|wo_b)|attn\.indexer\.wq_b|ffn\.shared_experts\.w[123]|"
                 r"e_proj|h_proj)\.weight$")
FP4 = re.compile(r"ffn\.experts\.\d+\.w[123]\.weight$")
F32 = re.compile(r"(hc_[a-z_]+|attn_sink|\.ape|gate\.bias)$")


def hf_to_published(name):
    special = {"model.embed_tokens.weight": "embed.weight", "lm_head.weight": "head.weight",
               "model.norm.weight": "norm.weight", "model.hc_head.hc_fn": "hc_head_fn",
               "model.hc_head.hc_base": "hc_head_base", "model.hc_head.hc_scale": "hc_head_scale"}
    out = special.get(name)
    if out is None:
        out = name[len("model."):] if name.startswith("model.") else name
        out = re.sub(r"^(layers\.\d+\.attn)\.norm\.weight$", r"\1.kv_norm.weight", out)
    if not any(p.fullmatch(out) for p in PUBLISHED):
        raise SystemExit(f"HF tensor {name!r} has no known published name ({out!r})")
    return out


def kind(pub):
    if pub.endswith("tid2eid"):
        return "i64"
    if FP8.search(pub):
        return "fp8"
    if FP4.search(pub):
        return "fp4"
    if F32.search(pub):
        return "f32"
    return "bf16"


# ---- quantizers (same math as train.py's fake quantization) -----------------------------------
def _pow2(amax, qmax):
    return torch.exp2(torch.ceil(torch.log2(amax.float() * (1.0 / qmax))))


def quant_fp8(w, block=128):
    rows, cols = w.shape
    p = torch.nn.functional.pad(w.float(), (0, -cols % block, 0, -rows % block))
    t = p.unflatten(0, (-1, block)).unflatten(-1, (-1, block))
    s = _pow2(t.abs().amax(dim=(1, 3)).clamp_min(1e-4), 448.0)
    q = (t / s[:, None, :, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    q = q.flatten(2, 3).flatten(0, 1)[:rows, :cols].contiguous()
    return q, s


E2M1_BOUNDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def e2m1_round(x):
    """(values, 4-bit codes) of the nearest e2m1 grid point (ties to the lower magnitude);
    code bit 3 is the sign, the low 3 bits index E2M1_GRID."""
    mag = x.abs().clamp(max=6.0)
    idx = torch.bucketize(mag, torch.tensor(E2M1_BOUNDS, device=x.device))
    val = torch.tensor(E2M1_GRID, device=x.device)[idx] * torch.sign(x)
    codes = idx.to(torch.uint8) | (((x < 0) & (idx > 0)).to(torch.uint8) << 3)
    return val, codes


def quant_fp4(w, block=32):
    g = w.float().unflatten(-1, (-1, block))
    s = _pow2(g.abs().amax(-1, keepdim=True).clamp_min(6 * 2.0 ** -126), 6.0)
    _, codes = e2m1_round(g / s)
    codes = codes.flatten(-2)
    pairs = codes.unflatten(-1, (-1, 2))
    packed = (pairs[..., 0] | (pairs[..., 1] << 4)).contiguous()
    return packed, s.squeeze(-1)


def e8m0_bytes(s):
    e = torch.round(torch.log2(s.float())).to(torch.int32) + 127
    assert int(e.min()) >= 0 and int(e.max()) <= 254, "scale outside the UE8M0 range"
    return e.to(torch.uint8).contiguous()


def raw(t):
    t = t.detach().contiguous().cpu()
    return t.view(torch.uint8).numpy().tobytes() if t.dtype != torch.uint8 else t.numpy().tobytes()


def st_write(path, tensors, metadata=None):
    """tensors: {name: (dtype string, shape, bytes)} -> a safetensors file."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        dt, shape, b = tensors[name]
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def encode(pub, w):
    """Published tensors (name -> (dtype, shape, bytes)) for one fp32 master tensor."""
    k = kind(pub)
    if k == "i64":
        return {pub: ("I64", w.shape, raw(w.to(torch.int64)))}
    if k == "f32":
        return {pub: ("F32", w.shape, raw(w.float()))}
    if k == "bf16":
        return {pub: ("BF16", w.shape, raw(w.to(torch.bfloat16)))}
    base = pub[:-len(".weight")]
    if k == "fp8":
        q, s = quant_fp8(w)
        return {pub: ("F8_E4M3", q.shape, raw(q)),
                base + ".scale": ("F8_E8M0", s.shape, raw(e8m0_bytes(s)))}
    q, s = quant_fp4(w)
    return {pub: ("I8", q.shape, raw(q)), base + ".scale": ("F8_E8M0", s.shape, raw(e8m0_bytes(s)))}


def clean_state(module):
    out = {}
    for k, v in module.state_dict().items():
        out[k.replace("parametrizations.", "").replace(".original", "")] = v.detach().float() \
            if v.is_floating_point() else v.detach()
    return out


def hf_saved(model_cls, hcfg, state):
    """{HF saved name: tensor} of a fresh model holding `state`, through save_pretrained."""
    from safetensors.torch import load_file
    fresh = model_cls(hcfg)
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise SystemExit(f"export: state mismatch, missing {missing[:5]} unexpected {unexpected[:5]}")
    with tempfile.TemporaryDirectory() as tmp:
        fresh.save_pretrained(tmp)
        out = {}
        for fn in sorted(os.listdir(tmp)):
            if fn.endswith(".safetensors"):
                out.update(load_file(os.path.join(tmp, fn)))
    return out


def export(tr, cfg, quant, out_dir):
    from transformers import DeepseekV4ForCausalLM
    tensors = {}
    main = hf_saved(DeepseekV4ForCausalLM, tr.hcfg, clean_state(tr.model))
    for name, w in main.items():
        tensors.update(encode(hf_to_published(name), w))
    # MTP: its block through a one-layer shell, renamed to mtp.0.*
    m = clean_state(tr.mtp)
    shell_state = {}
    for k, v in m.items():
        if k.startswith("block."):
            shell_state["model.layers.0." + k[len("block."):]] = v
        elif k.startswith("hc_head."):
            shell_state["model.hc_head." + k[len("hc_head."):]] = v
        elif k.startswith("norm."):
            shell_state["model.norm." + k[len("norm."):]] = v
    shell_state["model.embed_tokens.weight"] = main_embed = clean_state(tr.model)["model.embed_tokens.weight"]
    shell_state["lm_head.weight"] = torch.zeros_like(main_embed)
    shell = hf_saved(DeepseekV4ForCausalLM, tr.mtp.hcfg, shell_state)
    for name, w in shell.items():
        pub = hf_to_published(name)
        if pub in ("embed.weight", "head.weight"):
            continue
        if pub.startswith("layers.0."):
            pub = "mtp.0." + pub[len("layers.0."):]
        elif pub.startswith("hc_head_"):
            pub = "mtp.0." + pub
        elif pub == "norm.weight":
            pub = "mtp.0.norm.weight"
        tensors.update(encode(pub, w))
    for k in ("e_proj.weight", "h_proj.weight", "enorm.weight", "hnorm.weight"):
        tensors.update(encode("mtp.0." + k, m[k]))
    st_write(os.path.join(out_dir, "model.safetensors"), tensors, {"format": "pt"})
    config = dict(cfg, quantization_config=quant, expert_dtype="fp4")
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(dict(sorted(config.items())), f, indent=1)
    size = os.path.getsize(os.path.join(out_dir, "model.safetensors"))
    print(f"export: {len(tensors)} tensors, {size / 1e6:.2f} MB", flush=True)
    return {k: (v[0], list(v[1])) for k, v in tensors.items()}


def expected_shapes(c):
    """{published name: shape} the loader of src/model expects for config c."""
    d, H, D, V = c["hidden_size"], c["num_attention_heads"], c["head_dim"], c["vocab_size"]
    hc, E, I = c["hc_mult"], c["n_routed_experts"], c["moe_intermediate_size"]
    mix = (2 + hc) * hc
    ql, og, ol = c["q_lora_rank"], c["o_groups"], c["o_lora_rank"]
    ih, ihd = c["index_n_heads"], c["index_head_dim"]
    out = {"embed.weight": [V, d], "head.weight": [V, d], "norm.weight": [d],
           "hc_head_fn": [hc, hc * d], "hc_head_base": [hc], "hc_head_scale": [1]}

    def block(p, ratio, hashed):
        for s in ("attn", "ffn"):
            out.update({f"{p}hc_{s}_fn": [mix, hc * d], f"{p}hc_{s}_base": [mix],
                        f"{p}hc_{s}_scale": [3]})
        out.update({p + "attn_norm.weight": [d], p + "ffn_norm.weight": [d],
                    p + "attn.attn_sink": [H], p + "attn.wq_a.weight": [ql, d],
                    p + "attn.q_norm.weight": [ql], p + "attn.wq_b.weight": [H * D, ql],
                    p + "attn.wkv.weight": [D, d], p + "attn.kv_norm.weight": [D],
                    p + "attn.wo_a.weight": [og * ol, H * D // og], p + "attn.wo_b.weight": [d, og * ol]})
        if ratio:
            coff = 2 if ratio == 4 else 1
            a = p + "attn.compressor."
            out.update({a + "wkv.weight": [coff * D, d], a + "wgate.weight": [coff * D, d],
                        a + "ape": [ratio, coff * D], a + "norm.weight": [D]})
            if ratio == 4:
                i = p + "attn.indexer."
                out.update({i + "wq_b.weight": [ih * ihd, ql], i + "weights_proj.weight": [ih, d],
                            i + "compressor.wkv.weight": [2 * ihd, d],
                            i + "compressor.wgate.weight": [2 * ihd, d],
                            i + "compressor.ape": [ratio, 2 * ihd], i + "compressor.norm.weight": [ihd]})
        f = p + "ffn."
        out[f + "gate.weight"] = [E, d]
        out[f + ("gate.tid2eid" if hashed else "gate.bias")] = [V, c["num_experts_per_tok"]] if hashed else [E]
        for w, shp in (("w1", [I, d]), ("w2", [d, I]), ("w3", [I, d])):
            out[f"{f}shared_experts.{w}.weight"] = shp
            for e in range(E):
                out[f"{f}experts.{e}.{w}.weight"] = shp

    for i in range(c["num_hidden_layers"]):
        block(f"layers.{i}.", c["compress_ratios"][i], i < c["num_hash_layers"])
    block("mtp.0.", 0, False)
    out.update({"mtp.0.e_proj.weight": [d, d], "mtp.0.h_proj.weight": [d, d],
                "mtp.0.enorm.weight": [d], "mtp.0.hnorm.weight": [d], "mtp.0.norm.weight": [d],
                "mtp.0.hc_head_fn": [hc, hc * d], "mtp.0.hc_head_base": [hc],
                "mtp.0.hc_head_scale": [1]})
    return out


def check_published(pub, c):
    """Names, dtypes and shapes of an export against what src/model loads (raises on mismatch)."""
    want = expected_shapes(c)
    errors = []
    for name, shape in want.items():
        if name not in pub:
            errors.append(f"missing {name}")
            continue
        dt, got = pub[name]
        k = kind(name)
        exp = list(shape)
        if k == "fp4":
            exp = [shape[0], shape[1] // 2]
        if got != exp:
            errors.append(f"{name}: shape {got}, expected {exp}")
        if k in ("fp8", "fp4"):
            base = name[:-len(".weight")]
            bo, bi = (128, 128) if k == "fp8" else (1, 32)
            sshape = [-(-shape[0] // bo), -(-shape[1] // bi)]
            s = pub.get(base + ".scale")
            if s is None or s[1] != sshape or s[0] != "F8_E8M0":
                errors.append(f"{base}.scale: {s}, expected F8_E8M0 {sshape}")
    extra = [n for n in pub if n not in want and not n.endswith(".scale")]
    errors += [f"unexpected {n}" for n in extra]
    if errors:
        raise SystemExit("export check failed:\n  " + "\n  ".join(errors[:20]))
    print(f"export check: {len(want)} tensors as the loader expects", flush=True)


# ---- reading a published checkpoint back (for --resume-published) -----------------------------
def read_published(folder):
    """{published name: fp32 / int64 tensor} of a published checkpoint, FP8/FP4 dequantized."""
    files = [os.path.join(folder, "model.safetensors")]
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted({os.path.join(folder, f) for f in json.load(open(index))["weight_map"].values()})
    rawt = {}
    for path in files:
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        for name, info in header.items():
            if name == "__metadata__":
                continue
            s, e = info["data_offsets"]
            rawt[name] = (info["dtype"], info["shape"], data[s:e])

    def as_tensor(dt, shape, b):
        u8 = torch.frombuffer(bytearray(b), dtype=torch.uint8)
        if dt == "F32":
            return u8.view(torch.float32).reshape(shape).clone()
        if dt == "BF16":
            return u8.view(torch.bfloat16).reshape(shape).float()
        if dt == "I64":
            return u8.view(torch.int64).reshape(shape).clone()
        if dt == "F8_E4M3":
            return u8.view(torch.float8_e4m3fn).reshape(shape).float()
        if dt == "F8_E8M0":
            return torch.exp2(u8.reshape(shape).float() - 127)
        if dt in ("I8", "U8"):
            return u8.reshape(shape)
        raise SystemExit(f"unknown dtype {dt}")

    grid = torch.tensor(E2M1_GRID + tuple(-g for g in E2M1_GRID), dtype=torch.float32)
    out = {}
    for name, (dt, shape, b) in rawt.items():
        if name.endswith(".scale"):
            continue
        t = as_tensor(dt, shape, b)
        base = name[:-len(".weight")] if name.endswith(".weight") else None
        if base and base + ".scale" in rawt:
            s = as_tensor(*rawt[base + ".scale"])
            if dt == "F8_E4M3":
                rows, cols = t.shape
                full = s.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
                t = t * full
            else:
                b8 = t.long()
                vals = grid[torch.stack([b8 & 15, b8 >> 4], -1)].flatten(-2)
                t = (vals.unflatten(-1, (-1, 32)) * s.unsqueeze(-1)).flatten(-2)
        out[name] = t
    return out


def load_into_hf(model, values, rename):
    """Loads {published name: tensor} into an HF model through its own save/load conversion:
    save_pretrained (to learn the saved names), overwrite the values, from_pretrained, copy."""
    from safetensors.torch import load_file, save_file
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        for fn in sorted(os.listdir(tmp)):
            if not fn.endswith(".safetensors"):
                continue
            path = os.path.join(tmp, fn)
            saved = load_file(path)
            new = {}
            for k, v in saved.items():
                src = rename(hf_to_published(k))
                if src not in values:
                    raise SystemExit(f"resume: the checkpoint has no {src} (for {k})")
                w = values[src]
                if list(w.shape) != list(v.shape):
                    raise SystemExit(f"resume: {src} has shape {list(w.shape)}, expected {list(v.shape)}")
                new[k] = w.to(v.dtype).contiguous()
            save_file(new, path, metadata={"format": "pt"})
        fresh = type(model).from_pretrained(tmp, dtype=torch.float32)
        state = fresh.state_dict()
    own = model.state_dict()
    with torch.no_grad():
        for k, v in own.items():
            v.copy_(state[k].to(v.device, v.dtype))
    return len(own)


def resume_published(tr, folder):
    """Master weights of train.py's model and MTP block from a published checkpoint folder."""
    from transformers import DeepseekV4ForCausalLM
    values = read_published(folder)
    n = load_into_hf(tr.model, values, lambda p: p)
    shell = DeepseekV4ForCausalLM(tr.mtp.hcfg)

    def mtp_name(p):
        if p in ("embed.weight", "head.weight"):
            return p
        if p.startswith("layers.0."):
            return "mtp.0." + p[len("layers.0."):]
        return "mtp.0." + p  # hc_head_*, norm.weight

    n += load_into_hf(shell, values, mtp_name)
    with torch.no_grad():
        for dst, src in ((tr.mtp.block, shell.model.layers[0]), (tr.mtp.hc_head, shell.model.hc_head),
                         (tr.mtp.norm, shell.model.norm)):
            dst.load_state_dict({k: v.to(tr.device) for k, v in src.state_dict().items()})
        for k in ("e_proj", "h_proj", "enorm", "hnorm"):
            getattr(tr.mtp, k).weight.copy_(values[f"mtp.0.{k}.weight"].to(tr.device))
    print(f"resumed {n} tensors from {folder}", flush=True)
