#!/usr/bin/python3
"""Collects the Python-source corpus from installed Debian packages and splits it by file.

Usage: /usr/bin/python3 tools/train/prepare_corpus.py [--seed 1234] [--val-percent 3]

Reads the file lists dpkg keeps (/var/lib/dpkg/info/PKG.list) of the packages below, keeps
the *.py files that decode as UTF-8 and are not huge, and assigns each file to train or
validation by a seeded hash of its path (stable when the file list changes).

Writes (tools/train/work/):
  corpus/files_train.txt, corpus/files_val.txt  one absolute path a line, sorted
  corpus/manifest.json                          packages (name, version, license), counts,
                                                bytes, sha256 of the sorted file list
"""
import argparse
import hashlib
import json
import os
import subprocess

from common import NEWLINE_PLACEHOLDER, work_path

# (dpkg package, license as stated in /usr/share/doc/PKG/copyright)
PACKAGES = [
    ("libpython3.11-minimal:amd64", "PSF-2.0 (Python Software Foundation License)"),
    ("libpython3.11-stdlib:amd64", "PSF-2.0 (Python Software Foundation License)"),
    ("libpython3.11-testsuite", "PSF-2.0 (Python Software Foundation License)"),
    ("python3-lib2to3", "PSF-2.0 (Python Software Foundation License)"),
    ("python3-distutils", "PSF-2.0 (Python Software Foundation License)"),
]
MAX_FILE_BYTES = 400_000  # a few generated tables (e.g. unicode data) are larger; skip them


def package_version(package: str) -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def package_py_files(package: str) -> list[str]:
    list_path = f"/var/lib/dpkg/info/{package}.list"
    if not os.path.exists(list_path):
        raise SystemExit(f"error: {list_path} not found: is {package} installed?")
    with open(list_path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip().endswith(".py")]


def readable_source(path: str) -> bool:
    """True for a regular UTF-8 file of sane size without the newline placeholder or NULs."""
    if not os.path.isfile(path) or os.path.islink(path):
        return False
    size = os.path.getsize(path)
    if size == 0 or size > MAX_FILE_BYTES:
        return False
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (UnicodeDecodeError, OSError):
        return False
    return NEWLINE_PLACEHOLDER not in text and "\x00" not in text


def is_validation(path: str, seed: int, val_percent: float) -> bool:
    digest = hashlib.sha256(f"{seed}:{path}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % 10000 < val_percent * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--val-percent", type=float, default=3.0)
    args = parser.parse_args()

    files, packages = set(), []
    for package, license_name in PACKAGES:
        candidates = package_py_files(package)
        kept = [p for p in candidates if readable_source(p)]
        files.update(kept)
        packages.append({"package": package, "version": package_version(package),
                         "license": license_name, "py_files": len(candidates),
                         "kept": len(kept)})
    ordered = sorted(files)
    train = [p for p in ordered if not is_validation(p, args.seed, args.val_percent)]
    val = [p for p in ordered if is_validation(p, args.seed, args.val_percent)]

    for name, subset in (("files_train.txt", train), ("files_val.txt", val)):
        with open(work_path("corpus", name), "w", encoding="utf-8") as f:
            f.writelines(p + "\n" for p in subset)
    manifest = {
        "packages": packages,
        "selection": f"*.py from the dpkg file lists, UTF-8, 1..{MAX_FILE_BYTES} bytes",
        "split": {"seed": args.seed, "val_percent": args.val_percent,
                  "rule": "sha256(f'{seed}:{path}')[:8] little-endian % 10000 < val_percent*100"},
        "n_files": len(ordered), "n_train_files": len(train), "n_val_files": len(val),
        "train_bytes": sum(os.path.getsize(p) for p in train),
        "val_bytes": sum(os.path.getsize(p) for p in val),
        "file_list_sha256": hashlib.sha256("".join(p + "\n" for p in ordered).encode()).hexdigest(),
    }
    with open(work_path("corpus", "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main()
