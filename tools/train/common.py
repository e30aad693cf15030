"""Shared paths and constants of the training tools (tools/train/).

Everything these scripts write goes under tools/train/work/ (git-ignored): the corpus is
never committed, and neither are checkpoints.
"""
import os

# Busy-waiting OpenMP threads are ~10x slower when other processes compete for the cores
# (measured: 200 vs 3,000 tokens/s for a small model with 2 threads on a loaded 2-core machine).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402  (after the OpenMP setting)

TRAIN_DIR = os.path.dirname(os.path.abspath(__file__))
# SPECDEC_TRAIN_WORK moves the work folder (corpus, checkpoints, exports) out of the checkout,
# so training state survives a fresh checkout of the repository.
WORK_DIR = os.environ.get("SPECDEC_TRAIN_WORK") or os.path.join(TRAIN_DIR, "work")

# SentencePiece trains on lines ("sentences") that cannot contain "\n". We replace every
# newline with this private-use character while training and encoding, so the tokenizer
# learns pieces like "\n    " (newline + indentation), and the GGUF exporter maps it back
# to "\n" in the vocabulary. prepare_corpus.py rejects files that contain it.
NEWLINE_PLACEHOLDER = "\ue000"

# Token ids fixed by SentencePiece's defaults (unk_id=0, bos_id=1, eos_id=2), the layout
# llama-style GGUF tokenizers use; byte tokens <0x00>..<0xFF> follow at 3..258.
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2


def work_path(*parts: str) -> str:
    """Path under tools/train/work/, creating the parent folder."""
    path = os.path.join(WORK_DIR, *parts)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def setup_torch(n_threads: int = 2) -> None:
    """Pins torch to n_threads CPU threads (the machine has 2 cores shared with builds)."""
    torch.set_num_threads(n_threads)
    torch.set_num_interop_threads(1)


def to_model_text(text: str) -> str:
    """Source text -> the text SentencePiece sees (newlines replaced by the placeholder)."""
    return text.replace("\n", NEWLINE_PLACEHOLDER)


def from_model_text(text: str) -> str:
    """Inverse of to_model_text."""
    return text.replace(NEWLINE_PLACEHOLDER, "\n")
