#!/usr/bin/env python3
"""Runs `rlx-onnx check` on every case of the real-model corpus (written by
fetch.py) with the case's tolerance, and compares the outcome with
tests/expected/corpus.txt (`name  reason` per case expected to fail).

    python3 scripts/corpus/check.py [--binary PATH] [--cache DIR] [--target cpu|cuda|wgpu] [--threads N]
                                    [--only NAME[,NAME]]

Other targets compare with tests/expected/corpus-<target>.txt. Exits 1 when a
case fails that is not listed, or a listed case passes (so the list only
shrinks). `--only` checks some cases (the GPU script runs the corpus in parts).
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from models import MODELS, TOLERANCE  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))


def expected(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, reason = line.partition(" ")
            if not reason.strip():
                sys.exit(f"{path}: `{name}` has no reason")
            out[name] = reason.strip()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(REPO, "target", "debug", "rlx-onnx"))
    ap.add_argument("--cache", default=os.environ.get("RLX_CORPUS_CACHE", os.path.join(REPO, ".cache", "corpus")))
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="CPU worker threads of rlx-onnx")
    ap.add_argument("--only", default="", help="comma-separated model names")
    args = ap.parse_args()
    only = [n for n in args.only.split(",") if n]
    models = [m for m in MODELS if not only or m["name"] in only]
    if len(models) != len(only or models):
        sys.exit(f"unknown model among {only}")
    want_fail = expected(os.path.join(REPO, "tests", "expected", f"corpus{'' if args.target == 'cpu' else '-' + args.target}.txt"))
    surprises, passed = [], 0
    print(f"{'model':<28} {'result':<8} {'seconds':>8}  tolerance")
    for m in models:
        name = m["name"]
        case = os.path.join(args.cache, "cases", name)
        if not os.path.isdir(case):
            surprises.append(f"{name}: no case at {case} (run scripts/corpus/fetch.py)")
            continue
        rtol, atol, _ = TOLERANCE.get(name, (1e-3, 1e-7, ""))
        t = time.time()
        r = subprocess.run([args.binary, "check", case, "--target", args.target, "--rtol", str(rtol), "--atol", str(atol),
                            "--threads", str(args.threads)],
                           capture_output=True, text=True, timeout=900)
        secs = time.time() - t
        ok = r.returncode == 0
        passed += ok
        print(f"{name:<28} {'pass' if ok else 'FAIL':<8} {secs:>8.2f}  rtol {rtol:g} atol {atol:g}")
        if not ok and name not in want_fail:
            detail = "\n    ".join((r.stdout + r.stderr).strip().splitlines()[-6:])
            surprises.append(f"{name}: fails, and tests/expected is silent:\n    {detail}")
        if ok and name in want_fail:
            surprises.append(f"{name}: passes now; remove it from the expected failures")
    listed = sum(m["name"] in want_fail for m in models)
    print(f"corpus on {args.target}: {passed} passed, {len(models) - passed} failed ({listed} expected)")
    for s in surprises:
        print("SURPRISE", s)
    sys.exit(1 if surprises else 0)


if __name__ == "__main__":
    main()
