#!/usr/bin/python3
"""Tunes the Medusa candidate tree for trained heads (the tree specdec reads from
medusa.tree_choices, docs/HEADS.md), from how often each path of ranks is right.

Usage:
  /usr/bin/python3 tools/train/tune_medusa_tree.py --target models/demo-target.gguf \
      --medusa work/heads/medusa/final.pt [--data work/data/teacher_gen.bin] [--nodes 64] \
      [--out work/heads/medusa-tree.txt]

Medusa's own trees (Cai et al. 2024) are built greedily from per-head top-k accuracies, assuming
the heads are independent. Here the joint frequency is counted directly: at every position t of
--windows windows of --data (by default the target's greedy continuations of training prompts,
gen_teacher_data.py: the text Medusa drafts on at temperature 0; never validation files), the
chain root x_{t+1} is certain and head j (on f_t) must predict the target's greedy token
g_{t+j+1} = argmax Output(f_{t+j+1}). A path (r_0, .., r_d) of ranks is right at t when, for
every j <= d, head j ranks g_{t+j+1} at r_j and the data follows the target's greedy choice up
to there (x_{t+i+1} == g_{t+i} for 1 <= i <= j, so f_{t+j+1} is the feature greedy decoding
would see). Under greedy verification a tree accepts exactly the nodes whose paths are right,
so its expected accepted tokens per pass = sum over its nodes of P(path right). The tuned tree
is the --nodes paths of highest count (ties: shorter, then smaller ranks), which is prefix-closed
(a path is right no more often than its prefix) and ordered likeliest first, so specdec's
budget cut (the first n_max choices) keeps the best tree of every smaller size too.

Prints expected accepted tokens per pass against the node budget for the tuned tree and for
Medusa's default tree (mc_sim_7b_63), counted on the next --windows windows of the stream (not
the tuning windows), and writes the tree as "0;0,0;1;..." to --out; pass it
to export_heads.py --tree-choices.
"""
import argparse
import os
from collections import Counter

import torch
import torch.nn.functional as F

from common import setup_torch, work_path
from data import TrainStream, load_tokens
from heads_model import freeze, load_heads, target_features
from train import load_model

# Medusa's mc_sim_7b_63, as MedusaDrafter::default_choices() (spec/medusa_drafter.cpp).
DEFAULT_TREE = [
    (0,), (0, 0), (1,), (0, 1), (0, 0, 0), (1, 0), (2,), (0, 2), (0, 0, 1), (0, 3), (3,), (0, 1, 0),
    (2, 0), (4,), (0, 0, 2), (0, 4), (1, 1), (1, 0, 0), (0, 0, 0, 0), (5,), (0, 0, 3), (0, 5),
    (0, 2, 0), (3, 0), (0, 1, 1), (0, 6), (6,), (0, 7), (0, 0, 4), (4, 0), (1, 2), (0, 8), (7,),
    (0, 3, 0), (0, 0, 0, 1), (0, 0, 5), (2, 1), (0, 0, 6), (1, 0, 1), (0, 0, 1, 0), (2, 0, 0),
    (5, 0), (0, 9), (0, 1, 2), (8,), (0, 4, 0), (0, 2, 1), (1, 3), (0, 0, 7), (0, 0, 0, 2),
    (0, 0, 8), (1, 1, 0), (0, 1, 0, 0), (6, 0), (9,), (0, 1, 3), (0, 0, 0, 3), (1, 0, 2),
    (0, 5, 0), (3, 1), (0, 0, 2, 0), (7, 0), (1, 4)]


@torch.no_grad()
def path_counts(target, heads, windows, max_rank: int):
    """(Counter of right rank paths, number of positions counted)."""
    out_w = target.output.weight
    counts, n_positions = Counter(), 0
    n_heads = heads.n_heads
    for inputs, _ in windows:
        feats = target_features(target, inputs)[0]           # (T, d)
        tokens = inputs[0]                                    # (T,)  x_0..x_{T-1}
        greedy = F.linear(feats, out_w).argmax(-1)            # (T,)  g_t predicts x_{t+1}
        head_logits = F.linear(heads(feats), out_w)           # (K, T, V)
        T = tokens.shape[0]
        for t in range(T - n_heads - 1):
            n_positions += 1
            path = ()
            for j in range(n_heads):
                # data follows greedy from x_{t+2} to x_{t+j+1}
                if j > 0 and int(tokens[t + j + 1]) != int(greedy[t + j]):
                    break
                truth = int(greedy[t + j + 1])
                row = head_logits[j, t]
                rank = int((row > row[truth]).sum()) + int((row[:truth] == row[truth]).sum())
                if rank >= max_rank:
                    break
                path = path + (rank,)
                counts[path] += 1
    return counts, n_positions


def tune(counts: Counter, n_nodes: int) -> list:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))
    tree = [path for path, _ in ranked[:n_nodes]]
    chosen = set(tree)
    assert all(len(p) == 1 or p[:-1] in chosen for p in tree), "tuned tree not prefix-closed"
    return tree


def expected_accepted(tree: list, counts: Counter, n_positions: int, budget: int) -> float:
    """Expected accepted tokens per pass of the first `budget` usable choices of `tree`."""
    usable, taken = set(), 0
    total = 0
    for path in tree:
        if taken >= budget:
            break
        if len(path) > 1 and path[:-1] not in usable:
            continue
        usable.add(path)
        taken += 1
        total += counts.get(path, 0)
    return total / max(1, n_positions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--target", required=True, help="target GGUF or checkpoint")
    parser.add_argument("--medusa", required=True, help="train_heads.py medusa checkpoint, or "
                        "a Medusa heads GGUF (export_heads.py)")
    parser.add_argument("--data", default=None, help="default work/data/teacher_gen.bin")
    parser.add_argument("--windows", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--seed", type=int, default=4321)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--max-rank", type=int, default=16)
    parser.add_argument("--out", default=None, help="default work/heads/medusa-tree.txt")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    setup_torch(args.threads)
    target = freeze(load_model(args.target))
    if args.medusa.endswith(".gguf"):
        from gguf_writer import read_gguf
        from heads_model import MedusaHeads
        from train_heads import init_heads_from_gguf
        meta, _ = read_gguf(args.medusa)
        kind = meta.get("general.architecture")
        heads = MedusaHeads(int(meta["medusa.embedding_length"]), int(meta["medusa.head_count"]),
                            int(meta["medusa.block_count"])) if kind == "medusa" else None
        if heads is not None:
            init_heads_from_gguf(kind, heads, args.medusa)
        state = {"step": meta.get("general.name", "?")}
    else:
        kind, heads, state = load_heads(args.medusa)
    if kind != "medusa":
        raise SystemExit(f"error: --medusa {args.medusa} holds {kind} heads")
    heads = freeze(heads)
    stream = TrainStream(load_tokens(args.data or work_path("data", "teacher_gen.bin")),
                         args.seq_len, args.seed)
    windows = [stream.batch(i, 1) for i in range(args.windows)]
    counts, n_positions = path_counts(target, heads, windows, args.max_rank)
    tree = tune(counts, args.nodes)
    # Report on other windows of the same stream (the tuning windows would flatter the tree).
    held_out = [stream.batch(args.windows + i, 1) for i in range(args.windows)]
    eval_counts, eval_positions = path_counts(target, heads, held_out, args.max_rank)
    text = ";".join(",".join(str(r) for r in path) for path in tree)
    out = args.out or work_path("heads", "medusa-tree.txt")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    print(f"tuned on {n_positions} positions of {args.windows} windows, reported on "
          f"{eval_positions} positions of the next {args.windows}; heads: {state['step']}")
    print("| nodes | tuned tree: expected accepted / pass | default tree (mc_sim_7b_63) |")
    print("|---|---|---|")
    for budget in (1, 2, 4, 8, 16, 32, 64):
        if budget <= args.nodes:
            print(f"| {budget} | {expected_accepted(tree, eval_counts, eval_positions, budget):.3f} | "
                  f"{expected_accepted(DEFAULT_TREE, eval_counts, eval_positions, budget):.3f} |")
    print(f"tree ({len(tree)} nodes) -> {out}: {text[:200]}{'...' if len(text) > 200 else ''}")


if __name__ == "__main__":
    main()
