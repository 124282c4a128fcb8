#!/usr/bin/env python3
"""Per-call cost of `session.run` from Python: rlx_onnx against onnxruntime
(both from Python, alternating round by round, one thread each) and against
rlx-onnx's own Rust API on the same model (`rlx-onnx bench`, which times
`Session::run`). Tiny models, so the time is the call's, not the model's.

    python3 scripts/python_overhead_bench.py --binary target/release/rlx-onnx [--rounds 5 --iters 2000]

Compare like with like: a release wheel (`maturin build --release`) with the
release binary, or the dev wheel scripts/python-test.sh builds with
`--binary target/debug/rlx-onnx` (both built with the dev profile).

Run it in a virtualenv with the wheel installed (scripts/python-test.sh makes
one: target/py-test-venv/bin/python). Prints medians in microseconds and the
ratios rlx_onnx/ORT and rlx_onnx/Rust.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime
from onnx import TensorProto, helper, numpy_helper, save, save_tensor

import rlx_onnx


def tiny_models(tmp):
    """(name, path, feed): an Add of two 1x4 tensors, and a 1x16 MLP."""
    add = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["a", "b"], ["y"])],
            "add",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("a", "b")],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        ),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "bias")
    mlp = helper.make_model(
        helper.make_graph(
            [
                helper.make_node("MatMul", ["x", "w"], ["h"]),
                helper.make_node("Add", ["h", "bias"], ["z"]),
                helper.make_node("Relu", ["z"], ["y"]),
            ],
            "mlp",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
            initializer=[w, bias],
        ),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    out = []
    for name, m, feed in (
        ("add_1x4", add, {"a": np.ones((1, 4), np.float32), "b": np.ones((1, 4), np.float32)}),
        ("mlp_1x16", mlp, {"x": np.ones((1, 16), np.float32)}),
    ):
        m.ir_version = 8
        path = os.path.join(tmp, f"{name}.onnx")
        save(m, path)
        d = os.path.join(tmp, f"{name}_inputs")
        os.makedirs(d)
        for k, v in feed.items():
            save_tensor(numpy_helper.from_array(v, k), os.path.join(d, f"{k}.pb"))
        out.append((name, path, feed, d))
    return out


def per_call_us(session, feed, iters):
    session.run(None, feed)
    start = time.perf_counter()
    for _ in range(iters):
        session.run(None, feed)
    return (time.perf_counter() - start) / iters * 1e6


def rust_us(binary, path, inputs, iters):
    r = subprocess.run(
        [binary, "bench", path, "--inputs", inputs, "--iters", str(iters), "--threads", "1"],
        capture_output=True, text=True, check=True,
    )
    m = re.search(r"median: ([0-9.]+) ms", r.stdout)
    if not m:
        sys.exit(f"cannot read the median from `rlx-onnx bench`:\n{r.stdout}")
    # `bench` prints sub-millisecond medians to three significant digits.
    return float(m.group(1)) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/release/rlx-onnx")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=2000)
    a = ap.parse_args()
    print(f"onnxruntime {onnxruntime.__version__}, rlx_onnx {rlx_onnx.__version__}; one thread; "
          f"{a.rounds} rounds x {a.iters} calls, alternating; medians in us")
    print(f"{'model':<10} {'ORT py':>8} {'rlx py':>8} {'rlx Rust':>9} {'rlx/ORT':>8} {'py/Rust':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, feed, inputs in tiny_models(tmp):
            so = onnxruntime.SessionOptions()
            so.intra_op_num_threads = 1
            ort = onnxruntime.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            ro = rlx_onnx.SessionOptions()
            ro.intra_op_num_threads = 1
            rlx = rlx_onnx.InferenceSession(path, ro)
            o, r, rust = [], [], []
            for _ in range(a.rounds):
                o.append(per_call_us(ort, feed, a.iters))
                r.append(per_call_us(rlx, feed, a.iters))
                rust.append(rust_us(a.binary, path, inputs, a.iters))
            mo, mr, mrust = statistics.median(o), statistics.median(r), statistics.median(rust)
            print(f"{name:<10} {mo:8.2f} {mr:8.2f} {mrust:9.2f} {mr / mo:8.2f} {mr / mrust:8.2f}")


if __name__ == "__main__":
    main()
