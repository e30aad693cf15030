#!/usr/bin/env python3
"""Seed corpora for the fuzz targets.

  make_seeds.py handmade OUT_DIR          hand-made edge cases (committed under fuzz/seeds/<target>/)
  make_seeds.py fixtures FIXTURES OUT_DIR seeds derived from ../shared/fixtures at run time
                                          (never committed: the fixtures stay in ../shared)

OUT_DIR receives one folder per target: fuzz_gguf, fuzz_llama2c, fuzz_tokenizer,
fuzz_chat_template, fuzz_request.
Input layouts are described at the top of each fuzz/fuzz_*.cpp.
"""
import os
import struct
import sys

# ---------------------------------------------------------------- GGUF building
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gvalue(t, v):
    if t == STRING:
        return gstr(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gvalue(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf(kvs, tensors=(), version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, dims, ggml_type, data_bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t) + gvalue(t, v)
    offset, blobs = 0, []
    for name, dims, gtype, data in tensors:
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gtype, offset)
        blobs.append((offset, data))
        offset += (len(data) + alignment - 1) // alignment * alignment
    if tensors:
        out += b"\0" * (-len(out) % alignment)
        for _, data in blobs:
            out += data + b"\0" * (-len(data) % alignment)
    return out


def f32s(values):
    return b"".join(struct.pack("<f", x) for x in values)


def tiny_llama_kvs(tokens, types, scores, extra=()):
    return [
        ("general.architecture", STRING, "llama"),
        ("llama.context_length", U32, 16),
        ("llama.embedding_length", U32, 8),
        ("llama.block_count", U32, 1),
        ("llama.feed_forward_length", U32, 16),
        ("llama.attention.head_count", U32, 2),
        ("llama.attention.head_count_kv", U32, 1),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("llama.rope.dimension_count", U32, 4),
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.scores", ARRAY, (F32, scores)),
        ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
    ] + list(extra)


def tiny_llama_tensors(n_vocab):
    dim, ff, kv = 8, 16, 4
    t = [("token_embd.weight", [dim, n_vocab], 0, f32s([0.01 * i for i in range(dim * n_vocab)])),
         ("output_norm.weight", [dim], 0, f32s([1.0] * dim)),
         ("blk.0.attn_norm.weight", [dim], 0, f32s([1.0] * dim)),
         ("blk.0.attn_q.weight", [dim, dim], 0, f32s([0.1] * dim * dim)),
         ("blk.0.attn_k.weight", [dim, kv], 0, f32s([0.1] * dim * kv)),
         ("blk.0.attn_v.weight", [dim, kv], 0, f32s([0.1] * dim * kv)),
         ("blk.0.attn_output.weight", [dim, dim], 0, f32s([0.1] * dim * dim)),
         ("blk.0.ffn_norm.weight", [dim], 0, f32s([1.0] * dim)),
         ("blk.0.ffn_gate.weight", [dim, ff], 0, f32s([0.1] * dim * ff)),
         ("blk.0.ffn_up.weight", [dim, ff], 0, f32s([0.1] * dim * ff)),
         ("blk.0.ffn_down.weight", [ff, dim], 0, f32s([0.1] * dim * ff))]
    return t


def spm_vocab():
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    tokens += ["\u2581", "\u2581a", "a", "b", "\u2581the", "he", "t", "\u2581t", "é", "日本"]
    types = [2, 3, 3] + [6] * 256 + [1] * 10
    scores = [0.0] * 259 + [-1.0 * i for i in range(10)]
    return tokens, types, scores


def byte_level_chars():
    """GPT-2's byte -> printable character table (in byte order)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


def bpe_kvs(pre):
    chars = byte_level_chars()
    tokens = chars + ["Ġt", "he", "Ġthe", "in", "<|endoftext|>", "<|im_end|>"]
    types = [1] * (len(tokens) - 2) + [3, 3]
    merges = ["Ġ t", "h e", "Ġt he", "i n"]
    return [
        ("general.architecture", STRING, "gpt2"),
        ("tokenizer.ggml.model", STRING, "gpt2"),
        ("tokenizer.ggml.pre", STRING, pre),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
        ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
        ("tokenizer.ggml.bos_token_id", U32, len(tokens) - 2),
        ("tokenizer.ggml.eos_token_id", U32, len(tokens) - 2),
    ]


def handmade_gguf():
    seeds = {}
    seeds["empty-v3"] = gguf([])
    seeds["empty-v2"] = gguf([], version=2)
    seeds["scalars"] = gguf([(f"k{t}", t, v) for t, v in
                             [(U8, 7), (I8, -7), (U16, 700), (I16, -700), (U32, 70000), (I32, -70000),
                              (F32, 1.5), (BOOL, True), (U64, 1 << 40), (I64, -(1 << 40)), (F64, 2.5)]]
                            + [("s", STRING, "h\u00e9llo\n\"q\"")])
    seeds["nested-arrays"] = gguf([("a", ARRAY, (ARRAY, [(I32, [1, 2]), (I32, []), (I32, [3])])),
                                   ("b", ARRAY, (STRING, ["x", "", "yz"]))])
    seeds["align64"] = gguf([("general.alignment", U32, 64)],
                            [("t", [4, 2], 0, f32s(range(8))), ("u", [3], 0, f32s([1, 2, 3]))], alignment=64)
    # one block of each of a few quantized types (block sizes 32 and 256)
    seeds["quant-blocks"] = gguf([], [("q4_0", [32], 2, bytes(18)), ("q8_0", [32, 2], 8, bytes(68)),
                                      ("q4_k", [256], 12, bytes(144)), ("f16", [5], 1, bytes(10))])
    tokens, types, scores = spm_vocab()
    seeds["tiny-llama-spm"] = gguf(tiny_llama_kvs(tokens, types, scores), tiny_llama_tensors(len(tokens)))
    seeds["tiny-llama-spm-nometa"] = gguf(tiny_llama_kvs(tokens, types, scores,
                                                         [("tokenizer.ggml.add_bos_token", BOOL, False),
                                                          ("tokenizer.ggml.add_space_prefix", BOOL, False)]))
    for pre in ("gpt2", "llama-bpe", "deepseek-coder", "falcon", "qwen2"):
        seeds["bpe-" + pre] = gguf(bpe_kvs(pre))
    return seeds


# ---------------------------------------------------------------- llama2.c
def llama2c_model(dim=2, hidden=1, layers=1, heads=1, kv_heads=1, vocab=3, seq_len=1, shared=True):
    head = dim // heads
    kv_dim = dim // heads * kv_heads
    n = vocab * dim + layers * dim + layers * dim * dim * 2 + layers * kv_dim * dim * 2
    n += layers * dim + layers * hidden * dim * 3 + dim + seq_len * head
    if not shared:
        n += vocab * dim
    header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab, seq_len)
    return header + f32s([0.25 * ((i % 7) - 3) for i in range(n)])


def llama2c_tokenizer(pieces, max_len=None):
    out = struct.pack("<i", max_len if max_len is not None else max(len(p) for p in pieces))
    for i, p in enumerate(pieces):
        b = p.encode() if isinstance(p, str) else p
        out += struct.pack("<fi", -float(i), len(b)) + b
    return out


def convert_input(model, tok, context_choice=0):
    return bytes([2, context_choice]) + struct.pack("<I", len(model)) + model + tok


def handmade_llama2c():
    seeds = {}
    tiny = llama2c_model()
    tok3 = llama2c_tokenizer(["<unk>", "\n<s>\n", "\n</s>\n"])
    seeds["header-tiny"] = bytes([0]) + tiny
    seeds["header-versioned"] = bytes([0]) + b"42ka" + struct.pack("<6i", 2, 0, 0, 0, 0, 0)
    seeds["header-negative-vocab"] = bytes([0]) + llama2c_model(shared=False)
    seeds["tokenizer-3"] = bytes([1]) + struct.pack("<H", 3) + tok3
    seeds["tokenizer-bytes"] = bytes([1]) + struct.pack("<H", 6) + llama2c_tokenizer(
        ["<unk>", "<s>", "</s>", "<0x41>", " hi", b"\xff\xfe"])
    seeds["convert-tiny"] = convert_input(tiny, tok3)
    seeds["convert-tiny-ctx0"] = convert_input(tiny, tok3, 1)
    seeds["convert-gqa"] = convert_input(
        llama2c_model(dim=8, hidden=3, layers=2, heads=4, kv_heads=2, vocab=5, seq_len=3, shared=False),
        llama2c_tokenizer(["<unk>", "<s>", "</s>", " a", "<0x0A>"]), 2)
    return seeds


# ---------------------------------------------------------------- tokenizer
N_VOCABS = 6  # fuzz_tokenizer.cpp's vocabulary list


def handmade_tokenizer():
    seeds = {}
    texts = {
        "ascii": b"Hello world, it's 2024!",
        "spaces": b"  \t\n\n   x  ",
        "invalid-utf8": b"ab\xc3(cd\xff\xfe\xed\xa0\x80\xf4\x90\x80\x80",
        "truncated-utf8": b"\xe6\x97\xa5\xe6\x9c",
        "emoji": "😀 日本語 é\u2581".encode(),
        "specials": b"<s></s><|endoftext|><|im_end|><unk> <|end|>",
        "empty": b"",
    }
    for v in range(N_VOCABS):
        for name, text in texts.items():
            for flags in (0x00, 0x10, 0x30):
                seeds[f"enc-v{v}-{name}-{flags:02x}"] = bytes([v, flags]) + text
        ids = struct.pack("<8i", 1, 300, 3 + 0xE6, 3 + 0x97, 3 + 0xA5, -1, 1 << 30, 2)
        seeds[f"ids-v{v}"] = bytes([v, 0x01]) + ids
        seeds[f"ids-v{v}-inrange-special-resume"] = bytes([v, 0x31]) + ids + b"\0"
    return seeds


# ---------------------------------------------------------------- chat templates
def handmade_chat_template():
    seeds = {}
    templates = {
        "chatml": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
        "llama2": "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\n' + messages[0]['content'] | trim + '\n<</SYS>>\n\n' %}{% endif %}{{ bos_token + '[INST] ' }}",
        "llama3": "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}",
        "gemma": "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}",
        "phi3": "{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}",
        "zephyr": "{{ '<|user|>\n' + message['content'] + eos_token }}",
    }
    for name, t in templates.items():
        seeds["detect-" + name] = bytes([0, 0]) + t.encode()
    seeds["strip"] = bytes([1, 0]) + " \t\u3000 hi \xa0\n".encode() + b"\xff "
    convs = {
        "user": ["user", "Hello"],
        "system-user": ["system", " Be brief. ", "user", "Hi\n"],
        "alternating": ["user", "a", "assistant", "b", "user", "c"],
        "bad-order": ["assistant", "x", "assistant", "y"],
        "tool": ["tool", "t", "user", "u"],
        "utf8": ["user", "日本 \u2581 \xe9"],
    }
    for fam in range(7):
        for name, fields in convs.items():
            body = "\0".join(["<s>", "</s>"] + fields).encode()
            seeds[f"render-f{fam}-{name}"] = bytes([2 + fam, 1]) + body
    return seeds


# ---------------------------------------------------------------- server requests
def handmade_request():
    seeds = {}
    completions = {
        "minimal": '{"prompt": "Once upon a time"}',
        "full": r'{"model": "stories260K", "prompt": "Once", "max_tokens": 8, "temperature": 0.7, "top_p": 0.9,'
                r' "top_k": 40, "min_p": 0.05, "seed": 42, "stop": ["\n", "end"], "stream": true,'
                r' "stream_options": {"include_usage": true}, "logprobs": 2, "presence_penalty": 0.5,'
                r' "frequency_penalty": -0.5, "repeat_penalty": 1.1, "logit_bias": {"42": -100}, "n": 1}',
        "token-prompt": '{"prompt": [1, 403, 407], "max_tokens": 1}',
        "nested-prompt": '{"prompt": [[1, 2]], "max_tokens": 1}',
        "speculative": '{"prompt": "a", "speculative": {"method": "ngram", "draft_max": 4, "draft_min": 1}}',
        "bad-types": '{"prompt": 5, "max_tokens": "x", "temperature": null}',
        "huge-numbers": '{"prompt": "a", "max_tokens": 1e308, "seed": -1e300, "top_k": 1e20}',
        "unicode": r'{"prompt": "\ud83d\ude00 \u0000 caf\u00e9 \ud800"}',
    }
    for name, body in completions.items():
        seeds["cmpl-" + name] = bytes([0]) + body.encode()
    chats = {
        "minimal": '{"messages": [{"role": "user", "content": "Hi"}]}',
        "system": '{"model": "stories260K.gguf", "messages": [{"role": "system", "content": "Be brief"},'
                  ' {"role": "user", "content": "Hi"}], "max_completion_tokens": 4, "logprobs": true, "top_logprobs": 3}',
        "parts": '{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}',
        "bad-role": '{"messages": [{"role": 7, "content": {}}]}',
        "empty": '{"messages": []}',
    }
    for name, body in chats.items():
        seeds["chat-" + name] = bytes([1]) + body.encode()
    seeds["not-json"] = bytes([0]) + b'{"prompt": "a",'
    seeds["not-object"] = bytes([1]) + b'[1, 2, 3]'
    return seeds


def fixture_seeds(fixtures):
    """Seeds derived from ../shared/fixtures (written at run time, never committed)."""
    out = {"fuzz_gguf": {}, "fuzz_llama2c": {}, "fuzz_tokenizer": {}, "fuzz_chat_template": {},
           "fuzz_request": {}}
    for rel in ("models/stories260K.gguf", "arch/tiny-qwen2.gguf", "arch/tiny-llama3rope.gguf",
                "quant/tiny-Q4_K_M.gguf", "quant/tiny-Q2_K.gguf", "quant/tiny-Q5_1.gguf"):
        path = os.path.join(fixtures, rel)
        if os.path.exists(path):
            out["fuzz_gguf"][os.path.basename(rel)] = open(path, "rb").read()
    model = os.path.join(fixtures, "models/stories260K.bin")
    tok = os.path.join(fixtures, "models/tok512.bin")
    if os.path.exists(model) and os.path.exists(tok):
        m, t = open(model, "rb").read(), open(tok, "rb").read()
        out["fuzz_llama2c"]["stories260K-header"] = bytes([0]) + m[:28]
        out["fuzz_llama2c"]["tok512"] = bytes([1]) + struct.pack("<H", 512) + t
    names = ["stories260K.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf",
             "ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-falcon.gguf"]
    for v, name in enumerate(names):
        inp = os.path.join(fixtures, "tokenizer", name + ".inp")
        if not os.path.exists(inp):
            continue
        texts = open(inp, "rb").read().split(b"\n__ggml_vocab_test__\n")
        for i, text in enumerate(texts):
            if text:
                out["fuzz_tokenizer"][f"inp-v{v}-{i}"] = bytes([v, 0x10]) + text
    return out


def write(out_dir, target, seeds):
    d = os.path.join(out_dir, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "handmade":
        write(sys.argv[2], "fuzz_gguf", handmade_gguf())
        write(sys.argv[2], "fuzz_llama2c", handmade_llama2c())
        write(sys.argv[2], "fuzz_tokenizer", handmade_tokenizer())
        write(sys.argv[2], "fuzz_chat_template", handmade_chat_template())
        write(sys.argv[2], "fuzz_request", handmade_request())
    elif len(sys.argv) == 4 and sys.argv[1] == "fixtures":
        for target, seeds in fixture_seeds(sys.argv[2]).items():
            write(sys.argv[3], target, seeds)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
