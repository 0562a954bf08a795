#!/usr/bin/env python3
"""MTP noise floor for an official V4 fixture: the MTP logits at `mtp_rows` recomputed by the
official code (fresh load through its convert.py), and under the fixture tools' two noise variants
(alt: fp64 GEMMs; alt2: fp64 GEMMs + attention tiles of 16 + butterfly Hadamard), each applied to
the main prefill and the MTP block alike. make_official_v4.py records mtp_logits but no MTP noise.

  python3 tools/make_mtp_noise.py --tools tools/fixtures --fixture fx/official_v4_a \\
      --out tests/fixtures/official_v4_a/mtp_noise.safetensors

--fixture is the generator's own output folder (inference_config.json, model.safetensors).
"""
import argparse
import json
import os
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tools", required=True)
    p.add_argument("--fixture", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.tools))
    import torch
    import fixturelib as F
    import make_official_v4 as O

    ic = F.load_json(os.path.join(a.fixture, "inference_config.json"))
    ref = F.st_load(os.path.join(a.fixture, "reference.safetensors"))
    meta = F.load_json(os.path.join(a.fixture, "meta.json"))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    M, _, _ = O.import_official(O.DEFAULT_REF)
    _, model = O.build(M, ic, meta["runtime_args"], device)
    F.LowerIndexTopK().install()
    O.poison(model)
    O.load_released_way(model, O.DEFAULT_REF, a.fixture, ic["n_routed_experts"], {})
    hook = O.HeadHook(model)
    ids = ref["input_ids"].long()[None].to(device)
    rows = ref["mtp_rows"].long().to(device)

    def mtp_logits():
        O.prefill(model, hook, ids, keep_input=True)
        streams = hook.head_input
        hook.full = True
        model.mtp[0].forward(streams[:, :-1], 0, ids[:, 1:])
        hook.full = False
        return hook.logits[0, rows].float().cpu()

    out = {"mtp_logits": mtp_logits()}
    for which in ("alt", "alt2"):
        with O.noise_variant(M, which):
            out[f"{which}_mtp_logits"] = mtp_logits()
    F.st_save(a.out, out, {"tool": "tools/make_mtp_noise.py"})
    print(json.dumps({k: F.compare(v, ref["mtp_logits"]) for k, v in out.items()}))


if __name__ == "__main__":
    main()
