#!/usr/bin/env python3
"""Single operators on each GPU backend: kernel time and achieved throughput.

Runs ON THE LENT GPU MACHINE (torch there; the Vulkan loader carried in
`.gl/`, see scripts/gpu-env.sh). For each operator shape it writes a
one-node ONNX model (random weights), runs `rlx-onnx bench --profile` on
every target and reads the kernel time the profile sums (the device's own
timestamps), then times the same operation in PyTorch (CUDA events, fp32
with TF32 off) in the same call. The columns are kernel milliseconds and
TFLOP/s (products) or GB/s (norms: bytes read and written once).

    python3 scripts/gpu_ops_bench.py --binary B [--binary B2 ...] \
        [--targets cuda,vulkan,wgpu] [--ops mm,norm,chain] [--iters 20]

`chain` cases are 64 dependent dispatches of one small operator: their
columns are ms a step from the profile and from the wall clock (the median
run over 64), what a dependent dispatch costs in a stream.

Several `--binary` flags time each binary on every shape in turn, for A/B
comparisons of a kernel change in one call.
"""
import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

MATMULS = [
    # (m, k, n): BERT-base's products at 128 tokens, then square ones.
    (128, 768, 768),
    (128, 768, 2304),
    (128, 768, 3072),
    (128, 3072, 768),
    (1024, 768, 3072),
    (1024, 1024, 1024),
    (4096, 4096, 4096),
]
NORMS = [(128, 768), (1024, 768), (4096, 1024)]


def matmul_model(m, k, n, path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((k, n)) * 0.05).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="product")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def norm_model(rows, len_, path):
    """A residual add then LayerNorm (the fused residual norm)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    scale = numpy_helper.from_array(rng.standard_normal(len_).astype(np.float32), "scale")
    bias = numpy_helper.from_array(rng.standard_normal(len_).astype(np.float32), "bias")
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "r"], ["s"], name="residual"),
         helper.make_node("LayerNormalization", ["s", "scale", "bias"], ["y"], name="norm", axis=-1)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, len_]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [rows, len_])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, len_])], [scale, bias])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def chain_model(op, count, rows, len_, path):
    """`count` dependent `op`s (Softmax or LayerNormalization) over a
    [rows, len] input: one dispatch each, each waiting for the last."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    if op == "LayerNormalization":
        inits = [numpy_helper.from_array(rng.standard_normal(len_).astype(np.float32), n) for n in ("s", "b")]
    for i in range(count):
        y = "y" if i == count - 1 else f"t{i}"
        ins = [x, "s", "b"] if op == "LayerNormalization" else [x]
        nodes.append(helper.make_node(op, ins, [y], name=f"{op.lower()}{i}", axis=-1))
        x = y
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, len_])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, len_])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def kernel_ms(binary, model, target, iters):
    """(kernel ms from the profile, median wall ms) of `bench --profile`."""
    cmd = [binary, "bench", str(model), "--target", target, "--profile", "--iters", str(iters)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    k = re.search(r"profile: \d+ steps?, ([0-9.]+) ms in kernels", out)
    w = re.search(r"median: ([0-9.]+) ms", out)
    if r.returncode != 0 or not k:
        tail = out.strip().splitlines()[-3:]
        print(f"  {target} failed: {' | '.join(tail)}", file=sys.stderr)
        return None, None
    return float(k.group(1)), float(w.group(1)) if w else None


def torch_ms(fn, iters):
    """Milliseconds a call of `fn`, replayed as a CUDA graph of `iters` calls
    (no launch overhead: the peer of a profile's kernel time)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / (5 * iters)


def torch_matmul(m, k, n, iters):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(m, k, device="cuda")
    w = torch.randn(k, n, device="cuda")
    return torch_ms(lambda: x @ w, iters)


def torch_norm(rows, len_, iters):
    import torch

    x = torch.randn(rows, len_, device="cuda")
    r = torch.randn(rows, len_, device="cuda")
    s = torch.randn(len_, device="cuda")
    b = torch.randn(len_, device="cuda")
    return torch_ms(lambda: torch.nn.functional.layer_norm(x + r, (len_,), s, b), iters)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", action="append", required=True)
    ap.add_argument("--targets", default="cuda,vulkan,wgpu")
    ap.add_argument("--ops", default="mm,norm,chain")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    targets = args.targets.split(",")
    ops = args.ops.split(",")
    work = Path(tempfile.mkdtemp(prefix="rlx-ops-"))
    cases = []
    if "mm" in ops:
        for m, k, n in MATMULS:
            p = work / f"mm_{m}x{k}x{n}.onnx"
            matmul_model(m, k, n, p)
            cases.append((f"matmul {m}x{k}x{n}", p, 2.0 * m * k * n / 1e12, "TFLOP/s",
                          lambda m=m, k=k, n=n: torch_matmul(m, k, n, args.iters)))
    if "norm" in ops:
        for rows, len_ in NORMS:
            p = work / f"norm_{rows}x{len_}.onnx"
            norm_model(rows, len_, p)
            cases.append((f"residual norm {rows}x{len_}", p, 3 * 4 * rows * len_ / 1e9, "GB/s",
                          lambda rows=rows, len_=len_: torch_norm(rows, len_, args.iters)))
    if "chain" in ops:
        # Per step of a chain of 64 dependent dispatches: what a step costs
        # in a stream (the wall time's share) against what the profile says.
        for op, rows, len_ in (("Softmax", 16, 64), ("Softmax", 128, 768), ("LayerNormalization", 128, 768)):
            p = work / f"chain_{op}_{rows}x{len_}.onnx"
            chain_model(op, 64, rows, len_, p)
            cases.append((f"chain of 64 {op} {rows}x{len_}", p, 64, "steps/ms", None))
    names = [Path(b).name if len(args.binary) > 1 else "" for b in args.binary]
    head = ["case", "torch ms", "torch rate"]
    for t in targets:
        for nm in names:
            head += [f"{t}{' ' + nm if nm else ''} ms", "rate"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for label, model, work_units, unit, peer in cases:
        tms = None
        if peer is not None:
            try:
                tms = peer()
            except Exception as e:  # no torch CUDA here: the rlx columns still count
                print(f"  torch failed on {label}: {e}", file=sys.stderr)
        row = [label, f"{tms:.4f}" if tms else "-", f"{work_units / (tms / 1e3):.1f}" if tms else "-"]
        for t in targets:
            for b in args.binary:
                ms, wall = kernel_ms(b, model, t, args.iters)
                if peer is None:  # a chain: ms a step, profiled and by the wall clock
                    row += [f"{ms / work_units:.4f}" if ms else "-",
                            f"wall {wall / work_units:.4f}" if wall else "-"]
                    continue
                row += [f"{ms:.4f}" if ms else "-", f"{work_units / (ms / 1e3):.1f}" if ms else "-"]
        print("| " + " | ".join(row) + " |", flush=True)
    print(f"(rates in {', '.join(sorted({c[3] for c in cases}))}; rlx columns: kernel time from `bench --profile`)")


if __name__ == "__main__":
    main()
