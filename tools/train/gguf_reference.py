"""Independent numpy (float64) references for checking exported GGUF files.

- LlamaReference: the llama.cpp "llama" architecture forward pass, read from GGUF tensors
  alone (no PyTorch, no model.py), so it checks names, layouts, RoPE and metadata.
- spm_encode: llama.cpp's SentencePiece ("llama" vocabulary) encoder: no normalization,
  optional space prefix, spaces -> U+2581, greedy merges of adjacent symbols by best
  vocabulary score (leftmost on ties), unknown characters as <0xXX> byte tokens.
Both are slow and only meant for tests of a few hundred tokens.
"""
import heapq

import numpy as np

from gguf_writer import read_gguf


class LlamaReference:
    def __init__(self, path: str):
        self.meta, self.t = read_gguf(path)
        m = self.meta
        arch = m["general.architecture"]
        if arch != "llama":
            raise ValueError(f"{path}: architecture {arch}, expected llama")
        self.dim = m["llama.embedding_length"]
        self.n_layers = m["llama.block_count"]
        self.n_heads = m["llama.attention.head_count"]
        self.n_kv_heads = m.get("llama.attention.head_count_kv", self.n_heads)
        self.head_dim = self.dim // self.n_heads
        self.n_rot = m.get("llama.rope.dimension_count", self.head_dim)
        self.base = m.get("llama.rope.freq_base", 10000.0)
        self.eps = m["llama.attention.layer_norm_rms_epsilon"]
        self.w = {k: v.astype(np.float64) for k, v in self.t.items()}

    def _rms(self, x, weight):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * weight

    def _rope(self, x, positions):
        """x (T, H, hd): rotate adjacent pairs (2i, 2i+1) of the first n_rot dims."""
        out = x.copy()
        i = np.arange(self.n_rot // 2)
        theta = positions[:, None] * self.base ** (-2.0 * i / self.n_rot)  # (T, n_rot/2)
        c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        x0, x1 = x[..., 0:self.n_rot:2], x[..., 1:self.n_rot:2]
        out[..., 0:self.n_rot:2] = x0 * c - x1 * s
        out[..., 1:self.n_rot:2] = x0 * s + x1 * c
        return out

    def forward(self, tokens) -> np.ndarray:
        """Logits (T, n_vocab) for tokens at positions 0..T-1 (causal)."""
        return self.features(tokens) @ self.output_matrix().T

    def output_matrix(self) -> np.ndarray:
        """(n_vocab, dim): output.weight, or token_embd.weight when the model ties them."""
        return self.w.get("output.weight", self.w["token_embd.weight"])

    def features(self, tokens, layers=None):
        """Final hidden states after output_norm (T, dim): logits = features @ output^T.
        With layers (block indices): (features, residual (T, len(layers), dim)), the residual
        stream after each listed block (EAGLE-3 style fusion inputs)."""
        kept = {}
        w, n_tok = self.w, len(tokens)
        positions = np.arange(n_tok, dtype=np.float64)
        x = w["token_embd.weight"][np.asarray(tokens)]  # (T, dim)
        group = self.n_heads // self.n_kv_heads
        mask = np.triu(np.full((n_tok, n_tok), -np.inf), 1)
        for layer in range(self.n_layers):
            p = f"blk.{layer}."
            h = self._rms(x, w[p + "attn_norm.weight"])
            q = (h @ w[p + "attn_q.weight"].T).reshape(n_tok, self.n_heads, self.head_dim)
            k = (h @ w[p + "attn_k.weight"].T).reshape(n_tok, self.n_kv_heads, self.head_dim)
            v = (h @ w[p + "attn_v.weight"].T).reshape(n_tok, self.n_kv_heads, self.head_dim)
            q, k = self._rope(q, positions), self._rope(k, positions)
            out = np.zeros((n_tok, self.n_heads, self.head_dim))
            for head in range(self.n_heads):
                kv = head // group
                scores = q[:, head] @ k[:, kv].T / np.sqrt(self.head_dim) + mask
                probs = np.exp(scores - scores.max(-1, keepdims=True))
                probs /= probs.sum(-1, keepdims=True)
                out[:, head] = probs @ v[:, kv]
            x = x + out.reshape(n_tok, -1) @ w[p + "attn_output.weight"].T
            h = self._rms(x, w[p + "ffn_norm.weight"])
            gate = h @ w[p + "ffn_gate.weight"].T
            up = h @ w[p + "ffn_up.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "ffn_down.weight"].T
            kept[layer] = x
        final = self._rms(x, w["output_norm.weight"])
        if layers is None:
            return final
        return final, np.stack([kept[layer] for layer in layers], axis=1)


def spm_encode(text: str, tokens: list, scores: list, add_space_prefix: bool) -> list:
    """llama.cpp's SPM encoding of `text` (no BOS, no special-token parsing)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    if add_space_prefix:
        text = " " + text
    text = text.replace(" ", "\u2581")
    symbols = list(text)  # one symbol per Unicode character
    alive = [True] * len(symbols)
    nxt = list(range(1, len(symbols) + 1))
    prv = list(range(-1, len(symbols) - 1))
    heap = []

    def push(left):
        right = nxt[left]
        if left < 0 or right >= len(symbols):
            return
        merged = symbols[left] + symbols[right]
        if merged in vocab:
            # best score first, then leftmost
            heapq.heappush(heap, (-scores[vocab[merged]], left, merged))

    for i in range(len(symbols) - 1):
        push(i)
    while heap:
        _score, left, merged = heapq.heappop(heap)
        right = nxt[left] if alive[left] else len(symbols)
        if not alive[left] or right >= len(symbols) or symbols[left] + symbols[right] != merged:
            continue  # stale entry
        symbols[left] = merged
        alive[right] = False
        nxt[left] = nxt[right]
        if nxt[right] < len(symbols):
            prv[nxt[right]] = left
        if prv[left] >= 0:
            push(prv[left])
        push(left)
    ids = []
    for i, sym in enumerate(symbols):
        if not alive[i]:
            continue
        if sym in vocab:
            ids.append(vocab[sym])
        else:
            ids.extend(vocab[f"<0x{b:02X}>"] for b in sym.encode("utf-8"))
    return ids
