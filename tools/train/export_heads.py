#!/usr/bin/python3
"""Exports train_heads.py checkpoints to the heads GGUF layouts of docs/HEADS.md.

Usage: /usr/bin/python3 tools/train/export_heads.py --heads work/heads/medusa/final.pt \
           --target-gguf work/export/target-f16.gguf --out work/heads/medusa.gguf [--type f32|f16]

The file names its target by specdec.target.fingerprint, computed here from the TARGET GGUF
(its tokenizer.ggml.tokens and hyperparameters, see target_fingerprint). The fingerprint does
not cover weights: heads trained on another checkpoint of the same preset load without error,
so export from the checkpoint the GGUF was made from (general.name records the target step).
Matrices are F32 (default; medusa ~1 MB, eagle ~3.8 MB for the demo target) or F16; biases
and norm weights are always F32.

EAGLE, --draft-vocab N: writes eagle.draft_vocab, the N most frequent token ids of
--draft-vocab-tokens (default: work/data/teacher_gen.bin, the target's own sampled text, since
the layer drafts what the target writes; ties: lower id), so each drafted level scores N rows
of the output head instead of all (docs/HEADS.md "A reduced draft vocabulary"). Prints the
share of those tokens the subset covers.
"""
import argparse
import os
import struct


import gguf_writer as gw

FNV_OFFSET, FNV_PRIME, MASK64 = 0xcbf29ce484222325, 0x100000001b3, (1 << 64) - 1


def fnv1a64(data: bytes, state: int = FNV_OFFSET) -> int:
    """FNV-1a 64-bit of data, continuing from state."""
    for byte in data:
        state = ((state ^ byte) * FNV_PRIME) & MASK64
    return state


def read_metadata_raw(path: str) -> dict:
    """GGUF metadata only, strings as raw bytes (no decoding: the hash is over stored bytes)."""
    return read_header_raw(path)[0]


def read_header_raw(path: str):
    """(metadata with raw-bytes strings, {tensor name: (dims innermost first, ggml type)})."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        value = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return value

    def string():
        nonlocal pos
        n = take("<Q")
        pos += n
        return bytes(data[pos - n:pos])

    def value(vtype):
        if vtype == gw.T_STRING:
            return string()
        if vtype == gw.T_ARRAY:
            etype, count = take("<I"), take("<Q")
            return [value(etype) for _ in range(count)]
        return take(gw._SCALAR_FORMATS[vtype])

    if data[:4] != gw.GGUF_MAGIC:
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    take("<I")  # version
    n_tensors, n_kv = take("<Q"), take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = string().decode("utf-8")
        meta[key] = value(take("<I"))
    infos = {}
    for _ in range(n_tensors):
        name = string().decode("utf-8")
        dims = [take("<Q") for _ in range(take("<I"))]
        infos[name] = (dims, take("<I"))
        take("<Q")  # data offset
    return meta, infos


def fingerprint_of(tokens: list, n_embd: int, n_layers: int, n_heads: int, n_kv_heads: int,
                   n_ff: int) -> str:
    """docs/HEADS.md: FNV-1a 64 over each token's bytes + 0x00, then the shape text."""
    state = FNV_OFFSET
    for token in tokens:
        state = fnv1a64(token + b"\0", state)
    text = (f"n_vocab={len(tokens)},n_embd={n_embd},n_layers={n_layers},n_heads={n_heads},"
            f"n_kv_heads={n_kv_heads},n_ff={n_ff}")
    return f"{fnv1a64(text.encode('ascii'), state):016x}"


def target_fingerprint(path: str) -> str:
    """specdec.target.fingerprint of the target GGUF at path."""
    meta = read_metadata_raw(path)
    arch = meta["general.architecture"].decode("utf-8")
    n_heads = meta[f"{arch}.attention.head_count"]
    return fingerprint_of(meta["tokenizer.ggml.tokens"], meta[f"{arch}.embedding_length"],
                          meta[f"{arch}.block_count"], n_heads,
                          meta.get(f"{arch}.attention.head_count_kv", n_heads),
                          meta[f"{arch}.feed_forward_length"])


def export_heads(kind: str, tensors: dict, config: dict, fingerprint: str, path: str,
                 weight_type: str = "f32", name: str = "specdec-heads",
                 tree_choices: str = "", draft_vocab=None) -> None:
    """tensors: {gguf name: float32 numpy array (numpy order)}; config: the head config."""
    matrix_type = {"f32": gw.GGML_F32, "f16": gw.GGML_F16}[weight_type]
    w = gw.GgufWriter()
    w.add("general.architecture", gw.T_STRING, kind)
    w.add("general.name", gw.T_STRING, name)
    w.add("general.alignment", gw.T_UINT32, gw.ALIGNMENT)
    if kind == "medusa":
        w.add("medusa.head_count", gw.T_UINT32, config["n_heads"])
        w.add("medusa.block_count", gw.T_UINT32, config["n_blocks"])
        w.add("medusa.embedding_length", gw.T_UINT32, config["n_embd"])
        if tree_choices:  # tune_medusa_tree.py: "0;0,0;1;..."
            w.add("medusa.tree_choices", gw.T_STRING, tree_choices)
    else:
        w.add("eagle.embedding_length", gw.T_UINT32, config["dim"])
        w.add("eagle.feed_forward_length", gw.T_UINT32, config["ffn_dim"])
        w.add("eagle.attention.head_count", gw.T_UINT32, config["n_heads"])
        w.add("eagle.attention.head_count_kv", gw.T_UINT32, config["n_kv_heads"])
        w.add("eagle.attention.layer_norm_rms_epsilon", gw.T_FLOAT32, config["norm_eps"])
        w.add("eagle.rope.freq_base", gw.T_FLOAT32, config["rope_base"])
        w.add("eagle.context_length", gw.T_UINT32, config["n_ctx"])
        w.add("eagle.block_count", gw.T_UINT32, 1)
        if config.get("fuse_layers"):  # EAGLE-3 style fusion (docs/HEADS.md)
            w.add("eagle.fuse_layers", gw.T_ARRAY, config["fuse_layers"], gw.T_UINT32)
        if draft_vocab is not None:  # ascending token ids (docs/HEADS.md)
            w.add("eagle.draft_vocab", gw.T_ARRAY, [int(t) for t in draft_vocab], gw.T_INT32)
    w.add("specdec.target.fingerprint", gw.T_STRING, fingerprint)
    for tensor_name, array in tensors.items():
        w.add_tensor(tensor_name, array, matrix_type if array.ndim == 2 else gw.GGML_F32)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    w.write(tmp)
    os.replace(tmp, path)


def gguf_tensors(kind: str, heads) -> dict:
    """{gguf name: numpy float32} of a heads_model module (Linear weights are (out, in),
    i.e. GGUF [in, out] as they are)."""
    def arr(param):
        return param.detach().float().cpu().numpy()
    out = {}
    if kind == "medusa":
        for k, head in enumerate(heads.blocks):
            for j, lin in enumerate(head):
                out[f"medusa.{k}.blk.{j}.weight"] = arr(lin.weight)
                out[f"medusa.{k}.blk.{j}.bias"] = arr(lin.bias)
        return out
    block = heads.block
    if heads.fuse_layers:  # (n_embd, (k + 1) n_embd): GGUF [(k + 1) n_embd, n_embd]
        out["eagle.fuse.weight"] = arr(heads.fuse.weight)
    out["eagle.fc.weight"] = arr(heads.fc.weight)  # (n_embd, 2 n_embd): GGUF [2 n_embd, n_embd]
    out["eagle.fc.bias"] = arr(heads.fc.bias)
    out["blk.0.attn_norm.weight"] = arr(block.attn_norm.weight)
    out["blk.0.attn_q.weight"] = arr(block.attn.wq.weight)
    out["blk.0.attn_k.weight"] = arr(block.attn.wk.weight)
    out["blk.0.attn_v.weight"] = arr(block.attn.wv.weight)
    out["blk.0.attn_output.weight"] = arr(block.attn.wo.weight)
    out["blk.0.ffn_norm.weight"] = arr(block.ffn_norm.weight)
    out["blk.0.ffn_gate.weight"] = arr(block.ffn.w_gate.weight)
    out["blk.0.ffn_up.weight"] = arr(block.ffn.w_up.weight)
    out["blk.0.ffn_down.weight"] = arr(block.ffn.w_down.weight)
    return out


def most_frequent_tokens(token_files: list, n: int, n_vocab: int):
    """(ascending ids of the n most frequent tokens, the share of all tokens they cover)."""
    import numpy as np
    counts = np.zeros(n_vocab, dtype=np.int64)
    for path in token_files:
        counts += np.bincount(np.memmap(path, dtype=np.uint16, mode="r"), minlength=n_vocab)[:n_vocab]
    order = sorted(range(n_vocab), key=lambda t: (-int(counts[t]), t))[:n]
    return sorted(order), float(counts[order].sum()) / max(1, int(counts.sum()))


def export_checkpoint(heads_path: str, target_gguf: str, out: str, weight_type: str = "f32",
                      tree_choices: str = "", draft_vocab=None):
    from heads_model import load_heads  # torch only for the CLI path
    kind, heads, state = load_heads(heads_path)
    meta = read_metadata_raw(target_gguf)
    name = meta.get("general.name", b"target").decode("utf-8", errors="replace")
    n_embd = meta[f"{meta['general.architecture'].decode()}.embedding_length"]
    dim = state["config"]["n_embd"] if kind == "medusa" else state["config"]["dim"]
    if dim != n_embd:
        raise ValueError(f"{heads_path}: heads of width {dim}, target {target_gguf} has {n_embd}")
    export_heads(kind, gguf_tensors(kind, heads), state["config"], target_fingerprint(target_gguf),
                 out, weight_type, name=f"{kind} heads (step {state['step']}) for {name}",
                 tree_choices=tree_choices if kind == "medusa" else "",
                 draft_vocab=draft_vocab if kind == "eagle" else None)
    return kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--heads", required=True, help="train_heads.py final.pt / ckpt.pt")
    parser.add_argument("--target-gguf", required=True, help="the target these heads belong to")
    parser.add_argument("--out", required=True)
    parser.add_argument("--type", choices=("f32", "f16"), default="f32")
    parser.add_argument("--tree-choices", default="", help="medusa: the tuned tree, or @FILE "
                        "(tune_medusa_tree.py's output)")
    parser.add_argument("--draft-vocab", type=int, default=0,
                        help="eagle: draft only the N most frequent tokens (0: the whole vocabulary)")
    parser.add_argument("--draft-vocab-tokens", default=os.path.join(os.environ.get("SPECDEC_TRAIN_WORK") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "work"),
                                             "data", "teacher_gen.bin"),
                        help="comma-separated uint16 token files counted for --draft-vocab")
    args = parser.parse_args()
    tree = args.tree_choices
    if tree.startswith("@"):
        with open(tree[1:], encoding="utf-8") as f:
            tree = f.read().strip()
    draft_vocab = None
    if args.draft_vocab > 0:
        n_vocab = len(read_metadata_raw(args.target_gguf)["tokenizer.ggml.tokens"])
        if args.draft_vocab > n_vocab:
            raise ValueError(f"--draft-vocab {args.draft_vocab} exceeds the target's vocabulary of {n_vocab}")
        draft_vocab, covered = most_frequent_tokens(args.draft_vocab_tokens.split(","), args.draft_vocab, n_vocab)
        print(f"draft vocabulary: {len(draft_vocab)} of {n_vocab} tokens, covering {covered:.4f} of "
              f"{args.draft_vocab_tokens}")
    kind = export_checkpoint(args.heads, args.target_gguf, args.out, args.type, tree, draft_vocab)
    print(f"wrote {args.out} ({kind}, {os.path.getsize(args.out)} bytes, fingerprint "
          f"{target_fingerprint(args.target_gguf)})")


if __name__ == "__main__":
    main()
