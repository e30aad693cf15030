#!/usr/bin/python3
"""Evaluates Medusa heads and an EAGLE layer in PyTorch, as a cross-check of specdec's figures.

Usage:
  /usr/bin/python3 tools/train/eval_heads.py --target work/target/final.pt \
      --medusa work/heads/medusa/final.pt --eagle work/heads/eagle/final.pt

1. Teacher-forced top-1 accuracy on --windows validation windows of --seq-len tokens (true
   prefix, true features): per Medusa head k against the data token x_{t+k+2} (acc) and the
   target's own greedy token there (agree), plus top-5 agreement (what a tree of choices sees);
   EAGLE's g_t against x_{t+2} and against argmax Output(f_{t+1}).
2. Simulated greedy speculation with a CHAIN draft on --spec-prompts validation prompts (first
   --prompt-lines lines of each held-out file, --n-new greedy tokens of the target):
   Medusa: after a target pass whose last accepted row is t, the pass's own next token x_{t+1}
   is certain and head k drafts x_{t+k+2} from f_t (all K heads); EAGLE: the layer, fed the true
   (E[x_{j+1}], f_j) for j <= t, drafts --depth tokens autoregressively from its own g. A draft
   token counts while it equals the target's greedy token; each pass yields accepted + 1
   tokens. Reports the acceptance rate (accepted / drafted) and tokens per target pass, the
   same quantities evaluate.py reports for the draft model.
"""
import argparse
import json

import torch
import torch.nn.functional as F

from common import setup_torch, work_path
from data import eval_windows, load_tokens
from evaluate import prompt_ids
from heads_model import freeze, load_heads, target_features, target_features_and_layers
from train import load_model
from train_heads import head_metrics


@torch.no_grad()
def greedy_sequence(target, prompt: list, n_new: int) -> list:
    """prompt + n_new greedy tokens of the target (full recompute; stops before n_ctx)."""
    seq = list(prompt)
    while len(seq) < min(len(prompt) + n_new, target.cfg.n_ctx):
        seq.append(int(target(torch.tensor([seq]))[0, -1].argmax()))
    return seq


@torch.no_grad()
def simulate_chain(kind, heads, target, seq: list, n_prompt: int, depth: int):
    """(drafted, accepted, passes) over the generated part of seq (see module doc, 2)."""
    tokens = torch.tensor([seq])
    fuse_layers = getattr(heads, "fuse_layers", [])
    if fuse_layers:  # the verified rows' feature slots: fuse([r^{l_1}, .., f])
        feats, residual = target_features_and_layers(target, tokens, fuse_layers)
        slots = heads.fused(feats, residual)[0]  # (S, d)
        feats = feats[0]
    else:
        feats = target_features(target, tokens)[0]  # (S, d)
        slots = feats
    out_w, embed = target.output.weight, target.tok_embeddings
    drafted = accepted = passes = 0
    t = n_prompt - 1  # last row the target has verified (prefill)
    while t + 1 < len(seq):
        if kind == "medusa":
            hidden = heads(feats[t])  # (K, d)
            draft = F.linear(hidden, out_w).argmax(-1).tolist()
        else:
            rows_e = embed(tokens[0, 1:t + 2])  # E[x_{j+1}], j = 0..t  (t+1, d)
            rows_f = slots[:t + 1]              # f_j (fused)             (t+1, d)
            draft = []
            for _ in range(depth):
                if rows_f.shape[0] > heads.cfg.n_ctx:
                    break
                g = heads(rows_e[None], rows_f[None])[0, -1]  # (d)
                token = int(F.linear(g, out_w).argmax())
                draft.append(token)
                rows_e = torch.cat((rows_e, embed(torch.tensor([token]))))
                rows_f = torch.cat((rows_f, g[None]))
        room = len(seq) - (t + 2)  # tokens after the certain x_{t+1}
        draft = draft[:max(0, room)]
        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == seq[t + 2 + n_ok]:
            n_ok += 1
        drafted, accepted, passes = drafted + len(draft), accepted + n_ok, passes + 1
        t += 1 + n_ok
    return drafted, accepted, passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--target", default=None, help="default work/target/final.pt")
    parser.add_argument("--medusa", help="train_heads.py medusa checkpoint")
    parser.add_argument("--eagle", help="train_heads.py eagle checkpoint")
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--spec-prompts", type=int, default=8)
    parser.add_argument("--prompt-lines", type=int, default=8)
    parser.add_argument("--n-new", type=int, default=128)
    parser.add_argument("--depth", type=int, default=4, help="EAGLE chain length")
    args = parser.parse_args()
    setup_torch()
    import sentencepiece as spm
    target = freeze(load_model(args.target or work_path("target", "final.pt")))
    windows = eval_windows(load_tokens(work_path("data", "val.bin")), args.seq_len, args.windows)
    with open(work_path("data", "val_index.json"), encoding="utf-8") as f:
        val_files = json.load(f)
    sp = spm.SentencePieceProcessor(model_file=work_path("tokenizer", "spm.model"))
    sequences = []
    for path, _, _ in val_files[:args.spec_prompts]:
        prompt = prompt_ids(sp, path, args.prompt_lines)
        sequences.append((greedy_sequence(target, prompt, args.n_new), len(prompt)))
    results = {"val_windows": len(windows), "seq_len": args.seq_len}
    for kind in ("medusa", "eagle"):
        path = getattr(args, kind)
        if not path:
            continue
        loaded, heads, state = load_heads(path)
        if loaded != kind:
            raise SystemExit(f"error: --{kind} {path} holds {loaded} heads")
        heads = freeze(heads)
        metrics = head_metrics(kind, heads, target, windows)
        drafted = accepted = passes = produced = 0
        for seq, n_prompt in sequences:
            d, a, p = simulate_chain(kind, heads, target, seq, n_prompt, args.depth)
            drafted, accepted, passes = drafted + d, accepted + a, passes + p
            produced += len(seq) - n_prompt
        chain = heads.n_heads if kind == "medusa" else args.depth
        results[kind] = {"checkpoint": path, "step": state["step"],
                         **{k: round(v, 4) for k, v in metrics.items()},
                         "chain": chain, "prompts": len(sequences),
                         "acceptance_rate": round(accepted / max(1, drafted), 4),
                         "tokens_per_target_pass": round(produced / max(1, passes), 4)}
        print(json.dumps({kind: results[kind]}, indent=1), flush=True)
    return results


if __name__ == "__main__":
    main()
