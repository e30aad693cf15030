#!/usr/bin/python3
"""Validation loss and perplexity of checkpoints, draft/target agreement, and samples.

Usage:
  /usr/bin/python3 tools/train/evaluate.py --model work/target/final.pt
  /usr/bin/python3 tools/train/evaluate.py --model work/target/final.pt --draft work/draft/final.pt \
      --spec-prompts 8 --samples 2

  --model: validation cross-entropy (nats/token), perplexity, and bits/byte over
  non-overlapping windows of n_ctx tokens of work/data/val.bin (held-out files).
  --draft: the same for the draft, plus on the validation windows: greedy agreement
  (argmax equal; the acceptance rate of greedy speculation if errors were independent) and
  mean overlap sum(min(p, q)) (the expected acceptance at temperature 1 per drafted token).
  --spec-prompts N: greedy speculative decoding simulated in PyTorch with fixed K on the first
  lines of N validation files: acceptance rate = accepted / drafted, tokens per target pass.
  --samples N: greedy and temperature-1 continuations of validation prompts, as text.
"""
import argparse
import json
import math

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

from common import BOS_ID, EOS_ID, from_model_text, setup_torch, to_model_text, work_path
from data import eval_windows, load_tokens
from train import load_model


@torch.no_grad()
def val_metrics(model, draft, windows, n_bytes_per_token):
    sums = {"ce": 0.0, "draft_ce": 0.0, "agree": 0.0, "overlap": 0.0}
    for inputs, targets in windows:
        logits = model(inputs)
        sums["ce"] += F.cross_entropy(logits.flatten(0, 1), targets.flatten()).item()
        if draft is not None:
            d_logits = draft(inputs)
            sums["draft_ce"] += F.cross_entropy(d_logits.flatten(0, 1), targets.flatten()).item()
            sums["agree"] += (logits.argmax(-1) == d_logits.argmax(-1)).float().mean().item()
            p, q = torch.softmax(logits, -1), torch.softmax(d_logits, -1)
            sums["overlap"] += torch.minimum(p, q).sum(-1).mean().item()
    out = {k: v / len(windows) for k, v in sums.items()}
    result = {"val_tokens": len(windows) * windows[0][0].numel(), "val_loss": out["ce"],
              "val_ppl": math.exp(out["ce"]), "bits_per_byte": out["ce"] / math.log(2) / n_bytes_per_token}
    if draft is not None:
        result.update({"draft_val_loss": out["draft_ce"], "draft_val_ppl": math.exp(out["draft_ce"]),
                       "greedy_agreement": out["agree"], "overlap_t1": out["overlap"]})
    return result


def prompt_ids(sp, path: str, n_lines: int) -> list:
    with open(path, encoding="utf-8") as f:
        text = "".join(f.readline() for _ in range(n_lines))
    return [BOS_ID] + sp.encode(to_model_text(text))


@torch.no_grad()
def greedy_speculative(target, draft, prompt, n_new: int, k: int):
    """Greedy speculative decoding (full recompute, no cache): returns (tokens, drafted,
    accepted, target passes). The output equals plain greedy decoding of the target."""
    seq, drafted, accepted, passes = list(prompt), 0, 0, 0
    limit = min(target.cfg.n_ctx, draft.cfg.n_ctx)
    while len(seq) - len(prompt) < n_new and len(seq) + k + 1 <= limit:
        proposal = []
        for _ in range(k):
            logits = draft(torch.tensor([seq + proposal]))[0, -1]
            proposal.append(int(logits.argmax()))
        choice = target(torch.tensor([seq + proposal]))[0, len(seq) - 1:].argmax(-1).tolist()
        passes += 1
        n_ok = 0
        while n_ok < k and proposal[n_ok] == choice[n_ok]:
            n_ok += 1
        drafted += k
        accepted += n_ok
        seq += proposal[:n_ok] + [choice[n_ok]]
        if EOS_ID in seq[len(prompt):]:
            break
    return seq[len(prompt):], drafted, accepted, passes


@torch.no_grad()
def sample(model, prompt, n_new: int, temperature: float, generator) -> list:
    seq = list(prompt)
    for _ in range(n_new):
        logits = model(torch.tensor([seq[-model.cfg.n_ctx:]]))[0, -1]
        if temperature == 0:
            token = int(logits.argmax())
        else:
            probs = torch.softmax(logits / temperature, -1)
            token = int(torch.multinomial(probs, 1, generator=generator))
        if token == EOS_ID:
            break
        seq.append(token)
    return seq[len(prompt):]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--model", required=True, help="target (or any) final.pt / ckpt.pt")
    parser.add_argument("--draft", help="draft final.pt / ckpt.pt")
    parser.add_argument("--max-windows", type=int, default=0, help="0 = all validation windows")
    parser.add_argument("--spec-prompts", type=int, default=0)
    parser.add_argument("--spec-k", type=int, default=4)
    parser.add_argument("--prompt-lines", type=int, default=8)
    parser.add_argument("--n-new", type=int, default=128)
    parser.add_argument("--samples", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    setup_torch()

    model = load_model(args.model).eval()
    draft = load_model(args.draft).eval() if args.draft else None
    val = load_tokens(work_path("data", "val.bin"))
    windows = eval_windows(val, model.cfg.n_ctx, args.max_windows or len(val))
    val_files = json.load(open(work_path("data", "val_index.json"), encoding="utf-8"))
    n_bytes = sum(len(open(p, encoding="utf-8").read().encode()) for p, _, _ in val_files)
    results = val_metrics(model, draft, windows, n_bytes / len(val))
    print(json.dumps(results, indent=2), flush=True)

    sp = spm.SentencePieceProcessor(model_file=work_path("tokenizer", "spm.model"))
    if draft is not None and args.spec_prompts:
        drafted = accepted = passes = produced = 0
        for path, _, _ in val_files[:args.spec_prompts]:
            out, d, a, p = greedy_speculative(model, draft, prompt_ids(sp, path, args.prompt_lines),
                                              args.n_new, args.spec_k)
            drafted, accepted, passes, produced = drafted + d, accepted + a, passes + p, produced + len(out)
        print(json.dumps({"spec_k": args.spec_k, "prompts": args.spec_prompts,
                          "acceptance_rate": accepted / max(1, drafted),
                          "tokens_per_target_pass": produced / max(1, passes)}, indent=2))
    generator = torch.Generator().manual_seed(args.seed)
    for path, _, _ in val_files[:args.samples]:
        prompt = prompt_ids(sp, path, args.prompt_lines)
        for temperature in (0.0, 1.0):
            out = sample(model, prompt, args.n_new, temperature, generator)
            print(f"=== {path} (first {args.prompt_lines} lines), temperature {temperature} ===")
            print(from_model_text(sp.decode(prompt[1:])) + "<<<" + from_model_text(sp.decode(out)) + ">>>")


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
