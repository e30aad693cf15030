"""Token-stream batches for training and evaluation, deterministic and stateless.

The training stream is cut into windows of n_ctx+1 tokens. Epoch e visits every window once in
an order drawn from numpy's PCG64 seeded with (seed, e), with the window grid shifted by a
per-epoch offset so epochs see different boundaries. Sample number s (counted from the start of
training) is therefore a pure function of (seed, s): a resumed run only needs the step.
"""
import numpy as np
import torch


def load_tokens(path: str) -> np.ndarray:
    """uint16 token ids written by train_tokenizer.py, memory-mapped."""
    return np.memmap(path, dtype=np.uint16, mode="r")


class TrainStream:
    def __init__(self, tokens: np.ndarray, n_ctx: int, seed: int):
        self.tokens, self.n_ctx, self.seed = tokens, n_ctx, seed
        # one window fewer than fits, so any shift in [0, n_ctx) stays inside the stream
        self.n_windows = (len(tokens) - 1) // n_ctx - 1
        if self.n_windows < 1:
            raise ValueError(f"stream of {len(tokens)} tokens is shorter than 2 windows of {n_ctx}")
        self._epoch, self._order, self._shift = -1, None, 0

    def _epoch_plan(self, epoch: int):
        if epoch != self._epoch:
            rng = np.random.Generator(np.random.PCG64([self.seed, epoch]))
            self._order = rng.permutation(self.n_windows)
            self._shift = int(rng.integers(0, self.n_ctx))
            self._epoch = epoch
        return self._order, self._shift

    def window(self, sample: int) -> np.ndarray:
        """Tokens (n_ctx + 1) of sample number `sample`."""
        order, shift = self._epoch_plan(sample // self.n_windows)
        start = shift + int(order[sample % self.n_windows]) * self.n_ctx
        return np.asarray(self.tokens[start:start + self.n_ctx + 1], dtype=np.int64)

    def batch(self, first_sample: int, n_samples: int):
        """(inputs, targets), each (n_samples, n_ctx) int64, for samples first.. first+n-1."""
        rows = np.stack([self.window(first_sample + i) for i in range(n_samples)])
        rows = torch.from_numpy(rows)
        return rows[:, :-1], rows[:, 1:]

    def epoch_of(self, sample: int) -> float:
        return sample / self.n_windows


def eval_windows(tokens: np.ndarray, n_ctx: int, max_windows: int):
    """Fixed evaluation batches: consecutive non-overlapping windows from the start of the
    validation stream, as a list of (inputs, targets) pairs of shape (1, n_ctx)."""
    n_windows = min(max_windows, (len(tokens) - 1) // n_ctx)
    out = []
    for i in range(n_windows):
        row = torch.from_numpy(np.asarray(tokens[i * n_ctx:(i + 1) * n_ctx + 1], dtype=np.int64))
        out.append((row[None, :-1], row[None, 1:]))
    return out


class MixedStream:
    """Windows from a corpus stream and, for a fraction `frac` of them (evenly spread), from a
    second stream (e.g. teacher-generated text): window i comes from `extra` when
    floor((i + 1) * frac) > floor(i * frac) (its k-th such window is extra sample k), else from
    `corpus` (sample i - number of extra windows before i). frac = 0 or extra None: the corpus."""

    def __init__(self, corpus: TrainStream, extra=None, frac: float = 0.0):
        if not 0 <= frac <= 1 or (frac > 0) != (extra is not None):
            raise ValueError(f"extra fraction {frac}: in (0, 1] with a second stream, else 0")
        self.corpus, self.extra, self.frac = corpus, extra, frac

    @classmethod
    def from_files(cls, corpus_path: str, n_ctx: int, seed: int, extra_path=None, frac: float = 0.0):
        """The corpus stream seeded `seed`, the second stream (if any) `seed + 1`."""
        extra = TrainStream(load_tokens(extra_path), n_ctx, seed + 1) if extra_path else None
        return cls(TrainStream(load_tokens(corpus_path), n_ctx, seed), extra, frac)

    def batch(self, first_sample: int, n_samples: int):
        """(inputs, targets), each (n_samples, n_ctx) int64, as TrainStream.batch."""
        if self.extra is None:
            return self.corpus.batch(first_sample, n_samples)
        rows = []
        for i in range(first_sample, first_sample + n_samples):
            n_extra_before = int(i * self.frac)
            if int((i + 1) * self.frac) > n_extra_before:
                rows.append(self.extra.batch(n_extra_before, 1))
            else:
                rows.append(self.corpus.batch(i - n_extra_before, 1))
        return torch.cat([r[0] for r in rows]), torch.cat([r[1] for r in rows])
