"""Models for tests/loops.rs: loops written the way exporters write decoders.

decoder_loop/model.onnx: a greedy attention decoder in a Loop, the way
  Paddle2ONNX exports one: every weight enters the loop as a loop-carried value
  the body passes through (some through an `x + 0` / Unsqueeze / Squeeze
  chain), the encoder's features are projected inside the body on every
  iteration although they never change, a GRU-like cell updates the state,
  each step's output is written into a carried buffer with ScatterElements and
  the loop stops early when the step's argmax is the end token.
  test_data_set_0 holds an input and ONNX Runtime's outputs.

Run: python3 tests/data/loops/make_models.py (onnx 1.22, onnxruntime 1.31).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
T, D, H, V, STEPS = 12, 16, 24, 7, 9


def const(name, arr):
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(arr, name))


def decoder_loop():
    r = np.random.default_rng(11)
    f = lambda *s: (r.standard_normal(s) * 0.4).astype(np.float32)
    weights = {"w_enc": f(D, H), "w_hid": f(H, H), "w_att": f(H, 1), "w_x": f(3 * H, D),
               "w_h": f(3 * H, H), "w_out": f(H, V), "b_out": f(V)}
    names = list(weights)
    outer = [const(n, weights[n]) for n in names]
    outer += [
        const("trip", np.array(STEPS, dtype=np.int64)),
        const("cond0", np.array(True)),
        const("h0", np.zeros((1, H), np.float32)),
        const("buf0", np.zeros((1, STEPS, V), np.float32)),
    ]
    # Body: (i, cond, h, buf, weights...) -> (cond, h, buf, weights..., logits)
    b = [
        const("zero", np.zeros(1, np.float32)),
        const("ax0", np.array([0], np.int64)),
        # features projected on every iteration: loop-invariant
        helper.make_node("MatMul", ["feats_in", "w_enc_in"], ["proj"], name="proj"),
        helper.make_node("MatMul", ["h_in", "w_hid_in"], ["hq"], name="hq"),
        helper.make_node("Add", ["proj", "hq"], ["e0"], name="e0"),
        helper.make_node("Tanh", ["e0"], ["e1"], name="e1"),
        helper.make_node("MatMul", ["e1", "w_att_in"], ["score"], name="score"),
        helper.make_node("Softmax", ["score"], ["alpha"], name="alpha", axis=0),
        helper.make_node("Transpose", ["alpha"], ["alpha_t"], name="alpha_t", perm=[1, 0]),
        helper.make_node("MatMul", ["alpha_t", "feats_in"], ["ctx"], name="ctx"),
        # GRU-like cell with transposed weights (transposed on every iteration)
        helper.make_node("Transpose", ["w_x_in"], ["w_x_t"], name="w_x_t", perm=[1, 0]),
        helper.make_node("Transpose", ["w_h_in"], ["w_h_t"], name="w_h_t", perm=[1, 0]),
        helper.make_node("MatMul", ["ctx", "w_x_t"], ["gx"], name="gx"),
        helper.make_node("MatMul", ["h_in", "w_h_t"], ["gh"], name="gh"),
        helper.make_node("Split", ["gx"], ["xr", "xz", "xn"], name="split_x", axis=1, num_outputs=3),
        helper.make_node("Split", ["gh"], ["hr", "hz", "hn"], name="split_h", axis=1, num_outputs=3),
        helper.make_node("Add", ["xr", "hr"], ["r0"], name="r0"),
        helper.make_node("Sigmoid", ["r0"], ["rg"], name="rg"),
        helper.make_node("Add", ["xz", "hz"], ["z0"], name="z0"),
        helper.make_node("Sigmoid", ["z0"], ["zg"], name="zg"),
        helper.make_node("Mul", ["rg", "hn"], ["rn"], name="rn"),
        helper.make_node("Add", ["xn", "rn"], ["n0"], name="n0"),
        helper.make_node("Tanh", ["n0"], ["ng"], name="ng"),
        helper.make_node("Sub", ["h_in", "ng"], ["hd"], name="hd"),
        helper.make_node("Mul", ["zg", "hd"], ["zh"], name="zh"),
        helper.make_node("Add", ["ng", "zh"], ["h_out"], name="h_out"),
        # the step's logits, written into the carried buffer at row i
        helper.make_node("MatMul", ["h_out", "w_out_in"], ["lo"], name="lo"),
        helper.make_node("Add", ["lo", "b_out_in"], ["logits"], name="logits"),
        helper.make_node("Unsqueeze", ["logits", "ax0"], ["logits3"], name="logits3"),
        const("one_shape", np.array([1, 1, 1], np.int64)),
        helper.make_node("Reshape", ["i", "one_shape"], ["i111"], name="i111"),
        const("rep", np.array([1, 1, V], np.int64)),
        helper.make_node("Tile", ["i111", "rep"], ["idx"], name="idx"),
        helper.make_node("ScatterElements", ["buf_in", "idx", "logits3"], ["buf_out"], name="write", axis=1),
        # stop at the end token (class 4: three steps of the nine allowed here)
        helper.make_node("ArgMax", ["logits"], ["best"], name="best", axis=1, keepdims=0),
        const("end", np.array([4], np.int64)),
        helper.make_node("Equal", ["best", "end"], ["ended"], name="ended"),
        helper.make_node("Not", ["ended"], ["go"], name="go"),
        helper.make_node("Squeeze", ["go", "ax0"], ["cond_out"], name="cond_out"),
        # a weight passed through x + 0, Unsqueeze, Squeeze (Paddle's assign)
        helper.make_node("Unsqueeze", ["w_hid_in", "ax0"], ["w_hid_u"], name="w_hid_u"),
        helper.make_node("Add", ["w_hid_u", "zero"], ["w_hid_a"], name="w_hid_a"),
        helper.make_node("Squeeze", ["w_hid_a", "ax0"], ["w_hid_out"], name="w_hid_out"),
    ]
    tv = lambda n, t, s: helper.make_tensor_value_info(n, t, s)
    fl = TensorProto.FLOAT
    body_in = [tv("i", TensorProto.INT64, []), tv("cond", TensorProto.BOOL, []),
               tv("h_in", fl, [1, H]), tv("buf_in", fl, [1, STEPS, V]), tv("feats_in", fl, [T, D])]
    body_in += [tv(n + "_in", fl, list(weights[n].shape)) for n in names]
    body_out = [tv("cond_out", TensorProto.BOOL, []), tv("h_out", fl, [1, H]),
                tv("buf_out", fl, [1, STEPS, V]), tv("feats_in", fl, [T, D])]
    body_out += [tv(("w_hid_out" if n == "w_hid" else n + "_in"), fl, list(weights[n].shape)) for n in names]
    body_out += [tv("logits", fl, [1, V])]
    body = helper.make_graph(b, "body", body_in, body_out)
    carried = ["h0", "buf0", "feats"] + names
    loop_outs = ["h_final", "buf", "feats_final"] + [n + "_final" for n in names] + ["all_logits"]
    loop = helper.make_node("Loop", ["trip", "cond0"] + carried, loop_outs, name="decoder", body=body)
    g = helper.make_graph(
        outer + [loop],
        "decoder_loop",
        [tv("feats", fl, [T, D])],
        [tv("h_final", fl, [1, H]), tv("buf", fl, [1, STEPS, V]), tv("all_logits", fl, ["steps", 1, V]),
         tv("w_hid_final", fl, [H, H])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    return m


m = decoder_loop()
onnx.checker.check_model(m, full_check=True)
path = os.path.join(HERE, "decoder_loop", "model.onnx")
os.makedirs(os.path.dirname(path), exist_ok=True)
onnx.save(m, path)
import onnxruntime as ort

feats = np.random.default_rng(5).standard_normal((T, D)).astype(np.float32)
outs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"feats": feats})
print("steps run:", outs[2].shape[0])
data = os.path.join(HERE, "decoder_loop", "test_data_set_0")
os.makedirs(data, exist_ok=True)
onnx.save_tensor(numpy_helper.from_array(feats), os.path.join(data, "input_0.pb"))
for k, t in enumerate(outs):
    onnx.save_tensor(numpy_helper.from_array(t), os.path.join(data, f"output_{k}.pb"))
