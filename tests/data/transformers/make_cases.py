#!/usr/bin/env python3
"""Generates two end-to-end cases of a tiny BERT encoder, in the ONNX
backend-test layout (<case>/model.onnx, <case>/test_data_set_0/{input,output}_N.pb):

  bert_optimized       the encoder after onnxruntime.transformers.optimizer
                       .optimize_model(model_type="bert"): EmbedLayerNormalization,
                       Attention, SkipLayerNormalization, BiasGelu (com.microsoft)
  bert_optimized_int8  the same model after onnxruntime.quantization
                       .quantize_dynamic (per-tensor QInt8 weights, all the op
                       types it quantizes): QEmbedLayerNormalization, QAttention,
                       DynamicQuantizeLinear + MatMulInteger
  bert_optimized_int8_matmul
                       quantize_dynamic(op_types_to_quantize=["MatMul", "Gemm"]):
                       float EmbedLayerNormalization and Attention,
                       DynamicQuantizeLinear + MatMulInteger

The float model is built with the onnx helper in the node patterns that
torch.onnx.export (TorchScript, opset 17, dynamic axes batch_size and
sequence_length) writes for Hugging Face's BertModel: Gather embeddings with the
position ids sliced from a [1, max_positions] buffer by Shape/Gather/Unsqueeze,
LayerNormalization, Q/K/V MatMul + Add, Reshape by Shape/Gather/Unsqueeze/Concat,
Transpose, MatMul, Div by sqrt(head_size), the extended mask
(1 - Cast(Unsqueeze(Unsqueeze(attention_mask)))) * -10000, Softmax, the erf
Gelu x*0.5*(1+erf(x/sqrt(2))), residual Adds, and the pooler (Gather of token 0,
Gemm, Tanh). Sizes: vocab 100, hidden 32, 2 heads, 2 layers, intermediate 64,
max positions 16. Weights from a seeded generator; the reference outputs are
ONNX Runtime's (CPU, one thread, graph optimizations disabled).

Pinned: pip install onnx==1.22.0 onnxruntime==1.31.1 numpy
Usage: python3 tests/data/transformers/make_cases.py
"""
import collections
import os
import shutil
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.transformers.optimizer import optimize_model

assert onnx.__version__ == "1.22.0", onnx.__version__
assert ort.__version__ == "1.31.1", ort.__version__

HERE = os.path.dirname(os.path.abspath(__file__))
R = np.random.default_rng(2026)

VOCAB, HIDDEN, HEADS, LAYERS, INTER, MAX_POS, TYPES = 100, 32, 2, 2, 64, 16, 2
HEAD = HIDDEN // HEADS
BATCH, SEQ = 1, 8


def w(*s, scale=0.1):
    return (scale * R.standard_normal(s)).astype(np.float32)


class Graph:
    """A graph under construction: nodes named like torch.onnx.export's
    (/scope/Op), initializers, scalar and 1-D constants."""

    def __init__(self):
        self.nodes, self.inits, self.n = [], [], collections.Counter()

    def init(self, name, a):
        self.inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def const(self, scope, a):
        name = f"{scope}/Constant_{self.n[scope + 'C']}_output_0"
        self.n[scope + "C"] += 1
        self.nodes.append(helper.make_node("Constant", [], [name], name=name[: -len("_output_0")], value=numpy_helper.from_array(np.asarray(a))))
        return name

    def op(self, scope, op, inputs, **attrs):
        k = self.n[scope + op]
        self.n[scope + op] += 1
        name = f"{scope}/{op}" + (f"_{k}" if k else "")
        out = name + "_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def linear(self, scope, x, prefix, n_in, n_out):
        """torch Linear on a 3-D input: MatMul by the transposed weight, then Add(bias, .)."""
        wt = self.init(f"onnx::MatMul_{prefix}.weight", w(n_in, n_out))
        b = self.init(f"{prefix}.bias", w(n_out, scale=0.02))
        return self.op(scope, "Add", [b, self.op(scope, "MatMul", [x, wt])])

    def layer_norm(self, scope, x, prefix):
        g = self.init(f"{prefix}.weight", (1.0 + w(HIDDEN)).astype(np.float32))
        b = self.init(f"{prefix}.bias", w(HIDDEN, scale=0.05))
        return self.op(scope, "LayerNormalization", [x, g, b], axis=-1, epsilon=1e-12)

    def view_heads(self, scope, x):
        """x.view(x.size()[:-1] + (heads, head_size)).permute(0, 2, 1, 3)"""
        s0 = self.op(scope, "Shape", [x])
        d0 = self.op(scope, "Gather", [s0, self.const(scope, np.array(0, np.int64))], axis=0)
        s1 = self.op(scope, "Shape", [x])
        d1 = self.op(scope, "Gather", [s1, self.const(scope, np.array(1, np.int64))], axis=0)
        u0 = self.op(scope, "Unsqueeze", [d0, self.const(scope, np.array([0], np.int64))])
        u1 = self.op(scope, "Unsqueeze", [d1, self.const(scope, np.array([0], np.int64))])
        shape = self.op(scope, "Concat", [u0, u1, self.const(scope, np.array([HEADS], np.int64)), self.const(scope, np.array([HEAD], np.int64))], axis=0)
        r = self.op(scope, "Reshape", [x, shape], allowzero=0)
        return self.op(scope, "Transpose", [r], perm=[0, 2, 1, 3])


def build_float_model():
    g = Graph()
    E = "/bert/embeddings"
    # Embeddings: word + token type, + position ids sliced from the buffer.
    word = g.init("bert.embeddings.word_embeddings.weight", w(VOCAB, HIDDEN))
    pos = g.init("bert.embeddings.position_embeddings.weight", w(MAX_POS, HIDDEN))
    typ = g.init("bert.embeddings.token_type_embeddings.weight", w(TYPES, HIDDEN))
    pos_ids = g.init("bert.embeddings.position_ids", np.arange(MAX_POS, dtype=np.int64)[None, :])
    shp = g.op("/bert", "Shape", ["input_ids"])
    seq = g.op("/bert", "Gather", [shp, g.const("/bert", np.array(1, np.int64))], axis=0)
    ends = g.op(E, "Unsqueeze", [seq, g.const(E, np.array([0], np.int64))])
    sliced = g.op(E, "Slice", [pos_ids, g.const(E, np.array([0], np.int64)), ends, g.const(E, np.array([1], np.int64)), g.const(E, np.array([1], np.int64))])
    we = g.op(E + "/word_embeddings", "Gather", [word, "input_ids"])
    te = g.op(E + "/token_type_embeddings", "Gather", [typ, "token_type_ids"])
    emb = g.op(E, "Add", [we, te])
    pe = g.op(E + "/position_embeddings", "Gather", [pos, sliced])
    emb = g.op(E, "Add", [emb, pe])
    h = g.layer_norm(E + "/LayerNorm", emb, "bert.embeddings.LayerNorm")

    # Extended attention mask: (1.0 - mask[:, None, None, :].to(float)) * -10000.0
    m = g.op("/bert", "Unsqueeze", ["attention_mask", g.const("/bert", np.array([1], np.int64))])
    m = g.op("/bert", "Unsqueeze", [m, g.const("/bert", np.array([2], np.int64))])
    m = g.op("/bert", "Cast", [m], to=T.FLOAT)
    m = g.op("/bert", "Sub", [g.const("/bert", np.array(1.0, np.float32)), m])
    mask = g.op("/bert", "Mul", [m, g.const("/bert", np.array(-10000.0, np.float32))])

    for i in range(LAYERS):
        L, P = f"/bert/encoder/layer.{i}", f"bert.encoder.layer.{i}"
        S = L + "/attention/self"
        q = g.view_heads(S, g.linear(S + "/query", h, P + ".attention.self.query", HIDDEN, HIDDEN))
        k = g.view_heads(S, g.linear(S + "/key", h, P + ".attention.self.key", HIDDEN, HIDDEN))
        v = g.view_heads(S, g.linear(S + "/value", h, P + ".attention.self.value", HIDDEN, HIDDEN))
        kt = g.op(S, "Transpose", [k], perm=[0, 1, 3, 2])
        scores = g.op(S, "MatMul", [q, kt])
        scores = g.op(S, "Div", [scores, g.const(S, np.array(np.sqrt(HEAD), np.float32))])
        scores = g.op(S, "Add", [scores, mask])
        probs = g.op(S, "Softmax", [scores], axis=-1)
        ctx = g.op(S, "MatMul", [probs, v])
        ctx = g.op(S, "Transpose", [ctx], perm=[0, 2, 1, 3])
        s0 = g.op(S, "Shape", [ctx])
        d0 = g.op(S, "Gather", [s0, g.const(S, np.array(0, np.int64))], axis=0)
        s1 = g.op(S, "Shape", [ctx])
        d1 = g.op(S, "Gather", [s1, g.const(S, np.array(1, np.int64))], axis=0)
        u0 = g.op(S, "Unsqueeze", [d0, g.const(S, np.array([0], np.int64))])
        u1 = g.op(S, "Unsqueeze", [d1, g.const(S, np.array([0], np.int64))])
        shape = g.op(S, "Concat", [u0, u1, g.const(S, np.array([HIDDEN], np.int64))], axis=0)
        ctx = g.op(S, "Reshape", [ctx, shape], allowzero=0)
        O = L + "/attention/output"
        a = g.linear(O + "/dense", ctx, P + ".attention.output.dense", HIDDEN, HIDDEN)
        a = g.op(O, "Add", [a, h])
        h = g.layer_norm(O + "/LayerNorm", a, P + ".attention.output.LayerNorm")
        I = L + "/intermediate"
        x = g.linear(I + "/dense", h, P + ".intermediate.dense", HIDDEN, INTER)
        # x * 0.5 * (1.0 + erf(x / sqrt(2.0)))
        A = I + "/intermediate_act_fn"
        half = g.op(A, "Mul", [x, g.const(A, np.array(0.5, np.float32))])
        e = g.op(A, "Div", [x, g.const(A, np.array(1.4142135381698608, np.float32))])
        e = g.op(A, "Erf", [e])
        e = g.op(A, "Add", [e, g.const(A, np.array(1.0, np.float32))])
        x = g.op(A, "Mul", [half, e])
        O = L + "/output"
        y = g.linear(O + "/dense", x, P + ".output.dense", INTER, HIDDEN)
        y = g.op(O, "Add", [y, h])
        h = g.layer_norm(O + "/LayerNorm", y, P + ".output.LayerNorm")

    # Pooler: tanh(dense(hidden[:, 0])).
    Pl = "/bert/pooler"
    first = g.op(Pl, "Gather", [h, g.const(Pl, np.array(0, np.int64))], axis=1)
    pw = g.init("bert.pooler.dense.weight", w(HIDDEN, HIDDEN))
    pb = g.init("bert.pooler.dense.bias", w(HIDDEN, scale=0.02))
    pooled = g.op(Pl + "/dense", "Gemm", [first, pw, pb], alpha=1.0, beta=1.0, transB=1)
    pooled = g.op(Pl + "/activation", "Tanh", [pooled])
    g.nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"], name="/Identity"))
    g.nodes.append(helper.make_node("Identity", [pooled], ["pooler_output"], name="/Identity_1"))

    dims = ["batch_size", "sequence_length"]
    inputs = [helper.make_tensor_value_info(n, T.INT64, dims) for n in ("input_ids", "attention_mask", "token_type_ids")]
    outputs = [
        helper.make_tensor_value_info("last_hidden_state", T.FLOAT, dims + [HIDDEN]),
        helper.make_tensor_value_info("pooler_output", T.FLOAT, ["batch_size", HIDDEN]),
    ]
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch", producer_version="2.5.1")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def histogram(m):
    return collections.Counter((n.domain + "::" if n.domain else "") + n.op_type for n in m.graph.node)


def ort_run(m, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def quantize(m, **kw):
    """quantize_dynamic with per-tensor QInt8 weights (uint8 activations)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "opt.onnx"), os.path.join(tmp, "int8.onnx")
        onnx.save_model(m, src)
        # DefaultTensorType: ONNX shape inference cannot type the outputs of
        # the contrib ops, which the MatMuls after Attention consume.
        quantize_dynamic(src, dst, per_channel=False, reduce_range=False, weight_type=QuantType.QInt8, extra_options={"DefaultTensorType": T.FLOAT}, **kw)
        q = onnx.load(dst)
    q.producer_name = "onnx.quantize"
    return q


def ort_basic(m):
    """What optimize_model(opt_level=1), the default for "bert", runs before its
    fusions: ONNX Runtime's basic graph optimizations (constant folding, Constant
    nodes to initializers, redundant node elimination) without ConstantSharing.
    optimize_model itself would import torch for this (only to read
    torch.version.hip), so it is called with opt_level=0 after this step."""
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = os.path.join(tmp, "model_o1_cpu.onnx")
        ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"], disabled_optimizers=["ConstantSharing"])
        return onnx.load(so.optimized_model_filepath)


def write_case(name, m, feeds):
    outs = ort_run(m, feeds)
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save_model(m, os.path.join(d, "model.onnx"))
    for i, inp in enumerate(m.graph.input):
        onnx.save_tensor(numpy_helper.from_array(feeds[inp.name], inp.name), os.path.join(d, "test_data_set_0", f"input_{i}.pb"))
    for i, (o, y) in enumerate(zip(m.graph.output, outs)):
        onnx.save_tensor(numpy_helper.from_array(np.asarray(y), o.name), os.path.join(d, "test_data_set_0", f"output_{i}.pb"))
    for root, _, files in os.walk(d):
        for f in files:
            size = os.path.getsize(os.path.join(root, f))
            assert size < 200_000, (f, size)
    return outs


def main():
    float_model = build_float_model()
    feeds = {
        "input_ids": R.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64),
        "attention_mask": np.array([[1, 1, 1, 1, 1, 1, 0, 0]], np.int64),
        "token_type_ids": np.array([[0, 0, 0, 0, 1, 1, 1, 1]], np.int64),
    }
    print("float model:", dict(sorted(histogram(float_model).items())))
    ref = ort_run(float_model, feeds)

    opt = optimize_model(ort_basic(float_model), model_type="bert", num_heads=HEADS, hidden_size=HIDDEN, opt_level=0)
    opt_model = opt.model
    opt_model.producer_name = "onnxruntime.transformers"
    print("fused op statistics:", opt.get_fused_operator_statistics())
    hist = histogram(opt_model)
    print("bert_optimized:", dict(sorted(hist.items())))
    assert hist["com.microsoft::Attention"] + hist["com.microsoft::MultiHeadAttention"] == LAYERS, hist
    assert hist["com.microsoft::SkipLayerNormalization"] == 2 * LAYERS, hist
    assert hist["com.microsoft::EmbedLayerNormalization"] == 1, hist
    assert hist["com.microsoft::BiasGelu"] + hist["com.microsoft::FastGelu"] + hist["com.microsoft::Gelu"] == LAYERS, hist
    outs = write_case("bert_optimized", opt_model, {i.name: feeds[i.name] for i in opt_model.graph.input})
    # The fusions keep the float model's function (only the masked positions'
    # hidden states may differ: the fused Attention masks differently).
    for a, b in zip(ref, outs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

    q_model = quantize(opt_model)
    hist = histogram(q_model)
    print("bert_optimized_int8:", dict(sorted(hist.items())))
    assert hist["com.microsoft::QAttention"] == LAYERS, hist
    assert hist["com.microsoft::QEmbedLayerNormalization"] == 1, hist
    assert any(k in hist for k in ("com.microsoft::DynamicQuantizeMatMul", "MatMulInteger")), hist
    qouts = write_case("bert_optimized_int8", q_model, {i.name: feeds[i.name] for i in q_model.graph.input})
    for name, a, b in zip(["last_hidden_state", "pooler_output"], outs, qouts):
        print(f"int8 vs float {name}: max |diff| {np.abs(a - b).max():.4f}")

    # Only the MatMuls (and the pooler's Gemm, which the quantizer rewrites
    # as MatMul + Add) quantized: Attention and EmbedLayerNormalization stay float.
    q_model = quantize(opt_model, op_types_to_quantize=["MatMul", "Gemm"])
    hist = histogram(q_model)
    print("bert_optimized_int8_matmul:", dict(sorted(hist.items())))
    assert hist["com.microsoft::Attention"] == LAYERS and "com.microsoft::QAttention" not in hist, hist
    assert any(k in hist for k in ("com.microsoft::DynamicQuantizeMatMul", "MatMulInteger")), hist
    qouts = write_case("bert_optimized_int8_matmul", q_model, {i.name: feeds[i.name] for i in q_model.graph.input})
    for name, a, b in zip(["last_hidden_state", "pooler_output"], outs, qouts):
        print(f"int8 (MatMul only) vs float {name}: max |diff| {np.abs(a - b).max():.4f}")

if __name__ == "__main__":
    main()
