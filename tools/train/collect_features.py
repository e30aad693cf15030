#!/usr/bin/python3
"""Runs the frozen target over training windows and stores its features for train_heads.py.

Usage (resumable: the same command continues where it stopped):
  nice -n 10 /usr/bin/python3 tools/train/collect_features.py --target work/target/final.pt \
      --out work/heads/features [--windows 256 --seq-len 512]

Window i is sample i of data.TrainStream(train.bin, seq_len, seed + 7) (the stream
train_heads.py uses on the fly), so the cache holds exactly what on-the-fly training would see
first. With --extra-data F --extra-frac a, a fraction a of the windows (evenly spread) comes
from TrainStream(F, seq_len, seed + 8) instead: the target's own greedy continuations
(gen_teacher_data.py), the text EAGLE drafts on at temperature 0. --target may be a GGUF.
Features are the post-output-norm hidden states (heads_model.target_features).
Files in --out:
  tokens.u16   (windows, seq_len + 1) uint16: x_0..x_T of each window
  feats.f16    (windows, seq_len, n_embd) float16: f_0..f_{T-1} (F16: rel. error <= 2^-11,
               far below the EAGLE training noise)
  layers.f16   (windows, seq_len, len(layers), n_embd) float16, only with --layers L1,L2,..:
               the residual stream after those target blocks (EAGLE-3 style fusion inputs)
  meta.json    shapes, seed, target path and step, and n_done (windows written so far)
One window of 512 tokens costs 256 KiB of features; one target forward (~18 MFLOP/token).
"""
import argparse
import fcntl
import json
import os
import time

import numpy as np
import torch

from common import setup_torch, work_path
from data import MixedStream
from heads_model import freeze, target_features, target_features_and_layers
from train import load_model

STREAM_SEED_OFFSET = 7  # the heads' window order differs from the target's own training order


def open_cache(out: str, n_windows: int, seq_len: int, n_embd: int, mode: str):
    """(tokens memmap (N, T+1) uint16, feats memmap (N, T, d) float16)."""
    tokens = np.memmap(os.path.join(out, "tokens.u16"), dtype=np.uint16, mode=mode,
                       shape=(n_windows, seq_len + 1))
    feats = np.memmap(os.path.join(out, "feats.f16"), dtype=np.float16, mode=mode,
                      shape=(n_windows, seq_len, n_embd))
    return tokens, feats


def open_layers(out: str, n_windows: int, seq_len: int, n_layers: int, n_embd: int, mode: str):
    """layers memmap (N, T, n_layers, d) float16: residual streams after the listed blocks."""
    return np.memmap(os.path.join(out, "layers.f16"), dtype=np.float16, mode=mode,
                     shape=(n_windows, seq_len, n_layers, n_embd))


def load_cache(out: str):
    """(meta dict, tokens, feats, layers or None) of a finished or partial cache (first
    meta['n_done'] valid)."""
    with open(os.path.join(out, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    tokens, feats = open_cache(out, meta["windows"], meta["seq_len"], meta["n_embd"], "r")
    layers = None
    if meta.get("layers"):
        layers = open_layers(out, meta["windows"], meta["seq_len"], len(meta["layers"]),
                             meta["n_embd"], "r")
    return meta, tokens, feats, layers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--target", default=None, help="default work/target/final.pt")
    parser.add_argument("--out", default=None, help="default work/heads/features")
    parser.add_argument("--windows", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--chunk", type=int, default=4, help="windows per target forward")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--extra-data", help="second uint16 token stream (e.g. work/data/"
                        "teacher_gen.bin: the target's greedy continuations, what EAGLE drafts "
                        "on at temperature 0)")
    parser.add_argument("--extra-frac", type=float, default=0.0,
                        help="fraction of the windows taken from --extra-data (evenly spread)")
    parser.add_argument("--layers", default="", help="also store the residual stream after "
                        "these target blocks, e.g. 1,3 (EAGLE-3 style fusion; layers.f16)")
    args = parser.parse_args()
    layer_list = [int(v) for v in args.layers.split(",") if v.strip()]
    if not 0 <= args.extra_frac <= 1 or (args.extra_frac > 0) != bool(args.extra_data):
        parser.error("--extra-frac in (0, 1] goes with --extra-data")
    setup_torch(args.threads)
    target_path = args.target or work_path("target", "final.pt")
    out = args.out or work_path("heads", "features", "x")[:-2]
    os.makedirs(out, exist_ok=True)
    lock = open(os.path.join(out, "collect.lock"), "w")  # held until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"error: another collect_features.py is already writing {out}")
    step = None if target_path.endswith(".gguf") else \
        torch.load(target_path, map_location="cpu").get("step")
    target = freeze(load_model(target_path))
    meta_path = os.path.join(out, "meta.json")
    meta = {"windows": args.windows, "seq_len": args.seq_len, "n_embd": target.cfg.dim,
            "seed": args.seed, "stream_seed": args.seed + STREAM_SEED_OFFSET,
            "target": os.path.abspath(target_path), "target_step": step,
            "n_done": 0}
    if args.extra_data:  # recorded only when used, so older caches still resume
        meta["extra_data"] = os.path.abspath(args.extra_data)
        meta["extra_frac"] = args.extra_frac
    if layer_list:
        if any(not 0 <= v < target.cfg.n_layers for v in layer_list):
            parser.error(f"--layers {args.layers}: blocks are 0..{target.cfg.n_layers - 1}")
        meta["layers"] = layer_list
    if os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            old = json.load(f)
        same = {k: old[k] for k in meta if k != "n_done"} == {k: meta[k] for k in meta if k != "n_done"}
        if not same:
            raise SystemExit(f"error: {meta_path} was made with {old}; remove {out} to redo")
        meta["n_done"] = old["n_done"]
    mode = "r+" if meta["n_done"] else "w+"
    tokens, feats = open_cache(out, args.windows, args.seq_len, target.cfg.dim, mode)
    layers = None if not layer_list else \
        open_layers(out, args.windows, args.seq_len, len(layer_list), target.cfg.dim, mode)
    windows = MixedStream.from_files(work_path("data", "train.bin"), args.seq_len,
                                     args.seed + STREAM_SEED_OFFSET, args.extra_data, args.extra_frac)

    start = time.time()
    while meta["n_done"] < args.windows:
        first = meta["n_done"]
        n = min(args.chunk, args.windows - first)
        inputs, targets = windows.batch(first, n)
        full = torch.cat((inputs, targets[:, -1:]), dim=1)  # (n, T+1)
        tokens[first:first + n] = full.numpy().astype(np.uint16)
        if layers is None:
            feats[first:first + n] = target_features(target, inputs).numpy().astype(np.float16)
        else:
            final, residual = target_features_and_layers(target, inputs, layer_list)
            feats[first:first + n] = final.numpy().astype(np.float16)
            layers[first:first + n] = residual.numpy().astype(np.float16)
            layers.flush()
        tokens.flush()
        feats.flush()
        meta["n_done"] = first + n
        tmp = meta_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
        os.replace(tmp, meta_path)
        rate = (meta["n_done"] - first) * args.seq_len  # tokens this chunk
        print(f"{meta['n_done']}/{args.windows} windows, {time.time() - start:.0f} s "
              f"({rate} tokens/chunk)", flush=True)
    print(f"features done: {out} ({args.windows} x {args.seq_len} tokens, target step "
          f"{meta['target_step']})")


if __name__ == "__main__":
    main()
