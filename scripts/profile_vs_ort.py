#!/usr/bin/env python3
"""Where the time goes, per ONNX node, in rlx-onnx (CPU) and in onnxruntime, side by side.

For each model: `rlx-onnx bench --profile` and onnxruntime's own profiler (per-node
kernel times, medians over the runs), both with the same thread count, so that a
model slower than ORT points at the nodes that make the difference.

Usage: python3 scripts/profile_vs_ort.py [--threads N] [--runs 50] [--top 12] [--binary PATH] MODEL...
MODEL is an .onnx file or a case directory (model.onnx + test_data_set_0/input_N.pb,
as the corpus and golden cases are); inputs come from the test data where there is
some, else both sides generate floats in [-1, 1) (ids and sizes may need real data).
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_and_inputs(target):
    if os.path.isdir(target):
        path = os.path.join(target, "model.onnx")
        data = os.path.join(target, "test_data_set_0")
        return path, data if os.path.isdir(data) else None
    return target, None


def ort_feeds(session, data):
    """The session's inputs from `data`'s input_N.pb where there is one, else floats in [-1, 1)."""
    feeds = {}
    for k, i in enumerate(session.get_inputs()):
        pb = os.path.join(data, f"input_{k}.pb") if data else ""
        if os.path.exists(pb):
            feeds[i.name] = numpy_helper.to_array(onnx.load_tensor(pb))
            continue
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        feeds[i.name] = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    return feeds


def ort_profile(path, data, threads, runs, top):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort_profile")
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = ort_feeds(session, data)
    for _ in range(runs):
        session.run(None, feeds)
    events = json.load(open(session.end_profiling()))
    per_node = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_node[e["name"][: -len("_kernel_time")]].append((e["dur"], e["args"].get("op_name")))
    medians = {k: (float(np.median([d for d, _ in v])), v[0][1]) for k, v in per_node.items()}
    by_op = collections.defaultdict(float)
    for us, op in medians.values():
        by_op[op] += us
    print(f"  onnxruntime {ort.__version__}, {threads} thread(s): node total {sum(us for us, _ in medians.values()):.0f} us")
    for op, us in sorted(by_op.items(), key=lambda kv: -kv[1])[:16]:
        print(f"    {us:9.1f} us  {op}")
    print("    slowest nodes:")
    for name, (us, op) in sorted(medians.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"    {us:9.1f} us  {op:22s} {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "rlx-onnx"))
    args = ap.parse_args()
    for target in args.models:
        path, data = model_and_inputs(target)
        print(f"== {target}")
        cmd = [args.binary, "bench", path, "--threads", str(args.threads), "--iters", str(args.runs),
               "--profile", "--top", str(args.top)]
        if data:
            cmd += ["--inputs", data]
        rlx = subprocess.run(cmd, capture_output=True, text=True)
        print(f"  rlx-onnx, {args.threads} thread(s):")
        print("\n".join("    " + line for line in (rlx.stdout + rlx.stderr).strip().splitlines()))
        ort_profile(path, data, args.threads, args.runs, args.top)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
