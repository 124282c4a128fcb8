#!/usr/bin/env python3
"""rlx-onnx (CPU) against onnxruntime, one thread each (or --threads N), on the 9 `light/` models
of the onnx 1.22.0 test data, the golden CNN and transformer, and two recurrent
layers made here (a bidirectional LSTM, hidden 256 over 64 steps, as OCR
recognizers have; a GRU, hidden 128 over 100 steps, as audio models have).

Each round runs ORT (intra-op threads 1, all graph optimizations) then
`rlx-onnx bench --threads 1`, for several rounds alternately; the table reports the
median of the per-round medians and the ratio rlx/ORT (below 1: rlx-onnx is faster),
with the geometric mean last.

Usage: python3 scripts/bench_vs_ort.py [--rounds 3] [--iters 20] [--opt-level 2] [--models light_vgg19,...] [--corpus]
                                      [--threads N] [--binary PATH]
(--corpus adds the real-model corpus of scripts/corpus, fetched by scripts/corpus/fetch.py)
Needs: pip install onnxruntime==1.31.1 onnx==1.22.0 numpy, and a release build of rlx-onnx
(the script builds it with cargo if missing).
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def data_dir():
    if os.environ.get("RLX_ONNX_TESTDATA"):
        return os.environ["RLX_ONNX_TESTDATA"]
    out = subprocess.run([os.path.join(ROOT, "scripts", "fetch-onnx-testdata.sh")], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def models():
    light = os.path.join(data_dir(), "light")
    for f in sorted(os.listdir(light)):
        if f.endswith(".onnx"):
            path = os.path.join(light, f)
            m = onnx.load(path, load_external_data=False)
            inits = {t.name for t in m.graph.initializer}
            inp = [i for i in m.graph.input if i.name not in inits][0]
            dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
            n = int(np.prod(dims))
            x = (np.arange(n) / n).astype(np.float32).reshape(dims)
            yield f[:-5], path, {inp.name: x}
    for name in ["cnn", "transformer"]:
        case = os.path.join(ROOT, "golden", name)
        m = onnx.load(os.path.join(case, "model.onnx"), load_external_data=False)
        inits = {t.name for t in m.graph.initializer}
        names = [i.name for i in m.graph.input if i.name not in inits]
        feeds = {}
        for i, n in enumerate(names):
            feeds[n] = numpy_helper.to_array(onnx.load_tensor(os.path.join(case, "test_data_set_0", f"input_{i}.pb")))
        yield f"golden_{name}", os.path.join(case, "model.onnx"), feeds


def recurrent(tmp):
    """One-layer LSTM and GRU models with seeded weights, written to `tmp`."""
    r = np.random.default_rng(0)
    for name, kind, seq, inp, hs, bidir in [("rnn_lstm_bi_h256", "LSTM", 64, 512, 256, True), ("rnn_gru_h128", "GRU", 100, 64, 128, False)]:
        d, g = 2 if bidir else 1, {"LSTM": 4, "GRU": 3}[kind]
        w = [numpy_helper.from_array((0.1 * r.standard_normal(s)).astype(np.float32), n)
             for n, s in [("W", (d, g * hs, inp)), ("R", (d, g * hs, hs)), ("B", (d, 2 * g * hs))]]
        node = onnx.helper.make_node(kind, ["x", "W", "R", "B"], ["y", "yh"], hidden_size=hs, direction="bidirectional" if bidir else "forward")
        graph = onnx.helper.make_graph([node], name, [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [seq, 1, inp])],
                                       [onnx.helper.make_empty_tensor_value_info("y"), onnx.helper.make_empty_tensor_value_info("yh")], w)
        m = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 14)])
        m.ir_version = 8
        path = os.path.join(tmp, f"{name}.onnx")
        onnx.save(m, path)
        yield name, path, {"x": r.standard_normal((seq, 1, inp)).astype(np.float32)}


def int8_ffn(tmp):
    """A transformer FFN as onnxruntime's quantize_dynamic writes it: per matmul,
    DynamicQuantizeLinear of the activations, MatMulInteger with int8 weights,
    Cast and the two scales (128 tokens, 384 -> 1536 -> 384)."""
    r = np.random.default_rng(1)
    h = onnx.helper
    nodes, inits = [], []
    x = "x"
    for i, (k, n) in enumerate([(384, 1536), (1536, 384)]):
        w = r.integers(-127, 128, (k, n)).astype(np.int8)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.int8(0), f"wz{i}"),
                  numpy_helper.from_array(np.float32(0.02), f"ws{i}")]
        nodes += [h.make_node("DynamicQuantizeLinear", [x], [f"q{i}", f"s{i}", f"z{i}"]),
                  h.make_node("MatMulInteger", [f"q{i}", f"w{i}", f"z{i}", f"wz{i}"], [f"acc{i}"]),
                  h.make_node("Cast", [f"acc{i}"], [f"f{i}"], to=onnx.TensorProto.FLOAT),
                  h.make_node("Mul", [f"s{i}", f"ws{i}"], [f"sc{i}"]),
                  h.make_node("Mul", [f"f{i}", f"sc{i}"], [f"y{i}"])]
        x = f"y{i}"
        if i == 0:
            nodes.append(h.make_node("Relu", [x], ["r0"]))
            x = "r0"
    graph = h.make_graph(nodes, "int8_ffn", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [128, 384])],
                         [h.make_empty_tensor_value_info(x)], inits)
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(tmp, "int8_ffn.onnx")
    onnx.save(m, path)
    yield "int8_ffn_384x1536", path, {"x": r.standard_normal((128, 384)).astype(np.float32)}


def corpus():
    """The real-model corpus (scripts/corpus/fetch.py), inputs from each case's
    first test_data_set."""
    cases = os.path.join(ROOT, ".cache", "corpus", "cases")
    if not os.path.isdir(cases):
        sys.exit("no corpus: run `python3 scripts/corpus/fetch.py` first")
    for name in sorted(os.listdir(cases)):
        case = os.path.join(cases, name)
        m = onnx.load(os.path.join(case, "model.onnx"), load_external_data=False)
        inits = {t.name for t in m.graph.initializer}
        names = [i.name for i in m.graph.input if i.name not in inits]
        data = os.path.join(case, "test_data_set_0")
        feeds = {n: numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f"input_{i}.pb"))) for i, n in enumerate(names)}
        yield f"corpus_{name}", os.path.join(case, "model.onnx"), feeds


def ort_median(path, feeds, iters, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        sess.run(None, feeds)
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run(None, feeds)
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def rlx_median(binary, path, feeds, iters, opt_level, threads, tmp):
    d = os.path.join(tmp, "inputs")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    for i, x in enumerate(feeds.values()):
        onnx.save_tensor(numpy_helper.from_array(x), os.path.join(d, f"input_{i}.pb"))
    out = subprocess.run(
        [binary, "bench", path, "--inputs", d, "--threads", str(threads), "--iters", str(iters), "-O", str(opt_level)],
        check=True, capture_output=True, text=True,
    ).stdout
    for line in out.splitlines():
        if line.startswith("median:"):
            return float(line.split()[1])
    raise RuntimeError(f"no median in output: {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--opt-level", default="2")
    ap.add_argument("--models", default="", help="comma-separated parts of model names (light_squeezenet, corpus_yolo26n, ...)")
    ap.add_argument("--corpus", action="store_true", help="also the real-model corpus (.cache/corpus, from scripts/corpus/fetch.py)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads of both")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "rlx-onnx"))
    args = ap.parse_args()
    binary = args.binary
    if not os.path.exists(binary):
        subprocess.run(["cargo", "build", "--release", "--bin", "rlx-onnx"], cwd=ROOT, check=True)
    wanted = set(filter(None, args.models.split(",")))
    t = f"{args.threads} thread{'s' if args.threads > 1 else ''}"
    print(f"onnxruntime {ort.__version__}, {t}; rlx-onnx -O{args.opt_level}, {t}; {args.rounds} rounds x {args.iters} runs")
    print(f"{'model':<24} {'ORT ms':>10} {'rlx ms':>10} {'rlx/ORT':>8}")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        suites = [models(), recurrent(tmp), int8_ffn(tmp)] + ([corpus()] if args.corpus else [])
        for name, path, feeds in (case for suite in suites for case in suite):
            if wanted and not any(w in name for w in wanted):
                continue
            o, r = [], []
            for _ in range(args.rounds):
                o.append(ort_median(path, feeds, args.iters, args.threads))
                r.append(rlx_median(binary, path, feeds, args.iters, args.opt_level, args.threads, tmp))
            om, rm = statistics.median(o), statistics.median(r)
            ratios.append(rm / om)
            print(f"{name:<24} {om:>10.3f} {rm:>10.3f} {rm / om:>8.3f}")
            sys.stdout.flush()
    if not ratios:
        sys.exit("no model matched --models")
    print(f"{'geometric mean':<24} {'':>10} {'':>10} {math.exp(sum(map(math.log, ratios)) / len(ratios)):>8.3f}")


if __name__ == "__main__":
    main()
