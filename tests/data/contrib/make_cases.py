#!/usr/bin/env python3
"""Generates one-node models of ONNX Runtime's contrib ops (domain
`com.microsoft`, and the non-standard default-domain forms ORT's tools write),
each with inputs from a seeded generator and reference outputs from ONNX
Runtime, in the ONNX backend-test layout: <case>/model.onnx and
<case>/test_data_set_0/{input,output}_N.pb.

Pinned: pip install onnx==1.22.0 onnxruntime==1.31.1 numpy
Usage: python3 tests/data/contrib/make_cases.py
"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper, numpy_helper

assert onnx.__version__ == "1.22.0", onnx.__version__
assert ort.__version__ == "1.31.1", ort.__version__

HERE = os.path.dirname(os.path.abspath(__file__))
MS = "com.microsoft"
R = np.random.default_rng(2026)
CASES = []


def f32(*s, scale=1.0):
    return (scale * R.standard_normal(s)).astype(np.float32)


def case(name, op, inputs, outputs, attrs=None, domain=MS, opset=17, consts=None, numpy_ref=None, out=HERE, domain_opset=1):
    """A model of one `op` node. `inputs`: (name, array or None for an omitted
    optional input); `consts`: names among them stored as initializers;
    `outputs`: names (or "" to skip an optional output). `numpy_ref` computes
    the outputs for an op ORT implements only on the GPU (its formula from the
    contrib op's documentation)."""
    consts = consts or set()
    feeds = {n: a for n, a in inputs if a is not None and n not in consts}
    node = helper.make_node(op, [n if a is not None else "" for n, a in inputs], outputs, name=name, domain=domain, **(attrs or {}))
    graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs if a is not None and n not in consts]
    inits = [numpy_helper.from_array(a, n) for n, a in inputs if a is not None and n in consts]
    graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outputs if o]
    g = helper.make_graph([node], name, graph_inputs, graph_outputs, inits)
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, domain_opset))
    m = helper.make_model(g, opset_imports=opsets, producer_name="rlx-onnx contrib cases")
    m.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if numpy_ref is None:
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        outs = sess.run(None, feeds)
    else:
        outs = numpy_ref(**dict(inputs))
    # Declare the output types ORT produced, so the model is complete.
    del m.graph.output[:]
    for o, y in zip([o for o in outputs if o], outs):
        y = np.asarray(y)
        m.graph.output.append(helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(y.dtype), y.shape))
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save_model(m, os.path.join(d, "model.onnx"))
    for i, (n, a) in enumerate((n, a) for n, a in inputs if a is not None and n not in consts):
        onnx.save_tensor(numpy_helper.from_array(a), os.path.join(d, "test_data_set_0", f"input_{i}.pb"))
    for i, y in enumerate(outs):
        onnx.save_tensor(numpy_helper.from_array(np.asarray(y)), os.path.join(d, "test_data_set_0", f"output_{i}.pb"))
    CASES.append(name)


def activations():
    x = f32(2, 3, 8)
    case("gelu", "Gelu", [("x", x)], ["y"])
    case("fast_gelu", "FastGelu", [("x", x)], ["y"])
    case("fast_gelu_bias", "FastGelu", [("x", x), ("bias", f32(8))], ["y"])
    case("bias_gelu", "BiasGelu", [("x", x), ("bias", f32(8))], ["y"])
    case("quick_gelu", "QuickGelu", [("x", x)], ["y"], {"alpha": 1.5})
    case("quick_gelu_default", "QuickGelu", [("x", x)], ["y"])


def norms():
    x, skip, g, b, bias = f32(2, 3, 8), f32(2, 3, 8), f32(8), f32(8), f32(8)
    case("skip_layer_norm", "SkipLayerNormalization", [("x", x), ("skip", skip), ("gamma", g), ("beta", b), ("bias", bias)], ["y", "", "", "sum"], {"epsilon": 1e-5})
    case("skip_layer_norm_plain", "SkipLayerNormalization", [("x", x), ("skip", skip), ("gamma", g)], ["y"])
    case("skip_layer_norm_bcast", "SkipLayerNormalization", [("x", x), ("skip", f32(3, 8)), ("gamma", g), ("beta", b)], ["y"], {"epsilon": 1e-6})
    case("skip_simplified_layer_norm", "SkipSimplifiedLayerNormalization", [("x", x), ("skip", skip), ("gamma", g), ("bias", bias)], ["y", "", "", "sum"], {"epsilon": 1e-6})
    case("simplified_layer_norm", "SimplifiedLayerNormalization", [("x", x), ("gamma", g)], ["y"], {"epsilon": 1e-6, "axis": -1}, domain="", opset=13)
    case("layer_norm_opset13", "LayerNormalization", [("x", x), ("gamma", g), ("beta", b)], ["y"], {"epsilon": 1e-5, "axis": -1}, domain="", opset=13)
    ids = R.integers(0, 20, (2, 5)).astype(np.int32)
    seg = R.integers(0, 2, (2, 5)).astype(np.int32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=np.int32)
    word, pos, segw = f32(20, 8), f32(16, 8), f32(2, 8)
    emb = [("ids", ids), ("seg", seg), ("word", word), ("pos", pos), ("segw", segw), ("gamma", g), ("beta", b)]
    case("embed_layer_norm", "EmbedLayerNormalization", emb + [("mask", mask)], ["y", "mask_index"], {"epsilon": 1e-12}, consts={"word", "pos", "segw", "gamma", "beta"})
    case("embed_layer_norm_sum", "EmbedLayerNormalization", emb, ["y", "mask_index", "sum"], {"epsilon": 1e-12}, consts={"word", "pos", "segw", "gamma", "beta"})
    case("embed_layer_norm_noseg", "EmbedLayerNormalization", [("ids", ids), ("seg", None), ("word", word), ("pos", pos), ("segw", None), ("gamma", g), ("beta", b)], ["y", "mask_index"], {"epsilon": 1e-12}, consts={"word", "pos", "gamma", "beta"})


def attention():
    b, s, h, n = 2, 5, 8, 2
    x, w, bias = f32(b, s, h), f32(h, 3 * h, scale=0.3), f32(3 * h, scale=0.1)
    base = [("x", x), ("w", w), ("bias", bias)]
    case("attention", "Attention", base, ["y"], {"num_heads": n}, consts={"w", "bias"})
    case("attention_causal", "Attention", base, ["y"], {"num_heads": n, "unidirectional": 1}, consts={"w", "bias"})
    lens = np.array([3, 5], dtype=np.int32)
    case("attention_mask_lengths", "Attention", base + [("mask", lens)], ["y"], {"num_heads": n}, consts={"w", "bias"})
    m2 = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=np.int32)
    case("attention_mask_2d", "Attention", base + [("mask", m2)], ["y"], {"num_heads": n}, consts={"w", "bias"})
    case("attention_mask_3d", "Attention", base + [("mask", np.tril(np.ones((s, s), np.int32))[None].repeat(b, 0))], ["y"], {"num_heads": n}, consts={"w", "bias"})
    case("attention_scale_bias", "Attention", base + [("mask", None), ("past", None), ("attn_bias", f32(1, n, s, s))], ["y"], {"num_heads": n, "scale": 0.3}, consts={"w", "bias"})
    q, k, v = f32(b, s, h), f32(b, 7, h), f32(b, 7, h)
    case("mha", "MultiHeadAttention", [("q", q), ("k", k), ("v", v)], ["y"], {"num_heads": n})
    case("mha_bias_mask", "MultiHeadAttention", [("q", q), ("k", k), ("v", v), ("bias", f32(3 * h)), ("kpm", np.array([[1, 1, 1, 1, 0, 0, 0], [1] * 7], dtype=np.int32))], ["y"], {"num_heads": n})
    case("mha_causal", "MultiHeadAttention", [("q", q), ("k", f32(b, s, h)), ("v", f32(b, s, h))], ["y"], {"num_heads": n, "unidirectional": 1})
    case("mha_bnsh_kv", "MultiHeadAttention", [("q", q), ("k", f32(b, n, 7, h // n)), ("v", f32(b, n, 7, h // n))], ["y"], {"num_heads": n})
    hd = h // n
    pos = np.array([[0, 1, 2, 3, 4], [2, 3, 4, 5, 6]], dtype=np.int64)
    cos, sin = f32(16, hd // 2), f32(16, hd // 2)
    case("rotary_embedding", "RotaryEmbedding", [("x", f32(b, s, h)), ("pos", pos), ("cos", cos), ("sin", sin)], ["y"], {"num_heads": n})
    case("rotary_embedding_interleaved", "RotaryEmbedding", [("x", f32(b, n, s, hd)), ("pos", pos), ("cos", cos), ("sin", sin)], ["y"], {"interleaved": 1})
    case("rotary_embedding_offset", "RotaryEmbedding", [("x", f32(b, s, h)), ("pos", np.array([3], dtype=np.int64)), ("cos", cos), ("sin", sin)], ["y"], {"num_heads": n})


def matmuls():
    a, bm = f32(2, 4, 3), f32(2, 5, 4)
    case("fused_matmul", "FusedMatMul", [("a", a), ("b", bm)], ["y"], {"alpha": 0.5, "transA": 1, "transB": 1})
    case("fused_matmul_plain", "FusedMatMul", [("a", f32(2, 3, 4)), ("b", f32(4, 5))], ["y"])
    case("fused_matmul_batch", "FusedMatMul", [("a", f32(3, 2, 4)), ("b", f32(2, 4, 5))], ["y"], {"transBatchA": 1})
    x = f32(1, 3, 6, 6)
    w, cb = f32(4, 3, 3, 3, scale=0.3), f32(4)
    case("fused_conv_relu", "FusedConv", [("x", x), ("w", w), ("b", cb)], ["y"], {"activation": "Relu", "pads": [1, 1, 1, 1]}, consts={"w", "b"})
    case("fused_conv_leaky_sum", "FusedConv", [("x", x), ("w", w), ("b", cb), ("z", f32(1, 4, 4, 4))], ["y"], {"activation": "LeakyRelu", "activation_params": [0.2]}, consts={"w", "b"})
    case("fused_conv_clip", "FusedConv", [("x", x), ("w", w)], ["y"], {"activation": "Clip", "activation_params": [-0.5, 0.5]}, consts={"w"})
    case("fused_conv_hardsigmoid", "FusedConv", [("x", x), ("w", w), ("b", cb)], ["y"], {"activation": "HardSigmoid", "activation_params": [0.3, 0.4], "strides": [2, 2]}, consts={"w", "b"})
    # 4-bit weights: K=32, N=6, block 16 -> 2 blocks of 8 bytes per column.
    k, nn, blk = 32, 6, 16
    q4 = R.integers(0, 256, (nn, k // blk, blk // 2)).astype(np.uint8)
    scales = R.uniform(0.01, 0.1, (nn * (k // blk),)).astype(np.float32)
    zp = R.integers(0, 256, ((nn * ((k // blk + 1) // 2)),)).astype(np.uint8)
    case("matmul_nbits", "MatMulNBits", [("a", f32(2, 3, k)), ("b", q4), ("scales", scales)], ["y"], {"K": k, "N": nn, "bits": 4, "block_size": blk}, consts={"b", "scales"})
    case("matmul_nbits_zp_bias", "MatMulNBits", [("a", f32(3, k)), ("b", q4), ("scales", scales), ("zp", zp), ("gidx", None), ("bias", f32(nn))], ["y"], {"K": k, "N": nn, "bits": 4, "block_size": blk}, consts={"b", "scales", "zp", "bias"})
    au8 = R.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    bi8 = R.integers(-128, 128, (4, 5)).astype(np.int8)
    case("matmul_integer_to_float", "MatMulIntegerToFloat",
         [("a", au8), ("b", bi8), ("as", np.array(0.02, np.float32)), ("bs", R.uniform(0.01, 0.05, (5,)).astype(np.float32)), ("azp", np.array(120, np.uint8)), ("bzp", None), ("bias", f32(5))], ["y"], consts={"b", "bs", "bias"})
    case("dynamic_quantize_matmul", "DynamicQuantizeMatMul",
         [("a", f32(2, 3, 4)), ("b", bi8), ("bs", R.uniform(0.01, 0.05, (5,)).astype(np.float32)), ("bzp", None), ("bias", f32(5))], ["y"], consts={"b", "bs", "bias"})
    case("dynamic_quantize_matmul_u8", "DynamicQuantizeMatMul",
         [("a", f32(3, 4)), ("b", R.integers(0, 256, (4, 5)).astype(np.uint8)), ("bs", np.array(0.03, np.float32)), ("bzp", np.array(128, np.uint8))], ["y"], consts={"b", "bs", "bzp"})


def qlinear():
    u8 = lambda *s: R.integers(0, 256, s).astype(np.uint8)
    sc = lambda v: np.array(v, np.float32)
    zp = lambda v: np.array(v, np.uint8)
    a, b = u8(2, 3, 4), u8(3, 4)
    binq = [("a", a), ("as", sc(0.05)), ("azp", zp(128)), ("b", b), ("bs", sc(0.03)), ("bzp", zp(100)), ("ys", sc(0.07)), ("yzp", zp(90))]
    case("qlinear_add", "QLinearAdd", binq, ["y"], consts={"as", "azp", "bs", "bzp", "ys", "yzp"})
    case("qlinear_mul", "QLinearMul", binq, ["y"], consts={"as", "azp", "bs", "bzp", "ys", "yzp"})
    un = [("x", a), ("xs", sc(0.05)), ("xzp", zp(128)), ("ys", sc(1 / 256)), ("yzp", zp(0))]
    case("qlinear_sigmoid", "QLinearSigmoid", un, ["y"], consts={"xs", "xzp", "ys", "yzp"})
    case("qlinear_leaky_relu", "QLinearLeakyRelu", [("x", a), ("xs", sc(0.05)), ("xzp", zp(128)), ("ys", sc(0.04)), ("yzp", zp(60))], ["y"], {"alpha": 0.1}, consts={"xs", "xzp", "ys", "yzp"})
    img = u8(1, 3, 4, 5)
    case("qlinear_global_average_pool", "QLinearGlobalAveragePool", [("x", img), ("xs", sc(0.05)), ("xzp", zp(128)), ("ys", sc(0.02)), ("yzp", zp(120))], ["y"], consts={"xs", "xzp", "ys", "yzp"})
    case("qlinear_global_average_pool_nhwc", "QLinearGlobalAveragePool", [("x", u8(1, 4, 5, 3)), ("xs", sc(0.05)), ("xzp", zp(128)), ("ys", sc(0.02)), ("yzp", zp(120))], ["y"], {"channels_last": 1}, consts={"xs", "xzp", "ys", "yzp"})
    case("qlinear_concat", "QLinearConcat", [("ys", sc(0.06)), ("yzp", zp(125)), ("a", u8(2, 3)), ("as", sc(0.05)), ("azp", zp(128)), ("b", u8(2, 2)), ("bs", sc(0.08)), ("bzp", zp(110))], ["y"], {"axis": 1}, consts={"ys", "yzp", "as", "azp", "bs", "bzp"})
    x = f32(2, 3, 4)
    case("quantize_linear_ms", "QuantizeLinear", [("x", x), ("s", sc(0.02)), ("z", zp(128))], ["y"], consts={"s", "z"})
    case("dequantize_linear_ms", "DequantizeLinear", [("x", u8(2, 3)), ("s", sc(0.02)), ("z", zp(128))], ["y"], consts={"s", "z"})
    case("dequantize_linear_ms_axis", "DequantizeLinear", [("x", R.integers(-128, 128, (2, 3)).astype(np.int8)), ("s", R.uniform(0.01, 0.1, (3,)).astype(np.float32)), ("z", np.zeros(3, np.int8))], ["y"], {"axis": 1}, consts={"s", "z"})


def standard(op, inputs, attrs):
    """Runs one default-domain `op` in ORT (reference for GPU-only contrib ops)."""
    names = [f"i{k}" for k in range(len(inputs))]
    g = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], "ref",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in zip(names, inputs)],
        [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, dict(zip(names, inputs)))[0]


def misc():
    case("trilu_ms", "Trilu", [("x", f32(2, 4, 5)), ("k", np.array(1, np.int64))], ["y"], {"upper": 0}, consts={"k"})
    # ORT runs BiasAdd on CUDA only: y = x + bias + skip.
    case("bias_add", "BiasAdd", [("x", f32(2, 3, 8)), ("bias", f32(8)), ("skip", f32(2, 3, 8))], ["y"], numpy_ref=lambda x, bias, skip: [x + bias + skip])
    # ORT runs NhwcConv on CUDA only: Conv on the input transposed to NCHW,
    # the result transposed back.
    nhwc = lambda x, w, b: [standard("Conv", [x.transpose(0, 3, 1, 2), w, b], {"pads": [1, 1, 1, 1]}).transpose(0, 2, 3, 1)]
    case("nhwc_conv", "NhwcConv", [("x", f32(1, 6, 6, 3)), ("w", f32(4, 3, 3, 3, scale=0.3)), ("b", f32(4))], ["y"], {"pads": [1, 1, 1, 1]}, consts={"w", "b"}, numpy_ref=nhwc)


ML_DIR = os.path.join(os.path.dirname(HERE), "ml")


def ml():
    ML = "ai.onnx.ml"

    def m(name, op, inputs, outputs, attrs, **kw):
        case(name, op, inputs, outputs, attrs, domain=ML, out=ML_DIR, **kw)

    x = f32(5, 4)
    m("scaler", "Scaler", [("x", x)], ["y"], {"offset": [0.5, -1.0, 0.0, 2.0], "scale": [2.0, 0.5, 1.0, -1.0]})
    m("scaler_int", "Scaler", [("x", R.integers(-5, 5, (3, 2)).astype(np.int64))], ["y"], {"offset": [1.0], "scale": [0.25]})
    m("binarizer", "Binarizer", [("x", x)], ["y"], {"threshold": 0.2})
    for norm in ["MAX", "L1", "L2"]:
        m(f"normalizer_{norm.lower()}", "Normalizer", [("x", np.abs(x) + 0.1)], ["y"], {"norm": norm})
    holes = x.copy()
    holes[1, 2] = np.nan
    holes[3, 0] = np.nan
    m("imputer_nan", "Imputer", [("x", holes)], ["y"], {"imputed_value_floats": [1.0, 2.0, 3.0, 4.0], "replaced_value_float": float("nan")})
    m("imputer_int", "Imputer", [("x", np.array([[1, 0, 3], [0, 5, 0]], np.int64))], ["y"], {"imputed_value_int64s": [7, 8, 9], "replaced_value_int64": 0})
    coef = list(R.standard_normal(12).astype(np.float32))
    m("linear_regressor", "LinearRegressor", [("x", x)], ["y"], {"coefficients": coef, "intercepts": [0.5, -0.5, 1.0], "targets": 3})
    m("linear_regressor_1d", "LinearRegressor", [("x", f32(4))], ["y"], {"coefficients": coef[:4], "intercepts": [0.25]})
    for post in ["NONE", "LOGISTIC", "SOFTMAX"]:
        m(f"linear_classifier_{post.lower()}", "LinearClassifier", [("x", x)], ["label", "scores"],
          {"coefficients": coef, "intercepts": [0.1, 0.2, -0.3], "classlabels_ints": [3, 5, 7], "post_transform": post})
    for post in ["NONE", "LOGISTIC"]:
        m(f"linear_classifier_binary_{post.lower()}", "LinearClassifier", [("x", x)], ["label", "scores"],
          {"coefficients": coef[:4], "intercepts": [0.1], "classlabels_ints": [0, 1], "post_transform": post})
    m("array_feature_extractor", "ArrayFeatureExtractor", [("x", x), ("i", np.array([3, 0, 3], np.int64))], ["y"], {})
    m("one_hot_encoder", "OneHotEncoder", [("x", np.array([[1, 4], [2, 9]], np.int64))], ["y"], {"cats_int64s": [1, 2, 4]})
    m("label_encoder_ints", "LabelEncoder", [("x", np.array([[1, 4, 9], [2, 2, 1]], np.int64))], ["y"],
      {"keys_int64s": [1, 2, 4], "values_int64s": [10, 20, 40], "default_int64": -7}, domain_opset=2)
    m("label_encoder_to_float", "LabelEncoder", [("x", np.array([1, 4, 9, 2], np.int64))], ["y"],
      {"keys_int64s": [1, 2, 4], "values_floats": [0.5, 1.5, 2.5], "default_float": 9.0}, domain_opset=2)
    trees(m)
    # No draws from R here: the cases after these keep their data.
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[7, 8], [9, 10]], np.float32)
    c = np.array([[0.5], [-0.5]], np.float32)
    m("feature_vectorizer", "FeatureVectorizer", [("a", a), ("b", b), ("c", c)], ["y"], {"inputdimensions": [3, 1, 3]})
    sv = {"support_vectors": [0.0, 1.0, 2.0, 3.5, 4.0, 4.5], "coefficients": [0.5, -0.25], "rho": [0.05], "n_supports": 2}
    m("svm_regressor_one_class", "SVMRegressor", [("x", a)], ["y"], dict(sv, kernel_type="RBF", kernel_params=[0.1, 0.0, 3.0], one_class=1))
    m("svm_regressor_poly", "SVMRegressor", [("x", a)], ["y"], dict(sv, kernel_type="POLY", kernel_params=[0.2, 1.0, 2.0]))


def forest(n_trees, depth, n_features, modes=("BRANCH_LEQ",), nan_true=False):
    """Random full binary trees as TreeEnsemble{Regressor,Classifier} node
    attributes, and per tree its leaves as (tree id, node id)."""
    at = {k: [] for k in ["nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                          "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true"]}
    leaves = []
    for t in range(n_trees):
        count = 2 ** (depth + 1) - 1
        for i in range(count):
            leaf = i >= 2 ** depth - 1
            mode = "LEAF" if leaf else modes[int(R.integers(len(modes)))]
            at["nodes_treeids"].append(t)
            at["nodes_nodeids"].append(i)
            at["nodes_featureids"].append(0 if leaf else int(R.integers(n_features)))
            at["nodes_modes"].append(mode)
            at["nodes_values"].append(0.0 if leaf else float(R.integers(-2, 3) if mode in ("BRANCH_EQ", "BRANCH_NEQ") else R.standard_normal()))
            at["nodes_truenodeids"].append(0 if leaf else 2 * i + 1)
            at["nodes_falsenodeids"].append(0 if leaf else 2 * i + 2)
            at["nodes_missing_value_tracks_true"].append(int(nan_true and R.integers(2)))
            if leaf:
                leaves.append((t, i))
    return at, leaves


def entries(prefix, leaves, targets, weight, keep=lambda t, l: True):
    """`prefix`_{treeids,nodeids,ids,weights} of every (leaf, target) kept."""
    e = {f"{prefix}_{k}": [] for k in ["treeids", "nodeids", "ids", "weights"]}
    for li, (t, n) in enumerate(leaves):
        for c in targets:
            if keep(c, li):
                e[f"{prefix}_treeids"].append(t)
                e[f"{prefix}_nodeids"].append(n)
                e[f"{prefix}_ids"].append(c)
                e[f"{prefix}_weights"].append(float(weight()))
    return e


def trees(m):
    """Tree ensembles, including ONNX Runtime's two-class rules."""
    x = f32(16, 4)
    x[2, 1] = np.nan
    x[5, 0] = np.nan
    xi = R.integers(-2, 3, (16, 4)).astype(np.float32)
    normal = lambda: R.standard_normal()
    unit = lambda: R.uniform(0.0, 1.0)
    out = ["label", "probabilities"]

    def reg(name, n_targets, agg, **kw):
        at, leaves = forest(3, 3, 4, nan_true=True)
        keep = kw.pop("keep", lambda t, l: True)
        at.update(entries("target", leaves, range(n_targets), normal, keep), n_targets=n_targets, aggregate_function=agg, **kw)
        m(name, "TreeEnsembleRegressor", [("x", x)], ["y"], at, domain_opset=3)

    reg("tree_regressor_sum", 2, "SUM", base_values=[0.5, -0.5])
    reg("tree_regressor_average", 1, "AVERAGE")
    reg("tree_regressor_max_sparse", 2, "MAX", base_values=[1.0, 2.0], keep=lambda t, l: (t + l) % 3 != 0)
    reg("tree_regressor_min_logistic", 2, "MIN", post_transform="LOGISTIC")
    at, leaves = forest(2, 3, 4, modes=("BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"), nan_true=True)
    at.update(entries("target", leaves, [0], normal), n_targets=1)
    m("tree_regressor_modes", "TreeEnsembleRegressor", [("x", xi)], ["y"], at, domain_opset=3)

    def clf(name, classes, labels, weight, keep=lambda t, l: True, **kw):
        at, leaves = forest(4, 2, 4)
        at.update(entries("class", leaves, classes, weight, keep), classlabels_int64s=labels, **kw)
        m(name, "TreeEnsembleClassifier", [("x", x)], out, at, domain_opset=3)

    clf("tree_classifier_softmax", [0, 1, 2], [3, 5, 7], normal, post_transform="SOFTMAX")
    clf("tree_classifier_sparse", [0, 1, 2], [3, 5, 7], unit, keep=lambda t, l: (t + 2 * l) % 4 != 1)
    clf("tree_classifier_base", [0, 1, 2], [3, 5, 7], normal, base_values=[0.1, 0.2, -0.3], post_transform="SOFTMAX_ZERO")
    clf("tree_classifier_binary_one_class", [0], [0, 1], lambda: unit() / 4)
    clf("tree_classifier_binary_logistic_base", [0], [0, 1], normal, base_values=[0.3], post_transform="LOGISTIC")
    clf("tree_classifier_binary_both", [0, 1], [4, 9], normal)
    clf("tree_classifier_binary_both_base", [0, 1], [4, 9], normal, base_values=[0.1, 0.2])
    clf("tree_classifier_binary_class1_sparse", [1], [0, 1], unit, keep=lambda t, l: l % 3 != 0, base_values=[0.5])
    clf("tree_classifier_binary_class0_sparse", [0], [0, 1], normal, keep=lambda t, l: l % 3 != 0, post_transform="LOGISTIC")


def quantized_lstm():
    """DynamicQuantizeLSTM, int8 and uint8 weights (ORT takes one zero point per direction)."""
    for name, dt, dirs, per_channel, seq, batch in [
        ("dynamic_quantize_lstm", np.int8, "bidirectional", False, 5, 2),
        ("dynamic_quantize_lstm_uint8", np.uint8, "forward", False, 6, 3),
    ]:
        nd, hid, inp = (2 if dirs == "bidirectional" else 1), 8, 6
        lo, hi = (-128, 128) if dt == np.int8 else (0, 256)
        w = R.integers(lo, hi, (nd, inp, 4 * hid)).astype(dt)
        r = R.integers(lo, hi, (nd, hid, 4 * hid)).astype(dt)
        shape = (nd, 4 * hid) if per_channel else (nd,)
        zero = (lambda: R.integers(-3, 4, shape)) if dt == np.int8 else (lambda: R.integers(120, 136, shape))
        scale = lambda: R.uniform(0.002, 0.01, shape).astype(np.float32)
        inputs = [("x", f32(seq, batch, inp)), ("w", w), ("r", r), ("b", f32(nd, 8 * hid, scale=0.1)),
                  ("seq_lens", None), ("h0", f32(nd, batch, hid, scale=0.5)), ("c0", f32(nd, batch, hid, scale=0.5)), ("p", None),
                  ("ws", scale()), ("wz", zero().astype(dt)), ("rs", scale()), ("rz", zero().astype(dt))]
        case(name, "DynamicQuantizeLSTM", inputs, ["y", "yh", "yc"], {"hidden_size": hid, "direction": dirs},
             consts={"w", "r", "b", "ws", "wz", "rs", "rz"})


if __name__ == "__main__":
    for family in [activations, norms, attention, matmuls, qlinear, misc, ml, quantized_lstm]:
        family()
    print(f"{len(CASES)} cases written")
