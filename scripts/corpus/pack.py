#!/usr/bin/env python3
"""Packs the corpus cases (written by fetch.py) into parts that fit beside the
GPU binaries in one device call (its carry limit is 64 MiB in all).

    python3 scripts/corpus/pack.py [--cache DIR] [--out gpu-corpus] [--max-mb 44]

Writes OUT/part-N.tar.xz, each holding cases/<name>/ of whole cases (a case
larger than the limit gets a part of its own); the GPU script's `corpus`
stage checks the cases of every part it finds.
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from models import MODELS  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))


def size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.environ.get("RLX_CORPUS_CACHE", os.path.join(REPO, ".cache", "corpus")))
    ap.add_argument("--out", default=os.path.join(REPO, "gpu-corpus"))
    ap.add_argument("--max-mb", type=float, default=44.0)
    args = ap.parse_args()
    limit = args.max_mb * 1e6
    cases = []
    for m in MODELS:
        d = os.path.join(args.cache, "cases", m["name"])
        if not os.path.isdir(d):
            sys.exit(f"no case at {d} (run scripts/corpus/fetch.py)")
        cases.append((size(d), m["name"]))
    parts = []  # first fit, largest first
    for sz, name in sorted(cases, reverse=True):
        for p in parts:
            if p[0] + sz <= limit:
                p[0] += sz
                p[1].append(name)
                break
        else:
            parts.append([sz, [name]])
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    for i, (sz, names) in enumerate(parts, 1):
        tar = os.path.join(args.out, f"part-{i}.tar.xz")
        members = [os.path.join("cases", n) for n in sorted(names)]
        subprocess.run(["tar", "cJf", tar, "-C", args.cache, *members], check=True, env=dict(os.environ, XZ_OPT="-T2 -6"))
        print(f"{tar}: {os.path.getsize(tar) / 1e6:.1f} MB, {len(names)} cases ({sz / 1e6:.1f} MB unpacked)")


if __name__ == "__main__":
    main()
