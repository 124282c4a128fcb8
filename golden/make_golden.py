#!/usr/bin/env python3
"""Generates the golden models of rlx-onnx in the ONNX backend-test layout.

Each model goes to golden/<name>/model.onnx with test_data_set_0/{input,output}_N.pb.
Inputs and weights come from a seeded generator; reference outputs come from
onnxruntime (1 thread) and are cross-checked with onnx.reference.ReferenceEvaluator,
which only warns: its BatchNormalization disagrees with ORT and with the formula.
Pinned: pip install onnx==1.22.0 onnxruntime==1.31.1 numpy

Usage: python3 golden/make_golden.py
"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

assert onnx.__version__ == "1.22.0", f"golden models are made with onnx 1.22.0, not {onnx.__version__}"
assert ort.__version__ == "1.31.1", f"golden outputs are made with onnxruntime 1.31.1, not {ort.__version__}"

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def rng(seed):
    return np.random.default_rng(seed)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model(graph, opset, ir_version=None, full_check=True):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="rlx-onnx golden")
    if ir_version is not None:
        m.ir_version = ir_version
        if ir_version < 4:
            # Before IR 4, every initializer is also a graph input.
            for t in graph.initializer:
                m.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    else:
        m.ir_version = min(m.ir_version, 10)
    # Full checking runs shape inference, which wants one rank per value: models
    # whose `If` branches differ in rank get the structural check only.
    onnx.checker.check_model(m, full_check=full_check)
    return m


def save(name, m, inputs, external=False, more=()):
    """Writes the model and one data set per input list: `inputs` as set 0, each
    of `more` as the next (models with dynamic dims are checked at several shapes)."""
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    if external:
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
        m = onnx.load(path)
    else:
        onnx.save_model(m, path)
    names = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    shapes = []
    for k, xs in enumerate([inputs, *more]):
        feeds = dict(zip(names, xs))
        outs = sess.run(None, feeds)
        for a, b in zip(outs, ReferenceEvaluator(path).run(None, feeds)):
            if not np.allclose(a, b, rtol=1e-4, atol=1e-5):
                print(f"  warning: {name}: onnx.reference differs from onnxruntime by {np.abs(a - b).max():.3g}")
        s = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(s)
        for i, x in enumerate(xs):
            onnx.save_tensor(numpy_helper.from_array(x), os.path.join(s, f"input_{i}.pb"))
        for i, y in enumerate(outs):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(y)), os.path.join(s, f"output_{i}.pb"))
        shapes.append([np.asarray(y).shape for y in outs])
    print(f"{name}: {os.path.getsize(path)} bytes, outputs {shapes if more else shapes[0]}")


def mlp():
    r = rng(1)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1/MatMul"),
        helper.make_node("Add", ["h1", "b1"], ["h2"], name="fc1/Add"),
        helper.make_node("Relu", ["h2"], ["h3"], name="relu1"),
        helper.make_node("MatMul", ["h3", "w2"], ["h4"], name="fc2/MatMul"),
        helper.make_node("Add", ["h4", "b2"], ["h5"], name="fc2/Add"),
        helper.make_node("Softmax", ["h5"], ["y"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", F, ["N", 16])],
        [helper.make_tensor_value_info("y", F, ["N", 10])],
        [
            init("w1", r.standard_normal((16, 32)).astype(np.float32) * 0.3),
            init("b1", r.standard_normal(32).astype(np.float32) * 0.1),
            init("w2", r.standard_normal((32, 10)).astype(np.float32) * 0.3),
            init("b2", r.standard_normal(10).astype(np.float32) * 0.1),
        ],
    )
    save("mlp", model(g, 17), [r.standard_normal((4, 16)).astype(np.float32)])


def cnn():
    r = rng(2)
    c1, c2 = 8, 16
    inits = [
        init("conv1.w", r.standard_normal((c1, 3, 3, 3)).astype(np.float32) * 0.3),
        init("conv1.b", r.standard_normal(c1).astype(np.float32) * 0.1),
        init("bn1.scale", (1 + 0.1 * r.standard_normal(c1)).astype(np.float32)),
        init("bn1.bias", (0.1 * r.standard_normal(c1)).astype(np.float32)),
        init("bn1.mean", (0.1 * r.standard_normal(c1)).astype(np.float32)),
        init("bn1.var", (1 + 0.2 * r.random(c1)).astype(np.float32)),
        init("conv2.w", r.standard_normal((c2, c1, 3, 3)).astype(np.float32) * 0.2),
        init("bn2.scale", (1 + 0.1 * r.standard_normal(c2)).astype(np.float32)),
        init("bn2.bias", (0.1 * r.standard_normal(c2)).astype(np.float32)),
        init("bn2.mean", (0.1 * r.standard_normal(c2)).astype(np.float32)),
        init("bn2.var", (1 + 0.2 * r.random(c2)).astype(np.float32)),
        init("fc.w", r.standard_normal((10, c2)).astype(np.float32) * 0.3),
        init("fc.b", r.standard_normal(10).astype(np.float32) * 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"], ["n1"], name="bn1", epsilon=1e-5),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.w"], ["c2"], name="conv2", pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("BatchNormalization", ["c2", "bn2.scale", "bn2.bias", "bn2.mean", "bn2.var"], ["n2"], name="bn2", epsilon=1e-5),
        helper.make_node("Relu", ["n2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["y"], name="fc", transB=1),
    ]
    g = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", F, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", F, ["N", 10])],
        inits,
    )
    save("cnn", model(g, 13), [r.standard_normal((2, 3, 16, 16)).astype(np.float32)])


def transformer():
    """One pre-norm encoder block: LayerNorm, 2-head self-attention with an
    additive mask, residual, LayerNorm, MLP with the Erf GELU, residual."""
    r = rng(3)
    d, h, ff = 16, 2, 32
    hd = d // h

    def w(*s, scale=0.2):
        return (r.standard_normal(s) * scale).astype(np.float32)

    inits = [
        init("ln1.g", (1 + 0.1 * r.standard_normal(d)).astype(np.float32)),
        init("ln1.b", w(d, scale=0.1)),
        init("wq", w(d, d)),
        init("wk", w(d, d)),
        init("wv", w(d, d)),
        init("wo", w(d, d)),
        init("bq", w(d, scale=0.1)),
        init("bk", w(d, scale=0.1)),
        init("bv", w(d, scale=0.1)),
        init("bo", w(d, scale=0.1)),
        init("ln2.g", (1 + 0.1 * r.standard_normal(d)).astype(np.float32)),
        init("ln2.b", w(d, scale=0.1)),
        init("w1", w(d, ff)),
        init("b1", w(ff, scale=0.1)),
        init("w2", w(ff, d)),
        init("b2", w(d, scale=0.1)),
        init("heads_shape", np.array([0, 0, h, hd], dtype=np.int64)),
        init("merge_shape", np.array([0, 0, d], dtype=np.int64)),
        init("scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32)),
        init("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32)),
        init("one", np.array(1.0, dtype=np.float32)),
        init("half", np.array(0.5, dtype=np.float32)),
    ]
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln1.g", "ln1.b"], ["ln1"], name="ln1", axis=-1, epsilon=1e-5),
        n("MatMul", ["ln1", "wq"], ["q0"], name="attn/q/MatMul"),
        n("Add", ["q0", "bq"], ["q1"], name="attn/q/Add"),
        n("MatMul", ["ln1", "wk"], ["k0"], name="attn/k/MatMul"),
        n("Add", ["k0", "bk"], ["k1"], name="attn/k/Add"),
        n("MatMul", ["ln1", "wv"], ["v0"], name="attn/v/MatMul"),
        n("Add", ["v0", "bv"], ["v1"], name="attn/v/Add"),
        n("Reshape", ["q1", "heads_shape"], ["q2"], name="attn/q/Reshape"),
        n("Transpose", ["q2"], ["q"], name="attn/q/Transpose", perm=[0, 2, 1, 3]),
        n("Reshape", ["k1", "heads_shape"], ["k2"], name="attn/k/Reshape"),
        n("Transpose", ["k2"], ["kt"], name="attn/k/Transpose", perm=[0, 2, 3, 1]),
        n("Reshape", ["v1", "heads_shape"], ["v2"], name="attn/v/Reshape"),
        n("Transpose", ["v2"], ["v"], name="attn/v/Transpose", perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kt"], ["s0"], name="attn/scores/MatMul"),
        n("Mul", ["s0", "scale"], ["s1"], name="attn/scores/Mul"),
        n("Add", ["s1", "mask"], ["s2"], name="attn/scores/AddMask"),
        n("Softmax", ["s2"], ["p"], name="attn/Softmax", axis=-1),
        n("MatMul", ["p", "v"], ["o0"], name="attn/context/MatMul"),
        n("Transpose", ["o0"], ["o1"], name="attn/context/Transpose", perm=[0, 2, 1, 3]),
        n("Reshape", ["o1", "merge_shape"], ["o2"], name="attn/context/Reshape"),
        n("MatMul", ["o2", "wo"], ["o3"], name="attn/out/MatMul"),
        n("Add", ["o3", "bo"], ["o4"], name="attn/out/Add"),
        n("Add", ["x", "o4"], ["res1"], name="residual1"),
        n("LayerNormalization", ["res1", "ln2.g", "ln2.b"], ["ln2"], name="ln2", axis=-1, epsilon=1e-5),
        n("MatMul", ["ln2", "w1"], ["f0"], name="mlp/fc1/MatMul"),
        n("Add", ["f0", "b1"], ["f1"], name="mlp/fc1/Add"),
        n("Div", ["f1", "sqrt2"], ["g0"], name="mlp/gelu/Div"),
        n("Erf", ["g0"], ["g1"], name="mlp/gelu/Erf"),
        n("Add", ["g1", "one"], ["g2"], name="mlp/gelu/Add"),
        n("Mul", ["f1", "g2"], ["g3"], name="mlp/gelu/Mul"),
        n("Mul", ["g3", "half"], ["g4"], name="mlp/gelu/Mul_1"),
        n("MatMul", ["g4", "w2"], ["f2"], name="mlp/fc2/MatMul"),
        n("Add", ["f2", "b2"], ["f3"], name="mlp/fc2/Add"),
        n("Add", ["res1", "f3"], ["y"], name="residual2"),
    ]
    g = helper.make_graph(
        nodes,
        "transformer_block",
        [helper.make_tensor_value_info("x", F, ["batch", "seq", d]), helper.make_tensor_value_info("mask", F, ["batch", 1, 1, "seq"])],
        [helper.make_tensor_value_info("y", F, ["batch", "seq", d])],
        inits,
    )
    b, s = 2, 5
    mask = np.zeros((b, 1, 1, s), dtype=np.float32)
    mask[1, 0, 0, 3:] = -1e9
    save("transformer", model(g, 17), [r.standard_normal((b, s, d)).astype(np.float32), mask])


def shapes():
    """Shape arithmetic over a symbolic batch and sequence: the output keeps
    [batch, seq, ...] through Shape -> Gather -> Concat -> Reshape."""
    r = rng(4)
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["shp"], name="shape"),
        n("Gather", ["shp", "i0"], ["b"], name="gather_batch", axis=0),
        n("Gather", ["shp", "i1"], ["s"], name="gather_seq", axis=0),
        n("Mul", ["b", "s"], ["bs"], name="batch_times_seq"),
        n("Concat", ["bs", "minus1"], ["flat_shape"], name="concat_flat", axis=0),
        n("Reshape", ["x", "flat_shape"], ["flat"], name="flatten_tokens"),
        n("MatMul", ["flat", "w"], ["proj"], name="proj"),
        n("Concat", ["b", "s", "minus1"], ["back_shape"], name="concat_back", axis=0),
        n("Reshape", ["proj", "back_shape"], ["proj3"], name="unflatten_tokens"),
        n("Slice", ["shp", "zero", "two"], ["bs_vec"], name="slice_batch_seq"),
        n("ConstantOfShape", ["bs_vec"], ["ones"], name="ones", value=helper.make_tensor("v", F, [1], [1.0])),
        n("Unsqueeze", ["ones", "axes_last"], ["ones3"], name="unsqueeze_ones"),
        n("Mul", ["proj3", "ones3"], ["y"], name="scale_by_ones"),
    ]
    g = helper.make_graph(
        nodes,
        "shapes",
        [helper.make_tensor_value_info("x", F, ["batch", "seq", 6])],
        [helper.make_tensor_value_info("y", F, ["batch", "seq", 4])],
        [
            init("i0", np.array([0], dtype=np.int64)),
            init("i1", np.array([1], dtype=np.int64)),
            init("minus1", np.array([-1], dtype=np.int64)),
            init("zero", np.array([0], dtype=np.int64)),
            init("two", np.array([2], dtype=np.int64)),
            init("axes_last", np.array([2], dtype=np.int64)),
            init("w", (r.standard_normal((6, 4)) * 0.5).astype(np.float32)),
        ],
    )
    save("shapes", model(g, 17), [r.standard_normal((3, 7, 6)).astype(np.float32)])


def if_branches():
    r = rng(5)
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t"], name="then/Mul")],
        "then",
        [],
        [helper.make_tensor_value_info("t", F, ["N", 4])],
        [init("two", np.array(2.0, dtype=np.float32))],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e0"], name="else/Neg"), helper.make_node("Add", ["e0", "bias"], ["e"], name="else/Add")],
        "else",
        [],
        [helper.make_tensor_value_info("e", F, ["N", 4])],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="total", keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["cond"], name="is_positive"),
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
    ]
    g = helper.make_graph(
        nodes,
        "if_branches",
        [helper.make_tensor_value_info("x", F, ["N", 4])],
        [helper.make_tensor_value_info("y", F, ["N", 4])],
        [init("zero", np.array(0.0, dtype=np.float32)), init("bias", r.standard_normal(4).astype(np.float32))],
    )
    x = np.abs(r.standard_normal((3, 4))).astype(np.float32)
    save("if_branches", model(g, 13), [x])


def int_indexing():
    """int64 indexing: Gather with negative indices, Slice with a negative step,
    Where on an int64 comparison, ArgMax, and a CumSum over int64."""
    r = rng(6)
    n = helper.make_node
    nodes = [
        n("Gather", ["table", "ids"], ["emb"], name="embed", axis=0),
        n("Slice", ["emb", "starts", "ends", "axes", "steps"], ["rev"], name="reverse_tokens"),
        n("ArgMax", ["rev"], ["best"], name="argmax", axis=-1, keepdims=0),
        n("Greater", ["best", "two"], ["big"], name="best_gt_two"),
        n("Where", ["big", "best", "ids"], ["picked"], name="where_pick"),
        n("CumSum", ["picked", "axis1"], ["y_idx"], name="cumsum"),
        n("ReduceMax", ["rev", "axes_last"], ["y_max"], name="max_feature", keepdims=0),
    ]
    g = helper.make_graph(
        nodes,
        "int_indexing",
        [helper.make_tensor_value_info("ids", I64, ["B", "T"])],
        [helper.make_tensor_value_info("y_idx", I64, ["B", "T"]), helper.make_tensor_value_info("y_max", F, ["B", "T"])],
        [
            init("table", r.standard_normal((11, 5)).astype(np.float32)),
            init("starts", np.array([-1], dtype=np.int64)),
            init("ends", np.array([-(2**62)], dtype=np.int64)),
            init("axes", np.array([1], dtype=np.int64)),
            init("steps", np.array([-1], dtype=np.int64)),
            init("two", np.array(2, dtype=np.int64)),
            init("axis1", np.array(1, dtype=np.int64)),
            init("axes_last", np.array([-1], dtype=np.int64)),
        ],
    )
    ids = r.integers(-11, 11, size=(2, 6)).astype(np.int64)
    save("int_indexing", model(g, 18), [ids])


def external_data():
    r = rng(7)
    nodes = [
        helper.make_node("MatMul", ["x", "big_w"], ["h"], name="matmul"),
        helper.make_node("Add", ["h", "big_b"], ["y"], name="add"),
    ]
    g = helper.make_graph(
        nodes,
        "external_data",
        [helper.make_tensor_value_info("x", F, ["N", 64])],
        [helper.make_tensor_value_info("y", F, ["N", 48])],
        [init("big_w", (r.standard_normal((64, 48)) * 0.1).astype(np.float32)), init("big_b", r.standard_normal(48).astype(np.float32))],
    )
    save("external_data", model(g, 17), [r.standard_normal((2, 64)).astype(np.float32)], external=True)


def versioned(opset):
    """The same small net at two opsets: Reshape, Pad, ReduceMean, Softmax,
    Split, Squeeze/Unsqueeze and Clip change signatures between 7 and 18."""
    r = rng(8)
    n = helper.make_node
    old = opset < 11
    inits = [init("w", (r.standard_normal((4, 2, 3, 3)) * 0.3).astype(np.float32)), init("shape", np.array([0, -1], dtype=np.int64))]
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1])]
    if old:
        nodes.append(n("Pad", ["c"], ["p"], name="pad", pads=[0, 0, 1, 1, 0, 0, 0, 0], mode="constant", value=0.5))
        nodes.append(n("Clip", ["p"], ["cl"], name="clip", min=-1.0, max=1.0))
        nodes.append(n("ReduceMean", ["cl"], ["m"], name="mean", axes=[3], keepdims=1))
        nodes.append(n("Split", ["m"], ["s0", "s1"], name="split", axis=1, split=[1, 3]))
        nodes.append(n("Squeeze", ["s1"], ["sq"], name="squeeze", axes=[3]))
        nodes.append(n("Unsqueeze", ["sq"], ["us"], name="unsqueeze", axes=[1]))
    else:
        inits += [
            init("pads", np.array([0, 0, 1, 1, 0, 0, 0, 0], dtype=np.int64)),
            init("padv", np.array(0.5, dtype=np.float32)),
            init("lo", np.array(-1.0, dtype=np.float32)),
            init("hi", np.array(1.0, dtype=np.float32)),
            init("ax3", np.array([3], dtype=np.int64)),
            init("ax1", np.array([1], dtype=np.int64)),
            init("split", np.array([1, 3], dtype=np.int64)),
        ]
        nodes.append(n("Pad", ["c", "pads", "padv"], ["p"], name="pad", mode="constant"))
        nodes.append(n("Clip", ["p", "lo", "hi"], ["cl"], name="clip"))
        nodes.append(n("ReduceMean", ["cl", "ax3"], ["m"], name="mean", keepdims=1))
        nodes.append(n("Split", ["m", "split"], ["s0", "s1"], name="split", axis=1))
        nodes.append(n("Squeeze", ["s1", "ax3"], ["sq"], name="squeeze"))
        nodes.append(n("Unsqueeze", ["sq", "ax1"], ["us"], name="unsqueeze"))
    nodes.append(n("Reshape", ["us", "shape"], ["flat"], name="reshape"))
    nodes.append(n("Softmax", ["flat"], ["y"], name="softmax", axis=1))
    g = helper.make_graph(
        nodes,
        f"versioned_opset{opset}",
        [helper.make_tensor_value_info("x", F, [2, 2, 6, 5])],
        [helper.make_tensor_value_info("y", F, [2, 21])],
        inits,
    )
    save(f"opset{opset}", model(g, opset, ir_version=3 if old else None), [rng(9).standard_normal((2, 2, 6, 5)).astype(np.float32)])


def loop_counter():
    """A Loop that accumulates x * i for i in 0..M and stacks the partial sums."""
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], name="body/cast", to=F),
            helper.make_node("Mul", ["x", "fi"], ["xi"], name="body/mul"),
            helper.make_node("Add", ["acc", "xi"], ["acc_out"], name="body/add"),
            helper.make_node("Identity", ["cond"], ["cond_out"], name="body/cond"),
            helper.make_node("Identity", ["acc_out"], ["scan_out"], name="body/scan"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", I64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", F, [3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", F, [3]),
            helper.make_tensor_value_info("scan_out", F, [3]),
        ],
    )
    nodes = [helper.make_node("Loop", ["M", "true", "zeros"], ["final", "partials"], name="loop", body=body)]
    g = helper.make_graph(
        nodes,
        "loop_counter",
        [helper.make_tensor_value_info("x", F, [3])],
        [helper.make_tensor_value_info("final", F, [3]), helper.make_tensor_value_info("partials", F, [4, 3])],
        [init("M", np.array(4, dtype=np.int64)), init("true", np.array(True)), init("zeros", np.zeros(3, dtype=np.float32))],
    )
    save("loop_counter", model(g, 16), [np.array([1.0, -2.0, 0.5], dtype=np.float32)])


def placeholder_dims():
    """Placeholder dim names, as Paddle and older exporters write them: `?` on
    three axes of one input, an empty name and a -1. Each is its own unknown, so
    a 48x192 image binds the two spatial `?`s to different sizes."""
    r = rng(11)
    x = helper.make_tensor_value_info("x", F, ["?", 3, "?", "?"])
    bias = helper.make_tensor_value_info("bias", F, [""])
    bias.type.tensor_type.shape.dim[0].ClearField("dim_param")
    bias.type.tensor_type.shape.dim[0].dim_value = -1
    scale = helper.make_tensor_value_info("scale", F, [""])
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc", "bias"], ["logits"], name="fc", transB=1),
        helper.make_node("Mul", ["logits", "scale"], ["scaled"], name="scale"),
        helper.make_node("Softmax", ["scaled"], ["y"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(
        nodes,
        "placeholder_dims",
        [x, bias, scale],
        [helper.make_tensor_value_info("y", F, ["?", 2])],
        [init("w", (0.3 * r.standard_normal((4, 3, 3, 3))).astype(np.float32)), init("b", r.standard_normal(4).astype(np.float32)), init("fc", r.standard_normal((2, 4)).astype(np.float32))],
    )
    f32 = lambda *s: r.standard_normal(s).astype(np.float32)
    save(
        "placeholder_dims",
        model(g, 13),
        [f32(1, 3, 48, 192), f32(2), f32(1)],
        more=[[f32(2, 3, 32, 40), f32(1), f32(2)]],
    )


def if_rank():
    """`If`s whose branches return different ranks (valid ONNX; spox and
    torch exports write them). Three conditions: a shape-determining input
    (`sr`), a shape (the length of `x`), and the data (the sign of its sum)."""
    n = helper.make_node
    one = init("one", np.array([0], dtype=np.int64))

    def branch(name, node, out, shape):
        return helper.make_graph([node], name, [], [helper.make_tensor_value_info(out, F, shape)])

    nodes = [
        n("Equal", ["sr", "sr16k"], ["is16k"], name="is16k"),
        n("If", ["is16k"], ["a"], name="by_rate",
          then_branch=branch("unsqueeze", n("Unsqueeze", ["x", "axis0"], ["u"], name="by_rate/Unsqueeze"), "u", [1, "N"]),
          else_branch=branch("halve", n("Mul", ["x", "half"], ["h"], name="by_rate/Mul"), "h", ["N"])),
        n("ReduceSum", ["a"], ["total"], name="total", keepdims=0),
        n("Shape", ["x"], ["shape"], name="shape"),
        n("Gather", ["shape", "zero"], ["len"], name="len", axis=0),
        n("Greater", ["len", "four"], ["long"], name="long"),
        n("If", ["long"], ["b"], name="by_len",
          then_branch=branch("pairs", n("Reshape", ["x", "pairs"], ["p"], name="by_len/Reshape"), "p", [2, "M"]),
          else_branch=branch("negate", n("Neg", ["x"], ["q"], name="by_len/Neg"), "q", ["N"])),
        n("ReduceMax", ["b"], ["peak"], name="peak", keepdims=0),
        n("ReduceSum", ["x"], ["sum"], name="sum", keepdims=0),
        n("Greater", ["sum", "zerof"], ["positive"], name="positive"),
        n("If", ["positive"], ["c"], name="by_sign",
          then_branch=branch("row", n("Unsqueeze", ["x", "axis0"], ["v"], name="by_sign/Unsqueeze"), "v", [1, "N"]),
          else_branch=branch("flat", n("Identity", ["x"], ["w"], name="by_sign/Identity"), "w", ["N"])),
        n("Mul", ["c", "three"], ["d"], name="triple"),
    ]
    g = helper.make_graph(
        nodes,
        "if_rank",
        [helper.make_tensor_value_info("x", F, ["N"]), helper.make_tensor_value_info("sr", I64, [])],
        # ONNX wants a shape on graph outputs; `a` and `d` change rank with the
        # branch taken, so theirs are declared as one of the two.
        [helper.make_tensor_value_info(o, F, s) for o, s in [("a", ["N"]), ("total", []), ("peak", []), ("d", ["N"])]],
        [
            init("sr16k", np.array(16000, dtype=np.int64)),
            init("axis0", np.array([0], dtype=np.int64)),
            init("half", np.array(0.5, dtype=np.float32)),
            init("zero", np.array(0, dtype=np.int64)),
            init("four", np.array(4, dtype=np.int64)),
            init("pairs", np.array([2, -1], dtype=np.int64)),
            init("zerof", np.array(0.0, dtype=np.float32)),
            init("three", np.array(3.0, dtype=np.float32)),
        ],
    )
    x0 = np.array([0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 3.0, 1.0], dtype=np.float32)
    x1 = np.array([-2.0, 0.5, -1.0], dtype=np.float32)
    save("if_rank", model(g, 13, full_check=False), [x0, np.array(16000, dtype=np.int64)], more=[[x1, np.array(8000, dtype=np.int64)]])


def decoder():
    """A two-layer decoder-only model with a key/value cache, in the layout
    `transformers` exports: `input_ids`, `attention_mask` (over the cache and
    the new tokens) and `position_ids` in, `past_key_values.N.key/value`
    `[batch, 2 heads, past, 8]` in and `present.N.key/value` out, logits out.
    The causal mask is built from the cache length as exporters build it
    (Shape, Range, LessOrEqual). Besides the data sets, golden/decoder/
    holds a greedy decode made with onnxruntime step by step,
    checked against decoding without the cache (the whole sequence each step):
    golden/decoder/prompts.npy, [2, 5] token ids, and greedy.npy, the 12
    tokens that follow each; tokenizer.json names the tokens t0 .. t47."""
    r = rng(13)
    vocab, d, h, ff, layers, npos = 48, 16, 2, 32, 2, 64
    hd = d // h

    def w(*s, scale=0.35):
        return (r.standard_normal(s) * scale).astype(np.float32)

    n = helper.make_node
    inits = [
        init("wte", w(vocab, d, scale=1.0)),
        init("wpe", w(npos, d, scale=0.5)),
        init("heads", np.array([0, 0, h, hd], dtype=np.int64)),
        init("merge", np.array([0, 0, d], dtype=np.int64)),
        init("scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32)),
        init("neg", np.array(-1e9, dtype=np.float32)),
        init("zero_f", np.array(0.0, dtype=np.float32)),
        init("i0", np.array(0, dtype=np.int64)),
        init("i1", np.array(1, dtype=np.int64)),
        init("axis0", np.array([0], dtype=np.int64)),
        init("axis1", np.array([1], dtype=np.int64)),
        init("axes12", np.array([1, 2], dtype=np.int64)),
        init("lnf.g", (1 + 0.1 * r.standard_normal(d)).astype(np.float32)),
        init("lnf.b", w(d, scale=0.1)),
        init("head", w(d, vocab, scale=1.0)),
    ]
    nodes = [
        n("Gather", ["wte", "input_ids"], ["tok"], name="embed/tokens", axis=0),
        n("Gather", ["wpe", "position_ids"], ["pos"], name="embed/positions", axis=0),
        n("Add", ["tok", "pos"], ["x0"], name="embed/Add"),
        # The causal mask over [new positions, past + new positions].
        n("Shape", ["input_ids"], ["ids_shape"], name="mask/Shape"),
        n("Gather", ["ids_shape", "i1"], ["seq"], name="mask/seq", axis=0),
        n("Shape", ["attention_mask"], ["mask_shape"], name="mask/Shape_1"),
        n("Gather", ["mask_shape", "i1"], ["total"], name="mask/total", axis=0),
        n("Sub", ["total", "seq"], ["past"], name="mask/past"),
        n("Range", ["past", "total", "i1"], ["qpos"], name="mask/qpos"),
        n("Range", ["i0", "total", "i1"], ["kpos"], name="mask/kpos"),
        n("Unsqueeze", ["qpos", "axis1"], ["qcol"], name="mask/qcol"),
        n("Unsqueeze", ["kpos", "axis0"], ["krow"], name="mask/krow"),
        n("LessOrEqual", ["krow", "qcol"], ["causal"], name="mask/causal"),
        n("Cast", ["attention_mask"], ["padmask"], name="mask/Cast", to=TensorProto.BOOL),
        n("Unsqueeze", ["padmask", "axes12"], ["pad4"], name="mask/pad4"),
        n("And", ["causal", "pad4"], ["allowed"], name="mask/And"),
        n("Where", ["allowed", "zero_f", "neg"], ["bias"], name="mask/Where"),
    ]
    inputs = [
        helper.make_tensor_value_info("input_ids", I64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", I64, ["batch", "total"]),
        helper.make_tensor_value_info("position_ids", I64, ["batch", "seq"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", F, ["batch", "seq", vocab])]
    x = "x0"
    for l in range(layers):
        p = f"h{l}/"
        inits += [
            init(p + "ln1.g", (1 + 0.1 * r.standard_normal(d)).astype(np.float32)),
            init(p + "ln1.b", w(d, scale=0.1)),
            init(p + "wqkv", w(d, 3 * d)),
            init(p + "bqkv", w(3 * d, scale=0.1)),
            init(p + "wo", w(d, d)),
            init(p + "bo", w(d, scale=0.1)),
            init(p + "ln2.g", (1 + 0.1 * r.standard_normal(d)).astype(np.float32)),
            init(p + "ln2.b", w(d, scale=0.1)),
            init(p + "w1", w(d, ff)),
            init(p + "b1", w(ff, scale=0.1)),
            init(p + "w2", w(ff, d)),
            init(p + "b2", w(d, scale=0.1)),
        ]
        pk, pv = f"past_key_values.{l}.key", f"past_key_values.{l}.value"
        ok, ov = f"present.{l}.key", f"present.{l}.value"
        inputs += [helper.make_tensor_value_info(pk, F, ["batch", h, "past", hd]), helper.make_tensor_value_info(pv, F, ["batch", h, "past", hd])]
        outputs += [helper.make_tensor_value_info(ok, F, ["batch", h, "total", hd]), helper.make_tensor_value_info(ov, F, ["batch", h, "total", hd])]
        nodes += [
            n("LayerNormalization", [x, p + "ln1.g", p + "ln1.b"], [p + "ln1"], name=p + "ln_1", axis=-1, epsilon=1e-5),
            n("MatMul", [p + "ln1", p + "wqkv"], [p + "qkv0"], name=p + "attn/c_attn/MatMul"),
            n("Add", [p + "qkv0", p + "bqkv"], [p + "qkv"], name=p + "attn/c_attn/Add"),
            n("Split", [p + "qkv"], [p + "q0", p + "k0", p + "v0"], name=p + "attn/Split", axis=2, num_outputs=3),
        ]
        for t in "qkv":
            nodes += [
                n("Reshape", [p + t + "0", "heads"], [p + t + "1"], name=p + f"attn/{t}/Reshape"),
                n("Transpose", [p + t + "1"], [p + t + "2"], name=p + f"attn/{t}/Transpose", perm=[0, 2, 1, 3]),
            ]
        nodes += [
            n("Concat", [pk, p + "k2"], [ok], name=p + "attn/cache/key", axis=2),
            n("Concat", [pv, p + "v2"], [ov], name=p + "attn/cache/value", axis=2),
            n("Transpose", [ok], [p + "kt"], name=p + "attn/k/T", perm=[0, 1, 3, 2]),
            n("MatMul", [p + "q2", p + "kt"], [p + "s0"], name=p + "attn/scores/MatMul"),
            n("Mul", [p + "s0", "scale"], [p + "s1"], name=p + "attn/scores/Mul"),
            n("Add", [p + "s1", "bias"], [p + "s2"], name=p + "attn/scores/Mask"),
            n("Softmax", [p + "s2"], [p + "probs"], name=p + "attn/Softmax", axis=-1),
            n("MatMul", [p + "probs", ov], [p + "c0"], name=p + "attn/context/MatMul"),
            n("Transpose", [p + "c0"], [p + "c1"], name=p + "attn/context/Transpose", perm=[0, 2, 1, 3]),
            n("Reshape", [p + "c1", "merge"], [p + "c2"], name=p + "attn/context/Reshape"),
            n("MatMul", [p + "c2", p + "wo"], [p + "o0"], name=p + "attn/c_proj/MatMul"),
            n("Add", [p + "o0", p + "bo"], [p + "o1"], name=p + "attn/c_proj/Add"),
            n("Add", [x, p + "o1"], [p + "res1"], name=p + "residual1"),
            n("LayerNormalization", [p + "res1", p + "ln2.g", p + "ln2.b"], [p + "ln2"], name=p + "ln_2", axis=-1, epsilon=1e-5),
            n("MatMul", [p + "ln2", p + "w1"], [p + "f0"], name=p + "mlp/c_fc/MatMul"),
            n("Add", [p + "f0", p + "b1"], [p + "f1"], name=p + "mlp/c_fc/Add"),
            n("Relu", [p + "f1"], [p + "f2"], name=p + "mlp/act"),
            n("MatMul", [p + "f2", p + "w2"], [p + "f3"], name=p + "mlp/c_proj/MatMul"),
            n("Add", [p + "f3", p + "b2"], [p + "f4"], name=p + "mlp/c_proj/Add"),
            n("Add", [p + "res1", p + "f4"], [p + "out"], name=p + "residual2"),
        ]
        x = p + "out"
    nodes += [
        n("LayerNormalization", [x, "lnf.g", "lnf.b"], ["lnf"], name="ln_f", axis=-1, epsilon=1e-5),
        n("MatMul", ["lnf", "head"], ["logits"], name="lm_head/MatMul"),
    ]
    g = helper.make_graph(nodes, "decoder", inputs, outputs, inits)
    m = model(g, 18)

    def feeds(ids, past_len, cache=None):
        b, s = ids.shape
        f = {
            "input_ids": ids,
            "attention_mask": np.ones((b, past_len + s), dtype=np.int64),
            "position_ids": np.tile(np.arange(past_len, past_len + s, dtype=np.int64), (b, 1)),
        }
        for l in range(layers):
            for kv in ("key", "value"):
                name = f"past_key_values.{l}.{kv}"
                f[name] = cache[name] if cache else np.zeros((b, h, 0, hd), dtype=np.float32)
        return f

    def order(f):
        return [f[i.name] for i in g.input]

    prompt = r.integers(0, vocab, (2, 5)).astype(np.int64)
    # Set 0: a prefill (empty cache); set 1: two tokens after a cache of 5.
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    m_bytes = m.SerializeToString()
    sess = ort.InferenceSession(m_bytes, so, providers=["CPUExecutionProvider"])
    out_names = [o.name for o in g.output]
    first = dict(zip(out_names, sess.run(None, feeds(prompt, 0))))
    cache = {f"past_key_values.{l}.{kv}": first[f"present.{l}.{kv}"] for l in range(layers) for kv in ("key", "value")}
    more = r.integers(0, vocab, (2, 2)).astype(np.int64)
    save("decoder", m, order(feeds(prompt, 0)), more=[order(feeds(more, 5, cache))])

    # The reference decode: greedy, 12 new tokens, with the cache; the same
    # tokens must come from recomputing the whole sequence each step, and
    # each step's two best logits must stand apart (so no rounding can
    # swap them).
    new = 12
    tokens, cache, ids, past = [], None, prompt, 0
    for step in range(new):
        outs = dict(zip(out_names, sess.run(None, feeds(ids, past, cache))))
        last = outs["logits"][:, -1, :]
        top2 = np.sort(last, axis=-1)[:, -2:]
        assert (top2[:, 1] - top2[:, 0]).min() > 1e-3, f"step {step}: a near tie"
        nxt = last.argmax(-1)
        tokens.append(nxt)
        past += ids.shape[1]
        cache = {f"past_key_values.{l}.{kv}": outs[f"present.{l}.{kv}"] for l in range(layers) for kv in ("key", "value")}
        ids = nxt[:, None].astype(np.int64)
    tokens = np.stack(tokens, axis=1)
    seq = prompt
    for step in range(new):
        logits = sess.run(["logits"], feeds(seq, 0))[0]
        seq = np.concatenate([seq, logits[:, -1, :].argmax(-1)[:, None]], axis=1)
    assert (seq[:, prompt.shape[1]:] == tokens).all(), "the cache changes the greedy decode"
    # A word-level tokenizer of the vocabulary (t0 .. t47) for `generate
    # --tokenizer`, in Hugging Face's tokenizer.json format.
    import json
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {f"t{i}": i for i in range(vocab)}, "unk_token": "t0"},
    }
    with open(os.path.join(HERE, "decoder", "tokenizer.json"), "w") as f:
        json.dump(tok, f, indent=1)
        f.write("\n")
    np.save(os.path.join(HERE, "decoder", "prompts.npy"), prompt)
    np.save(os.path.join(HERE, "decoder", "greedy.npy"), tokens.astype(np.int64))
    print(f"decoder: greedy {tokens.tolist()}")


def norms():
    """Layer norms in the shapes the GPU norm kernels split on: 600 rows of 8
    (a warp a row), 6 rows of 20 and a residual norm of 3 rows of 768 (a
    block a row), each row a multiple of 4 elements (moved 4 at a time), and
    7 rows of 15 (element by element)."""
    r = rng(11)
    nodes = [
        helper.make_node("LayerNormalization", ["a", "sa", "ba"], ["ya"], name="warp_rows/LayerNorm", axis=-1, epsilon=1e-5),
        helper.make_node("LayerNormalization", ["b", "sb", "bb"], ["yb"], name="block_rows/LayerNorm", axis=1, epsilon=1e-5),
        helper.make_node("Add", ["c", "d"], ["cd"], name="residual/Add"),
        helper.make_node("LayerNormalization", ["cd", "sc", "bc"], ["yc"], name="residual/LayerNorm", axis=-1, epsilon=1e-5),
        helper.make_node("Mul", ["cd", "two"], ["zc"], name="residual/Mul"),
        helper.make_node("LayerNormalization", ["e", "se"], ["ye"], name="odd_rows/LayerNorm", axis=-1, epsilon=1e-5),
    ]
    g = helper.make_graph(
        nodes,
        "norms",
        [
            helper.make_tensor_value_info("a", F, [600, 8]),
            helper.make_tensor_value_info("b", F, [6, 4, 5]),
            helper.make_tensor_value_info("c", F, [3, 768]),
            helper.make_tensor_value_info("d", F, [3, 768]),
            helper.make_tensor_value_info("e", F, [7, 15]),
        ],
        [
            helper.make_tensor_value_info("ya", F, [600, 8]),
            helper.make_tensor_value_info("yb", F, [6, 4, 5]),
            helper.make_tensor_value_info("yc", F, [3, 768]),
            helper.make_tensor_value_info("zc", F, [3, 768]),
            helper.make_tensor_value_info("ye", F, [7, 15]),
        ],
        [
            init("sa", (1 + 0.2 * r.standard_normal(8)).astype(np.float32)),
            init("ba", (0.1 * r.standard_normal(8)).astype(np.float32)),
            init("sb", (1 + 0.2 * r.standard_normal((4, 5))).astype(np.float32)),
            init("bb", (0.1 * r.standard_normal((4, 5))).astype(np.float32)),
            init("sc", (1 + 0.2 * r.standard_normal(768)).astype(np.float32)),
            init("bc", (0.1 * r.standard_normal(768)).astype(np.float32)),
            init("two", np.array(2.0, dtype=np.float32)),
            init("se", (1 + 0.2 * r.standard_normal(15)).astype(np.float32)),
        ],
    )
    inputs = [
        (3 + r.standard_normal((600, 8))).astype(np.float32),
        r.standard_normal((6, 4, 5)).astype(np.float32),
        r.standard_normal((3, 768)).astype(np.float32),
        r.standard_normal((3, 768)).astype(np.float32),
        r.standard_normal((7, 15)).astype(np.float32),
    ]
    save("norms", model(g, 17), inputs)


def unrolled_lstm():
    """An LSTM cell unrolled over 5 steps as a tracing exporter writes it
    (PyTorch's LSTMCell in a Python loop): each step projects its input with
    its own Gemm against one weight (stacked into one product by
    `stack-matmuls`) and the last state with another (a chain, left alone)."""
    r = rng(12)
    t_steps, b, i_size, h = 5, 2, 12, 8
    nodes = []
    inits = [
        init("w_ih", (0.3 * r.standard_normal((4 * h, i_size))).astype(np.float32)),
        init("b_ih", (0.1 * r.standard_normal(4 * h)).astype(np.float32)),
        init("w_hh", (0.3 * r.standard_normal((4 * h, h))).astype(np.float32)),
        init("b_hh", (0.1 * r.standard_normal(4 * h)).astype(np.float32)),
        init("sizes", np.array([h, h, h, h], dtype=np.int64)),
        init("h0", np.zeros((b, h), dtype=np.float32)),
    ]
    hs = []
    h_prev, c_prev = "h0", "h0"
    for t in range(t_steps):
        p = f"/lstm/cell_{t}/"
        inits.append(init(f"t{t}", np.array(t, dtype=np.int64)))
        nodes += [
            helper.make_node("Gather", ["x", f"t{t}"], [p + "xt"], name=f"/lstm/Gather_{t}", axis=0),
            helper.make_node("Gemm", [p + "xt", "w_ih", "b_ih"], [p + "gi"], name=p + "Gemm_1", transB=1),
            helper.make_node("Gemm", [h_prev, "w_hh", "b_hh"], [p + "gh"], name=p + "Gemm", transB=1),
            helper.make_node("Add", [p + "gi", p + "gh"], [p + "g"], name=p + "Add"),
            helper.make_node("Split", [p + "g", "sizes"], [p + "i", p + "f", p + "cc", p + "o"], name=p + "Split", axis=1),
            helper.make_node("Sigmoid", [p + "i"], [p + "si"], name=p + "Sigmoid"),
            helper.make_node("Sigmoid", [p + "f"], [p + "sf"], name=p + "Sigmoid_1"),
            helper.make_node("Tanh", [p + "cc"], [p + "tc"], name=p + "Tanh"),
            helper.make_node("Sigmoid", [p + "o"], [p + "so"], name=p + "Sigmoid_2"),
            helper.make_node("Mul", [p + "sf", c_prev], [p + "fc"], name=p + "Mul"),
            helper.make_node("Mul", [p + "si", p + "tc"], [p + "ic"], name=p + "Mul_1"),
            helper.make_node("Add", [p + "fc", p + "ic"], [p + "c"], name=p + "Add_1"),
            helper.make_node("Tanh", [p + "c"], [p + "tch"], name=p + "Tanh_1"),
            helper.make_node("Mul", [p + "so", p + "tch"], [p + "h"], name=p + "Mul_2"),
        ]
        h_prev, c_prev = p + "h", p + "c"
        hs.append(p + "h")
    nodes.append(helper.make_node("Concat", hs, ["y"], name="/lstm/Concat", axis=0))
    g = helper.make_graph(
        nodes,
        "unrolled_lstm",
        [helper.make_tensor_value_info("x", F, [t_steps, b, i_size])],
        [
            helper.make_tensor_value_info("y", F, [t_steps * b, h]),
            helper.make_tensor_value_info(c_prev, F, [b, h]),
        ],
        inits,
    )
    save("unrolled_lstm", model(g, 17), [r.standard_normal((t_steps, b, i_size)).astype(np.float32)])


def while_loops():
    """Two while-loops as tf2onnx writes them. `map`: a tf.map_fn over the
    batch, counters carried, the condition `counter + 1 < batch` read from
    the input's shape, each row framed through shape arithmetic: its trip
    count is known once the batch is (`loop-trips`), then it unrolls. `until`:
    a loop whose condition reads the data (halve until the sum is below 1):
    its count stays unknown and it runs as a loop."""
    i32 = TensorProto.INT32
    b_ = helper.make_node
    body = helper.make_graph(
        [
            b_("Unsqueeze", ["counter", "axes0"], ["idx"], name="map/Unsqueeze"),
            b_("Gather", ["x", "idx"], ["row2"], name="map/Gather", axis=0),
            b_("Squeeze", ["row2", "axes0"], ["row"], name="map/Squeeze"),
            b_("Shape", ["row"], ["n"], name="map/frame/Shape"),
            b_("Div", ["n", "two64"], ["half"], name="map/frame/floordiv"),
            b_("Concat", ["half", "two64"], ["frame_shape"], name="map/frame/concat", axis=0),
            b_("Reshape", ["row", "frame_shape"], ["frames"], name="map/frame/Reshape"),
            b_("ReduceSum", ["frames", "axes1"], ["energy"], name="map/ReduceSum", keepdims=0),
            b_("Add", ["counter", "one32"], ["next"], name="map/add"),
            b_("Shape", ["x"], ["xs"], name="map/Shape"),
            b_("Gather", ["xs", "zero64"], ["batch"], name="map/batch", axis=0),
            b_("Cast", ["batch"], ["batch_f"], name="map/batch_f", to=F),
            b_("Cast", ["next"], ["next_f"], name="map/next_f", to=F),
            b_("Less", ["next_f", "batch_f"], ["cond_out"], name="map/Less"),
        ],
        "map_body",
        [
            helper.make_tensor_value_info("i", I64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("counter", i32, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("next", i32, []),
            helper.make_tensor_value_info("energy", F, [4]),
        ],
        [
            init("axes0", np.array([0], dtype=np.int64)),
            init("axes1", np.array([1], dtype=np.int64)),
            init("two64", np.array([2], dtype=np.int64)),
            init("one32", np.array(1, dtype=np.int32)),
            init("zero64", np.array(0, dtype=np.int64)),
        ],
    )
    until = helper.make_graph(
        [
            b_("Mul", ["v", "half_f"], ["v_next"], name="until/Mul"),
            b_("ReduceSum", ["v_next"], ["s"], name="until/ReduceSum", keepdims=0),
            b_("Less", ["one_f", "s"], ["go"], name="until/Less"),
        ],
        "until_body",
        [
            helper.make_tensor_value_info("j", I64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", F, [4]),
        ],
        [
            helper.make_tensor_value_info("go", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_next", F, [4]),
            helper.make_tensor_value_info("s", F, []),
        ],
        [init("half_f", np.array(0.5, dtype=np.float32)), init("one_f", np.array(1.0, dtype=np.float32))],
    )
    nodes = [
        b_("Loop", ["", "yes", "zero32"], ["final_counter", "energies"], name="map/while", body=body),
        b_("MatMul", ["energies", "w"], ["y"], name="head/MatMul"),
        b_("ReduceSum", ["y"], ["total"], name="head/ReduceSum", keepdims=1),
        b_("Reshape", ["total", "shape1"], ["total1"], name="head/Reshape"),
        b_("Expand", ["total1", "shape4"], ["total4"], name="head/Expand"),
        b_("Abs", ["total4"], ["start"], name="head/Abs"),
        b_("Loop", ["", "yes", "start"], ["halved", "sums"], name="until/while", body=until),
    ]
    g = helper.make_graph(
        nodes,
        "while_loops",
        [helper.make_tensor_value_info("x", F, ["b", 8])],
        [
            helper.make_tensor_value_info("y", F, ["b", 3]),
            helper.make_tensor_value_info("halved", F, [4]),
            helper.make_tensor_value_info("sums", F, [None]),
        ],
        [
            init("yes", np.array(True)),
            init("zero32", np.array(0, dtype=np.int32)),
            init("w", rng(13).standard_normal((4, 3)).astype(np.float32)),
            init("shape1", np.array([1], dtype=np.int64)),
            init("shape4", np.array([4], dtype=np.int64)),
        ],
    )
    r = rng(14)
    save(
        "while_loops",
        model(g, 17),
        [(3 * r.standard_normal((2, 8))).astype(np.float32)],
        more=[[(3 * r.standard_normal((3, 8))).astype(np.float32)]],
    )


def decode_step():
    """One decode step of a Llama-style layer as the TorchScript exporter
    writes it: RMSNorm, Q/K/V projections of the one new token, rotary
    embeddings whose cos/sin tables are computed from `position_ids` at run
    time (`cos(concat(freqs, freqs))`, `rotate_half` as Slice/Neg/Concat),
    the cache concatenated, attention, a SiLU-gated MLP, the head. Set 0 is
    one sequence (its projections' outputs one row: GPU plans merge them
    and read their pieces in place), set 1 two. The head's weights are small,
    as a randomly initialized LM head's are: at scale 1 a logit near zero
    among logits of magnitude ~5 differed between -O0 and -O2 by 7e-6 (the
    fused kernels sum in another order), past tests/equivalence.rs's
    absolute 1e-6."""
    r = rng(15)
    vocab, d, h, hd, ff = 40, 32, 4, 8, 64

    def w(*s, scale=0.3):
        return (r.standard_normal(s) * scale).astype(np.float32)

    n = helper.make_node
    inits = [
        init("wte", w(vocab, d, scale=1.0)),
        init("inv_freq", (1.0 / (100.0 ** (np.arange(0, hd, 2) / hd))).astype(np.float32)),
        init("heads", np.array([0, 0, h, hd], dtype=np.int64)),
        init("merge", np.array([0, 0, d], dtype=np.int64)),
        init("scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32)),
        init("eps", np.array(1e-6, dtype=np.float32)),
        init("two", np.array(2.0, dtype=np.float32)),
        init("axis1", np.array([1], dtype=np.int64)),
        init("axis2", np.array([2], dtype=np.int64)),
        init("axis3", np.array([3], dtype=np.int64)),
        init("i0", np.array([0], dtype=np.int64)),
        init("ihalf", np.array([hd // 2], dtype=np.int64)),
        init("iend", np.array([np.iinfo(np.int64).max], dtype=np.int64)),
        init("wq", w(d, d)), init("wk", w(d, d)), init("wv", w(d, d)), init("wo", w(d, d)),
        init("wg", w(d, ff)), init("wu", w(d, ff)), init("wd", w(ff, d)),
        init("g1", (1 + 0.1 * r.standard_normal(d)).astype(np.float32)),
        init("g2", (1 + 0.1 * r.standard_normal(d)).astype(np.float32)),
        init("gf", (1 + 0.1 * r.standard_normal(d)).astype(np.float32)),
        init("head", w(d, vocab, scale=0.1)),
    ]

    def rms(x, g, name):
        return [
            n("Pow", [x, "two"], [f"{name}/sq"], name=f"{name}/Pow"),
            n("ReduceMean", [f"{name}/sq"], [f"{name}/ms"], name=f"{name}/ReduceMean", axes=[-1], keepdims=1),
            n("Add", [f"{name}/ms", "eps"], [f"{name}/mse"], name=f"{name}/Add"),
            n("Sqrt", [f"{name}/mse"], [f"{name}/rms"], name=f"{name}/Sqrt"),
            n("Div", [x, f"{name}/rms"], [f"{name}/xn"], name=f"{name}/Div"),
            n("Mul", [f"{name}/xn", g], [f"{name}/y"], name=f"{name}/Mul"),
        ]

    def heads(x, name):
        return [
            n("Reshape", [x, "heads"], [f"{name}/r"], name=f"{name}/Reshape"),
            n("Transpose", [f"{name}/r"], [f"{name}/t"], name=f"{name}/Transpose", perm=[0, 2, 1, 3]),
        ]

    def rotate(x, name):
        return [
            n("Slice", [x, "ihalf", "iend", "axis3"], [f"{name}/hi"], name=f"{name}/Slice_1"),
            n("Neg", [f"{name}/hi"], [f"{name}/nhi"], name=f"{name}/Neg"),
            n("Slice", [x, "i0", "ihalf", "axis3"], [f"{name}/lo"], name=f"{name}/Slice"),
            n("Concat", [f"{name}/nhi", f"{name}/lo"], [f"{name}/rot"], name=f"{name}/Concat", axis=-1),
            n("Mul", [x, "cos4"], [f"{name}/xc"], name=f"{name}/Mul"),
            n("Mul", [f"{name}/rot", "sin4"], [f"{name}/rs"], name=f"{name}/Mul_1"),
            n("Add", [f"{name}/xc", f"{name}/rs"], [f"{name}/y"], name=f"{name}/Add"),
        ]

    nodes = [
        n("Gather", ["wte", "input_ids"], ["x0"], name="embed_tokens/Gather", axis=0),
        # The tables: freqs [B, S, hd/2] from the positions, doubled, cos/sin.
        n("Cast", ["position_ids"], ["posf"], name="rotary_emb/Cast", to=F),
        n("Unsqueeze", ["posf", "axis2"], ["pos3"], name="rotary_emb/Unsqueeze"),
        n("Mul", ["pos3", "inv_freq"], ["freqs"], name="rotary_emb/Mul"),
        n("Concat", ["freqs", "freqs"], ["emb"], name="rotary_emb/Concat", axis=-1),
        n("Cos", ["emb"], ["cos"], name="rotary_emb/Cos"),
        n("Sin", ["emb"], ["sin"], name="rotary_emb/Sin"),
        n("Unsqueeze", ["cos", "axis1"], ["cos4"], name="attn/Unsqueeze_cos"),
        n("Unsqueeze", ["sin", "axis1"], ["sin4"], name="attn/Unsqueeze_sin"),
        *rms("x0", "g1", "input_layernorm"),
        n("MatMul", ["input_layernorm/y", "wq"], ["q"], name="attn/q_proj/MatMul"),
        n("MatMul", ["input_layernorm/y", "wk"], ["k"], name="attn/k_proj/MatMul"),
        n("MatMul", ["input_layernorm/y", "wv"], ["v"], name="attn/v_proj/MatMul"),
        *heads("q", "attn/q"), *heads("k", "attn/k"), *heads("v", "attn/v"),
        *rotate("attn/q/t", "attn/q_rot"), *rotate("attn/k/t", "attn/k_rot"),
        n("Concat", ["past_key", "attn/k_rot/y"], ["present_key"], name="attn/Concat_k", axis=2),
        n("Concat", ["past_value", "attn/v/t"], ["present_value"], name="attn/Concat_v", axis=2),
        n("Transpose", ["present_key"], ["kt"], name="attn/Transpose_k", perm=[0, 1, 3, 2]),
        n("MatMul", ["attn/q_rot/y", "kt"], ["scores"], name="attn/MatMul"),
        n("Mul", ["scores", "scale"], ["scaled"], name="attn/Mul_scale"),
        n("Softmax", ["scaled"], ["probs"], name="attn/Softmax", axis=-1),
        n("MatMul", ["probs", "present_value"], ["ctx"], name="attn/MatMul_1"),
        n("Transpose", ["ctx"], ["ctx_t"], name="attn/Transpose_o", perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "merge"], ["ctx3"], name="attn/Reshape_o"),
        n("MatMul", ["ctx3", "wo"], ["o"], name="attn/o_proj/MatMul"),
        n("Add", ["x0", "o"], ["x1"], name="Add"),
        *rms("x1", "g2", "post_attention_layernorm"),
        n("MatMul", ["post_attention_layernorm/y", "wg"], ["gate"], name="mlp/gate_proj/MatMul"),
        n("Sigmoid", ["gate"], ["gs"], name="mlp/act_fn/Sigmoid"),
        n("Mul", ["gate", "gs"], ["silu"], name="mlp/act_fn/Mul"),
        n("MatMul", ["post_attention_layernorm/y", "wu"], ["up"], name="mlp/up_proj/MatMul"),
        n("Mul", ["silu", "up"], ["gated"], name="mlp/Mul"),
        n("MatMul", ["gated", "wd"], ["down"], name="mlp/down_proj/MatMul"),
        n("Add", ["x1", "down"], ["x2"], name="Add_1"),
        *rms("x2", "gf", "norm"),
        n("MatMul", ["norm/y", "head"], ["logits"], name="lm_head/MatMul"),
    ]
    g = helper.make_graph(
        nodes,
        "decode_step",
        [
            helper.make_tensor_value_info("input_ids", I64, ["batch", "seq"]),
            helper.make_tensor_value_info("position_ids", I64, ["batch", "seq"]),
            helper.make_tensor_value_info("past_key", F, ["batch", h, "past", hd]),
            helper.make_tensor_value_info("past_value", F, ["batch", h, "past", hd]),
        ],
        [
            helper.make_tensor_value_info("logits", F, ["batch", "seq", vocab]),
            helper.make_tensor_value_info("present_key", F, ["batch", h, "total", hd]),
            helper.make_tensor_value_info("present_value", F, ["batch", h, "total", hd]),
        ],
        inits,
    )

    def step(b, past):
        return [
            r.integers(0, vocab, (b, 1)).astype(np.int64),
            np.full((b, 1), past, dtype=np.int64),
            r.standard_normal((b, h, past, hd)).astype(np.float32),
            r.standard_normal((b, h, past, hd)).astype(np.float32),
        ]

    save("decode_step", model(g, 17), step(1, 5), more=[step(2, 3)])


def one_hot():
    """Embedding lookups written as products with one-hot matrices: jax2tf's
    Equal(ids[..., None], range(n)) -> Cast -> MatMul with the table, then a
    bias; and tf2onnx's OneHot(ids, n, [0, 1]) -> MatMul. Ids outside the range
    included (their one-hot rows are all zeros), negative ones too (OneHot
    counts them from the end)."""
    r = rng(21)
    n = helper.make_node
    nodes = [
        n("Unsqueeze", ["ids", "last"], ["ids_col"], name="ids_col"),
        n("Equal", ["ids_col", "range"], ["hot"], name="one_hot_eq"),
        n("Cast", ["hot"], ["hot_f"], name="one_hot_cast", to=F),
        n("MatMul", ["hot_f", "table"], ["emb"], name="embed"),
        n("Add", ["emb", "bias"], ["y"], name="embed_bias"),
        n("OneHot", ["ids", "depth", "onoff"], ["hot2"], name="one_hot_op", axis=-1),
        n("MatMul", ["hot2", "table2"], ["y2"], name="embed_op"),
    ]
    g = helper.make_graph(
        nodes,
        "one_hot",
        [helper.make_tensor_value_info("ids", I64, ["B", "T"])],
        [helper.make_tensor_value_info("y", F, ["B", "T", 8]), helper.make_tensor_value_info("y2", F, ["B", "T", 4])],
        [
            init("last", np.array([-1], dtype=np.int64)),
            init("range", np.arange(32, dtype=np.int64)),
            init("table", r.standard_normal((32, 8)).astype(np.float32)),
            init("bias", r.standard_normal(8).astype(np.float32)),
            init("depth", np.array(32, dtype=np.int64)),
            init("onoff", np.array([0.0, 1.0], dtype=np.float32)),
            init("table2", r.standard_normal((32, 4)).astype(np.float32)),
        ],
    )
    ids = r.integers(-36, 36, size=(2, 9)).astype(np.int64)
    ids[0, :3] = [-(2**62), 2**62, 31]
    more = r.integers(0, 32, size=(3, 5)).astype(np.int64)
    save("one_hot", model(g, 17), [ids], more=[[more]])


if __name__ == "__main__":
    mlp()
    cnn()
    transformer()
    shapes()
    if_branches()
    int_indexing()
    external_data()
    versioned(7)
    versioned(18)
    loop_counter()
    placeholder_dims()
    if_rank()
    decoder()
    norms()
    unrolled_lstm()
    while_loops()
    decode_step()
    one_hot()
