#!/usr/bin/python3
"""Checks exported heads GGUFs against their PyTorch modules, and the target fingerprint.

Usage:
  /usr/bin/python3 tools/train/check_heads.py --random        # tiny random target + heads
  /usr/bin/python3 tools/train/check_heads.py --target work/target/final.pt \
      --target-gguf work/export/target-f16.gguf \
      --medusa work/heads/medusa/final.pt --medusa-gguf work/heads/medusa.gguf \
      --eagle work/heads/eagle/final.pt --eagle-gguf work/heads/eagle.gguf

1. Fingerprint: export_heads.target_fingerprint on ../shared/fixtures/models/stories260K.gguf
   against an independent computation (tokens read by gguf_writer.read_gguf, shapes from the
   tensors, FNV-1a checked on its published test vectors); a heads file must refuse a target
   with another fingerprint.
2. Per kind, on the first --n-tokens of the validation stream, heads_reference (numpy, GGUFs
   only) vs the PyTorch modules: max abs diff of the heads' outputs given the SAME features
   (and, for EAGLE, the same embedding rows: the target GGUF's)
   (isolates the heads export; relative to max(1, max |output|): bound 1e-5 for F32 files,
   1e-2 for F16), and end to end
   (features from the target GGUF through the heads and Output): rel. RMS of the logits and
   argmax agreement (bound 5e-3, F16 target).
Exits non-zero when a check fails.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

from common import TRAIN_DIR, setup_torch, work_path
from data import load_tokens
import gguf_writer as gw
from export_heads import export_heads, fnv1a64, gguf_tensors, read_header_raw, target_fingerprint
from gguf_writer import read_gguf
from heads_model import (EagleLayer, MedusaHeads, eagle_config, freeze, heads_config,
                         load_heads, target_features, target_features_and_layers)
from heads_reference import HeadsReference

STORIES = os.path.join(TRAIN_DIR, "..", "..", "..", "shared", "fixtures", "models",
                       "stories260K.gguf")


def independent_fingerprint(path: str) -> str:
    """The fingerprint from read_gguf's decoded tokens and tensor shapes (not metadata)."""
    meta, tensors = read_gguf(path)
    arch = meta["general.architecture"]
    n_vocab, n_embd = tensors["token_embd.weight"].shape
    n_layers = len([n for n in tensors if n.endswith(".attn_q.weight")])
    n_heads = meta[f"{arch}.attention.head_count"]  # not recoverable from shapes
    n_kv_heads = tensors["blk.0.attn_k.weight"].shape[0] // (n_embd // n_heads)
    n_ff = tensors["blk.0.ffn_gate.weight"].shape[0]
    blob = b"".join(t.encode("utf-8") + b"\0" for t in meta["tokenizer.ggml.tokens"])
    blob += (f"n_vocab={n_vocab},n_embd={n_embd},n_layers={n_layers},n_heads={n_heads},"
             f"n_kv_heads={n_kv_heads},n_ff={n_ff}").encode()
    state = 0xcbf29ce484222325
    for byte in blob:  # FNV-1a 64 written out once more, over the whole buffer
        state = ((state ^ byte) * 0x100000001b3) % (1 << 64)
    return f"{state:016x}"


def check_fingerprint() -> bool:
    vectors = {b"": 0xcbf29ce484222325, b"a": 0xaf63dc4c8601ec8c, b"foobar": 0x85944171f73967e8}
    ok = all(fnv1a64(k) == v for k, v in vectors.items())
    if not os.path.exists(STORIES):
        print(f"fingerprint: FNV test vectors {'ok' if ok else 'FAILED'}; {STORIES} missing, skipped")
        return ok
    mine, other = target_fingerprint(STORIES), independent_fingerprint(STORIES)
    print(f"fingerprint stories260K: {mine} (independent: {other}); FNV test vectors "
          f"{'ok' if ok else 'FAILED'}")
    return ok and mine == other


def check_kind(kind, heads, target, target_gguf, heads_gguf, tokens) -> bool:
    ref = HeadsReference(heads_gguf, target_gguf)
    types = {ggml_type for dims, ggml_type in read_header_raw(heads_gguf)[1].values() if len(dims) == 2}
    bound = 1e-2 if gw.GGML_F16 in types else 1e-5
    with torch.no_grad():
        feats = target_features(target, torch.from_numpy(tokens)[None])[0]  # (T, d)
        out_w = target.output.weight
        if kind == "medusa":
            torch_h = heads(feats).double().numpy()  # (K, T, d)
            same = ref.medusa_hidden(feats.double().numpy())
            end = ref.medusa_hidden(ref.features(tokens))
            torch_logits = F.linear(heads(feats), out_w).double().numpy()
        else:
            # the embedding rows as the target GGUF stores them (F16), so only the heads differ
            emb = torch.from_numpy(ref.embedding[tokens[1:]]).float()  # (T-1, d)
            layers = heads.fuse_layers
            residual = None
            if layers:
                feats, residual = target_features_and_layers(
                    target, torch.from_numpy(tokens)[None], layers)
                feats, residual = feats[0], residual[0]  # (T, d), (T, k, d)
            slot = heads.fused(feats[None, :-1], None if residual is None else residual[None, :-1])
            torch_h = heads(emb[None], slot)[0].double().numpy()
            same = ref.eagle(tokens[1:], ref.eagle_slot(
                feats[:-1].double().numpy(),
                None if residual is None else residual[:-1].double().numpy()))
            if layers:
                ref_f, ref_r = ref.features(tokens, layers)
                end = ref.eagle(tokens[1:], ref.eagle_slot(ref_f[:-1], ref_r[:-1]))
            else:
                end = ref.eagle(tokens[1:], ref.features(tokens)[:-1])
            torch_logits = F.linear(torch.from_numpy(torch_h).float(), out_w).double().numpy()
    # relative to the largest output (float32 PyTorch vs float64 numpy rounding scales with it)
    diff = float(np.abs(same - torch_h).max()) / max(1.0, float(np.abs(torch_h).max()))
    ref_logits = end @ ref.output.T
    rel = float(np.linalg.norm(ref_logits - torch_logits) / np.linalg.norm(torch_logits))
    agree = float((ref_logits.argmax(-1) == torch_logits.argmax(-1)).mean())
    print(f"{kind}: heads given the same features: max abs diff / max(1, max |out|) {diff:.2e} "
          f"(max |out| {float(np.abs(torch_h).max()):.3g}, bound {bound:g}); "
          f"end to end from the GGUFs: logits rel. RMS {rel:.2e} (bound 5e-3), "
          f"argmax agreement {agree:.3f}")
    # a file for another target must be refused
    try:
        HeadsReference(heads_gguf, STORIES) if os.path.exists(STORIES) else None
        refused = not os.path.exists(STORIES)
    except ValueError as err:
        refused = "fingerprint" in str(err)
    print(f"{kind}: refuses stories260K.gguf as its target: {refused}")
    return diff <= bound and rel <= 5e-3 and refused


def random_setup(tmp: str):
    """A tiny random target (exported F16) and random-weight heads of both kinds."""
    from export_gguf import export_model
    from model import PRESETS, Transformer
    torch.manual_seed(5)
    target = freeze(Transformer(PRESETS["tiny"]))
    target_gguf = os.path.join(tmp, "target.gguf")
    export_model(target, target_gguf, "f16", name="tiny-random")
    medusa = MedusaHeads(target.cfg.dim, 3, 2)
    for p in medusa.parameters():
        torch.nn.init.normal_(p, std=0.1)
    eagle = EagleLayer(eagle_config(target.cfg))
    fused = EagleLayer(eagle_config(target.cfg), [0, 1])  # EAGLE-3 style fusion
    for layer in (eagle, fused):
        for p in layer.block.parameters():
            if p.dim() == 1:
                torch.nn.init.normal_(p, mean=1.0, std=0.1)
    torch.nn.init.normal_(fused.fuse.weight, std=0.05)
    out = {}
    for name, kind, heads in (("medusa", "medusa", medusa), ("eagle", "eagle", eagle),
                              ("eagle-fused", "eagle", fused)):
        path = os.path.join(tmp, f"{name}.gguf")
        export_heads(kind, gguf_tensors(kind, heads), heads_config(kind, heads),
                     target_fingerprint(target_gguf), path)
        out[name] = (kind, freeze(heads), path)
    return target, target_gguf, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--random", action="store_true", help="tiny random target and heads")
    parser.add_argument("--target", help="target final.pt / ckpt.pt")
    parser.add_argument("--target-gguf", help="its GGUF export")
    for kind in ("medusa", "eagle"):
        parser.add_argument(f"--{kind}", help=f"train_heads.py --kind {kind} checkpoint")
        parser.add_argument(f"--{kind}-gguf", help="its export_heads.py GGUF")
    parser.add_argument("--n-tokens", type=int, default=96)
    args = parser.parse_args()
    setup_torch()
    ok = check_fingerprint()
    tokens = np.asarray(load_tokens(work_path("data", "val.bin"))[:args.n_tokens], dtype=np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        if args.random:
            target, target_gguf, kinds = random_setup(tmp)
            tokens = tokens % target.cfg.n_vocab
        else:
            from train import load_model
            if not (args.target and args.target_gguf):
                parser.error("--target and --target-gguf are required without --random")
            target, target_gguf, kinds = freeze(load_model(args.target)), args.target_gguf, {}
            for kind in ("medusa", "eagle"):
                if getattr(args, kind):
                    if not getattr(args, f"{kind}_gguf"):
                        parser.error(f"--{kind} needs --{kind}-gguf")
                    loaded_kind, heads, _state = load_heads(getattr(args, kind))
                    if loaded_kind != kind:
                        parser.error(f"--{kind} {getattr(args, kind)} holds {loaded_kind} heads")
                    kinds[kind] = (kind, freeze(heads), getattr(args, f"{kind}_gguf"))
        for name, (kind, heads, path) in kinds.items():
            print(f"-- {name}")
            ok &= check_kind(kind, heads, target, target_gguf, path, tokens)
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
