"""Builds the small models the CLI tests (tests/cli.rs) run.

token_table.onnx: int64 token ids index a 5-row table with Gather, so ids
  generated in [0, 10) would fail; the CLI must keep them below 5.
strided_neck.onnx: five stride-2 pools and a 2x upsample added back, on an
  input whose height and width are symbolic: the dims a detector's neck makes,
  which the IR text names instead of printing them whole.

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


for name, m in [("token_table", token_table()), ("strided_neck", strided_neck())]:
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, f"{name}.onnx"))
