#!/usr/bin/python3
"""Exports a checkpoint to GGUF v3 (llama.cpp "llama" architecture and tensor names).

Usage: /usr/bin/python3 tools/train/export_gguf.py --ckpt work/target/final.pt \
           --out work/export/target-f16.gguf [--type f16|q8_0]

Weights: 2-D matrices in F16 or Q8_0, norm vectors in F32. PyTorch Linear weights
(out, in) row-major are GGUF tensors with dims [in, out] as they are; RoPE is on adjacent
pairs in model.py, as llama.cpp's llama arch expects, so Q and K are not permuted.
Tokenizer: the SentencePiece model from train_tokenizer.py as a "llama" (SPM) vocabulary,
with the newline placeholder mapped back to "\n" and add_space_prefix = false.

load_gguf_model(path) is the inverse: a model.Transformer from a GGUF written here (e.g. the
committed models/demo-target.gguf as a distillation teacher), F16/Q8_0 weights as float32.
"""
import argparse
import os

import numpy as np
import sentencepiece as spm

import gguf_writer as gw
from common import BOS_ID, EOS_ID, UNK_ID, from_model_text, work_path

TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 5, 6


def tokenizer_tables(model_file: str):
    """(tokens, scores, token types) of the SentencePiece model, GGUF-ready."""
    sp = spm.SentencePieceProcessor(model_file=model_file)
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        if sp.is_unknown(i):
            kind = TOKEN_UNKNOWN
        elif sp.is_control(i):
            kind = TOKEN_CONTROL
        elif sp.is_byte(i):
            kind = TOKEN_BYTE
        elif sp.is_unused(i):
            kind = TOKEN_UNUSED
        else:
            kind = TOKEN_NORMAL
            piece = from_model_text(piece)
        tokens.append(piece)
        scores.append(sp.get_score(i))
        types.append(kind)
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"{model_file}: duplicate token texts after mapping the newline")
    return tokens, scores, types


def gguf_tensors(model):
    """(llama.cpp tensor name, parameter) of every weight of a model.Transformer, in file
    order; the same map serves the exporter and load_gguf_model."""
    out = [("token_embd.weight", model.tok_embeddings.weight)]
    for i, layer in enumerate(model.layers):
        out += [(f"blk.{i}.attn_norm.weight", layer.attn_norm.weight),
                (f"blk.{i}.attn_q.weight", layer.attn.wq.weight),
                (f"blk.{i}.attn_k.weight", layer.attn.wk.weight),
                (f"blk.{i}.attn_v.weight", layer.attn.wv.weight),
                (f"blk.{i}.attn_output.weight", layer.attn.wo.weight),
                (f"blk.{i}.ffn_norm.weight", layer.ffn_norm.weight),
                (f"blk.{i}.ffn_gate.weight", layer.ffn.w_gate.weight),
                (f"blk.{i}.ffn_up.weight", layer.ffn.w_up.weight),
                (f"blk.{i}.ffn_down.weight", layer.ffn.w_down.weight)]
    return out + [("output_norm.weight", model.norm.weight), ("output.weight", model.output.weight)]


def load_gguf_model(path: str):
    """A model.Transformer with the weights of a "llama" GGUF (as export_model writes them:
    no Q/K permutation, since both sides rotate adjacent pairs; F16/Q8_0 -> float32)."""
    import torch
    from model import ModelConfig, Transformer
    meta, tensors = gw.read_gguf(path)
    if meta.get("general.architecture") != "llama":
        raise ValueError(f"{path}: architecture {meta.get('general.architecture')}, expected llama")
    n_heads = meta["llama.attention.head_count"]
    cfg = ModelConfig(n_vocab=len(meta["tokenizer.ggml.tokens"]), dim=meta["llama.embedding_length"],
                      n_layers=meta["llama.block_count"], n_heads=n_heads,
                      n_kv_heads=meta.get("llama.attention.head_count_kv", n_heads),
                      ffn_dim=meta["llama.feed_forward_length"],
                      n_ctx=meta["llama.context_length"],
                      rope_base=meta.get("llama.rope.freq_base", 10000.0),
                      norm_eps=meta["llama.attention.layer_norm_rms_epsilon"])
    if meta.get("llama.rope.dimension_count", cfg.head_dim) != cfg.head_dim:
        raise ValueError(f"{path}: partial RoPE is not supported by model.py")
    model = Transformer(cfg)
    params = gguf_tensors(model)
    if sorted(tensors) != sorted(name for name, _ in params):
        raise ValueError(f"{path}: tensors {sorted(set(tensors) ^ {n for n, _ in params})} "
                         "differ from model.py's")
    with torch.no_grad():
        for name, param in params:
            if tuple(tensors[name].shape) != tuple(param.shape):
                raise ValueError(f"{path}: {name} has shape {tensors[name].shape}, "
                                 f"expected {tuple(param.shape)}")
            param.copy_(torch.from_numpy(np.array(tensors[name])))
    return model


def export_model(model, path: str, weight_type: str = "f16", name: str = "specdec",
                 tokenizer_file: str = None) -> None:
    """Writes `model` (model.Transformer) with the project tokenizer to `path`."""
    cfg = model.cfg
    tokenizer_file = tokenizer_file or work_path("tokenizer", "spm.model")
    tokens, scores, types = tokenizer_tables(tokenizer_file)
    if len(tokens) != cfg.n_vocab:
        raise ValueError(f"tokenizer has {len(tokens)} tokens, model n_vocab {cfg.n_vocab}")
    matrix_type = {"f16": gw.GGML_F16, "q8_0": gw.GGML_Q8_0}[weight_type]

    w = gw.GgufWriter()
    w.add("general.architecture", gw.T_STRING, "llama")
    w.add("general.name", gw.T_STRING, name)
    w.add("general.file_type", gw.T_UINT32, {"f16": 1, "q8_0": 7}[weight_type])
    w.add("general.alignment", gw.T_UINT32, gw.ALIGNMENT)
    w.add("llama.vocab_size", gw.T_UINT32, cfg.n_vocab)
    w.add("llama.context_length", gw.T_UINT32, cfg.n_ctx)
    w.add("llama.embedding_length", gw.T_UINT32, cfg.dim)
    w.add("llama.block_count", gw.T_UINT32, cfg.n_layers)
    w.add("llama.feed_forward_length", gw.T_UINT32, cfg.ffn_dim)
    w.add("llama.attention.head_count", gw.T_UINT32, cfg.n_heads)
    w.add("llama.attention.head_count_kv", gw.T_UINT32, cfg.n_kv_heads)
    w.add("llama.rope.dimension_count", gw.T_UINT32, cfg.head_dim)
    w.add("llama.rope.freq_base", gw.T_FLOAT32, cfg.rope_base)
    w.add("llama.attention.layer_norm_rms_epsilon", gw.T_FLOAT32, cfg.norm_eps)
    w.add("tokenizer.ggml.model", gw.T_STRING, "llama")
    w.add("tokenizer.ggml.tokens", gw.T_ARRAY, tokens, gw.T_STRING)
    w.add("tokenizer.ggml.scores", gw.T_ARRAY, scores, gw.T_FLOAT32)
    w.add("tokenizer.ggml.token_type", gw.T_ARRAY, types, gw.T_INT32)
    w.add("tokenizer.ggml.bos_token_id", gw.T_UINT32, BOS_ID)
    w.add("tokenizer.ggml.eos_token_id", gw.T_UINT32, EOS_ID)
    w.add("tokenizer.ggml.unknown_token_id", gw.T_UINT32, UNK_ID)
    w.add("tokenizer.ggml.add_bos_token", gw.T_BOOL, True)
    w.add("tokenizer.ggml.add_eos_token", gw.T_BOOL, False)
    w.add("tokenizer.ggml.add_space_prefix", gw.T_BOOL, False)

    for gguf_name, param in gguf_tensors(model):
        array = param.detach().float().cpu().numpy()
        w.add_tensor(gguf_name, array, matrix_type if param.dim() == 2 else gw.GGML_F32)

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    w.write(tmp)
    os.replace(tmp, path)


def main() -> None:
    from train import load_model  # torch-heavy import only for the CLI
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--ckpt", required=True, help="final.pt or ckpt.pt")
    parser.add_argument("--out", required=True)
    parser.add_argument("--type", choices=("f16", "q8_0"), default="f16")
    parser.add_argument("--name", default=None, help="general.name (default: file stem)")
    args = parser.parse_args()
    model = load_model(args.ckpt)
    name = args.name or os.path.splitext(os.path.basename(args.out))[0]
    export_model(model, args.out, args.type, name=name)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes, {model.n_params()} params)")


if __name__ == "__main__":
    main()
