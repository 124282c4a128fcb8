"""Cases an earlier hostile-input probe found wrong (issue 34), checked
against ONNX Runtime live: each model is built here, run by both, and the
outputs must agree (exactly for integers, strings and bools)."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import rlx_onnx
from conftest import assert_close

vi = helper.make_tensor_value_info
RNG = np.random.default_rng(7)


def model(nodes, ins, outs, opsets=(("", 18),)):
    g = helper.make_graph(nodes, "g", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8
    return m.SerializeToString()


CASES = {
    "pow_int64_negative_base_odd_exponent": (
        model([helper.make_node("Pow", ["a", "b"], ["y"])],
              [vi("a", T.INT64, [3]), vi("b", T.INT64, [3])], [vi("y", T.INT64, [3])]),
        {"a": np.array([-2, -3, 2], np.int64), "b": np.array([3, 3, 2], np.int64)},
    ),
    "layernorm_broadcasting_scale": (
        model([helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=1)],
              [vi("x", T.FLOAT, [2, 3, 4]), vi("s", T.FLOAT, [3, 1])], [vi("y", T.FLOAT, [2, 3, 4])]),
        {"x": RNG.random((2, 3, 4), np.float32), "s": RNG.random((3, 1), np.float32)},
    ),
    "ml_normalizer_l2_zero_row": (
        model([helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="L2")],
              [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])], (("", 18), ("ai.onnx.ml", 1))),
        {"x": np.array([[0, 0, 0], [1, 2, 2]], np.float32)},
    ),
    "cast_float_to_string": (
        model([helper.make_node("Cast", ["x"], ["y"], to=T.STRING)],
              [vi("x", T.FLOAT, [4])], [vi("y", T.STRING, [4])]),
        {"x": np.array([1.5, -0.25, 1e10, np.inf], np.float32)},
    ),
    "regex_word_class_is_ascii": (
        model([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"\w+")],
              [vi("x", T.STRING, [2])], [vi("y", T.BOOL, [2])], (("", 20),)),
        {"x": np.array(["héllo", "hello"], dtype=object)},
    ),
    "dynamic_quantize_linear": (
        model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
              [vi("x", T.FLOAT, [4096])],
              [vi("y", T.UINT8, [4096]), vi("s", T.FLOAT, []), vi("z", T.UINT8, [])]),
        {"x": (RNG.standard_normal(4096) * 3).astype(np.float32)},
    ),
    "einsum_four_vectors_to_scalar": (
        model([helper.make_node("Einsum", ["a", "b", "c", "d"], ["y"], equation="i,j,k,l->")],
              [vi(n, T.FLOAT, [1000]) for n in "abcd"], [vi("y", T.FLOAT, [])]),
        {n: (RNG.random(1000) * 0.01).astype(np.float32) for n in "abcd"},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_ort(ort, name):
    m, feed = CASES[name]
    want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feed)
    got = rlx_onnx.InferenceSession(m).run(None, feed)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, 1e-5, 1e-6, f"{name} output {i}")
