#!/usr/bin/env python3
"""Runs the specdec CLI on every bad input we know of and prints a Markdown table of the outcome.

  scripts/bad_inputs.py [--cli build/specdec] [--fixtures ../shared/fixtures] [--out FILE]

Paths are shown as $TMP (the temporary folder) and $FIXTURES. Each row: what the input is, the command, the exit status and the first line of stderr. An input
is handled when the CLI exits with status 1 or 2 (an error message, no crash) within 20 s; a
signal (crash), a timeout (hang) or status 0 (bad input accepted) is marked UNEXPECTED and makes
the script exit 1. docs/SECURITY.md holds the table of the last run.
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "seeds"))
from make_seeds import (ARRAY, BOOL, I32, STRING, U32, U8, gguf, gstr, llama2c_model,  # noqa: E402
                        llama2c_tokenizer, f32s)


def raw_header(version=3, n_tensors=0, n_kv=0):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def tensor_info(name, dims, gtype, offset):
    out = gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    return out + struct.pack("<IQ", gtype, offset)


def one_tensor(dims, gtype, offset, data_bytes):
    out = raw_header(3, 1, 0) + tensor_info("t", dims, gtype, offset)
    out += b"\0" * (-len(out) % 32)
    return out + b"\0" * data_bytes


def gguf_cases():
    """(file name, description, bytes) for malformed GGUF files."""
    kv = lambda key, t, payload: gstr(key) + struct.pack("<I", t) + payload  # noqa: E731
    return [
        ("text.gguf", "a text file", b"hello, I am not a model\n"),
        ("v1.gguf", "GGUF version 1", raw_header(1)),
        ("bigendian.gguf", "big-endian GGUF", b"GGUF" + struct.pack(">IQQ", 3, 0, 0)),
        ("v4.gguf", "unknown GGUF version 4", raw_header(4)),
        ("header-cut.gguf", "header cut after the version", b"GGUF" + struct.pack("<I", 3)),
        ("many-tensors.gguf", "tensor count 2^40", raw_header(3, 1 << 40, 0)),
        ("many-kv.gguf", "metadata count larger than the file can hold", raw_header(3, 0, 1000)),
        ("long-string.gguf", "a key whose length is 2^60",
         raw_header(3, 0, 1) + struct.pack("<Q", 1 << 60) + b"k" * 16),
        ("bad-type.gguf", "unknown metadata value type 13", raw_header(3, 0, 1) + kv("k", 13, b"\0" * 8)),
        ("huge-array.gguf", "array claiming 2^62 elements",
         raw_header(3, 0, 1) + kv("a", ARRAY, struct.pack("<IQ", U8, 1 << 62))),
        ("deep-array.gguf", "arrays nested 100 deep",
         raw_header(3, 0, 1) + gstr("a") + struct.pack("<I", ARRAY) + struct.pack("<IQ", ARRAY, 1) * 100),
        ("bad-bool.gguf", "bool value 7", raw_header(3, 0, 1) + kv("b", BOOL, b"\x07")),
        ("dup-key.gguf", "duplicate metadata key",
         raw_header(3, 0, 2) + kv("k", U32, struct.pack("<I", 1)) * 2),
        ("bad-align.gguf", "general.alignment = 48",
         raw_header(3, 0, 1) + kv("general.alignment", U32, struct.pack("<I", 48))),
        ("five-dims.gguf", "tensor with 5 dimensions", one_tensor([1, 1, 1, 1, 1], 0, 0, 32)),
        ("zero-dim.gguf", "tensor with a 0 dimension", one_tensor([4, 0], 0, 0, 32)),
        ("bad-ttype.gguf", "unknown tensor type 99", one_tensor([4], 99, 0, 32)),
        ("q4-33.gguf", "Q4_0 row of 33 elements (block is 32)", one_tensor([33], 2, 0, 64)),
        ("past-end.gguf", "tensor data past the end of the file", one_tensor([1024], 0, 0, 64)),
        ("huge-tensor.gguf", "tensor of 2^62 x 2^62 elements (size overflow)",
         one_tensor([1 << 62, 1 << 62], 0, 0, 32)),
        ("misaligned.gguf", "tensor offset 3 (alignment 32)", one_tensor([4], 0, 3, 64)),
        ("dup-tensor.gguf", "duplicate tensor name",
         raw_header(3, 2, 0) + tensor_info("t", [4], 0, 0) + tensor_info("t", [4], 0, 32) + b"\0" * 200),
        ("no-arch.gguf", "valid GGUF without general.architecture", gguf([("x", U32, 1)])),
        ("arch-gpt2.gguf", "architecture gpt2 (unsupported)", gguf([("general.architecture", STRING, "gpt2")])),
        ("llama-no-keys.gguf", "llama without hyperparameters", gguf([("general.architecture", STRING, "llama")])),
        ("llama-no-tensors.gguf", "llama hyperparameters but no tensors",
         gguf([("general.architecture", STRING, "llama"), ("llama.context_length", U32, 16),
               ("llama.embedding_length", U32, 8), ("llama.block_count", U32, 1),
               ("llama.feed_forward_length", U32, 16), ("llama.attention.head_count", U32, 2),
               ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
               ("tokenizer.ggml.model", STRING, "llama"),
               ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<unk>", "<s>", "</s>", "a"]))])),
        ("zero-heads.gguf", "head_count = 0",
         gguf([("general.architecture", STRING, "llama"), ("llama.context_length", U32, 16),
               ("llama.embedding_length", U32, 8), ("llama.block_count", U32, 1),
               ("llama.feed_forward_length", U32, 16), ("llama.attention.head_count", U32, 0),
               ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
               ("tokenizer.ggml.tokens", ARRAY, (STRING, ["a"]))])),
        ("bad-token-type.gguf", "tokenizer token_type array shorter than the tokens",
         gguf([("tokenizer.ggml.model", STRING, "llama"),
               ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<unk>", "<s>", "</s>"])),
               ("tokenizer.ggml.token_type", ARRAY, (I32, [2, 3]))])),
        ("unknown-tokenizer.gguf", "tokenizer model 'wordpiece'",
         gguf([("tokenizer.ggml.model", STRING, "wordpiece"), ("tokenizer.ggml.tokens", ARRAY, (STRING, ["a"]))])),
    ]


MODEL_LEVEL_CASES = {"no-arch.gguf", "arch-gpt2.gguf", "llama-no-keys.gguf", "llama-no-tensors.gguf",
                     "zero-heads.gguf"}
TOKENIZER_CASES = {"bad-token-type.gguf", "unknown-tokenizer.gguf"}


class Runner:
    def __init__(self, cli, tmp):
        self.cli, self.tmp, self.rows, self.failures = cli, tmp, [], 0

    def run(self, kind, what, args, env=None, expect_ok=False, user=None, note=""):
        cmd = [self.cli] + args
        shown = "specdec " + " ".join(a.replace(self.tmp, "$TMP") for a in args)
        full_env = dict(os.environ, **(env or {}))
        if env:
            shown = " ".join(f"{k}={v}" for k, v in env.items()) + " " + shown
        if user:
            cmd = ["runuser", "-u", user, "--"] + cmd
            shown = f"(as {user}) " + shown
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=20, env=full_env, stdin=subprocess.DEVNULL)
            rc = p.returncode
            lines = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
            message = lines[0] if lines else "(no message)"
            for line in lines:  # prefer the line that carries the error
                if line.startswith("error") or "Error" in line or "ERROR" in line:
                    message = line
                    break
        except subprocess.TimeoutExpired:
            rc, message = "timeout", "(hung for 20 s)"
        ok = rc == 0 if expect_ok else rc in (1, 2, 105, 106, 108, 109)  # CLI11 parse errors: 1xx
        if not ok:
            self.failures += 1
        message = message.replace(self.tmp, "$TMP").replace("|", "\\|")
        if len(message) > 300:
            message = message[:297] + "..."
        if note:
            message = note + " — " + message
        self.rows.append((kind, what, "`" + shown.replace("|", "\\|") + "`", str(rc) + ("" if ok else " UNEXPECTED"),
                          message))

    def table(self):
        out = ["| kind | bad input | command | exit | message |", "|---|---|---|---|---|"]
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default="build/specdec")
    ap.add_argument("--fixtures", default="../shared/fixtures")
    ap.add_argument("--out")
    args = ap.parse_args()
    cli = os.path.abspath(args.cli)
    fx = os.path.abspath(args.fixtures)
    stories = os.path.join(fx, "models/stories260K.gguf")
    tmp = tempfile.mkdtemp(prefix="specdec-bad-")
    os.chmod(tmp, 0o755)
    r = Runner(cli, tmp)
    try:
        # ---- files that are not GGUF models
        fifo = os.path.join(tmp, "model.fifo")
        os.mkfifo(fifo)
        empty = os.path.join(tmp, "empty.gguf")
        open(empty, "wb").close()
        for what, path in [("missing file", os.path.join(tmp, "missing.gguf")), ("a directory", tmp),
                           ("/dev/null", "/dev/null"), ("a FIFO (would block a plain open)", fifo),
                           ("empty file", empty), ("/proc file (size 0)", "/proc/self/status")]:
            r.run("file", what, ["inspect", path])
        unreadable = os.path.join(tmp, "unreadable.gguf")
        shutil.copy(stories, unreadable)
        os.chmod(unreadable, 0)
        if os.geteuid() == 0 and shutil.which("runuser"):
            r.run("file", "unreadable file (mode 000)", ["inspect", unreadable], user="nobody")
        else:
            r.run("file", "unreadable file (mode 000)", ["inspect", unreadable])
        for name, what, data in gguf_cases():
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            # Format errors show with `inspect`; model-level ones need a load (`generate`).
            model_level = name in MODEL_LEVEL_CASES
            if name in TOKENIZER_CASES:
                r.run("GGUF", what, ["tokenize", "-m", path, "-p", "hi"])
            else:
                r.run("GGUF", what, ["generate", "-m", path, "-p", "hi", "-n", "1"] if model_level else ["inspect", path])
        if os.path.exists(stories):
            data = open(stories, "rb").read()
            for frac, label in [(2, "half"), (100, "first 1%")]:
                path = os.path.join(tmp, f"stories-{label.replace(' ', '').replace('%', 'pct')}.gguf")
                open(path, "wb").write(data[: len(data) // frac])
                r.run("GGUF", f"stories260K.gguf cut to its {label}", ["generate", "-m", path, "-p", "hi", "-n", "1"])
            vocab = os.path.join(fx, "tokenizer/ggml-vocab-llama-spm.gguf")
            r.run("GGUF", "vocabulary-only GGUF used as a model", ["generate", "-m", vocab, "-p", "hi", "-n", "1"])
            gpt2 = os.path.join(fx, "tokenizer/ggml-vocab-gpt-2.gguf")
            r.run("GGUF", "draft model of an unsupported architecture (a gpt-2 vocabulary file)", ["generate", "-m", stories, "--md", gpt2, "-p", "hi", "-n", "1"])

        # ---- llama2.c conversion
        bin_path, tok_path = os.path.join(fx, "models/stories260K.bin"), os.path.join(fx, "models/tok512.bin")
        out = os.path.join(tmp, "out.gguf")
        if os.path.exists(bin_path):
            model = open(bin_path, "rb").read()
            tok = open(tok_path, "rb").read()
            cases = [
                ("checkpoint cut by 4 bytes", model[:-4], tok),
                ("checkpoint with 4 extra bytes", model + b"\0" * 4, tok),
                ("checkpoint with dim = -5", struct.pack("<i", -5) + model[4:], tok),
                ("versioned llama2.c export (magic ak42)", struct.pack("<ii", 0x616B3432, 2) + model[8:], tok),
                ("tokenizer cut in half", model, tok[: len(tok) // 2]),
                ("tokenizer with extra bytes", model, tok + b"\0" * 8),
                ("tokenizer token length -1", llama2c_model(), struct.pack("<ifi", 4, 0.0, -1)),
            ]
            for i, (what, m, t) in enumerate(cases):
                mp, tp = os.path.join(tmp, f"ck{i}.bin"), os.path.join(tmp, f"tok{i}.bin")
                open(mp, "wb").write(m)
                open(tp, "wb").write(t)
                r.run("llama2.c", what, ["convert-llama2c", "--model", mp, "--tokenizer", tp, "-o", out])
            r.run("llama2.c", "context longer than the checkpoint's seq_len",
                  ["convert-llama2c", "--model", bin_path, "--tokenizer", tok_path, "-o", out, "--ctx", "4096"])
            r.run("llama2.c", "output into a missing directory",
                  ["convert-llama2c", "--model", bin_path, "--tokenizer", tok_path, "-o", os.path.join(tmp, "no/dir/x.gguf")])

        # ---- command line
        if os.path.exists(stories):
            g = ["generate", "-m", stories, "-p", "Once upon a time"]
            # Accepted on purpose (llama.cpp's meaning): top-p >= 1 and top-k <= 0 switch the filter off,
            # draft-max 0 drafts nothing.
            for what, extra, note in [("top-p 2", ["--top-p", "2", "-n", "4"], "accepted: top-p >= 1 means off"),
                                      ("top-k -3", ["--top-k", "-3", "-n", "4"], "accepted: top-k <= 0 means off"),
                                      ("draft-max 0", ["--draft-max", "0", "-n", "4"], "accepted: no drafting")]:
                r.run("CLI", what, g + extra, expect_ok=True, note=note)
            for what, extra in [("-n 0", ["-n", "0"]), ("context larger than the model's", ["-c", "100000"]),
                                ("negative context", ["-c", "-5"]), ("negative threads", ["-t", "-1"]),
                                ("negative temperature", ["--temp", "-1"]), ("top-p 0", ["--top-p", "0"]),
                                ("unknown --spec method", ["--spec", "magic"]),
                                ("draft-min > draft-max", ["--draft-min", "9", "--draft-max", "2"]),
                                ("lenience 0", ["--lenience", "0"]), ("unknown flag", ["--frobnicate"]),
                                ("both --prompt and --file", ["-f", os.path.join(tmp, "nope.txt")]),
                                ("lookup cache is a directory", ["--lookup-cache", tmp]),
                                ("non-numeric -n", ["-n", "lots"])]:
                r.run("CLI", what, g + extra)
            r.run("CLI", "prompt file missing", ["generate", "-m", stories, "-f", os.path.join(tmp, "nope.txt")])
            r.run("CLI", "prompt file is a directory", ["generate", "-m", stories, "-f", tmp])
            long_prompt = os.path.join(tmp, "long.txt")
            open(long_prompt, "w").write("once upon a time " * 200)
            r.run("CLI", "prompt longer than the context (128)", ["generate", "-m", stories, "-f", long_prompt, "-n", "4"])
            r.run("CLI", "KV cache larger than the available memory (limit forced to 0 MiB)",
                  ["generate", "-m", stories, "-p", "hi", "-n", "1"], env={"SPECDEC_MEMORY_LIMIT_MB": "0"})
            big = os.path.join(tmp, "big-ctx.gguf")
            subprocess.run([cli, "make-model", "--shape", "tiny", "--type", "F32", "--ctx", "16777216", "-o", big],
                           capture_output=True, timeout=120)
            if os.path.exists(big):
                r.run("CLI", "model whose context (2^24) needs more KV memory than the machine has",
                      ["generate", "-m", big, "-p", "hi", "-n", "1"])
            r.run("CLI", "quantize to an unknown type", ["quantize", stories, os.path.join(tmp, "q.gguf"), "Q9_9"])
            r.run("CLI", "tokenize without a model", ["tokenize", "-p", "hi"])
            r.run("CLI", "unknown subcommand", ["frobnicate"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table = r.table().replace(fx, "$FIXTURES")
    if args.out:
        open(args.out, "w").write(table + "\n")
    print(table)
    print(f"\n{len(r.rows)} inputs, {r.failures} unexpected", file=sys.stderr)
    sys.exit(1 if r.failures else 0)


if __name__ == "__main__":
    main()
