#!/usr/bin/python3
"""Trains Medusa heads or an EAGLE draft layer on a frozen target (docs/HEADS.md).

Usage (the same command resumes from the checkpoint):
  nice -n 10 /usr/bin/python3 tools/train/train_heads.py --kind medusa [--target work/target/final.pt]
  nice -n 10 /usr/bin/python3 tools/train/train_heads.py --kind eagle

Features: with --features DIR (collect_features.py's cache, the default when it is complete)
the steps cycle through the cached windows, in a seeded order per epoch; without it every step
runs the frozen target over fresh training windows (on the fly: ~2x the cost per step; on a GPU
the target's forward is cheap and no cache is needed), optionally mixed with --extra-data
windows (data.MixedStream). Either way sample s is a function of the step, so a resumed run is
bit-identical (with --schedule-minutes the step count itself comes from a measured rate).
  medusa: sum_k decay^k * CE(Output(head_k(f_t)), x_{t+k+2}) / sum_k decay^k   (Medusa-1)
  eagle:  SmoothL1(g_t, f_{t+1}) + w * CE(Output(g_t), x_{t+2}),
          g_t = Layer(E[x_{t+1}], f_t + U(-noise, noise))   (EAGLE's feature noise)
          --ce-target target replaces x_{t+2} by the target's distribution Output(f_{t+1})
          (EAGLE's own code does that; the default follows docs/HEADS.md).
Writes (in --out, default work/heads/<kind>): ckpt.pt (every --ckpt-minutes, at the end, on
SIGTERM), final.pt at --max-steps (exit 0; 3 = stopped early), log.tsv.
"""
import argparse
import fcntl
import json
import os
import signal
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from common import setup_torch, work_path
from data import MixedStream, eval_windows, load_tokens
from heads_model import (EagleLayer, MedusaHeads, eagle_config, freeze, heads_config,
                         target_features, target_features_and_layers)
from train import Logger, load_model, lr_at


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--kind", choices=("medusa", "eagle"), required=True)
    parser.add_argument("--target", help="frozen target final.pt / ckpt.pt "
                                         "(default work/target/final.pt)")
    parser.add_argument("--out", help="default work/heads/<kind>")
    parser.add_argument("--features", help="collect_features.py cache (default "
                        "work/heads/features if complete; 'none' = on the fly)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--init", help="fresh start from these heads (a heads GGUF of "
                        "export_heads.py, e.g. models/demo-eagle.gguf), same kind and shapes")
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--batch-tokens", type=int, default=2048, help="tokens per step")
    parser.add_argument("--seq-len", type=int, default=512, help="window length (<= n_ctx)")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak")
    parser.add_argument("--min-lr-ratio", type=float, default=0.1)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--grad-clip", type=float, default=0.5)
    parser.add_argument("--medusa-heads", type=int, default=4)
    parser.add_argument("--medusa-blocks", type=int, default=1)
    parser.add_argument("--medusa-decay", type=float, default=0.8, help="loss weight decay^k")
    parser.add_argument("--eagle-ffn", type=int, default=0, help="0 = the target's FFN width")
    parser.add_argument("--eagle-heads", type=int, default=0, help="0 = the target's")
    parser.add_argument("--eagle-kv-heads", type=int, default=0, help="0 = the target's")
    parser.add_argument("--ce-weight", type=float, default=0.1, help="eagle: w")
    parser.add_argument("--ce-target", choices=("data", "target", "both"), default="data",
                        help="eagle: CE on the data token, on the target's distribution, or "
                        "both (the target's distribution + its argmax, the demo draft's loss)")
    parser.add_argument("--noise", type=float, default=0.1, help="eagle: uniform feature noise")
    parser.add_argument("--unroll", type=int, default=1, help="eagle: passes per step, k >= 2 "
                        "on the layer's own features (training-time test; see eagle_loss)")
    parser.add_argument("--fuse-layers", default="", help="eagle: EAGLE-3 style fusion of the "
                        "residual stream after these target blocks with f_t, e.g. 1,3 (the "
                        "feature cache must hold them: collect_features.py --layers)")
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--eval-windows", type=int, default=4, help="validation windows")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--ckpt-minutes", type=float, default=5.0)
    parser.add_argument("--max-minutes", type=float, default=0.0, help="0 = no limit")
    parser.add_argument("--schedule-minutes", type=float, default=0.0, help="fixed time budget: "
                        "after --calibrate-steps, --max-steps becomes the step count that fits "
                        "this many minutes at the measured rate (the cosine then ends on time; "
                        "0 = use --max-steps as given)")
    parser.add_argument("--calibrate-steps", type=int, default=20)
    parser.add_argument("--extra-data", help="on the fly only: second uint16 token stream, e.g. "
                        "gen_teacher_torch.py's teacher windows")
    parser.add_argument("--extra-frac", type=float, default=0.0,
                        help="fraction of the windows taken from --extra-data (evenly spread)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    if args.features is None:
        default = work_path("heads", "features", "meta.json")
        if os.path.exists(default):
            args.features = os.path.dirname(default)
    if args.features == "none":
        args.features = None
    if args.features:
        with open(os.path.join(args.features, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        if meta["n_done"] < meta["windows"]:
            raise SystemExit(f"error: {args.features} is incomplete ({meta['n_done']}/"
                             f"{meta['windows']} windows); run collect_features.py again")
        if args.target and os.path.abspath(args.target) != meta["target"]:
            raise SystemExit(f"error: --target {args.target} but {args.features} holds "
                             f"features of {meta['target']}")
        args.target = meta["target"]
        args.seq_len = meta["seq_len"]
    args.target = args.target or work_path("target", "final.pt")
    if args.extra_data and args.features:
        parser.error("--extra-data is for on-the-fly features (--features none); a cache "
                     "takes it at collect_features.py")
    if not 0 <= args.extra_frac <= 1 or (args.extra_frac > 0) != bool(args.extra_data):
        parser.error("--extra-frac in (0, 1] goes with --extra-data")
    args.fuse_layers = [int(v) for v in args.fuse_layers.split(",") if v.strip()]
    if args.fuse_layers and args.kind != "eagle":
        parser.error("--fuse-layers is for --kind eagle")
    if args.fuse_layers and args.features:
        missing = [v for v in args.fuse_layers if v not in meta.get("layers", [])]
        if missing:
            parser.error(f"--fuse-layers: {args.features} holds no residual stream of blocks "
                         f"{missing} (collect_features.py --layers)")
    args.out = args.out or work_path("heads", args.kind, "x")[:-2]
    return args


def init_heads_from_gguf(kind: str, heads, path: str) -> None:
    """Copies every tensor of a heads GGUF into `heads` (export_heads.gguf_tensors names the
    parameters; the file must hold exactly those tensors with the same shapes)."""
    from export_heads import gguf_tensors
    from gguf_writer import read_gguf
    meta, tensors = read_gguf(path)
    if meta.get("general.architecture") != kind:
        raise SystemExit(f"error: --init {path} holds {meta.get('general.architecture')} heads, "
                         f"not {kind}")
    wanted = gguf_tensors(kind, heads)  # {name: numpy copy}, only for names and shapes
    if kind == "eagle" and heads.fuse_layers and "eagle.fuse.weight" not in tensors:
        # an unfused layer grows a fusion that starts as the identity on f_t
        print(f"--init {path} has no fusion: eagle.fuse.weight starts as [0 .. 0 I]", flush=True)
        tensors = {**tensors, "eagle.fuse.weight": wanted["eagle.fuse.weight"].copy()}
    if set(wanted) != set(tensors) or any(wanted[n].shape != tensors[n].shape for n in wanted):
        raise SystemExit(f"error: --init {path}: tensors do not fit the {kind} heads "
                         f"{heads_config(kind, heads)}")
    params = dict(heads.named_parameters())
    # gguf name -> parameter name: mark parameter i with the value i + 1 and see where the
    # exporter puts it (its table stays the only name mapping; works on any device).
    pnames = list(params)
    with torch.no_grad():
        for i, param in enumerate(params.values()):
            param.fill_(i + 1)
        names = {g: pnames[int(a.flat[0]) - 1] for g, a in gguf_tensors(kind, heads).items()}
        if sorted(names.values()) != sorted(pnames):
            raise SystemExit(f"error: --init {path}: the exporter's tensors do not map one to one "
                             f"onto the {kind} parameters")
        for gname, pname in names.items():
            params[pname].copy_(torch.from_numpy(np.array(tensors[gname])))
    print(f"initialised from {path} ({len(names)} tensors)", flush=True)


class CachedBatches:
    """Batches from a collect_features.py cache: sample i is window order_e[i % N] of epoch
    e = i // N (a PCG64([seed, e]) permutation)."""

    def __init__(self, folder: str, seed: int, fuse_layers=()):
        from collect_features import load_cache
        self.meta, self.tokens, self.feats, self.layers = load_cache(folder)
        self.n, self.seed, self._epoch, self._order = self.meta["windows"], seed, -1, None
        # positions of the wanted blocks in the cache's layers.f16
        self.layer_index = [self.meta["layers"].index(v) for v in fuse_layers]

    def batch(self, first: int, count: int):
        """(full tokens (count, T+1) int64, features (count, T, d) float32, residual
        (count, T, k, d) float32 of the fused blocks or None)."""
        rows = []
        for i in range(first, first + count):
            if i // self.n != self._epoch:
                self._epoch = i // self.n
                rng = np.random.Generator(np.random.PCG64([self.seed, self._epoch]))
                self._order = rng.permutation(self.n)
            rows.append(int(self._order[i % self.n]))
        full = torch.from_numpy(self.tokens[rows].astype(np.int64))
        residual = None
        if self.layer_index:
            residual = torch.from_numpy(
                self.layers[rows][:, :, self.layer_index].astype(np.float32))
        return full, torch.from_numpy(self.feats[rows].astype(np.float32)), residual


def medusa_loss(heads, out_w, feats, full, decay: float):
    """feats f (B, T, d), full tokens x_0..x_T (B, T+1) -> (weighted loss, [CE_k])."""
    n_tok = feats.shape[1]
    hidden = heads(feats)  # (K, B, T, d)
    losses, total, norm = [], 0.0, 0.0
    for k in range(hidden.shape[0]):
        logits = F.linear(hidden[k, :, :n_tok - k - 1], out_w)  # (B, T-k-1, V) for x_{t+k+2}
        ce = F.cross_entropy(logits.flatten(0, 1), full[:, k + 2:].flatten())
        losses.append(ce)
        total, norm = total + decay ** k * ce, norm + decay ** k
    return total / norm, losses


def eagle_loss(layer, out_w, embed, feats, full, args, noise_gen=None, residual=None):
    """-> (loss, SmoothL1, CE). Rows t = 0..T-2: input (E[x_{t+1}], f_t), targets f_{t+1}, x_{t+2}.
    With fusion the input feature is layer.fused(f_t, residual_t) (the verified rows' slot).
    --unroll n > 1 (training-time test, as EAGLE-3): pass k >= 2 feeds the layer its own
    previous output instead of the true feature (input at row t: g^{k-1}_{t-1}, row 0 keeps
    f_0), with the same targets, so the layer learns to draft from its own inexact features as
    it does at depth >= 2; gradients flow through the earlier passes. The loss is the mean over
    the passes; the returned SmoothL1 and CE are those of the first (teacher-forced) pass."""
    inputs_f = layer.fused(feats[:, :-1], None if residual is None else residual[:, :-1])
    first_f = inputs_f[:, :1]  # (B, 1, d): row 0 of every pass reads the verified feature
    if noise_gen is not None and args.noise > 0:
        noise = torch.rand(inputs_f.shape, generator=noise_gen, device=noise_gen.device)
        noise = noise.to(inputs_f.device)
        inputs_f = inputs_f + (noise * 2 - 1) * args.noise
    next_embeddings = embed(full[:, 1:-1])  # (B, T-1, d)
    with torch.no_grad():
        p = None if args.ce_target == "data" else torch.softmax(F.linear(feats[:, 1:], out_w), -1)
    total, first = 0.0, None
    for k in range(max(1, args.unroll)):
        g = layer(next_embeddings, inputs_f)  # (B, T-1, d)
        reg = F.smooth_l1_loss(g, feats[:, 1:])
        logits = F.linear(g, out_w)  # (B, T-1, V)
        if p is not None:
            log_q = F.log_softmax(logits, -1)
            ce = -(p * log_q).sum(-1).mean()
            if args.ce_target == "both":  # + CE on the target's greedy token
                ce = ce - log_q.gather(-1, p.argmax(-1, keepdim=True)).mean()
        else:
            ce = F.cross_entropy(logits.flatten(0, 1), full[:, 2:].flatten())
        total = total + reg + args.ce_weight * ce
        first = first or (reg, ce)
        inputs_f = torch.cat((first_f, g[:, :-1]), dim=1)  # the next pass's inputs
    return total / max(1, args.unroll), first[0], first[1]


def _in_top5(logits, tokens) -> float:
    """Fraction of rows whose token is among the 5 largest logits."""
    return (logits.topk(5, -1).indices == tokens[..., None]).any(-1).float().mean().item()


@torch.no_grad()
def head_metrics(kind, heads, target, windows) -> dict:
    """Teacher-forced top-1 accuracy on validation windows [(inputs, targets)]: against the
    data token (acc) and against the target's greedy token given the true prefix (agree)."""
    heads.eval()
    out_w = target.output.weight
    sums = {}

    def add(key, value):
        sums[key] = sums.get(key, 0.0) + value
    device = out_w.device
    for inputs, targets in windows:
        inputs, targets = inputs.to(device), targets.to(device)
        full = torch.cat((inputs, targets[:, -1:]), dim=1)
        fuse_layers = getattr(heads, "fuse_layers", [])
        if fuse_layers:
            feats, residual = target_features_and_layers(target, inputs, fuse_layers)
        else:
            feats, residual = target_features(target, inputs), None  # (1, T, d)
        greedy = F.linear(feats, out_w).argmax(-1)  # (1, T): target's x_{t+1}
        n_tok = feats.shape[1]
        if kind == "medusa":
            hidden = heads(feats)
            for k in range(hidden.shape[0]):
                logits = F.linear(hidden[k, :, :n_tok - k - 1], out_w)
                add(f"acc{k}", (logits.argmax(-1) == full[:, k + 2:]).float().mean().item())
                add(f"agree{k}", (logits.argmax(-1) == greedy[:, k + 1:]).float().mean().item())
                add(f"agree{k}_top5", _in_top5(logits, greedy[:, k + 1:]))
        else:
            g = heads(target.tok_embeddings(full[:, 1:-1]),
                      heads.fused(feats[:, :-1], None if residual is None else residual[:, :-1]))
            logits = F.linear(g, out_w)
            add("acc", (logits.argmax(-1) == full[:, 2:]).float().mean().item())
            add("agree", (logits.argmax(-1) == greedy[:, 1:]).float().mean().item())
            add("agree_top5", _in_top5(logits, greedy[:, 1:]))
            add("smooth_l1", F.smooth_l1_loss(g, feats[:, 1:]).item())
    heads.train()
    return {k: v / len(windows) for k, v in sums.items()}


def save_checkpoint(path, kind, heads, optimizer, step, args):
    state = {"kind": kind, "config": heads_config(kind, heads), "model": heads.state_dict(),
             "optimizer": optimizer.state_dict(), "step": step, "args": vars(args),
             "target": os.path.abspath(args.target), "torch_rng": torch.get_rng_state()}
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def main(argv=None) -> None:
    args = parse_args(argv)
    setup_torch(args.threads)
    if args.device.startswith("cuda"):
        torch.set_float32_matmul_precision("high")  # TF32: far below the feature noise
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    lock = open(os.path.join(args.out, "train.lock"), "w")  # held until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"error: another train_heads.py is already writing {args.out}")
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    logger = Logger(os.path.join(args.out, "log.tsv"))

    if not os.path.exists(args.target):
        raise SystemExit(f"error: target {args.target} not found")
    target = freeze(load_model(args.target)).to(args.device)
    if args.seq_len > target.cfg.n_ctx:
        raise SystemExit(f"error: --seq-len {args.seq_len} > target n_ctx {target.cfg.n_ctx}")
    if args.kind == "medusa":
        heads = MedusaHeads(target.cfg.dim, args.medusa_heads, args.medusa_blocks)
    else:
        if any(v >= target.cfg.n_layers for v in args.fuse_layers):
            raise SystemExit(f"error: --fuse-layers {args.fuse_layers}: the target has "
                             f"{target.cfg.n_layers} blocks")
        heads = EagleLayer(eagle_config(target.cfg, args.eagle_ffn, args.eagle_heads,
                                        args.eagle_kv_heads), args.fuse_layers)
    heads = heads.to(args.device)
    decay = [p for p in heads.parameters() if p.dim() >= 2]
    no_decay = [p for p in heads.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    step = 0
    if args.init and not os.path.exists(ckpt_path):
        init_heads_from_gguf(args.kind, heads, args.init)
    if os.path.exists(ckpt_path):
        state = torch.load(ckpt_path, map_location=args.device)
        if state["kind"] != args.kind or state["config"] != heads_config(args.kind, heads):
            raise SystemExit(f"error: {ckpt_path} holds {state['kind']} {state['config']}, "
                             f"not {args.kind} {heads_config(args.kind, heads)}")
        heads.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        torch.set_rng_state(state["torch_rng"].cpu())
        print(f"resumed {ckpt_path} at step {step}", flush=True)
    if step >= args.max_steps:
        print(f"already at step {step} >= --max-steps {args.max_steps}; nothing to do")
        return

    if args.features:
        cached = CachedBatches(args.features, args.seed, args.fuse_layers)
    else:
        stream = MixedStream.from_files(work_path("data", "train.bin"), args.seq_len, args.seed + 7,
                                        args.extra_data, args.extra_frac)
    val = eval_windows(load_tokens(work_path("data", "val.bin")), args.seq_len, args.eval_windows)
    seqs_per_step = max(1, args.batch_tokens // args.seq_len)
    n_params = sum(p.numel() for p in heads.parameters())
    print(f"{args.kind}: {n_params} params {heads_config(args.kind, heads)}; target {args.target}; "
          f"{seqs_per_step} x {args.seq_len} tokens per step; features "
          f"{args.features or 'on the fly'}", flush=True)

    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    out_w, embed = target.output.weight, target.tok_embeddings
    start = last_ckpt = last_log = time.time()
    first_step, calibrated = step, not args.schedule_minutes
    sums, n_sum, tokens_since_log = {}, 0, 0
    heads.train()
    while step < args.max_steps and stop["signal"] is None:
        lr = lr_at(step, args)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if args.features:
            full, feats, residual = cached.batch(step * seqs_per_step, seqs_per_step)
            full, feats = full.to(args.device), feats.to(args.device)  # (B, T+1), (B, T, d)
            residual = None if residual is None else residual.to(args.device)  # (B, T, k, d)
        else:
            inputs, targets = stream.batch(step * seqs_per_step, seqs_per_step)
            full = torch.cat((inputs, targets[:, -1:]), dim=1).to(args.device)  # (B, T+1)
            if args.fuse_layers:
                feats, residual = target_features_and_layers(target, full[:, :-1], args.fuse_layers)
            else:
                feats, residual = target_features(target, full[:, :-1]), None  # (B, T, d)
        optimizer.zero_grad(set_to_none=True)
        if args.kind == "medusa":
            loss, parts = medusa_loss(heads, out_w, feats, full, args.medusa_decay)
            named = {f"ce{k}": v for k, v in enumerate(parts)}
        else:
            # noise drawn from a generator seeded by the step: resumable and reproducible
            gen = torch.Generator(device=args.device).manual_seed(args.seed * 1_000_003 + step)
            loss, reg, ce = eagle_loss(heads, out_w, embed, feats, full, args, gen, residual)
            named = {"smooth_l1": reg, "ce": ce}
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(heads.parameters(), args.grad_clip).item()
        optimizer.step()
        step += 1
        for key, value in {"loss": loss, **named}.items():
            sums[key] = sums.get(key, 0.0) + value.item()
        n_sum += 1
        tokens_since_log += feats.shape[0] * feats.shape[1]

        now = time.time()
        if not calibrated and step - first_step == args.calibrate_steps:
            per_step = (now - start) / args.calibrate_steps
            budget = args.schedule_minutes * 60 - (now - start)
            args.max_steps = max(step + 1, step + int(budget / per_step))
            calibrated = True
            print(f"--schedule-minutes {args.schedule_minutes}: {per_step * 1000:.1f} ms per "
                  f"step -> --max-steps {args.max_steps}", flush=True)
        if step % args.log_every == 0:
            logger.write(step, {**{k: v / n_sum for k, v in sums.items()}, "lr": lr,
                                "grad_norm": grad_norm,
                                "tok_per_s": tokens_since_log / (now - last_log),
                                "elapsed_min": (now - start) / 60})
            sums, n_sum, tokens_since_log, last_log = {}, 0, 0, now
        if step % args.eval_every == 0 or step == args.max_steps:
            logger.write(step, {f"val_{k}": v for k, v in
                                head_metrics(args.kind, heads, target, val).items()})
            last_log = time.time()
        if now - last_ckpt > args.ckpt_minutes * 60:
            save_checkpoint(ckpt_path, args.kind, heads, optimizer, step, args)
            last_ckpt = time.time()
        if args.max_minutes and now - start > args.max_minutes * 60:
            print(f"--max-minutes {args.max_minutes} reached", flush=True)
            break

    save_checkpoint(ckpt_path, args.kind, heads, optimizer, step, args)
    print(f"saved {ckpt_path} at step {step}"
          + (f" (signal {stop['signal']})" if stop["signal"] else ""), flush=True)
    if step >= args.max_steps:
        torch.save({"kind": args.kind, "config": heads_config(args.kind, heads),
                    "model": heads.state_dict(), "step": step,
                    "target": os.path.abspath(args.target)},
                   os.path.join(args.out, "final.pt"))
    sys.exit(0 if step >= args.max_steps else 3)


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
