#!/usr/bin/env python3
"""rlx-onnx (CPU, the Python package) against onnxruntime where every call
brings input shapes not seen before: a text recognizer fed lines of every
width, a tagger fed sentences of every length, a detector fed images of
every size. A session plans each new set of shapes once (rlx-onnx
specializes the graph for it), so the first call at a shape costs more than
the next; this measures both, and the session setup.

For each corpus case (scripts/corpus) whose inputs have symbolic dims, the
case's first test set is the base feed; each new feed crops or tiles every
input along its symbolic dims (those of one name alike, so masks stay with
their ids) to a length the base's times a factor (a multiple of 32 where the
base's is one: detectors want that). Dims whose base is 1, and dims named
for the batch, stay. Per shape: rlx-onnx's first call and a second, then
ONNX Runtime's (the order alternating from shape to shape). One thread each.

Reports per model: session setup (best of 3), the mean first call at a new
shape, the mean second call, and the ratios rlx/ORT (below 1: rlx-onnx is
faster), with geometric means, and the largest difference of any float
output from ONNX Runtime's (a speed benchmark: the corpus check,
scripts/corpus/check.py, holds each case to its tolerance; quantized models
and ranked detections differ by more here, as ORT's own runs do).

Usage: python3 scripts/dynamic_shapes_bench.py [--shapes 10] [--cases a,b] [--threads 1]
Needs: the rlx_onnx package built in release (`maturin build --release -m
python/Cargo.toml`, then pip install the wheel), onnxruntime==1.31.1, onnx,
numpy, and the corpus (`python3 scripts/corpus/fetch.py`).
"""
import argparse
import glob
import math
import os
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

import rlx_onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, ".cache", "corpus", "cases")
FACTORS = [0.55, 1.3, 0.7, 1.15, 0.85, 1.45, 0.62, 1.07, 0.93, 1.22, 0.77, 1.38]


def base_feed(case):
    m = onnx.load(os.path.join(case, "model.onnx"), load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in inits]
    sets = sorted(glob.glob(os.path.join(case, "test_data_set_*")))
    if not sets:
        return None
    feed, dims = {}, {}
    for k, i in enumerate(inputs):
        path = os.path.join(sets[0], f"input_{k}.pb")
        if not os.path.exists(path):
            return None
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        feed[i.name] = numpy_helper.to_array(t)
        shape = i.type.tensor_type.shape
        dims[i.name] = [d.dim_param if d.HasField("dim_param") else None for d in shape.dim]
    return feed, dims


def varied(feed, dims):
    """The symbolic dims to vary: name -> base length."""
    out = {}
    for name, ds in dims.items():
        for axis, d in enumerate(ds):
            if not d or "batch" in d.lower() or axis >= feed[name].ndim:
                continue
            n = feed[name].shape[axis]
            if n > 1:
                out.setdefault(d, n)
    return out


def resized(a, axis, n):
    """`a` cropped or tiled along `axis` to length `n`."""
    reps = [1] * a.ndim
    reps[axis] = -(-n // a.shape[axis])
    return np.take(np.tile(a, reps), range(n), axis=axis)


def feeds(feed, dims, count):
    sym = varied(feed, dims)
    if not sym:
        return []
    out = []
    for f in FACTORS[:count]:
        length = {}
        for d, n in sym.items():
            v = max(2, round(n * f))
            if n % 32 == 0:
                v = max(32, round(n * f / 32) * 32)
            length[d] = v
        new = {}
        for name, a in feed.items():
            for axis, d in enumerate(dims[name]):
                if d in length and axis < a.ndim:
                    a = resized(a, axis, length[d])
            new[name] = np.require(a, requirements="C")  # scalars stay rank 0
        out.append(new)
    return out


def timed(f):
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) * 1e3


def setup_ms(make):
    best = math.inf
    for _ in range(3):
        best = min(best, timed(make))
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", type=int, default=10)
    ap.add_argument("--cases", default="")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    names = args.cases.split(",") if args.cases else sorted(os.listdir(CASES))

    def rlx_session(path):
        so = rlx_onnx.SessionOptions()
        so.intra_op_num_threads = args.threads
        return rlx_onnx.InferenceSession(path, so)

    def ort_session(path):
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.log_severity_level = 3
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    print(f"onnxruntime {ort.__version__}, rlx_onnx {rlx_onnx.__version__}; {args.threads} thread(s); "
          f"{args.shapes} new shapes a model; ms")
    print(f"{'model':26} {'setup rlx':>9} {'ort':>7} {'first rlx':>9} {'ort':>7} {'again rlx':>9} {'ort':>7}"
          f" {'setup':>6} {'first':>6} {'again':>6}  max|rlx-ORT|")
    logs = {"setup": [], "first": [], "again": []}
    for name in names:
        case = os.path.join(CASES, name)
        base = base_feed(case)
        if base is None:
            continue
        fs = feeds(*base, args.shapes)
        if not fs:
            continue
        path = os.path.join(case, "model.onnx")
        try:
            setup = (setup_ms(lambda: rlx_session(path)), setup_ms(lambda: ort_session(path)))
            r, o = rlx_session(path), ort_session(path)
            first, again = [[], []], [[], []]
            worst = 0.0
            for k, f in enumerate(fs):
                order = [(0, r), (1, o)] if k % 2 == 0 else [(1, o), (0, r)]
                outs = [None, None]
                for who, s in order:
                    first[who].append(timed(lambda: outs.__setitem__(who, s.run(None, f))))
                    again[who].append(timed(lambda: s.run(None, f)))
                for a, b in zip(*outs):
                    if a.dtype.kind == "f" and a.shape == b.shape:
                        worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - b), initial=0)))
        except Exception as e:  # a model this feed does not suit: say so, go on
            print(f"{name:26} skipped: {str(e).splitlines()[0][:90]}")
            continue
        row = {
            "setup": setup,
            "first": (np.mean(first[0]), np.mean(first[1])),
            "again": (np.mean(again[0]), np.mean(again[1])),
        }
        for k, (a, b) in row.items():
            logs[k].append(math.log(a / b))
        print(f"{name:26} {setup[0]:9.1f} {setup[1]:7.1f} {row['first'][0]:9.2f} {row['first'][1]:7.2f}"
              f" {row['again'][0]:9.2f} {row['again'][1]:7.2f}"
              + "".join(f" {row[k][0] / row[k][1]:6.2f}" for k in ("setup", "first", "again"))
              + f"  {worst:.1e}")
    if logs["setup"]:
        print(f"{'geomean rlx/ORT':26} {'':9} {'':7} {'':9} {'':7} {'':9} {'':7}"
              + "".join(f" {math.exp(np.mean(logs[k])):6.2f}" for k in ("setup", "first", "again")))


if __name__ == "__main__":
    main()
