#!/usr/bin/python3
"""Teacher-generated distillation data: the target's greedy continuations of training prompts.

Usage: /usr/bin/python3 tools/train/gen_teacher_data.py --specdec build/specdec \
           --target models/demo-target.gguf [--prompt-lines 8] [--n-start 192] [--n-mid 128]

Why: speculative decoding at temperature 0 drafts on the target's own greedy output, which
differs from source code (a small target falls into repetition loops). DistillSpec (Zhou et
al. 2023) trains on teacher- or student-generated sequences for this reason. Prompts come
from TRAINING files only (validation files are the held-out measurement prompts): for each
file, its first --prompt-lines lines (as measure_spec.py prompts) continued for --n-start
tokens, and --prompt-lines lines from a seeded random line of the file continued for --n-mid.
Texts come from `specdec generate --spec none --temp 0` (C++ with a KV cache; seconds for all
prompts where PyTorch without a cache would take hours) and are re-encoded with the
SentencePiece model, so a record's ids can differ from the generated ids where the target
produced a non-canonical tokenization (rare; the text is the same).

Writes (tools/train/work/): teacher_gen/texts.jsonl (one record a line; resumable: done
prompts are skipped) and data/teacher_gen.bin (uint16; each record = BOS + tokens + EOS, the
layout of train.bin) for train.py --extra-data.
"""
import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import tempfile
import threading

import numpy as np

from common import BOS_ID, EOS_ID, to_model_text, work_path


def prompts(files: list, n_lines: int, n_start: int, n_mid: int, seed: int):
    """(key, prompt text, tokens to generate) for every training file: its start, and a
    window at a random line (seeded by the path)."""
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines(keepends=True)
        yield f"{path}:0", "".join(lines[:n_lines]), n_start
        if n_mid and len(lines) > 2 * n_lines:
            start = random.Random(f"{seed}:{path}").randrange(n_lines, len(lines) - n_lines)
            yield f"{path}:{start}", "".join(lines[start:start + n_lines]), n_mid


def generate(specdec: str, target: str, prompt: str, n_new: int) -> str:
    # A prompt file of its own per call: workers run concurrently.
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt",
                                     dir=os.path.dirname(work_path("teacher_gen", "x"))) as f:
        f.write(prompt)
        f.flush()
        cmd = [specdec, "generate", "-m", target, "-f", f.name, "-n", str(n_new), "--temp", "0",
               "--spec", "none", "--no-display-prompt", "-t", "1"]
        return subprocess.run(cmd, check=True, capture_output=True, encoding="utf-8",
                              errors="replace").stdout


def encode(texts_path: str, out_path: str, order: list) -> None:
    """Records in the canonical prompt order `order` (keys), whatever order they were written
    in (parallel workers, resumed runs); a key written twice counts once."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=work_path("tokenizer", "spm.model"))
    records = {}
    with open(texts_path, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            records.setdefault(record["key"], record)
    ids = []
    for key in order:
        if key in records:
            record = records[key]
            ids += [BOS_ID] + sp.encode(to_model_text(record["prompt"] + record["output"])) + [EOS_ID]
    np.asarray(ids, dtype=np.uint16).tofile(out_path)
    print(f"wrote {out_path}: {len(ids)} tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--specdec", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--prompt-lines", type=int, default=8)
    parser.add_argument("--n-start", type=int, default=192, help="tokens after a file's start")
    parser.add_argument("--n-mid", type=int, default=128, help="tokens after a random line (0 = none)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--encode-only", action="store_true")
    parser.add_argument("--workers", type=int, default=1, help="specdec processes at once "
                        "(each -t 1; the output does not depend on it)")
    args = parser.parse_args()

    texts_path = work_path("teacher_gen", "texts.jsonl")
    with open(work_path("corpus", "files_train.txt"), encoding="utf-8") as f:
        files = [line.strip() for line in f if line.strip()]
    todo = [p for p in prompts(files, args.prompt_lines, args.n_start, args.n_mid, args.seed)
            if p[1].strip()]
    if not args.encode_only:
        done = set()
        if os.path.exists(texts_path):
            with open(texts_path, encoding="utf-8") as f:
                done = {json.loads(line)["key"] for line in f}
        pending = [p for p in todo if p[0] not in done]
        lock = threading.Lock()

        def run(item, out):
            key, prompt, n_new = item
            output = generate(args.specdec, args.target, prompt, n_new)
            with lock:
                out.write(json.dumps({"key": key, "prompt": prompt, "output": output}) + "\n")
                out.flush()

        with open(texts_path, "a", encoding="utf-8") as out, \
                concurrent.futures.ThreadPoolExecutor(max(1, args.workers)) as pool:
            for future in [pool.submit(run, item, out) for item in pending]:
                future.result()
        print(f"{texts_path}: all prompts generated")
    encode(texts_path, work_path("data", "teacher_gen.bin"), [p[0] for p in todo])


if __name__ == "__main__":
    main()
