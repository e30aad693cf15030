#!/usr/bin/python3
"""Writes the prompt files of the speculative-decoding workloads in docs/BENCHMARKS.md.

Usage: tools/bench/make_workloads.py OUT_DIR [--work tools/train/work]

Each file holds one prompt per line as a JSON string (`specdec bench --prompts` reads that form
for prompts with newlines). From the demo corpus's held-out split (work/corpus/files_val.txt):
  code_continue.jsonl  the first ~1,200 bytes (~500 tokens) of 6 validation files longer than
                       6,000 bytes, cut at a line end: continuing a source file (input-repetitive)
  code_short.jsonl     the first 8 lines of the same files (little to look up)
  self_repeat.jsonl    a ~1,600-byte passage followed by its own first ~200 bytes, so the
                       continuation repeats the passage (input-repetitive, extreme)
  random_text.jsonl    40 random identifiers (seeded): non-repetitive
  tune_short.jsonl     like code_short and code_continue, from 27 other validation files of at
  tune_continue.jsonl  least 3,000 bytes (none of the above): the TUNING split, on which
                       drafter settings are chosen (EAGLE's rank temperature and sampled tree
                       width, docs/HEADS.md) so the benchmark prompts stay held out
"""
import argparse
import json
import os
import random


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--work", default=os.environ.get("SPECDEC_TRAIN_WORK", "tools/train/work"))
    args = parser.parse_args()
    files = [line.strip() for line in open(os.path.join(args.work, "corpus/files_val.txt"))]
    os.makedirs(args.out_dir, exist_ok=True)

    def write(name, prompts):
        with open(os.path.join(args.out_dir, name), "w") as out:
            for p in prompts:
                out.write(json.dumps(p) + "\n")

    continued, short = [], []
    for path in files:
        text = open(path, encoding="utf-8").read()
        if len(text) < 6000:
            continue
        continued.append(text[:text.rfind("\n", 0, 1200) + 1])
        short.append("\n".join(text.split("\n")[:8]) + "\n")
        if len(continued) >= 6:
            break
    write("code_continue.jsonl", continued)
    write("code_short.jsonl", short)
    repeated = []
    for path in files[6:10]:
        text = open(path, encoding="utf-8").read()
        passage = text[:text.rfind("\n", 0, 1600) + 1]
        repeated.append(passage + passage[:passage.find("\n", 200) + 1])
    write("self_repeat.jsonl", repeated)
    tune_short, tune_continue = [], []
    first_long = [p for p in files if len(open(p, encoding="utf-8").read()) >= 6000][:6]  # code_*
    for path in files:
        text = open(path, encoding="utf-8").read()
        if len(text) < 3000 or path in first_long or path in files[6:10]:
            continue
        tune_short.append("\n".join(text.split("\n")[:8]) + "\n")
        tune_continue.append(text[:text.rfind("\n", 0, 1200) + 1])
        if len(tune_short) >= 30:
            break
    write("tune_short.jsonl", tune_short)
    write("tune_continue.jsonl", tune_continue)
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_"
    write("random_text.jsonl", [" ".join("".join(rng.choice(alphabet) for _ in range(rng.randint(2, 9)))
                                         for _ in range(40)) for _ in range(4)])


if __name__ == "__main__":
    main()
