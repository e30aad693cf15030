#!/usr/bin/python3
"""Trains the SentencePiece BPE tokenizer on the training files and encodes the corpus.

Usage: /usr/bin/python3 tools/train/train_tokenizer.py [--vocab-size 4096]
(Deterministic: every sentence is used in file order, no sampling or shuffle, so no seed.)
Requires: prepare_corpus.py ran (work/corpus/files_*.txt).

Tokenizer settings (chosen so that a llama.cpp-style SPM encoder, which does no
pre-splitting and no normalization, encodes text exactly as SentencePiece does here):
  - BPE with byte_fallback: every byte is representable (<0x00>..<0xFF> are ids 3..258).
  - identity normalization, remove_extra_whitespaces=false: spaces and tabs are kept.
  - add_dummy_prefix=false: no space is prepended (the GGUF says add_space_prefix=false).
  - no pre-splitting (whitespace, script, numbers): pieces may span "\n    " and "self.".
  - newlines: SentencePiece's sentences cannot hold "\n", so files are fed with "\n" replaced
    by a private-use placeholder (common.NEWLINE_PLACEHOLDER); the exporter maps it back.
Training sentences are chunks of whole lines (newlines included) of at most ~2000 bytes.

Writes (tools/train/work/):
  tokenizer/spm.model, spm.vocab    the SentencePiece model
  tokenizer/sp_input.txt            the training sentences
  data/train.bin, data/val.bin      uint16 token ids; each file is BOS + tokens + EOS
  data/val_index.json               (path, offset, length) of each validation file in val.bin
"""
import argparse
import json
import time

import numpy as np
import sentencepiece as spm

from common import BOS_ID, EOS_ID, UNK_ID, to_model_text, work_path

MAX_CHUNK_CHARS = 2000


def read_list(name: str) -> list[str]:
    with open(work_path("corpus", name), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def read_source(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def write_training_sentences(files: list[str], out_path: str) -> int:
    """Writes chunks of whole lines (placeholder for newlines), one chunk a line."""
    n_chunks = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for path in files:
            chunk = ""
            for line in read_source(path).splitlines(keepends=True):
                if chunk and len(chunk) + len(line) > MAX_CHUNK_CHARS:
                    out.write(to_model_text(chunk) + "\n")
                    n_chunks += 1
                    chunk = ""
                chunk += line[:MAX_CHUNK_CHARS]
            if chunk:
                out.write(to_model_text(chunk) + "\n")
                n_chunks += 1
    return n_chunks


def encode_files(sp: spm.SentencePieceProcessor, files: list[str]):
    """Returns (uint16 ids of BOS+tokens+EOS per file concatenated, [(path, offset, length)])."""
    pieces, index, offset = [], [], 0
    for path in files:
        ids = [BOS_ID] + sp.encode(to_model_text(read_source(path))) + [EOS_ID]
        pieces.append(np.asarray(ids, dtype=np.uint16))
        index.append((path, offset, len(ids)))
        offset += len(ids)
    return np.concatenate(pieces), index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--vocab-size", type=int, default=4096)
    args = parser.parse_args()

    train_files, val_files = read_list("files_train.txt"), read_list("files_val.txt")
    sentences_path = work_path("tokenizer", "sp_input.txt")
    n_chunks = write_training_sentences(train_files, sentences_path)
    print(f"{n_chunks} training sentences from {len(train_files)} files")

    start = time.time()
    spm.SentencePieceTrainer.train(
        input=sentences_path, model_prefix=work_path("tokenizer", "spm"),
        model_type="bpe", vocab_size=args.vocab_size, byte_fallback=True,
        character_coverage=0.9999, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=False,
        split_by_whitespace=False, split_by_unicode_script=False, split_by_number=False,
        split_digits=False, allow_whitespace_only_pieces=True, max_sentencepiece_length=16,
        max_sentence_length=4 * MAX_CHUNK_CHARS + 16,
        # every sentence is used (no sampling), so the result does not depend on a shuffle
        input_sentence_size=n_chunks + 1, shuffle_input_sentence=False,
        num_threads=2,
        unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=-1,
        minloglevel=1)
    print(f"tokenizer trained in {time.time() - start:.0f} s")

    sp = spm.SentencePieceProcessor(model_file=work_path("tokenizer", "spm.model"))
    for name, files in (("train", train_files), ("val", val_files)):
        ids, index = encode_files(sp, files)
        ids.tofile(work_path("data", f"{name}.bin"))
        n_bytes = sum(len(read_source(p).encode()) for p in files)
        print(f"{name}: {len(ids)} tokens, {n_bytes / len(ids):.2f} bytes/token")
        if name == "val":
            with open(work_path("data", "val_index.json"), "w", encoding="utf-8") as f:
                json.dump(index, f, indent=0)


if __name__ == "__main__":
    main()
