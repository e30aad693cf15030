"""PyTorch modules of the self-speculation heads (docs/HEADS.md) and the target's features.

feature f_t (n_embd): the target's final hidden state at the row of token x_t AFTER the output
RMSNorm, i.e. the vector `target.output` multiplies to give the logits of x_{t+1}.
Output(h) = h @ output.weight^T (the target's head, frozen, shared by every head kind).

MedusaHeads (Medusa-1, frozen target): K heads, head k predicts x_{t+k+2} from f_t;
  h = f_t; per block j: h = h + SiLU(W_kj h + b_kj); logits_k = Output(h).
  W and b start at zero, so every head starts as the target's own next-token head.
EagleLayer (EAGLE-1 style): u_t = fc(concat(E[x_{t+1}], f_t)), g_t = Block(u_t; position t),
  g_t approximates f_{t+1}; Output(g_t) is the draft distribution of x_{t+2}. Block is
  model.Block (a standard Llama decoder layer, RoPE on adjacent pairs, no final norm).
  With fuse_layers (EAGLE-3 style fusion) the feature slot of a row whose token the target
  has verified holds fuse(concat(r^{l_1}_t, .., r^{l_k}_t, f_t)) instead of f_t, r^l the
  target's residual stream after block l; drafted rows still feed back g. The fuse matrix
  starts as [0 .. 0 I], i.e. exactly the unfused layer.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from model import Block, ModelConfig, Transformer, rope_tables


def causal_mask(n_tokens: int, device) -> torch.Tensor:
    """(n_tokens, n_tokens): 0 on and below the diagonal, -inf above."""
    return torch.full((n_tokens, n_tokens), float("-inf"), device=device).triu(1)


@torch.no_grad()
def target_features(target: Transformer, tokens: torch.Tensor) -> torch.Tensor:
    """tokens (B, T) at positions 0..T-1 -> features (B, T, n_embd) (post output norm).
    target.output(features) equals target(tokens) exactly (same operations in the same order)."""
    n_tokens = tokens.shape[1]
    cos, sin = target.rope_cos[:n_tokens], target.rope_sin[:n_tokens]
    mask = causal_mask(n_tokens, tokens.device)
    x = target.tok_embeddings(tokens)  # (B, T, n_embd)
    for layer in target.layers:
        x = layer(x, cos, sin, mask)
    return target.norm(x)


@torch.no_grad()
def target_features_and_layers(target: Transformer, tokens: torch.Tensor, layers):
    """-> (features (B, T, n_embd) as target_features, residual (B, T, len(layers), n_embd)):
    the residual stream after each listed block (0-based, before any norm), what specdec's
    Features::layers returns (EAGLE-3 style fusion)."""
    n_tokens = tokens.shape[1]
    cos, sin = target.rope_cos[:n_tokens], target.rope_sin[:n_tokens]
    mask = causal_mask(n_tokens, tokens.device)
    x = target.tok_embeddings(tokens)  # (B, T, n_embd)
    kept = {}
    for index, layer in enumerate(target.layers):
        x = layer(x, cos, sin, mask)
        if index in layers:
            kept[index] = x
    return target.norm(x), torch.stack([kept[index] for index in layers], dim=2)


def freeze(module: nn.Module) -> nn.Module:
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


class MedusaHeads(nn.Module):
    def __init__(self, n_embd: int, n_heads: int = 4, n_blocks: int = 1):
        super().__init__()
        self.n_embd, self.n_heads, self.n_blocks = n_embd, n_heads, n_blocks
        # blocks[k][j]: Linear (out = n_embd, in = n_embd) with bias; zero init (see module doc)
        self.blocks = nn.ModuleList(
            nn.ModuleList(nn.Linear(n_embd, n_embd, bias=True) for _ in range(n_blocks))
            for _ in range(n_heads))
        for head in self.blocks:
            for lin in head:
                nn.init.zeros_(lin.weight)
                nn.init.zeros_(lin.bias)

    def config(self) -> dict:
        return {"n_embd": self.n_embd, "n_heads": self.n_heads, "n_blocks": self.n_blocks}

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """features (..., n_embd) -> hidden states (K, ..., n_embd) to multiply by Output."""
        out = []
        for head in self.blocks:
            h = features
            for lin in head:
                h = h + F.silu(lin(h))
            out.append(h)
        return torch.stack(out)


def eagle_config(target_cfg: ModelConfig, ffn_dim: int = 0, n_heads: int = 0,
                 n_kv_heads: int = 0) -> ModelConfig:
    """The draft layer's shape: by default the same as one target layer (EAGLE's choice)."""
    return ModelConfig(n_vocab=target_cfg.n_vocab, dim=target_cfg.dim, n_layers=1,
                       n_heads=n_heads or target_cfg.n_heads,
                       n_kv_heads=n_kv_heads or target_cfg.n_kv_heads,
                       ffn_dim=ffn_dim or target_cfg.ffn_dim, n_ctx=target_cfg.n_ctx,
                       rope_base=target_cfg.rope_base, norm_eps=target_cfg.norm_eps)


class EagleLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, fuse_layers=()):
        super().__init__()
        if cfg.dim % cfg.n_heads or cfg.n_heads % cfg.n_kv_heads or cfg.head_dim % 2:
            raise ValueError(f"inconsistent head layout: {cfg}")
        self.cfg = cfg
        self.fuse_layers = [int(v) for v in fuse_layers]
        if len(set(self.fuse_layers)) != len(self.fuse_layers) or \
                any(v < 0 for v in self.fuse_layers):
            raise ValueError(f"fuse_layers {fuse_layers}: distinct block indices expected")
        if self.fuse_layers:  # in: [r^{l_1}_t, .., r^{l_k}_t, f_t]; starts as [0 .. 0 I]
            k = len(self.fuse_layers)
            self.fuse = nn.Linear((k + 1) * cfg.dim, cfg.dim, bias=False)
            with torch.no_grad():
                self.fuse.weight.zero_()
                self.fuse.weight[:, k * cfg.dim:] = torch.eye(cfg.dim)
        self.fc = nn.Linear(2 * cfg.dim, cfg.dim, bias=True)  # in: [E[x_{t+1}], f_t]
        self.block = Block(cfg)
        for name, param in self.block.named_parameters():
            if param.dim() == 2:
                std = 0.02 / math.sqrt(2) if name.endswith(("wo.weight", "w_down.weight")) else 0.02
                nn.init.normal_(param, mean=0.0, std=std)
        cos, sin = rope_tables(cfg.head_dim, cfg.n_ctx, cfg.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)  # (n_ctx, hd/2)
        self.register_buffer("rope_sin", sin, persistent=False)  # (n_ctx, hd/2)

    def fused(self, features: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """features f_t (B, T, d), residual (B, T, k, d) of self.fuse_layers -> the feature
        slot of verified rows (B, T, d); f_t itself without fusion."""
        if not self.fuse_layers:
            return features
        return self.fuse(torch.cat((residual.flatten(-2), features), dim=-1))

    def forward(self, next_embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """next_embeddings E[x_{t+1}] (B, T, d), features f_t (B, T, d), rows at positions
        0..T-1 -> g (B, T, d), g_t approximating f_{t+1} (causal over the T rows)."""
        n_tokens = features.shape[1]
        if n_tokens > self.cfg.n_ctx:
            raise ValueError(f"{n_tokens} rows exceed n_ctx {self.cfg.n_ctx}")
        u = self.fc(torch.cat((next_embeddings, features), dim=-1))  # (B, T, d)
        return self.block(u, self.rope_cos[:n_tokens], self.rope_sin[:n_tokens],
                          causal_mask(n_tokens, u.device))


def build_heads(kind: str, config: dict) -> nn.Module:
    """A head module from the 'config' dict stored in its checkpoint."""
    if kind == "medusa":
        return MedusaHeads(**config)
    if kind == "eagle":
        config = dict(config)
        fuse_layers = config.pop("fuse_layers", ())
        return EagleLayer(ModelConfig(**config), fuse_layers)
    raise ValueError(f"unknown head kind {kind!r}")


def heads_config(kind: str, heads: nn.Module) -> dict:
    if kind == "medusa":
        return heads.config()
    config = heads.cfg.to_dict()
    if heads.fuse_layers:  # only when used: unfused checkpoints keep their config
        config["fuse_layers"] = list(heads.fuse_layers)
    return config


def load_heads(path: str):
    """(kind, module, checkpoint dict) from a train_heads.py ckpt.pt / final.pt."""
    state = torch.load(path, map_location="cpu")
    heads = build_heads(state["kind"], state["config"])
    heads.load_state_dict(state["model"])
    return state["kind"], heads, state
