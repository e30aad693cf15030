#!/usr/bin/python3
"""Measures the pair with specdec on held-out prompts: acceptance and speedup per setting.

Usage: /usr/bin/python3 tools/train/measure_spec.py --specdec build/specdec \
           --target models/TARGET.gguf --draft models/DRAFT.gguf [--prompts 8] [--n-predict 128]

Prompts: the first --prompt-lines lines of the first --prompts validation files
(work/corpus/files_val.txt). For each setting (temperature 0 and 1; fixed K = 4 with
--draft-p-min 0, and specdec's adaptive K) it runs `specdec generate --compare-plain` per
prompt and sums drafted/accepted tokens and decode times. Speedup = total plain decode time /
total speculative decode time. Timings need an otherwise idle machine to mean anything.
c_draft is the mean of what specdec prints (it reports 0.000 where it does not measure it,
as with fixed K). Prints a Markdown table (for models/README.md) and the raw numbers as JSON.
Sanity check: with the target as its own draft, acceptance is 1.000 in every setting.
"""
import argparse
import json
import re
import subprocess

from common import work_path

SETTINGS = [
    ("temperature 0, fixed K = 4, --draft-p-min 0", ["--temp", "0", "--draft-max", "4", "--no-adaptive", "--draft-p-min", "0"]),
    ("temperature 1, fixed K = 4, --draft-p-min 0", ["--temp", "1", "--draft-max", "4", "--no-adaptive", "--draft-p-min", "0"]),
    ("temperature 0, adaptive K", ["--temp", "0"]),
    ("temperature 1, adaptive K", ["--temp", "1"]),
]
RE_DRAFTER = re.compile(r"\[speculative\] drafter .*?drafted (\d+), accepted (\d+).*?c_draft ([\d.]+)")
RE_DECODE = re.compile(r"\[(speculative|plain)\] prompt \d+ tokens.*?generated (\d+) tokens.*?decode ([\d.]+) tok/s")


def run_one(args, prompt_file: str, extra: list) -> dict:
    cmd = [args.specdec, "generate", "-m", args.target, "-md", args.draft, "-f", prompt_file,
           "-n", str(args.n_predict), "--compare-plain", "--no-stream", "-s", str(args.seed),
           "-t", str(args.threads)] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    text = out.stdout + out.stderr
    drafter = RE_DRAFTER.search(text)
    if not drafter:
        raise RuntimeError(f"no drafter statistics in the output of {' '.join(cmd)}:\n{text}")
    result = {"drafted": int(drafter[1]), "accepted": int(drafter[2]), "c_draft": float(drafter[3])}
    for kind, generated, rate in RE_DECODE.findall(text):
        result[f"{kind}_tokens"] = int(generated)
        result[f"{kind}_seconds"] = int(generated) / max(float(rate), 1e-9)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--specdec", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--draft", required=True)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-lines", type=int, default=8)
    parser.add_argument("--n-predict", type=int, default=128)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--only", default="", help="run only the settings whose name contains "
                        "this text (e.g. 'temperature 0, fixed')")
    args = parser.parse_args()

    with open(work_path("corpus", "files_val.txt"), encoding="utf-8") as f:
        files = [line.strip() for line in f][:args.prompts]
    prompt_files = []
    for i, path in enumerate(files):
        with open(path, encoding="utf-8") as f:
            text = "".join(f.readline() for _ in range(args.prompt_lines))
        prompt_file = work_path("prompts", f"val{i:02d}.txt")
        with open(prompt_file, "w", encoding="utf-8") as f:
            f.write(text)
        prompt_files.append(prompt_file)

    rows, raw = [], {}
    for name, extra in SETTINGS:
        if args.only not in name:
            continue
        runs = [run_one(args, p, extra) for p in prompt_files]
        total = {k: sum(r.get(k, 0) for r in runs) for k in
                 ("drafted", "accepted", "speculative_seconds", "plain_seconds")}
        acceptance = total["accepted"] / max(1, total["drafted"])
        speedup = total["plain_seconds"] / max(1e-9, total["speculative_seconds"])
        c_draft = sum(r["c_draft"] for r in runs) / len(runs)
        rows.append(f"| {name} | {acceptance:.3f} | {speedup:.2f}x | {c_draft:.3f} |")
        raw[name] = {"runs": runs, **total, "acceptance": acceptance, "speedup": speedup}
    print(f"{len(prompt_files)} held-out prompts (first {args.prompt_lines} lines), "
          f"{args.n_predict} tokens each\n")
    print("| setting | acceptance | tokens/s speedup | c_draft |\n|---|---|---|---|")
    print("\n".join(rows))
    print(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
