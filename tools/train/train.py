#!/usr/bin/python3
"""Trains the target model (next-token loss) or distills the draft from it (DistillSpec).

Usage (run in the background on idle CPU; the same command resumes from the checkpoint):
  nohup nice -n 19 /usr/bin/python3 tools/train/train.py --mode target >>tools/train/work/target.out 2>&1 &
  nohup nice -n 19 /usr/bin/python3 tools/train/train.py --mode distill >>tools/train/work/draft.out 2>&1 &

Requires: train_tokenizer.py ran (work/data/train.bin, val.bin); distill mode also needs the
finished target (work/target/final.pt, written when the target reaches --max-steps), or
--teacher models/demo-target.gguf (GGUF weights load through export_gguf.load_gguf_model).
Distill options for the second demo draft (tools/train/README.md): --init grows a trained
draft by identity layers, --extra-data mixes the target's own greedy continuations
(gen_teacher_data.py) into every batch, --argmax-weight adds cross-entropy on the teacher's
argmax to the KL.

Writes (in --out, default work/target or work/draft):
  ckpt.pt     model, optimizer, step, RNG states, args; saved every --ckpt-minutes, at the
              end, and on SIGTERM/SIGINT (the data position is the step: see data.py)
  final.pt    the model alone, once --max-steps is reached (exit status 0; 3 = stopped
              early by a signal or --max-minutes, resume with the same command)
  log.tsv     one line per --log-every steps (train loss) and per evaluation (val loss;
              distill: KL to the target, greedy agreement and 1 - TV distance on validation)
  model-f16.gguf  an exported snapshot every --export-minutes and at the end
"""
import argparse
import fcntl
import math
import os
import signal
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from common import setup_torch, work_path
from data import TrainStream, eval_windows, load_tokens
from model import PRESETS, ModelConfig, Transformer


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--mode", choices=("target", "distill"), required=True)
    parser.add_argument("--preset", choices=sorted(PRESETS), help="default: target | draft by mode")
    parser.add_argument("--out", help="default: work/target | work/draft by mode")
    parser.add_argument("--teacher", help="distill: teacher model, a checkpoint or a GGUF such as "
                        "models/demo-target.gguf (default work/target/final.pt)")
    parser.add_argument("--init", help="fresh start from this model (.pt or .gguf) of the same "
                        "width; layers it lacks start as identity blocks (zero output projections)")
    parser.add_argument("--extra-data", help="second uint16 token stream (e.g. work/data/"
                        "teacher_gen.bin from gen_teacher_data.py) mixed into every batch")
    parser.add_argument("--extra-frac", type=float, default=0.5,
                        help="fraction of each batch's sequences taken from --extra-data")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--max-steps", type=int, help="default: 1600 target | 1200 distill")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="tokens per step")
    parser.add_argument("--micro-tokens", type=int, default=4096, help="tokens per forward")
    parser.add_argument("--short-seq-len", type=int, default=256,
                        help="sequence length before the long phase (0 = always n_ctx)")
    parser.add_argument("--long-frac", type=float, default=0.2,
                        help="the last fraction of steps trains on full n_ctx sequences")
    parser.add_argument("--lr", type=float, help="peak; default: 1e-3 target | 2e-3 distill")
    parser.add_argument("--min-lr-ratio", type=float, default=0.1)
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--distill-temp", type=float, default=1.0,
                        help="softening temperature of teacher and student in the KL")
    parser.add_argument("--ce-weight", type=float, default=0.0,
                        help="distill: weight of the data cross-entropy added to the KL")
    parser.add_argument("--argmax-weight", type=float, default=0.0,
                        help="distill: weight of the cross-entropy on the teacher's argmax "
                        "(greedy agreement) added to the KL")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-windows", type=int, default=16, help="validation windows of n_ctx")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--ckpt-minutes", type=float, default=5.0)
    parser.add_argument("--export-minutes", type=float, default=30.0)
    parser.add_argument("--max-minutes", type=float, default=0.0,
                        help="stop (after saving) when this process ran this long; 0 = no limit")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu | cuda (a lent GPU machine)")
    args = parser.parse_args(argv)
    if not 0 <= args.extra_frac < 1:
        parser.error("--extra-frac must be in [0, 1): every step keeps some corpus windows")
    target = args.mode == "target"
    args.max_steps = args.max_steps or (1600 if target else 1200)
    args.lr = args.lr or (1e-3 if target else 2e-3)
    args.preset = args.preset or ("target" if args.mode == "target" else "draft")
    args.out = args.out or work_path("target" if args.mode == "target" else "draft", "x")[:-2]
    args.teacher = args.teacher or os.path.join(work_path("target", "x")[:-2], "final.pt")
    return args


def lr_at(step: int, args) -> float:
    """Linear warmup, then cosine decay to min_lr_ratio * lr at max_steps."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    progress = min(1.0, (step - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps))
    return args.lr * (args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def long_phase_start(args) -> int:
    """First step of the long-sequence phase."""
    if not args.short_seq_len:
        return 0
    return int(round(args.max_steps * (1 - args.long_frac)))


def seq_len_at(step: int, args, n_ctx: int) -> int:
    """Sequence length of a step: short_seq_len first (cheap attention), n_ctx at the end so
    the model learns every position up to its context length."""
    return n_ctx if step >= long_phase_start(args) else args.short_seq_len


def make_optimizer(model: Transformer, args) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


def load_model(path: str) -> Transformer:
    """A model from final.pt or ckpt.pt (either holds 'config' and 'model'), or from a GGUF
    that export_gguf.py wrote (e.g. models/demo-target.gguf as the distillation teacher)."""
    if path.endswith(".gguf"):
        from export_gguf import load_gguf_model  # local import: sentencepiece only here
        return load_gguf_model(path)
    state = torch.load(path, map_location="cpu")
    model = Transformer(ModelConfig(**state["config"]))
    model.load_state_dict(state["model"])
    return model


def init_from(model: Transformer, path: str) -> None:
    """Copies a smaller-or-equal-depth model of the same width into `model`. Extra layers keep
    their random init but with zero attention and FFN output projections, so they start as
    identity blocks and the grown model computes exactly what the source model computes."""
    src = load_model(path)
    same = ("n_vocab", "dim", "n_heads", "n_kv_heads", "ffn_dim", "n_ctx")
    if any(getattr(src.cfg, k) != getattr(model.cfg, k) for k in same) \
            or src.cfg.n_layers > model.cfg.n_layers:
        raise SystemExit(f"error: --init {path} {src.cfg} does not fit {model.cfg}")
    with torch.no_grad():
        for name, param in src.state_dict().items():
            model.state_dict()[name].copy_(param)
        for layer in model.layers[src.cfg.n_layers:]:
            layer.attn.wo.weight.zero_()
            layer.ffn.w_down.weight.zero_()
    print(f"initialised from {path} ({src.cfg.n_layers} of {model.cfg.n_layers} layers)", flush=True)


def distill_loss(student_logits, teacher_logits, temp: float):
    """Forward KL(teacher_T || student_T) per token, mean, scaled by temp^2."""
    t = F.log_softmax(teacher_logits.float() / temp, dim=-1)
    s = F.log_softmax(student_logits.float() / temp, dim=-1)
    return (t.exp() * (t - s)).sum(-1).mean() * temp * temp


@torch.no_grad()
def evaluate(model, windows, teacher=None) -> dict:
    """Mean validation cross-entropy; with a teacher also KL, greedy agreement, 1 - TV."""
    model.eval()
    total = {"val_loss": 0.0, "val_kl": 0.0, "val_agree": 0.0, "val_overlap": 0.0}
    device = next(model.parameters()).device
    for inputs, targets in windows:
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        total["val_loss"] += F.cross_entropy(logits.flatten(0, 1), targets.flatten()).item()
        if teacher is not None:
            t_logits = teacher(inputs)
            total["val_kl"] += distill_loss(logits, t_logits, 1.0).item()
            total["val_agree"] += (logits.argmax(-1) == t_logits.argmax(-1)).float().mean().item()
            p, q = torch.softmax(t_logits, -1), torch.softmax(logits, -1)
            total["val_overlap"] += torch.minimum(p, q).sum(-1).mean().item()
    model.train()
    keys = total if teacher is not None else ["val_loss"]
    return {k: total[k] / len(windows) for k in keys}


class Logger:
    def __init__(self, path: str):
        self.path = path

    def write(self, step: int, fields: dict):
        line = f"step={step}\t" + "\t".join(
            f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items())
        print(line, flush=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def save_checkpoint(path, model, optimizer, step, args):
    state = {"config": model.cfg.to_dict(), "model": model.state_dict(),
             "optimizer": optimizer.state_dict(), "step": step, "args": vars(args),
             "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state()}
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def export_snapshot(model, out_dir: str, step: int):
    from export_gguf import export_model  # local import: only needed when exporting
    path = os.path.join(out_dir, "model-f16.gguf")
    export_model(model, path, "f16", name=f"specdec-{os.path.basename(out_dir)}-step{step}")
    print(f"exported {path} at step {step}", flush=True)


def main(argv=None) -> None:
    args = parse_args(argv)
    setup_torch(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    lock = open(os.path.join(args.out, "train.lock"), "w")  # held until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"error: another train.py is already writing {args.out}")
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    logger = Logger(os.path.join(args.out, "log.tsv"))

    model = Transformer(PRESETS[args.preset]).to(args.device)
    optimizer = make_optimizer(model, args)
    step = 0
    if os.path.exists(ckpt_path):
        state = torch.load(ckpt_path, map_location=args.device)
        if state["config"] != model.cfg.to_dict():
            raise SystemExit(f"error: {ckpt_path} holds config {state['config']}, "
                             f"not preset {args.preset} {model.cfg.to_dict()}")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        torch.set_rng_state(state["torch_rng"].cpu())
        np.random.set_state(state["numpy_rng"])
        print(f"resumed {ckpt_path} at step {step}", flush=True)
    elif args.init:
        init_from(model, args.init)
    if step >= args.max_steps:
        print(f"already at step {step} >= --max-steps {args.max_steps}; nothing to do")
        return

    teacher = None
    if args.mode == "distill":
        if not os.path.exists(args.teacher):
            raise SystemExit(f"error: teacher {args.teacher} not found (train the target first)")
        teacher = load_model(args.teacher).to(args.device).eval()
        for p in teacher.parameters():
            p.requires_grad_(False)
        if teacher.cfg.n_vocab != model.cfg.n_vocab:
            raise SystemExit(f"error: teacher vocab {teacher.cfg.n_vocab} != {model.cfg.n_vocab}")

    n_ctx = model.cfg.n_ctx
    train_tokens = load_tokens(work_path("data", "train.bin"))
    val_tokens = load_tokens(work_path("data", "val.bin"))
    extra_tokens = load_tokens(args.extra_data) if args.extra_data else None
    # phase 0: short sequences from step 0; phase 1: n_ctx from long_phase_start (own seed)
    streams = {}

    def phase_stream(step):
        """(stream, first step of its phase, eval windows, extra stream or None) for the
        step's sequence length."""
        seq_len = seq_len_at(step, args, n_ctx)
        if seq_len not in streams:
            phase = int(seq_len == n_ctx)
            extra = None if extra_tokens is None else \
                TrainStream(extra_tokens, seq_len, args.seed + 2 + phase)
            streams[seq_len] = (TrainStream(train_tokens, seq_len, args.seed + phase),
                                long_phase_start(args) if phase else 0,
                                eval_windows(val_tokens, seq_len,
                                             args.eval_windows * n_ctx // seq_len), extra)
        return streams[seq_len]
    print(f"mode {args.mode}, preset {args.preset}: {model.n_params()} params "
          f"({model.n_params(non_embedding=True)} non-embedding), {model.flops_per_token()} "
          f"forward FLOP/token; {len(train_tokens)} train tokens; n_ctx from step "
          f"{long_phase_start(args)}", flush=True)

    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    start = last_ckpt = last_export = last_log = time.time()
    tokens_since_log, loss_sum, aux_sum, n_sum = 0, 0.0, 0.0, 0
    model.train()
    while step < args.max_steps and stop["signal"] is None:
        stream, phase_first_step, val, extra = phase_stream(step)
        seqs_per_step = args.batch_tokens // stream.n_ctx
        seqs_per_micro = max(1, min(seqs_per_step, args.micro_tokens // stream.n_ctx))
        n_micro = seqs_per_step // seqs_per_micro
        n_extra = round(args.extra_frac * seqs_per_step) if extra is not None else 0
        first_sample = (step - phase_first_step) * (seqs_per_step - n_extra)
        batch_inputs, batch_targets = stream.batch(first_sample, seqs_per_step - n_extra)
        if n_extra:
            extra_inputs, extra_targets = extra.batch((step - phase_first_step) * n_extra, n_extra)
            batch_inputs = torch.cat((batch_inputs, extra_inputs))
            batch_targets = torch.cat((batch_targets, extra_targets))
        lr = lr_at(step, args)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        for micro in range(n_micro):
            rows = slice(micro * seqs_per_micro, (micro + 1) * seqs_per_micro)
            inputs = batch_inputs[rows].to(args.device)
            targets = batch_targets[rows].to(args.device)
            logits = model(inputs)
            ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
            if teacher is not None:
                with torch.no_grad():
                    t_logits = teacher(inputs)
                kl = distill_loss(logits, t_logits, args.distill_temp)
                loss = kl + args.ce_weight * ce
                if args.argmax_weight:
                    loss = loss + args.argmax_weight * F.cross_entropy(
                        logits.flatten(0, 1), t_logits.argmax(-1).flatten())
                aux_sum += kl.item()
            else:
                loss = ce
            (loss / n_micro).backward()
            loss_sum += ce.item()
            n_sum += 1
            tokens_since_log += inputs.numel()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip).item()
        optimizer.step()
        step += 1

        now = time.time()
        if step % args.log_every == 0:
            fields = {"train_ce": loss_sum / n_sum, "lr": lr, "grad_norm": grad_norm,
                      "tok_per_s": tokens_since_log / (now - last_log),
                      "seq_len": stream.n_ctx,
                      "phase_epoch": stream.epoch_of(first_sample + seqs_per_step - n_extra),
                      "elapsed_min": (now - start) / 60}
            if teacher is not None:
                fields["train_kl"] = aux_sum / n_sum
            logger.write(step, fields)
            tokens_since_log, loss_sum, aux_sum, n_sum, last_log = 0, 0.0, 0.0, 0, now
        if step % args.eval_every == 0 or step == args.max_steps:
            logger.write(step, {**evaluate(model, val, teacher), "val_seq_len": stream.n_ctx})
            last_log = time.time()  # evaluation time is not training throughput
        if now - last_ckpt > args.ckpt_minutes * 60:
            save_checkpoint(ckpt_path, model, optimizer, step, args)
            last_ckpt = time.time()
        if now - last_export > args.export_minutes * 60:
            export_snapshot(model, args.out, step)
            last_export = time.time()
        if args.max_minutes and now - start > args.max_minutes * 60:
            print(f"--max-minutes {args.max_minutes} reached", flush=True)
            break

    save_checkpoint(ckpt_path, model, optimizer, step, args)
    print(f"saved {ckpt_path} at step {step}"
          + (f" (signal {stop['signal']})" if stop["signal"] else ""), flush=True)
    if step >= args.max_steps:
        torch.save({"config": model.cfg.to_dict(), "model": model.state_dict(), "step": step},
                   os.path.join(args.out, "final.pt"))
        export_snapshot(model, args.out, step)
    # non-zero when stopped early (signal, --max-minutes), so a pipeline does not go on
    sys.exit(0 if step >= args.max_steps else 3)


if __name__ == "__main__":
    main()
