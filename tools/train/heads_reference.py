"""Independent numpy (float64) forward passes of Medusa heads and the EAGLE layer, read from
their GGUF (docs/HEADS.md) and the target GGUF alone: no PyTorch, no heads_model.py.

HeadsReference(heads_gguf, target_gguf) checks specdec.target.fingerprint against the target
file (a mismatch is an error naming both), then
  medusa_hidden(f) (K, T, d): h = f; h = h + SiLU(W h + b) per block; logits = h @ Output^T
  eagle(next_tokens, f) (T, d): g_t = Block(fc([E[x_{t+1}], f_t]); position t), causal over
    the T rows (the teacher-forced form of the layer's KV cache)
  eagle_slot(f, residual) (T, d): the feature slot of verified rows: f, or with
    eagle.fuse_layers fuse([r^{l_1}, .., r^{l_k}, f]) (residual (T, k, d))
  features(tokens) (T, d): the target's post-norm hidden states (gguf_reference.LlamaReference)
Slow; meant for checks over a few hundred tokens.
"""
import numpy as np

from export_heads import target_fingerprint
from gguf_reference import LlamaReference
from gguf_writer import read_gguf


def _rms(x, weight, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * weight


def _rope(x, positions, base):
    """x (T, H, hd): rotate adjacent pairs (2i, 2i+1) by angle pos * base^(-2i/hd)."""
    head_dim = x.shape[-1]
    theta = positions[:, None] * base ** (-2.0 * np.arange(head_dim // 2) / head_dim)
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    out = np.empty_like(x)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


class HeadsReference:
    def __init__(self, heads_path: str, target_path: str):
        self.meta, tensors = read_gguf(heads_path)
        self.kind = self.meta["general.architecture"]
        if self.kind not in ("medusa", "eagle"):
            raise ValueError(f"{heads_path}: architecture {self.kind}, expected medusa or eagle")
        want = self.meta.get("specdec.target.fingerprint")
        have = target_fingerprint(target_path)
        if want != have:
            raise ValueError(f"{heads_path} belongs to target fingerprint {want}, but "
                             f"{target_path} has fingerprint {have}")
        self.target = LlamaReference(target_path)
        self.w = {k: v.astype(np.float64) for k, v in tensors.items()}
        self.output = self.target.output_matrix()  # (n_vocab, d)
        self.embedding = self.target.w["token_embd.weight"]  # (n_vocab, d)

    def features(self, tokens, layers=None):
        return self.target.features(tokens, layers)

    def medusa_hidden(self, features: np.ndarray) -> np.ndarray:
        """features (T, d) -> (K, T, d)."""
        m = self.meta
        out = []
        for k in range(m["medusa.head_count"]):
            h = features
            for j in range(m["medusa.block_count"]):
                pre = h @ self.w[f"medusa.{k}.blk.{j}.weight"].T + self.w[f"medusa.{k}.blk.{j}.bias"]
                h = h + pre / (1 + np.exp(-pre))
            out.append(h)
        return np.stack(out)

    def fuse_layers(self) -> list:
        return list(self.meta.get("eagle.fuse_layers", []))

    def eagle_slot(self, features: np.ndarray, residual=None) -> np.ndarray:
        if not self.fuse_layers():
            return features
        joined = np.concatenate((residual.reshape(len(features), -1), features), axis=1)
        return joined @ self.w["eagle.fuse.weight"].T

    def eagle(self, next_tokens, features: np.ndarray) -> np.ndarray:
        """next_tokens x_{t+1} (T,), features f_t (T, d) at positions 0..T-1 -> g (T, d)."""
        m, w = self.meta, self.w
        n_tok = len(next_tokens)
        eps = m["eagle.attention.layer_norm_rms_epsilon"]
        n_heads = m["eagle.attention.head_count"]
        n_kv = m["eagle.attention.head_count_kv"]
        head_dim = m["eagle.embedding_length"] // n_heads
        base = m["eagle.rope.freq_base"]
        u = np.concatenate((self.embedding[np.asarray(next_tokens)], features), axis=1)
        x = u @ w["eagle.fc.weight"].T + w["eagle.fc.bias"]  # (T, d)
        positions = np.arange(n_tok, dtype=np.float64)
        h = _rms(x, w["blk.0.attn_norm.weight"], eps)
        q = _rope((h @ w["blk.0.attn_q.weight"].T).reshape(n_tok, n_heads, head_dim), positions, base)
        k = _rope((h @ w["blk.0.attn_k.weight"].T).reshape(n_tok, n_kv, head_dim), positions, base)
        v = (h @ w["blk.0.attn_v.weight"].T).reshape(n_tok, n_kv, head_dim)
        mask = np.triu(np.full((n_tok, n_tok), -np.inf), 1)
        att = np.zeros((n_tok, n_heads, head_dim))
        for head in range(n_heads):
            kv = head // (n_heads // n_kv)
            scores = q[:, head] @ k[:, kv].T / np.sqrt(head_dim) + mask
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            att[:, head] = (probs / probs.sum(-1, keepdims=True)) @ v[:, kv]
        x = x + att.reshape(n_tok, -1) @ w["blk.0.attn_output.weight"].T
        h = _rms(x, w["blk.0.ffn_norm.weight"], eps)
        gate = h @ w["blk.0.ffn_gate.weight"].T
        up = h @ w["blk.0.ffn_up.weight"].T
        return x + (gate / (1 + np.exp(-gate)) * up) @ w["blk.0.ffn_down.weight"].T
