#!/usr/bin/env python3
"""Issue 36's CPU patterns as small models, rlx-onnx against onnxruntime on
one thread (or --threads N), alternating round by round: a one-hot built as
Equal + Cast, a tall 5x1 convolution over a small plane, 2x2/2 transposed
convolutions (upsampling), a pointwise convolution alone and followed by an
erf-GELU or a SiLU, stride-2 3x3 convolutions with few input
channels (a detector's stem) and a few-channel pointwise one over a large
plane, a softmax guarded with IsNaN/Where behind int8
weights stored with Cast + Mul, and a MiniLM-shaped BERT encoder (6 layers,
384 wide, 128 tokens with padding) in fp32 and dynamically quantized to int8.

Usage: python3 scripts/cpu_patterns_bench.py [--binary target/release/rlx-onnx]
                                             [--threads 1] [--rounds 3] [--only onehot,...]
Writes the models and inputs to a temporary folder. Needs onnx, onnxruntime, numpy.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng(0)
vi = h.make_tensor_value_info


def save(name, nodes, ins, outs, inits, opset=17):
    g = h.make_graph(nodes, name, ins, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, f"{name}.onnx")


def W(name, *shape, dt=np.float32, scale=0.05):
    return nh.from_array((rng.standard_normal(shape) * scale).astype(dt), name)


def build():
    # 1. one-hot: Equal(ids[...,None], range) -> Cast -> MatMul
    save("onehot", [h.make_node("Unsqueeze", ["ids", "ax"], ["u"]), h.make_node("Equal", ["u", "r"], ["e"]),
                    h.make_node("Cast", ["e"], ["f"], to=T.FLOAT), h.make_node("MatMul", ["f", "w"], ["y"])],
         [vi("ids", T.INT64, [1, 512])], [vi("y", T.FLOAT, [1, 512, 64])],
         [nh.from_array(np.array([-1], np.int64), "ax"), nh.from_array(np.arange(1024, dtype=np.int64), "r"), W("w", 1024, 64)])
    # 2. tall conv 5x1 over 12x32, 256->512
    save("tallconv", [h.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[5, 1], pads=[2, 0, 2, 0]), h.make_node("Relu", ["y"], ["z"])],
         [vi("x", T.FLOAT, [1, 256, 12, 32])], [vi("z", T.FLOAT, [1, 512, 12, 32])], [W("w", 512, 256, 5, 1), W("b", 512)])
    # 3. ConvTranspose 2x2 s2, 16->16, 160x160 -> 320x320 (+BN-like Relu)
    save("convt2x2", [h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[2, 2], strides=[2, 2]), h.make_node("Relu", ["y"], ["z"])],
         [vi("x", T.FLOAT, [1, 16, 160, 160])], [vi("z", T.FLOAT, [1, 16, 320, 320])], [W("w", 16, 16, 2, 2), W("b", 16)])
    # 3b. DB-style: 64->64 k2 s2 at 80x80
    save("convt2x2_64", [h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
         [vi("x", T.FLOAT, [1, 64, 80, 80])], [vi("y", T.FLOAT, [1, 64, 160, 160])], [W("w", 64, 64, 2, 2), W("b", 64)])
    # 4. pointwise 32->64 at 160x160 + erf GELU
    save("pw_gelu", [h.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1]),
                     h.make_node("Div", ["y", "s2"], ["d"]), h.make_node("Erf", ["d"], ["e"]), h.make_node("Add", ["e", "one"], ["a"]),
                     h.make_node("Mul", ["y", "a"], ["m"]), h.make_node("Mul", ["m", "half"], ["z"])],
         [vi("x", T.FLOAT, [1, 32, 160, 160])], [vi("z", T.FLOAT, [1, 64, 160, 160])],
         [W("w", 64, 32, 1, 1, scale=0.2), W("b", 64), nh.from_array(np.array(1.4142135, np.float32), "s2"),
          nh.from_array(np.array(1.0, np.float32), "one"), nh.from_array(np.array(0.5, np.float32), "half")])
    # 5. NaN-guarded softmax attention with int8 weights (Cast+Mul)
    S, D, Hh = 256, 256, 4
    nodes = [h.make_node("Cast", ["wq8"], ["wqf"], to=T.FLOAT), h.make_node("Mul", ["wqf", "sq"], ["wq"]),
             h.make_node("MatMul", ["x", "wq"], ["q"]),
             h.make_node("Reshape", ["q", "shp"], ["q4"]), h.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
             h.make_node("Transpose", ["q4"], ["kh"], perm=[0, 2, 3, 1]),
             h.make_node("MatMul", ["qh", "kh"], ["s"]), h.make_node("Mul", ["s", "scale"], ["ss"]),
             h.make_node("Softmax", ["ss"], ["p"], axis=-1), h.make_node("IsNaN", ["p"], ["nan"]),
             h.make_node("Where", ["nan", "zero", "p"], ["pg"]), h.make_node("MatMul", ["pg", "qh"], ["o"]),
             h.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), h.make_node("Reshape", ["ot", "shp3"], ["y"])]
    save("nan_softmax", nodes, [vi("x", T.FLOAT, [1, S, D])], [vi("y", T.FLOAT, [1, S, D])],
         [nh.from_array(rng.integers(-127, 127, (D, D)).astype(np.int8), "wq8"), nh.from_array(np.array(0.002, np.float32), "sq"),
          nh.from_array(np.array([1, S, Hh, D // Hh], np.int64), "shp"), nh.from_array(np.array([1, S, D], np.int64), "shp3"),
          nh.from_array(np.array(0.125, np.float32), "scale"), nh.from_array(np.array(0.0, np.float32), "zero")])
    save("pw_only", [h.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1])],
         [vi("x", T.FLOAT, [1, 32, 160, 160])], [vi("y", T.FLOAT, [1, 64, 160, 160])], [W("w", 64, 32, 1, 1, scale=0.2), W("b", 64)])
    save("pw_silu", [h.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1]), h.make_node("Sigmoid", ["y"], ["s"]), h.make_node("Mul", ["y", "s"], ["z"])],
         [vi("x", T.FLOAT, [1, 32, 160, 160])], [vi("z", T.FLOAT, [1, 64, 160, 160])], [W("w", 64, 32, 1, 1, scale=0.2), W("b", 64)])
    # 6. stride-2 3x3 convolutions with few input channels and a SiLU, as a
    # detector's stem writes them (YOLOv8n at 640²: 3->16, 16->32, 32->64).
    for name, ci, co, hw in [("stem3", 3, 16, 640), ("down16", 16, 32, 320), ("down32", 32, 64, 160)]:
        save(name, [h.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                    h.make_node("Sigmoid", ["y"], ["s"]), h.make_node("Mul", ["y", "s"], ["z"])],
             [vi("x", T.FLOAT, [1, ci, hw, hw])], [vi("z", T.FLOAT, [1, co, hw // 2, hw // 2])],
             [W("w", co, ci, 3, 3, scale=0.2), W("b", co)])
    # 7. a pointwise convolution with few channels over a large plane (16->16 at 256²).
    save("pw16", [h.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1]), h.make_node("Sigmoid", ["y"], ["s"]),
                  h.make_node("Mul", ["y", "s"], ["z"])],
         [vi("x", T.FLOAT, [1, 16, 256, 256])], [vi("z", T.FLOAT, [1, 16, 256, 256])], [W("w", 16, 16, 1, 1, scale=0.2), W("b", 16)])
    encoder("minilm")
    quantized("minilm", "minilm_int8")


def encoder(name, layers=6, hidden=384, heads=12, ffn=1536, seq=128, vocab=30522):
    """A MiniLM-shaped BERT encoder (sentence-transformers' small models) as
    the TorchScript exporter writes one: embeddings, then per layer Q/K/V
    MatMul+Add, Reshape/Transpose to heads, scaled QK^T plus the additive
    padding mask, Softmax, the head merge, the output projection, residual
    adds and LayerNormalization, an erf-GELU FFN."""
    dh = hidden // heads
    nodes, inits = [], [W("word", vocab, hidden, scale=0.5), W("pos", seq, hidden, scale=0.5),
                        nh.from_array(np.array([0, 0, heads, dh], np.int64), "heads"),
                        nh.from_array(np.array([0, 0, hidden], np.int64), "merged"),
                        nh.from_array(np.array(1.0 / np.sqrt(dh), np.float32), "scale"),
                        nh.from_array(np.array(1.4142135, np.float32), "s2"),
                        nh.from_array(np.array(1.0, np.float32), "one"), nh.from_array(np.array(0.5, np.float32), "half"),
                        nh.from_array(np.array(-10000.0, np.float32), "neg"), nh.from_array(np.array([1, 2], np.int64), "ax12")]
    n = nodes.append

    def ln(x, y, p):
        inits.extend([nh.from_array((1 + rng.standard_normal(hidden) * 0.1).astype(np.float32), f"{p}_g"), W(f"{p}_b", hidden)])
        n(h.make_node("LayerNormalization", [x, f"{p}_g", f"{p}_b"], [y], axis=-1, epsilon=1e-12))

    def linear(x, y, p, k, m):
        inits.extend([W(f"{p}_w", k, m), W(f"{p}_bias", m)])
        n(h.make_node("MatMul", [x, f"{p}_w"], [f"{p}_mm"]))
        n(h.make_node("Add", [f"{p}_mm", f"{p}_bias"], [y]))

    n(h.make_node("Gather", ["word", "ids"], ["we"]))
    n(h.make_node("Add", ["we", "pos"], ["emb"]))
    ln("emb", "x0", "eln")
    # The padding mask as BERT's exporter writes it: (1 - mask) * -10000 on [b, 1, 1, s].
    n(h.make_node("Unsqueeze", ["mask", "ax12"], ["m4"]))
    n(h.make_node("Cast", ["m4"], ["mf"], to=T.FLOAT))
    n(h.make_node("Sub", ["one", "mf"], ["inv"]))
    n(h.make_node("Mul", ["inv", "neg"], ["bias"]))
    x = "x0"
    for i in range(layers):
        p = f"l{i}"
        for t in "qkv":
            linear(x, f"{p}{t}", f"{p}{t}", hidden, hidden)
            n(h.make_node("Reshape", [f"{p}{t}", "heads"], [f"{p}{t}4"]))
        n(h.make_node("Transpose", [f"{p}q4"], [f"{p}qh"], perm=[0, 2, 1, 3]))
        n(h.make_node("Transpose", [f"{p}k4"], [f"{p}kh"], perm=[0, 2, 3, 1]))
        n(h.make_node("Transpose", [f"{p}v4"], [f"{p}vh"], perm=[0, 2, 1, 3]))
        n(h.make_node("MatMul", [f"{p}qh", f"{p}kh"], [f"{p}s"]))
        n(h.make_node("Mul", [f"{p}s", "scale"], [f"{p}ss"]))
        n(h.make_node("Add", [f"{p}ss", "bias"], [f"{p}sm"]))
        n(h.make_node("Softmax", [f"{p}sm"], [f"{p}p"], axis=-1))
        n(h.make_node("MatMul", [f"{p}p", f"{p}vh"], [f"{p}o"]))
        n(h.make_node("Transpose", [f"{p}o"], [f"{p}ot"], perm=[0, 2, 1, 3]))
        n(h.make_node("Reshape", [f"{p}ot", "merged"], [f"{p}om"]))
        linear(f"{p}om", f"{p}proj", f"{p}o", hidden, hidden)
        n(h.make_node("Add", [f"{p}proj", x], [f"{p}r1"]))
        ln(f"{p}r1", f"{p}h1", f"{p}ln1")
        linear(f"{p}h1", f"{p}f1", f"{p}f1", hidden, ffn)
        n(h.make_node("Div", [f"{p}f1", "s2"], [f"{p}gd"]))
        n(h.make_node("Erf", [f"{p}gd"], [f"{p}ge"]))
        n(h.make_node("Add", [f"{p}ge", "one"], [f"{p}ga"]))
        n(h.make_node("Mul", [f"{p}f1", f"{p}ga"], [f"{p}gm"]))
        n(h.make_node("Mul", [f"{p}gm", "half"], [f"{p}g"]))
        linear(f"{p}g", f"{p}f2", f"{p}f2", ffn, hidden)
        n(h.make_node("Add", [f"{p}f2", f"{p}h1"], [f"{p}r2"]))
        ln(f"{p}r2", f"{p}h2", f"{p}ln2")
        x = f"{p}h2"
    n(h.make_node("Identity", [x], ["y"]))
    save(name, nodes, [vi("ids", T.INT64, [1, seq]), vi("mask", T.INT64, [1, seq])], [vi("y", T.FLOAT, [1, seq, hidden])], inits)


def quantized(src, name):
    """`src` with ONNX Runtime's dynamic int8 quantization (what int8 MiniLM
    exports hold: DynamicQuantizeLinear, MatMulInteger, Cast, Mul)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(f"{src}.onnx", f"{name}.onnx", weight_type=QuantType.QInt8)


def feeds(m):
    out = {}
    for i in m.graph.input:
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        r = np.random.default_rng(0)
        if i.name == "mask":  # a padding mask: the last quarter padded
            out[i.name] = (np.arange(dims[-1]) < dims[-1] * 3 // 4).astype(np.int64)[None].repeat(dims[0], 0)
        elif i.type.tensor_type.elem_type == T.INT64:
            out[i.name] = r.integers(0, 1000, dims).astype(np.int64)
        else:
            out[i.name] = r.standard_normal(dims).astype(np.float32)
    return out


def ort_median(path, feeds, threads, iters):
    """ORT's median ms. The session is made and dropped here: its pool's
    threads spin after a run, and a session kept alive while rlx-onnx's
    timed runs went on took one of their cores (a 2-core VM: a pointwise
    convolution on two threads timed 1.14 ms beside ORT's spinning threads,
    0.56 alone)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        s.run(None, feeds)
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        s.run(None, feeds)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "rlx-onnx"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    os.chdir(tempfile.mkdtemp(prefix="rlx-patterns-"))
    build()
    names = ["onehot", "tallconv", "convt2x2", "convt2x2_64", "pw_only", "pw_gelu", "pw_silu", "stem3", "down16", "down32", "pw16",
             "nan_softmax", "minilm", "minilm_int8"]
    if args.only:
        names = args.only.split(",")
    print(f"onnxruntime {ort.__version__}, {args.threads} thread(s); {args.rounds} rounds x {args.iters} runs")
    print(f"{'model':14s} {'ORT ms':>9s} {'rlx ms':>9s}  rlx/ORT")
    ratios = []
    for n in names:
        m = onnx.load(f"{n}.onnx")
        f = feeds(m)
        for k, v in f.items():
            np.save(f"{n}_{k}.npy", v)
        o, r = [], []
        for _ in range(args.rounds):
            o.append(ort_median(f"{n}.onnx", f, args.threads, args.iters))
            cmd = [binary, "bench", f"{n}.onnx", "--threads", str(args.threads), "--iters", str(args.iters)]
            for k in f:
                cmd += ["--input", f"{k}={n}_{k}.npy"]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            mm = re.search(r"median:\s+([\d.]+)\s*(ms|us|µs)", res.stdout + res.stderr)
            r.append(float(mm.group(1)) / (1 if mm.group(2) == "ms" else 1000))
        a, b = statistics.median(o), statistics.median(r)
        ratios.append(b / a)
        print(f"{n:14s} {a:9.3f} {b:9.3f}  {b / a:7.3f}")
    print(f"{'geometric mean':34s}  {float(np.exp(np.mean(np.log(ratios)))):7.3f}")


if __name__ == "__main__":
    main()
