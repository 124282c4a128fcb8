"""Models for tests/fallback.rs: graphs a GPU target runs only in part.

words_to_features/model.onnx: string words -> ids (LabelEncoder, ai.onnx.ml) ->
  embedding Gather -> MatMul + Add + Relu -> features, and the words with a
  suffix (StringConcat) as a second output. The string ops run on the CPU,
  the numeric middle on the GPU, when the session is asked for a CPU fallback.
  test_data_set_0 holds an input and ONNX Runtime's outputs.

Run: python3 tests/data/fallback/make_models.py (onnx 1.22, onnxruntime 1.31).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def words_to_features():
    r = np.random.default_rng(7)
    vocab = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
    table = numpy_helper.from_array(r.standard_normal((len(vocab) + 1, 8)).astype(np.float32), "table")
    w = numpy_helper.from_array(r.standard_normal((8, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(r.standard_normal(4).astype(np.float32), "b")
    suffix = numpy_helper.from_array(np.array(["!"], dtype=object), "suffix")
    nodes = [
        helper.make_node("LabelEncoder", ["words"], ["ids"], name="vocab", domain="ai.onnx.ml",
                         keys_strings=vocab, values_int64s=list(range(1, len(vocab) + 1)), default_int64=0),
        helper.make_node("Gather", ["table", "ids"], ["emb"], name="embed", axis=0),
        helper.make_node("MatMul", ["emb", "w"], ["proj"], name="project"),
        helper.make_node("Add", ["proj", "b"], ["biased"], name="bias"),
        helper.make_node("Relu", ["biased"], ["features"], name="act"),
        helper.make_node("StringConcat", ["words", "suffix"], ["shout"], name="exclaim"),
    ]
    g = helper.make_graph(
        nodes,
        "words_to_features",
        [helper.make_tensor_value_info("words", TensorProto.STRING, [6])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [6, 4]),
         helper.make_tensor_value_info("shout", TensorProto.STRING, [6])],
        [table, w, b, suffix],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ai.onnx.ml", 4)])
    m.ir_version = 10
    return m


m = words_to_features()
onnx.checker.check_model(m)
path = os.path.join(HERE, "words_to_features", "model.onnx")
os.makedirs(os.path.dirname(path), exist_ok=True)
onnx.save(m, path)
import onnxruntime as ort

words = np.array(["the", "cat", "zebra", "mat", "dog", "a"], dtype=object)
outs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"words": words})
data = os.path.join(HERE, "words_to_features", "test_data_set_0")
os.makedirs(data, exist_ok=True)
for name, t in [("input_0", words), ("output_0", outs[0]), ("output_1", outs[1])]:
    onnx.save_tensor(numpy_helper.from_array(t), os.path.join(data, f"{name}.pb"))
