#!/usr/bin/env python3
"""How rlx-onnx (CPU) and onnxruntime scale with threads, model by model.

For each model and thread count: `rlx-onnx bench --threads N` (median of 50 runs),
then onnxruntime with N intra-op threads, spinning between ops (its default) and
not (`session.intra_op.allow_spinning = 0`), medians of 50 runs each. The gap
between ORT's two columns is what waking sleeping threads costs on the machine.

Usage: python3 scripts/thread_sweep.py [--binary PATH] [--threads 1,4,16] MODEL...
MODEL is an .onnx file or a case directory (model.onnx + test_data_set_0/).
"""
import argparse
import os
import subprocess
import time

import numpy as np
import onnxruntime as ort

from profile_vs_ort import ort_feeds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rlx_median(binary, path, data, threads):
    cmd = [binary, "bench", path, "--threads", str(threads), "--iters", "50"]
    if data:
        cmd += ["--inputs", data]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    lines = [line for line in out.splitlines() if line.startswith("median:")]
    return float(lines[0].split()[1]) if lines else float("nan")


def ort_median(path, data, threads, spin):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = ort_feeds(session, data)
    for _ in range(5):
        session.run(None, feeds)
    times = []
    for _ in range(50):
        t = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", default="1,4,16")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "rlx-onnx"))
    args = ap.parse_args()
    for target in args.models:
        if os.path.isdir(target):
            path, data = os.path.join(target, "model.onnx"), os.path.join(target, "test_data_set_0")
        else:
            path, data = target, None
        print(f"== {os.path.basename(target.rstrip('/'))}  (median ms)")
        for t in [int(v) for v in args.threads.split(",")]:
            rlx = rlx_median(args.binary, path, data, t)
            spin, idle = ort_median(path, data, t, True), ort_median(path, data, t, False)
            print(f"  threads {t:2d}: rlx {rlx:8.3f}  ort {spin:8.3f}  ort without spinning {idle:8.3f}"
                  f"  rlx/ort {rlx / spin:.2f}", flush=True)


if __name__ == "__main__":
    main()
