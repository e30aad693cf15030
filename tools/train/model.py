"""Llama-architecture decoder in PyTorch, laid out exactly as llama.cpp's "llama" GGUF arch.

RMSNorm, rotary position embedding on ADJACENT pairs (x[2i], x[2i+1]) (llama.cpp's
"normal" RoPE mode, so Q/K weights need no permutation at export), grouped-query attention,
SwiGLU feed-forward, no biases, untied output matrix. torch.nn.Linear stores weights as
(out_features, in_features) row-major, which is exactly a GGUF tensor with dims
[in_features, out_features], so the exporter writes the weights as they are.
"""
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelConfig:
    n_vocab: int = 4096
    dim: int = 320
    n_layers: int = 6
    n_heads: int = 5
    n_kv_heads: int = 5
    ffn_dim: int = 864
    n_ctx: int = 1024
    rope_base: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)


# Presets: the target and a draft about 10x cheaper per token (same vocabulary).
PRESETS = {
    "target": ModelConfig(dim=256, n_layers=6, n_heads=4, n_kv_heads=4, ffn_dim=704),
    "draft": ModelConfig(dim=128, n_layers=1, n_heads=2, n_kv_heads=2, ffn_dim=384),
    # the second demo draft: "draft" plus one layer (two attention layers can copy spans,
    # which the target's repetitive greedy output rewards)
    "draft2": ModelConfig(dim=128, n_layers=2, n_heads=2, n_kv_heads=2, ffn_dim=384),
    "tiny": ModelConfig(dim=64, n_layers=2, n_heads=2, n_kv_heads=1, ffn_dim=160, n_ctx=128),
}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))  # (dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim: int, n_ctx: int, base: float):
    """cos, sin tables, each (n_ctx, head_dim/2): angle = pos * base^(-2i/head_dim)."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(n_ctx, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates adjacent pairs of x (B, T, H, hd) by position; cos/sin (T, hd/2)."""
    pairs = x.unflatten(-1, (-1, 2))  # (B, T, H, hd/2, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin, mask):
        batch, n_tokens, _ = x.shape
        q = self.wq(x).view(batch, n_tokens, self.n_heads, self.head_dim)
        k = self.wk(x).view(batch, n_tokens, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(batch, n_tokens, self.n_kv_heads, self.head_dim)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, hd)
        group = self.n_heads // self.n_kv_heads
        if group > 1:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))  # (B, H, T, T)
        probs = torch.softmax(scores + mask, dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(batch, n_tokens, -1)  # (B, T, H*hd)
        return self.wo(out)


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w_gate = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w_up = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w_down = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x):
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.ffn = FeedForward(cfg)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask)
        return x + self.ffn(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.dim % cfg.n_heads or cfg.n_heads % cfg.n_kv_heads or cfg.head_dim % 2:
            raise ValueError(f"inconsistent head layout: {cfg}")
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.n_vocab, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.n_vocab, bias=False)
        cos, sin = rope_tables(cfg.head_dim, cfg.n_ctx, cfg.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)  # (n_ctx, hd/2)
        self.register_buffer("rope_sin", sin, persistent=False)  # (n_ctx, hd/2)
        self._init_weights()

    def _init_weights(self):
        for name, param in self.named_parameters():
            if param.dim() == 2:
                std = 0.02
                if name.endswith("wo.weight") or name.endswith("w_down.weight"):
                    std = 0.02 / math.sqrt(2 * self.cfg.n_layers)
                nn.init.normal_(param, mean=0.0, std=std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) with T <= n_ctx at positions 0..T-1 -> logits (B, T, n_vocab)."""
        n_tokens = tokens.shape[1]
        if n_tokens > self.cfg.n_ctx:
            raise ValueError(f"{n_tokens} tokens exceed n_ctx {self.cfg.n_ctx}")
        cos, sin = self.rope_cos[:n_tokens], self.rope_sin[:n_tokens]
        mask = torch.full((n_tokens, n_tokens), float("-inf"), device=tokens.device).triu(1)
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output(self.norm(x))

    def n_params(self, non_embedding: bool = False) -> int:
        total = sum(p.numel() for p in self.parameters())
        return total - self.tok_embeddings.weight.numel() if non_embedding else total

    def flops_per_token(self) -> int:
        """Forward multiply-adds x2 per token at full context (weights + attention)."""
        cfg = self.cfg
        weights = self.n_params() - self.tok_embeddings.weight.numel()
        attention = 2 * cfg.n_layers * cfg.n_ctx * cfg.dim  # QK^T and PV over n_ctx keys
        return 2 * (weights + attention)
