#!/usr/bin/env python3
"""A model without its weights, and random weights put back: to carry a real
export's graph from a machine that can make it (torch, transformers) to one
that cannot, where a file of hundreds of megabytes cannot travel.

    python3 scripts/model_skeleton.py strip MODEL.onnx SKELETON.onnx
    python3 scripts/model_skeleton.py fill SKELETON.onnx MODEL.onnx [--seed 0]

`strip` empties every initializer over 4 KiB (shape constants and small
tables stay) and records each one's mean and standard deviation in the
model's metadata (`rlx.skeleton`); `fill` draws normal weights with those
moments (a norm's scale stays near one, a bias near its mean), so the
filled model computes in the ranges the original did. Timing a filled
model measures the real graph; its outputs are not the original's.
"""
import argparse
import json
import os

import numpy as np
import onnx
from onnx import numpy_helper

KEY = "rlx.skeleton"
THRESHOLD = 4096


def strip(src, dst):
    m = onnx.load(src)
    moments = {}
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t, base_dir=os.path.dirname(os.path.abspath(src)))
        if a.nbytes <= THRESHOLD or a.dtype.kind != "f":
            continue
        f = a.astype(np.float64)
        moments[t.name] = [float(f.mean()), float(f.std())]
        name, dims, dtype = t.name, list(t.dims), t.data_type
        t.Clear()
        t.name, t.data_type = name, dtype
        t.dims.extend(dims)
    del m.metadata_props[:]
    m.metadata_props.add(key=KEY, value=json.dumps(moments))
    with open(dst, "wb") as f:
        f.write(m.SerializeToString())
    print(f"{dst}: {len(moments)} weights left out, {os.path.getsize(dst) / 1e6:.1f} MB")


def fill(src, dst, seed):
    m = onnx.load(src)
    meta = {p.key: p.value for p in m.metadata_props}
    if KEY not in meta:
        raise SystemExit(f"{src} is not a skeleton (no {KEY} metadata)")
    moments = json.loads(meta[KEY])
    rng = np.random.default_rng(seed)
    for t in m.graph.initializer:
        if t.name not in moments:
            continue
        mean, std = moments[t.name]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
        a = rng.standard_normal(list(t.dims), dtype=np.float32) * np.float32(std) + np.float32(mean)
        t.CopyFrom(numpy_helper.from_array(a.astype(dtype), t.name))
    del m.metadata_props[:]
    # Weights beside the model: a filled decoder may pass protobuf's 2 GB.
    onnx.save(m, dst, save_as_external_data=True, all_tensors_to_one_file=True,
              location=os.path.basename(dst) + ".data", size_threshold=THRESHOLD)
    print(f"{dst}: {len(moments)} weights drawn")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("strip")
    s.add_argument("src")
    s.add_argument("dst")
    f = sub.add_parser("fill")
    f.add_argument("src")
    f.add_argument("dst")
    f.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.cmd == "strip":
        strip(a.src, a.dst)
    else:
        fill(a.src, a.dst, a.seed)


if __name__ == "__main__":
    main()
