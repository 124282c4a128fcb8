#!/usr/bin/env python3
"""Attention alone on CUDA: rlx-onnx's tiled kernels against PyTorch's SDPA.

Runs ON THE LENT GPU MACHINE (torch and onnx are installed there). For each
shape it writes an ONNX model of CHAIN opset-23 `Attention` nodes in fp16
(each one's output the next one's queries; K and V shared), runs it through
`rlx-onnx bench --target cuda --profile` once per `--cuda-attention` choice
and reads the attention steps' kernel time from the profile (device time,
events around each step), then times `torch.nn.functional.
scaled_dot_product_attention` on the same shape with each of its fp16
backends (flash, cuDNN, memory-efficient) by CUDA events. Both sides are
device time of the attention alone; the ratio is rlx-onnx's default choice
against the fastest SDPA backend.

    python3 scripts/attention_bench.py --binary /tmp/rlx-onnx \\
        [--shapes 1x12x1536x64,1x12x1024x64c] [--kernels tiled,tiled-wide] \\
        [--out DIR]

A shape is BxHxSxD, with a trailing `c` for causal.
"""
import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

CHAIN = 8

SHAPES = [
    "1x12x128x64",
    "2x12x128x64",
    "8x12x128x64",
    "1x12x197x64",
    "1x12x256x64",
    "1x12x512x64",
    "1x12x1024x64c",
    "1x12x1536x64",
    "1x12x4096x64",
    "1x16x2048x128",
    "1x32x1024x128c",
]

KERNELS = ["tiled", "tiled-split", "tiled-wide"]


def parse_shape(s):
    causal = s.endswith("c")
    b, h, sq, d = (int(x) for x in s.rstrip("c").split("x"))
    return b, h, sq, d, causal


def write_model(path, b, h, sq, d, causal):
    import onnx
    from onnx import TensorProto, helper

    dims = [b, h, sq, d]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT16, dims) for n in ("q", "k", "v")]
    nodes, prev = [], "q"
    for i in range(CHAIN):
        out = "y" if i == CHAIN - 1 else f"y{i}"
        nodes.append(helper.make_node("Attention", [prev, "k", "v"], [out], name=f"attention_{i}", is_causal=int(causal)))
        prev = out
    graph = helper.make_graph(nodes, "attention", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT16, dims)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.save(model, str(path))


def rlx_us(binary, model, kernel):
    """Mean kernel time of one attention step (us), from `bench --profile`."""
    r = subprocess.run(
        [binary, "bench", str(model), "--target", "cuda", "--generate-missing", "--iters", "5",
         "--warmup", "2", "--profile", "--top", "0", "--cuda-attention", kernel],
        capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip() or r.stdout.strip())
    total, steps = 0.0, 0
    for line in r.stdout.splitlines():
        m = re.match(r"\s+(flash_attention\S*?|attention\S*?),?\s+([\d.]+) ms\s+[\d.]+%\s+\((\d+) steps\)", line)
        if m:
            total += float(m.group(2))
            steps += int(m.group(3))
    if steps != CHAIN:
        raise RuntimeError(f"expected {CHAIN} attention steps in the profile:\n{r.stdout}")
    return total / steps * 1000.0, r.stdout


def torch_us(b, h, sq, d, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (torch.randn(b, h, sq, d, device="cuda", dtype=torch.float16) for _ in range(3))
    out = {}
    for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                     ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        try:
            with sdpa_kernel([be]):
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                n = 50
                s.record()
                for _ in range(n):
                    fn()
                e.record()
                torch.cuda.synchronize()
                out[name] = s.elapsed_time(e) / n * 1000.0
        except RuntimeError:
            out[name] = None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    kernels = a.kernels.split(",")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rlx-attention-"))
    head = ["shape", *[f"rlx {k}" for k in kernels], "sdpa flash", "sdpa cudnn", "sdpa efficient", "rlx/best sdpa"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    print(rows[0], flush=True)
    print(rows[1], flush=True)
    for spec in a.shapes.split(","):
        b, h, sq, d, causal = parse_shape(spec)
        model = work / f"{spec}.onnx"
        write_model(model, b, h, sq, d, causal)
        cells = [spec]
        ours = {}
        for k in kernels:
            try:
                us, log = rlx_us(a.binary, model, k)
                ours[k] = us
                cells.append(f"{us:.1f}")
                if a.out:
                    (a.out / f"attention_{spec}_{k}.txt").write_text(log)
            except Exception as ex:  # one failing choice must not hide the rest
                print(f"{spec} {k}: {ex}", file=sys.stderr)
                cells.append("error")
        peers = torch_us(b, h, sq, d, causal)
        for name in ("flash", "cudnn", "efficient"):
            cells.append("n/a" if peers[name] is None else f"{peers[name]:.1f}")
        best = min((v for v in peers.values() if v is not None), default=None)
        mine = ours.get("tiled", min(ours.values(), default=None))
        cells.append(f"{mine / best:.2f}" if best and mine else "n/a")
        row = "| " + " | ".join(cells) + " |"
        rows.append(row)
        print(row, flush=True)
    if a.out:
        (a.out / "attention.md").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
