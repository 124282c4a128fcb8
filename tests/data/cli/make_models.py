"""Builds the small models the CLI tests (tests/cli.rs) run.

token_table.onnx: int64 token ids index a 5-row table with Gather, so ids
  generated in [0, 10) would fail; the CLI must keep them below 5.
narrow_weights.onnx: an int8 weight with per-column scales behind a
  DequantizeLinear, an f16 weight behind a Cast, and an int8 weight of an
  integer matrix product: the artifact must store them narrow again.
odd_output_names.onnx: outputs named `y/1`, `y_1` and `y:1`, which the same
  file-name cleaning maps to one name: `run` must keep them apart.
strided_neck.onnx: five stride-2 pools and a 2x upsample added back, on an
  input whose height and width are symbolic: the dims a detector's neck makes,
  which the IR text names instead of printing them whole.
three_inputs.onnx: y = a + b * c over three f32[1,1,4] inputs, with model
  metadata (doc string, version, domain) and metadata_props (class names,
  image size): `run` must refuse a forgotten input, `inspect` and artifacts
  must keep the metadata.
words_and_sequence.onnx: string input compared with a 100-string initializer
  (a string weight), and a sequence input appended to and counted: `run`
  reads and writes strings (.npy) and sequences (.npz), through an artifact.

Run: python3 tests/data/cli/make_models.py (onnx 1.22).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def token_table():
    table = numpy_helper.from_array(
        np.arange(15, dtype=np.float32).reshape(5, 3), "table")
    g = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], name="lookup", axis=0)],
        "token_table",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3])],
        [table],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def strided_neck():
    nodes = []
    prev = "x"
    for i in range(5):
        nodes.append(helper.make_node(
            "MaxPool", [prev], [f"p{i}"], name=f"pool{i}",
            kernel_shape=[1, 1], strides=[2, 2]))
        prev = f"p{i}"
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes.append(helper.make_node(
        "Resize", ["p4", "", "scales"], ["up"], name="upsample", mode="nearest"))
    nodes.append(helper.make_node("Add", ["p3", "up"], ["y"], name="merge"))
    g = helper.make_graph(
        nodes,
        "strided_neck",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, None, None])],
        [scales],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def narrow_weights():
    rng = np.random.RandomState(0)
    q = numpy_helper.from_array(rng.randint(-127, 128, (64, 32)).astype(np.int8), "wq")
    scale = numpy_helper.from_array((rng.rand(32) * 0.01 + 0.001).astype(np.float32), "wscale")
    zp = numpy_helper.from_array(np.zeros(32, np.int8), "wzp")
    h = numpy_helper.from_array(rng.randn(32, 32).astype(np.float16), "wh")
    qi = numpy_helper.from_array(rng.randint(-127, 128, (32, 16)).astype(np.int8), "wi")
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "wscale", "wzp"], ["w"], name="dq", axis=1),
        helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
        helper.make_node("Cast", ["wh"], ["wf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["a", "wf"], ["b"], name="mm_f16"),
        helper.make_node("Relu", ["b"], ["r"], name="relu"),
        helper.make_node("DynamicQuantizeLinear", ["r"], ["rq", "rs", "rz"], name="dql"),
        helper.make_node("MatMulInteger", ["rq", "wi", "rz"], ["yi"], name="mmi"),
        helper.make_node("Cast", ["yi"], ["yf"], name="cast_y", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["yf", "rs"], ["y"], name="rescale"),
    ]
    g = helper.make_graph(
        nodes,
        "narrow_weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
        [q, scale, zp, h, qi],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def odd_output_names():
    g = helper.make_graph(
        [
            helper.make_node("Identity", ["x"], ["y/1"], name="a"),
            helper.make_node("Neg", ["x"], ["y_1"], name="b"),
            helper.make_node("Abs", ["x"], ["y:1"], name="c"),
        ],
        "odd_output_names",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ["y/1", "y_1", "y:1"]],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def words_and_sequence():
    # 100 strings: past the importer's inline limit, so the table is a weight
    # (the artifact must store strings).
    words = numpy_helper.from_array(np.array([f"w{i}" for i in range(100)], dtype=object), "words")
    g = helper.make_graph(
        [
            helper.make_node("Equal", ["x", "words"], ["same"], name="match"),
            helper.make_node("SequenceInsert", ["s", "t"], ["s2"], name="append"),
            helper.make_node("SequenceLength", ["s2"], ["n"], name="count"),
        ],
        "words_and_sequence",
        [
            helper.make_tensor_value_info("x", TensorProto.STRING, [100]),
            helper.make_tensor_sequence_value_info("s", TensorProto.INT64, None),
            helper.make_tensor_value_info("t", TensorProto.INT64, [2]),
        ],
        [
            helper.make_tensor_value_info("same", TensorProto.BOOL, [100]),
            helper.make_tensor_sequence_value_info("s2", TensorProto.INT64, None),
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
        ],
        [words],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def three_inputs():
    g = helper.make_graph(
        [
            helper.make_node("Mul", ["b", "c"], ["bc"], name="mul"),
            helper.make_node("Add", ["a", "bc"], ["y"], name="add"),
        ],
        "three_inputs",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, 4]) for n in "abc"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4])],
        doc_string="y = a + b * c",
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="make_models.py", doc_string="A model with metadata.",
                          model_version=3, domain="ai.rlx.test")
    helper.set_model_props(m, {"names": "{0: 'cat', 1: 'dog'}", "imgsz": "[640, 640]"})
    return m


for name, m in [("three_inputs", three_inputs()), ("odd_output_names", odd_output_names()), ("token_table", token_table()), ("strided_neck", strided_neck()),
                ("narrow_weights", narrow_weights()), ("words_and_sequence", words_and_sequence())]:
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, f"{name}.onnx"))
