#!/usr/bin/python3
"""Checks an exported GGUF against its PyTorch checkpoint and the training tokenizer.

Usage: /usr/bin/python3 tools/train/check_export.py --ckpt work/target/final.pt \
           --gguf work/target/model-f16.gguf [--n-tokens 64] [--n-files 4]

1. Logits: the first n_tokens of the validation stream through the PyTorch model and through
   gguf_reference.LlamaReference (numpy, float64, reading only the GGUF): relative RMS error
   and argmax agreement. (The reference itself reproduces llama.cpp's logits of the shared
   stories260K fixture to 1.6e-4: run with --stories to see.)
2. Tokenizer: llama.cpp's SPM algorithm (gguf_reference.spm_encode) on the GGUF vocabulary
   must give the same ids as SentencePiece did when the training data was encoded.
3. With --specdec BIN: greedy text of `specdec generate --spec none --temp 0` on the GGUF
   against greedy decoding of the PyTorch model with F16-rounded weights (same prompt); the
   texts must agree on at least --min-agree of the generated tokens' text (near-ties can flip
   late tokens between float orders).
Exits non-zero when a check fails (F16: rel. RMS <= 5e-3, Q8_0: <= 5e-2, tokens identical).
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import sentencepiece as spm
import torch

from common import BOS_ID, EOS_ID, TRAIN_DIR, from_model_text, setup_torch, to_model_text, work_path
from data import load_tokens
from gguf_reference import LlamaReference, spm_encode


def check_stories() -> float:
    fixtures = os.path.join(TRAIN_DIR, "..", "..", "..", "shared", "fixtures", "models")
    ref = LlamaReference(f"{fixtures}/stories260K.gguf")
    tokens = [1, 403, 407, 261, 378, 11, 280, 300, 17, 42, 511, 7, 99, 250, 3, 128]
    gold = np.fromfile(f"{fixtures}/stories260K.logits.f32", dtype=np.float32).reshape(16, -1)
    mine = ref.forward(tokens)
    return float(np.linalg.norm(mine - gold) / np.linalg.norm(mine))


def greedy_text(model, sp, prompt: str, n_new: int) -> str:
    """Greedy continuation by the PyTorch model (weights rounded to F16 like the export)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.copy_(p.half().float())
        seq = [BOS_ID] + sp.encode(to_model_text(prompt))
        n_prompt = len(seq)
        for _ in range(n_new):
            seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
            if seq[-1] == EOS_ID:  # specdec stops there too
                break
    return from_model_text(sp.decode(seq[n_prompt:]))


def specdec_text(binary: str, gguf: str, prompt: str, n_new: int) -> str:
    cmd = [binary, "generate", "-m", gguf, "-p", prompt, "-n", str(n_new), "--temp", "0",
           "--spec", "none", "--no-display-prompt", "-t", "1"]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main() -> None:
    from train import load_model
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--n-tokens", type=int, default=64)
    parser.add_argument("--n-files", type=int, default=4)
    parser.add_argument("--stories", action="store_true", help="also check the reference itself")
    parser.add_argument("--specdec", help="specdec binary: compare its greedy generation")
    parser.add_argument("--prompt", default="import os\nimport sys\n\n\ndef main(argv):\n")
    parser.add_argument("--n-new", type=int, default=48)
    parser.add_argument("--min-agree", type=float, default=0.9)
    args = parser.parse_args()
    setup_torch()
    ok = True

    if args.stories:
        err = check_stories()
        print(f"reference vs llama.cpp on stories260K: rel. RMS {err:.2e}")
        ok &= err < 2e-3

    model = load_model(args.ckpt).eval()
    ref = LlamaReference(args.gguf)
    tokens = np.asarray(load_tokens(work_path("data", "val.bin"))[:args.n_tokens], dtype=np.int64)
    with torch.no_grad():
        torch_logits = model(torch.from_numpy(tokens)[None])[0].double().numpy()
    gguf_logits = ref.forward(tokens)
    err = float(np.linalg.norm(gguf_logits - torch_logits) / np.linalg.norm(torch_logits))
    agree = float((gguf_logits.argmax(-1) == torch_logits.argmax(-1)).mean())
    bound = 5e-3 if ref.meta.get("general.file_type") == 1 else 5e-2
    print(f"logits GGUF reference vs PyTorch ({args.n_tokens} tokens): rel. RMS {err:.2e} "
          f"(bound {bound:g}), argmax agreement {agree:.3f}")
    ok &= err <= bound

    sp = spm.SentencePieceProcessor(model_file=work_path("tokenizer", "spm.model"))
    vocab, scores = ref.meta["tokenizer.ggml.tokens"], ref.meta["tokenizer.ggml.scores"]
    add_prefix = ref.meta.get("tokenizer.ggml.add_space_prefix", True)
    with open(work_path("corpus", "files_val.txt"), encoding="utf-8") as f:
        files = [line.strip() for line in f][:args.n_files]
    n_same = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()[:8000]
        n_same += sp.encode(to_model_text(text)) == spm_encode(text, vocab, scores, add_prefix)
    print(f"tokenizer: {n_same}/{len(files)} validation files encode identically")
    ok &= n_same == len(files)
    if args.specdec:
        expected = greedy_text(model, sp, args.prompt, args.n_new)
        got = specdec_text(args.specdec, args.gguf, args.prompt, args.n_new)
        common = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b),
                      min(len(expected), len(got)))
        print(f"specdec greedy vs PyTorch greedy: {common}/{len(expected)} characters agree")
        print(f"--- PyTorch ---\n{expected}\n--- specdec ---\n{got}\n---")
        ok &= common >= args.min_agree * len(expected)
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
