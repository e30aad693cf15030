#!/usr/bin/python3
"""Teacher-generated windows in bulk: the target's continuations of corpus windows, batched in
PyTorch with a KV cache (for a GPU; gen_teacher_data.py drives specdec one prompt at a time).

Usage:
  python3 tools/train/gen_teacher_torch.py --target models/demo-target.gguf \
      --out work/data/teacher_torch.bin --windows 16384 [--prompt-len 128 --seq-len 512] \
      [--sample-frac 0.25] [--device cuda]
  python3 tools/train/gen_teacher_torch.py --target models/demo-target.gguf --check

Window i: a prompt of --prompt-len tokens (sample i of TrainStream(train.bin, prompt-len,
seed + 11): corpus text from the TRAINING split, cut at any position) continued by the target
to --seq-len + 1 tokens. Rows with floor((i + 1) * f) > floor(i * f), f = --sample-frac, are
sampled at temperature 1 (what EAGLE drafts on at T = 1); the others are greedy (T = 0, the
target's own repetitive output that greedy speculation verifies). The output is the rows
concatenated as one uint16 stream (the layout of train.bin and teacher_gen.bin), so
collect_features.py / train_heads.py take it as --extra-data.

Numerics: float32 with TF32 off; a greedy row equals argmax decoding by full forwards except
where two logits tie within rounding (--check compares, on the CPU, 4 prompts x 24 tokens).
The sampling generator is seeded by --seed and the batch index: reproducible on one device.
"""
import argparse
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from common import setup_torch, work_path
from data import TrainStream, load_tokens
from heads_model import freeze
from model import apply_rope
from train import load_model

PROMPT_SEED_OFFSET = 11  # a prompt order of its own (not the heads' or the target's windows)


class KvCache:
    """Per layer keys and values, each (B, n_kv_heads, n_ctx, head_dim)."""

    def __init__(self, cfg, batch: int, n_ctx: int, device):
        shape = (batch, cfg.n_kv_heads, n_ctx, cfg.head_dim)
        self.k = [torch.zeros(shape, device=device) for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(shape, device=device) for _ in range(cfg.n_layers)]


@torch.no_grad()
def forward_cached(model, tokens: torch.Tensor, pos0: int, cache: KvCache) -> torch.Tensor:
    """tokens (B, L) at positions pos0..pos0+L-1, the cache holding positions < pos0 ->
    logits (B, n_vocab) of the last row. The same operations as model.Transformer.forward."""
    cfg = model.cfg
    batch, n_new = tokens.shape
    end = pos0 + n_new
    cos, sin = model.rope_cos[pos0:end], model.rope_sin[pos0:end]
    # query row i (position pos0 + i) sees keys 0..pos0 + i
    mask = torch.full((n_new, end), float("-inf"), device=tokens.device).triu(pos0 + 1)
    x = model.tok_embeddings(tokens)  # (B, L, d)
    for index, layer in enumerate(model.layers):
        attn = layer.attn
        h = layer.attn_norm(x)
        q = attn.wq(h).view(batch, n_new, cfg.n_heads, cfg.head_dim)
        k = attn.wk(h).view(batch, n_new, cfg.n_kv_heads, cfg.head_dim)
        v = attn.wv(h).view(batch, n_new, cfg.n_kv_heads, cfg.head_dim)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        cache.k[index][:, :, pos0:end] = k.transpose(1, 2)
        cache.v[index][:, :, pos0:end] = v.transpose(1, 2)
        keys, values = cache.k[index][:, :, :end], cache.v[index][:, :, :end]  # (B, Hkv, end, hd)
        group = cfg.n_heads // cfg.n_kv_heads
        if group > 1:
            keys, values = keys.repeat_interleave(group, 1), values.repeat_interleave(group, 1)
        scores = (q.transpose(1, 2) @ keys.transpose(-1, -2)) * (1.0 / math.sqrt(cfg.head_dim))
        probs = torch.softmax(scores + mask, dim=-1)  # (B, H, L, end)
        out = (probs @ values).transpose(1, 2).reshape(batch, n_new, -1)
        x = x + attn.wo(out)
        x = x + layer.ffn(layer.ffn_norm(x))
    return model.output(model.norm(x[:, -1]))


@torch.no_grad()
def continue_rows(model, prompts: torch.Tensor, n_new: int, sampled: torch.Tensor,
                  generator) -> torch.Tensor:
    """prompts (B, P) -> (B, P + n_new): rows with sampled[b] draw from softmax(logits), the
    others take the argmax."""
    batch, n_prompt = prompts.shape
    cache = KvCache(model.cfg, batch, n_prompt + n_new, prompts.device)
    rows = torch.empty((batch, n_prompt + n_new), dtype=torch.long, device=prompts.device)
    rows[:, :n_prompt] = prompts
    logits = forward_cached(model, prompts, 0, cache)
    for pos in range(n_prompt, n_prompt + n_new):
        greedy = logits.argmax(-1)
        drawn = torch.multinomial(F.softmax(logits, -1), 1, generator=generator)[:, 0]
        rows[:, pos] = torch.where(sampled, drawn, greedy)
        if pos + 1 < n_prompt + n_new:
            logits = forward_cached(model, rows[:, pos:pos + 1], pos, cache)
    return rows


def check(model) -> None:
    """Greedy rows against argmax of full forwards (no cache) on 4 corpus prompts."""
    stream = TrainStream(load_tokens(work_path("data", "train.bin")), 32, 99)
    device = model.output.weight.device
    prompts = stream.batch(0, 4)[0].to(device)
    rows = continue_rows(model, prompts, 24, torch.zeros(4, dtype=torch.bool, device=device), None)
    reference = prompts.clone()
    for _ in range(24):
        with torch.no_grad():
            next_token = model(reference)[:, -1].argmax(-1)
        reference = torch.cat((reference, next_token[:, None]), 1)
    mismatches = int((rows != reference).sum())
    print(f"check: {mismatches} of {rows.numel()} tokens differ from full-forward greedy")
    if mismatches:
        raise SystemExit("error: cached generation differs from the full forward")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--target", required=True, help="GGUF or final.pt")
    parser.add_argument("--out", help="uint16 stream (default work/data/teacher_torch.bin)")
    parser.add_argument("--windows", type=int, default=4096)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=512, help="rows are seq-len + 1 tokens")
    parser.add_argument("--sample-frac", type=float, default=0.25)
    parser.add_argument("--batch", type=int, default=1024, help="rows generated at once")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--check", action="store_true", help="only compare with full forwards")
    args = parser.parse_args()
    if not 0 < args.prompt_len <= args.seq_len or not 0 <= args.sample_frac <= 1:
        parser.error("need 0 < --prompt-len <= --seq-len and --sample-frac in [0, 1]")
    setup_torch(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = freeze(load_model(args.target)).to(args.device)
    if args.check:
        check(model)
        return
    out = args.out or work_path("data", "teacher_torch.bin")
    stream = TrainStream(load_tokens(work_path("data", "train.bin")), args.prompt_len,
                         args.seed + PROMPT_SEED_OFFSET)
    n_new = args.seq_len + 1 - args.prompt_len
    start = time.time()
    with open(out + ".tmp", "wb") as f:
        for first in range(0, args.windows, args.batch):
            n = min(args.batch, args.windows - first)
            prompts = stream.batch(first, n)[0]  # (n, prompt_len)
            index = torch.arange(first, first + n)
            sampled = (torch.floor((index + 1) * args.sample_frac) >
                       torch.floor(index * args.sample_frac)).to(args.device)
            generator = torch.Generator(device=args.device).manual_seed(args.seed * 7919 + first)
            rows = continue_rows(model, prompts.to(args.device), n_new, sampled, generator)
            f.write(rows.cpu().numpy().astype(np.uint16).tobytes())
            print(f"{first + n}/{args.windows} windows, {time.time() - start:.1f} s", flush=True)
    os.replace(out + ".tmp", out)
    print(f"wrote {out}: {args.windows} x {args.seq_len + 1} tokens "
          f"({args.sample_frac:.2f} sampled at T=1)")


if __name__ == "__main__":
    main()
