#!/usr/bin/env python3
"""Reference values for the FP8 / FP4 storage formats and the official quantization kernels.

Runs on the GPU machine (torch >= 2.7 with float8 dtypes) next to the fixture tools folder:

  python3 tools/make_quant_fixture.py --tools tools/fixtures --out tests/fixtures/quant

Writes quant_reference.safetensors (all U8 / F32) and README.md. Every value comes from torch's own
float8_e4m3fn / float8_e8m0fnu conversions, or from the kernel stand-ins (v4_kernels.py) that the
official-numerics fixtures were made with, so the C++ decoders and kernels can be checked bit for bit.
"""
import argparse
import json
import os
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tools", required=True, help="folder with fixturelib.py and v4_kernels.py")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.tools))
    import torch
    import fixturelib as F
    import v4_kernels as K

    g = torch.Generator(device="cpu").manual_seed(a.seed)
    out, notes = {}, {}

    def u8(t):
        return t.contiguous().view(torch.uint8)

    def bf16_values(t):
        return t.float().to(torch.bfloat16).float()

    # --- scalar formats: every code ------------------------------------------------------------
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    out["e4m3_codes"] = codes
    out["e4m3_values"] = codes.view(torch.float8_e4m3fn).float()
    out["e8m0_values"] = codes.view(torch.float8_e8m0fnu).float()
    nib = torch.arange(16, dtype=torch.int32).to(torch.uint8)
    try:
        pairs = (nib | (nib << 4)).contiguous().view(torch.float4_e2m1fn_x2)
        vals = pairs.to(torch.float32)
        if vals.numel() == 16:
            raise RuntimeError("float4 cast did not unpack pairs")
        out["e2m1_values"] = vals.reshape(16, 2)[:, 0].contiguous()
        notes["e2m1_values"] = "torch float4_e2m1fn_x2 -> float32 cast"
    except Exception as e:  # noqa: BLE001 - torch builds without that cast
        out["e2m1_values"] = K.e2m1_table("cpu")
        notes["e2m1_values"] = f"torch has no float4 -> float32 cast here ({type(e).__name__}); e2m1 table of v4_kernels"

    # --- e4m3 rounding: random magnitudes, exact midpoints, subnormals, saturation, NaN ---------
    n = 4096
    x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-16, 11, (n,), generator=g).float())
    grid = out["e4m3_values"][:127].double()                     # 0 .. 448, ascending
    mids = ((grid[1:] + grid[:-1]) / 2).float()                  # exact ties (representable in fp32)
    sgn = torch.where(torch.rand(mids.numel(), generator=g) < 0.5, -1.0, 1.0)
    special = torch.tensor([0.0, -0.0, 448.0, -448.0, 449.0, 463.9, 464.0, 480.0, 1e6, -1e6,
                            float("inf"), float("-inf"), float("nan"), 2.0 ** -9, 2.0 ** -10,
                            3 * 2.0 ** -11, 2.0 ** -11, 1e-30, -2.0 ** -10])
    rin = torch.cat([x, mids * sgn, special]).float()
    out["e4m3_round_in"] = rin
    out["e4m3_round_sat_codes"] = u8(torch.clamp(rin, -448.0, 448.0).to(torch.float8_e4m3fn))

    # --- e2m1 rounding (the rule of the FP4 quantizers: nearest, ties to the even code) ---------
    fin = torch.cat([torch.randn(2048, generator=g) * 3,
                     torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -5.0, 6.0, -6.0,
                                   0.0, -0.0, 0.1, 5.9])]).float()
    fin = torch.clamp(fin, -6.0, 6.0)
    out["e2m1_round_in"] = fin
    out["e2m1_round_codes"] = K.e2m1_codes(fin)

    # --- stored weights ---------------------------------------------------------------------------
    w = torch.randn(300, 200, generator=g) * 0.05
    w[:128, :128] *= 40.0                                        # blocks with different scales
    q, s = F.quant_fp8_blocks(w, 128)
    out["fp8w_q"], out["fp8w_s"] = u8(q), u8(s)
    out["fp8w_deq"] = F.dequant_fp8_blocks(q, s, 128)
    # f32 block scales (the layout of checkpoints with float scales)
    sf = (torch.rand(3, 2, generator=g) + 0.5) * 1e-3
    full = sf.repeat_interleave(128, 0)[:300].repeat_interleave(128, 1)[:, :200]
    qf = torch.clamp(w / full, -448.0, 448.0).to(torch.float8_e4m3fn)
    out["fp8wf_q"], out["fp8wf_s"] = u8(qf), sf.float()
    out["fp8wf_deq"] = qf.float() * full
    w4 = torch.randn(48, 256, generator=g) * 0.1
    packed, s4 = F.quant_fp4_rows(w4)
    out["fp4w_packed"], out["fp4w_s"] = packed.contiguous(), u8(s4)
    out["fp4w_deq"] = F.dequant_fp4_rows(packed, s4)

    # --- activation quantizers (v4_kernels, as used by the official fixtures) -------------------
    def act_rows(rows, cols, zero_row=True):
        t = torch.randn(rows, cols, generator=g) * torch.exp2(torch.randint(-8, 6, (rows, 1), generator=g).float())
        if zero_row:
            t[1] = 0.0
        return t.to(torch.bfloat16)

    xa = act_rows(6, 384)
    qa, sa = K.act_quant(xa, 128, "ue8m0", torch.float32)
    out["act_x"], out["act_q"], out["act_s"] = xa.float(), u8(qa), sa.float()
    xk = act_rows(6, 448)
    out["kvq_x"] = xk.float()
    out["kvq_y"] = K.act_quant(xk.clone(), 64, "ue8m0", None, True).float()
    xf = act_rows(6, 128)
    out["fp4q_x"] = xf.float()
    out["fp4q_y"] = K.fp4_act_quant(xf.clone(), 32, True).float()
    xh = act_rows(6, 128, zero_row=False)
    out["had_x"] = xh.float()
    out["had_y"] = K.hadamard_transform(xh, 128 ** -0.5).float()

    # --- block-scaled GEMMs (bf16 in, bf16 out) -------------------------------------------------
    x8 = act_rows(3, 384, zero_row=False)
    w8 = torch.randn(200, 384, generator=g) * 0.05
    q8, s8 = F.quant_fp8_blocks(w8, 128)
    x4 = act_rows(3, 256, zero_row=False)
    w4b = torch.randn(64, 256, generator=g) * 0.1
    torch.set_default_dtype(torch.bfloat16)             # GEMM outputs in bf16, as the official code runs
    aq, asc = K.act_quant(x8, 128, "ue8m0", torch.float32)
    out["gemm8_x"], out["gemm8_wq"], out["gemm8_ws"] = x8.float(), u8(q8), u8(s8)
    out["gemm8_y"] = K.fp8_gemm(aq, asc, q8, s8.float()).float()
    p4, s4b = F.quant_fp4_rows(w4b)
    aq4, asc4 = K.act_quant(x4, 128, "ue8m0", torch.float32)
    out["gemm4_x"], out["gemm4_wp"], out["gemm4_ws"] = x4.float(), p4.contiguous(), u8(s4b)
    out["gemm4_y"] = K.fp4_gemm(aq4, asc4, K.fp4_from_bytes(p4), s4b.float()).float()
    torch.set_default_dtype(torch.float32)

    os.makedirs(a.out, exist_ok=True)
    F.st_save(os.path.join(a.out, "quant_reference.safetensors"), {k: v.contiguous().cpu() for k, v in out.items()},
              {"tool": "tools/make_quant_fixture.py", "seed": a.seed})
    listing = "\n".join(f"- `{k}` {list(v.shape)} {str(v.dtype).replace('torch.', '')}" for k, v in sorted(out.items()))
    env = F.environment()
    readme = f"""# FP8 / FP4 format and kernel reference values

Made by `python3 tools/make_quant_fixture.py --tools tools/fixtures --out tests/fixtures/quant`
(seed {a.seed}) with torch {env['torch']} on {env.get('gpu', 'CPU')}.

- `e4m3_values`, `e8m0_values`: torch's float8_e4m3fn / float8_e8m0fnu -> float32 of every byte 0..255.
- `e2m1_values`: {notes['e2m1_values']}.
- `e4m3_round_in` -> `e4m3_round_sat_codes`: torch's cast of clamp(x, -448, 448) (round to nearest even).
- `e2m1_round_in` -> `e2m1_round_codes`: nearest e2m1 value, ties to the even code (bit 3 = sign).
- `fp8w_*`: FP8 weight [300, 200] with 128x128 UE8M0 block scales (partial blocks), `fp8wf_*` with F32 scales;
  `fp4w_*`: FP4 weight [48, 256], bytes hold elements 2k (low nibble) and 2k+1 (high nibble), per-32 UE8M0 scales.
- `act_*`: act_quant per 128 (codes + power-of-two scales); `kvq_*`: in-place act_quant per 64 (bf16 out);
  `fp4q_*`: in-place fp4_act_quant per 32; `had_*`: Hadamard-128 times 128^-1/2 on bf16.
- `gemm8_*`, `gemm4_*`: FP8 x FP8 (128x128) and FP8 x FP4 (per 32) GEMMs of bf16 activations, bf16 out.
  Block partial sums are fp32 GEMMs in another order than ours: compare within bf16 rounding.

{listing}
"""
    with open(os.path.join(a.out, "README.md"), "w", encoding="utf-8") as f:
        f.write(readme)
    print(json.dumps({"tensors": len(out), "notes": notes}))


if __name__ == "__main__":
    main()
