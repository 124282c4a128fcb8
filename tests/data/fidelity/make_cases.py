"""Builds the fidelity cases tests/fidelity.rs runs: small models whose
results rlx-onnx once got silently wrong, or refused where ONNX Runtime
runs them, each in the ONNX backend-test layout (model.onnx,
test_data_set_0/input_N.pb, output_N.pb), the outputs made by ONNX Runtime.

pow_int64_odd_exponents: Pow on int64 with negative bases and odd exponents
  past 128 (a capped loop gave (-1)^129 = 1).
layer_norm_channel_scale: LayerNormalization over axes 1.. of [2,3,4] with a
  scale and bias of [3,1] (one per channel; was read cyclically).
normalizer_l2_zero_row: ai.onnx.ml Normalizer L2 with an all-zero row (ORT
  leaves it 0; 0/0 gave NaN).
cast_float_to_string, cast_string_to_float: Cast to and from strings (was
  refused): ORT's %.8g, INF, NaN; strtod's blanks, INF, hex.
dynamic_quantize_zeros: DynamicQuantizeLinear of zeros (ORT's scale is 1).
regex_ascii_classes: RegexFullMatch with \\w and \\d, which RE2 reads as ASCII.
einsum_four_vectors: Einsum i,j,k,l-> over four 1000-vectors (a sum over
  10^12 terms, now four sums and a product).
if_untypable_branch: an If on a run-time value whose other branch feeds an
  LSTM a rank-4 value (the whole model was refused; ORT checks a branch when
  it runs). Made with ORT's graph optimizations off: its constant folding
  would show it the rank at load, as rlx-onnx's import sees it.
qdq_round_trips: QuantizeLinear -> DequantizeLinear pairs (u8 and i8, ties
  and saturation; one whose 8-bit value is also an output) feeding an Add,
  a Relu and a batched MatMul of two activations (rewritten to arithmetic
  and to an 8-bit product). ORT's optimizations off: its reference is the
  unfused pairs and an f32 product (exact here: every sum is of multiples
  of 1/8).

Run: python3 tests/data/fidelity/make_cases.py (onnx 1.22, onnxruntime 1.31).
"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)


def case(name, nodes, inputs, outputs, feeds, opset=17, domains=(), initializers=(), optimize=True):
    g = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 9
    onnx.checker.check_model(m)
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(m, os.path.join(d, "model.onnx"))
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    got = s.run(None, feeds)
    for i, (n, v) in enumerate(feeds.items()):
        t = numpy_helper.from_array(v, n)
        open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb").write(t.SerializeToString())
    for i, (o, v) in enumerate(zip(outputs, got)):
        t = numpy_helper.from_array(np.asarray(v), o.name)
        open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb").write(t.SerializeToString())


def vi(name, dtype, dims):
    return helper.make_tensor_value_info(name, dtype, dims)


F, I64, S, U8, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING, TensorProto.UINT8, TensorProto.BOOL

case("pow_int64_odd_exponents", [helper.make_node("Pow", ["x", "y"], ["z"])],
     [vi("x", I64, [6]), vi("y", I64, [6])], [vi("z", I64, [6])],
     {"x": np.array([-2, -3, -1, 2, -5, -1], np.int64), "y": np.array([3, 5, 129, 3, 1, 1001], np.int64)})

case("layer_norm_channel_scale", [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=1)],
     [vi("x", F, [2, 3, 4]), vi("s", F, [3, 1]), vi("b", F, [3, 1])], [vi("y", F, [2, 3, 4])],
     {"x": rng.standard_normal((2, 3, 4)).astype(np.float32), "s": rng.standard_normal((3, 1)).astype(np.float32),
      "b": rng.standard_normal((3, 1)).astype(np.float32)})

case("normalizer_l2_zero_row", [helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="L2")],
     [vi("x", F, [3, 3])], [vi("y", F, [3, 3])],
     {"x": np.array([[0, 0, 0], [3, 4, 0], [-1, 0, 0]], np.float32)}, domains=("ai.onnx.ml",))

case("cast_float_to_string", [helper.make_node("Cast", ["x"], ["y"], to=S)],
     [vi("x", F, [12])], [vi("y", S, [12])],
     {"x": np.array([0.1, 1 / 3, 123456789.0, 1e-5, -0.0, np.inf, -np.inf, np.nan, 1e-40, 3.4e38, 100.0, 0.5],
                    np.float32)}, opset=19)

case("cast_string_to_float", [helper.make_node("Cast", ["x"], ["y"], to=F)],
     [vi("x", S, [7])], [vi("y", F, [7])],
     {"x": np.array(["1.5", " 2", "INF", "-inf", "NaN", "1e3", "0x10"], dtype=object)}, opset=19)

case("dynamic_quantize_zeros", [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
     [vi("x", F, [16])], [vi("y", U8, [16]), vi("s", F, []), vi("z", U8, [])],
     {"x": np.zeros(16, np.float32)})

case("regex_ascii_classes", [helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"\w+\d")],
     [vi("x", S, [6])], [vi("y", B, [6])],
     {"x": np.array(["abc1", "héllo1", "x_9", "٣", "ab٣", "日本1"], dtype=object)}, opset=20)

v = [rng.standard_normal(1000).astype(np.float32) for _ in range(4)]
case("einsum_four_vectors", [helper.make_node("Einsum", ["a", "b", "c", "d"], ["y"], equation="i,j,k,l->")],
     [vi(n, F, [1000]) for n in "abcd"], [vi("y", F, [])], dict(zip("abcd", v)))


def lstm_branch(name, rank4):
    nodes, src = [], "x"
    if rank4:
        nodes += [helper.make_node("Cast", ["axes_f"], [name + "_axes"], to=I64, name=name + "_axes"),
                  helper.make_node("Unsqueeze", ["x", name + "_axes"], [name + "_u"], name=name + "_unsqueeze")]
        src = name + "_u"
    nodes += [helper.make_node("LSTM", [src, "W", "R"], [name + "_y"], hidden_size=4, name=name + "_lstm"),
              helper.make_node("ReduceSum", [name + "_y"], [name + "_out"], keepdims=0, name=name + "_sum")]
    return helper.make_graph(nodes, name, [], [vi(name + "_out", F, [])])


W = rng.standard_normal((1, 16, 8)).astype(np.float32)
R = rng.standard_normal((1, 16, 4)).astype(np.float32)
case("if_untypable_branch",
     [helper.make_node("Equal", ["sr", "rate"], ["c"], name="is_16k"),
      helper.make_node("If", ["c"], ["y"], name="by_rate",
                       then_branch=lstm_branch("then", False), else_branch=lstm_branch("else", True))],
     [vi("x", F, [5, 1, 8]), vi("sr", I64, [])], [vi("y", F, [])],
     {"x": rng.standard_normal((5, 1, 8)).astype(np.float32), "sr": np.array(16000, np.int64)},
     initializers=[numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"),
                   numpy_helper.from_array(np.array(16000, np.int64), "rate"),
                   numpy_helper.from_array(np.array([0.0], np.float32), "axes_f")],
     optimize=False)


# Quantization round trips: ties (x / s = k + 1/2) and values past both ends.
qx = (rng.standard_normal((2, 3, 8, 16)) * 20).astype(np.float32)
qx.flat[::7] = (np.arange(qx.size)[::7] % 41 - 20) * 0.25 + 0.125
qy = (rng.standard_normal((2, 3, 16, 8)) * 4).astype(np.float32)
case("qdq_round_trips", [
    helper.make_node("QuantizeLinear", ["x", "s", "zu"], ["qa"]),
    helper.make_node("DequantizeLinear", ["qa", "s", "zu"], ["da"]),
    helper.make_node("Add", ["da", "bias"], ["a"]),
    helper.make_node("QuantizeLinear", ["x", "s2", "zi"], ["qb"]),
    helper.make_node("DequantizeLinear", ["qb", "s2", "zi"], ["db"]),
    helper.make_node("Relu", ["db"], ["b"]),
    helper.make_node("QuantizeLinear", ["x", "s3", "zu"], ["qm"]),
    helper.make_node("DequantizeLinear", ["qm", "s3", "zu"], ["dm"]),
    helper.make_node("QuantizeLinear", ["y", "s", "zu"], ["qk"]),
    helper.make_node("DequantizeLinear", ["qk", "s", "zu"], ["dk"]),
    helper.make_node("MatMul", ["dm", "dk"], ["c"]),
], [vi("x", F, [2, 3, 8, 16]), vi("y", F, [2, 3, 16, 8])],
    [vi("a", F, [2, 3, 8, 16]), vi("b", F, [2, 3, 8, 16]), vi("qb", TensorProto.INT8, [2, 3, 8, 16]),
     vi("c", F, [2, 3, 8, 8])],
    {"x": qx, "y": qy},
    initializers=[numpy_helper.from_array(np.array(0.25, np.float32), "s"),
                  numpy_helper.from_array(np.array(0.1, np.float32), "s2"),
                  numpy_helper.from_array(np.array(0.5, np.float32), "s3"),
                  numpy_helper.from_array(np.array(128, np.uint8), "zu"),
                  numpy_helper.from_array(np.array(-3, np.int8), "zi"),
                  numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "bias")],
    optimize=False)
