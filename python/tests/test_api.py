"""The API against ONNX Runtime's: the same names, attribute values, types
and exception classes, on the same models, compared live."""

import os
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper

import rlx_onnx
from conftest import REPO, assert_close, golden_cases, read_inputs

CNN = os.path.join(REPO, "golden", "cnn", "model.onnx")
TRANSFORMER = os.path.join(REPO, "golden", "transformer", "model.onnx")


def both(ort, model, **kw):
    return (
        ort.InferenceSession(model, providers=["CPUExecutionProvider"], **kw),
        rlx_onnx.InferenceSession(model, providers=["CPUExecutionProvider"], **kw),
    )


def model_bytes(nodes, inputs, outputs, opset=18, domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(graph, opset_imports=opsets, producer_name="rlx-tests")
    m.ir_version = 8
    return m.SerializeToString()


@pytest.mark.parametrize("case", golden_cases(), ids=os.path.basename)
def test_inputs_outputs_and_metadata_match(ort, case):
    model = os.path.join(case, "model.onnx")
    o, r = both(ort, model)
    for mine, theirs in ((r.get_inputs(), o.get_inputs()), (r.get_outputs(), o.get_outputs())):
        assert [a.name for a in mine] == [a.name for a in theirs]
        assert [a.type for a in mine] == [a.type for a in theirs]
    # Inputs: the declared shapes, but that a dim ORT leaves unnamed (None,
    # or a placeholder such as '?') is named by rlx-onnx.
    for a, b in zip(r.get_inputs(), o.get_inputs()):
        assert len(a.shape) == len(b.shape), a.name
        for x, y in zip(a.shape, b.shape):
            unnamed = y is None or (isinstance(y, str) and not y.replace("_", "").isalnum())
            assert x == y or (unnamed and isinstance(x, str)), (a.name, a.shape, b.shape)
    # Outputs: the declared shapes, as ORT reports them, but that a dim ORT
    # leaves unknown (None) or named may be a size rlx-onnx's inference fixes.
    for a, b in zip(r.get_outputs(), o.get_outputs()):
        assert len(a.shape) == len(b.shape), a.name
        for x, y in zip(a.shape, b.shape):
            assert x == y or (isinstance(x, int) and not isinstance(y, int)) or (x is None and y is None), (
                a.name,
                a.shape,
                b.shape,
            )
    mo, mr = o.get_modelmeta(), r.get_modelmeta()
    for field in ("producer_name", "graph_name", "domain", "description", "graph_description", "version"):
        assert getattr(mr, field) == getattr(mo, field), field
    assert mr.custom_metadata_map == mo.custom_metadata_map


def error_class(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e).__name__
    return None


@pytest.mark.parametrize(
    "feed",
    [
        lambda x: {"nope": x},  # unknown input name
        lambda x: {"x": x.astype(np.float64)},  # wrong dtype
        lambda x: {"x": x[0]},  # wrong rank
        lambda x: {"x": np.concatenate([x, x], axis=3)},  # wrong fixed dim
        lambda x: {},  # missing input
    ],
    ids=["name", "dtype", "rank", "dim", "missing"],
)
def test_wrong_inputs_raise_ort_classes(ort, feed):
    o, r = both(ort, CNN)
    name = o.get_inputs()[0].name
    x = read_inputs(os.path.dirname(CNN))[0]
    f = lambda x: {name if k == "x" else k: v for k, v in feed(x).items()}  # noqa: E731
    want = error_class(lambda: o.run(None, f(x)))
    got = error_class(lambda: r.run(None, f(x)))
    assert want is not None
    assert got == want


def test_invalid_kernel_inputs_raise_ort_classes(ort):
    # A gamma shorter than the hidden size: both refuse it when the run
    # reaches the node.
    m = model_bytes(
        [helper.make_node("SkipLayerNormalization", ["x", "s", "g"], ["y"], domain="com.microsoft")],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 2, 4]),
            helper.make_tensor_value_info("g", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4])],
        domains=["com.microsoft"],
    )
    o, r = both(ort, m)
    feed = {"x": np.ones((1, 2, 4), np.float32), "s": np.ones((1, 2, 4), np.float32), "g": np.ones(2, np.float32)}
    want = error_class(lambda: o.run(None, feed))
    assert want is not None
    assert error_class(lambda: r.run(None, feed)) == want


def test_wrong_output_name_raises_invalid_argument(ort):
    o, r = both(ort, CNN)
    x = read_inputs(os.path.dirname(CNN))
    feed = {o.get_inputs()[0].name: x[0]}
    assert error_class(lambda: r.run(["nope"], feed)) == error_class(lambda: o.run(["nope"], feed))


def test_bad_files_raise_ort_classes(ort, tmp_path):
    missing = str(tmp_path / "missing.onnx")
    assert error_class(lambda: rlx_onnx.InferenceSession(missing)) == "NoSuchFile"
    assert error_class(lambda: ort.InferenceSession(missing)) == "NoSuchFile"
    garbage = b"\x08\x07garbage that is not a model"
    assert error_class(lambda: rlx_onnx.InferenceSession(garbage)) == "InvalidProtobuf"
    with pytest.raises(rlx_onnx.capi.onnxruntime_pybind11_state.RlxError):
        rlx_onnx.InferenceSession(b"")


def test_output_subset_and_order(ort):
    o, r = both(ort, TRANSFORMER)
    feed = dict(zip([i.name for i in o.get_inputs()], read_inputs(os.path.dirname(TRANSFORMER))))
    names = [x.name for x in o.get_outputs()][::-1]
    for g, w in zip(r.run(names, feed), o.run(names, feed)):
        assert_close(g, w, 1e-4, 1e-5, "output")
    assert len(r.run([], feed)) == len(o.get_outputs())


def test_strings_sequences_and_maps(ort):
    m = model_bytes(
        [
            helper.make_node("Identity", ["s"], ["s_out"]),
            helper.make_node("SequenceConstruct", ["x", "x"], ["seq"]),
            helper.make_node("ZipMap", ["p"], ["probs"], domain="ai.onnx.ml", classlabels_int64s=[3, 7]),
        ],
        [
            helper.make_tensor_value_info("s", TensorProto.STRING, [2]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("p", TensorProto.FLOAT, [2, 2]),
        ],
        [
            helper.make_tensor_value_info("s_out", TensorProto.STRING, [2]),
            helper.make_value_info("seq", helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))),
            helper.make_value_info(
                "probs",
                helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, []))),
            ),
        ],
        domains=["ai.onnx.ml"],
    )
    o, r = both(ort, m)
    feed = {
        "s": np.array(["héllo", "wörld"], dtype=object),
        "x": np.array([1.5, -2.0], dtype=np.float32),
        "p": np.array([[0.25, 0.75], [0.5, 0.5]], dtype=np.float32),
    }
    assert [a.type for a in r.get_outputs()] == [a.type for a in o.get_outputs()]
    got, want = r.run(None, feed), o.run(None, feed)
    assert list(got[0]) == list(want[0]) and got[0].dtype == object
    assert_close(got[1], want[1], 0, 0, "seq")
    assert_close(got[2], want[2], 1e-6, 0, "zipmap")


def test_providers(ort):
    r = rlx_onnx.InferenceSession(CNN)
    assert r.get_providers() == ["CPUExecutionProvider"]
    assert "CPUExecutionProvider" in rlx_onnx.get_available_providers()
    assert rlx_onnx.get_available_providers()[-1] == "CPUExecutionProvider"
    with pytest.raises(rlx_onnx.InvalidArgument, match="unknown provider"):
        rlx_onnx.InferenceSession(CNN, providers=["NoSuchExecutionProvider"])
    if "CUDAExecutionProvider" not in rlx_onnx.get_available_providers():
        # A missing device is an error unless the CPU is listed after it.
        with pytest.raises(rlx_onnx.EPFail):
            rlx_onnx.InferenceSession(CNN, providers=["CUDAExecutionProvider"])
        s = rlx_onnx.InferenceSession(CNN, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
        assert s.get_providers() == ["CPUExecutionProvider"]


def test_session_options(ort, tmp_path):
    so = rlx_onnx.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = rlx_onnx.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "cnn.rlx")
    r = rlx_onnx.InferenceSession(CNN, sess_options=so)
    assert os.path.exists(so.optimized_model_filepath)
    x = read_inputs(os.path.dirname(CNN))
    feed = {r.get_inputs()[0].name: x[0]}
    o = ort.InferenceSession(CNN, providers=["CPUExecutionProvider"])
    assert_close(r.run(None, feed)[0], o.run(None, feed)[0], 1e-4, 1e-5, "O0")
    # The artifact loads without compiling and gives the same outputs.
    a = rlx_onnx.InferenceSession(so.optimized_model_filepath)
    assert_close(a.run(None, feed)[0], o.run(None, feed)[0], 1e-4, 1e-5, "artifact")
    with pytest.raises(rlx_onnx.NotImplemented):
        so.enable_profiling = True
    so.limits = {"max_tensor_elements": 10}
    with pytest.raises(rlx_onnx.RlxError, match="limit"):
        rlx_onnx.InferenceSession(CNN, sess_options=so)
    so.limits = {"no_such_limit": 1}
    with pytest.raises(rlx_onnx.InvalidArgument, match="unknown limit"):
        rlx_onnx.InferenceSession(CNN, sess_options=so)
    ro = rlx_onnx.RunOptions()
    ro.terminate = True
    with pytest.raises(rlx_onnx.RuntimeException):
        r.run(None, feed, ro)


def test_free_dimension_override(ort):
    m = model_bytes(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    )
    so = rlx_onnx.SessionOptions()
    so.add_free_dimension_override_by_name("batch", 2)
    r = rlx_onnx.InferenceSession(m, sess_options=so)
    assert r.get_inputs()[0].shape == [2, 3]
    assert rlx_onnx.InferenceSession(m).get_inputs()[0].shape == ["batch", 3]
    with pytest.raises(rlx_onnx.InvalidArgument):
        r.run(None, {"x": np.zeros((4, 3), np.float32)})


def test_convert_keeps_existing_files(tmp_path):
    out = tmp_path / "m.rlx"
    out.write_bytes(b"keep me")
    with pytest.raises(rlx_onnx.InvalidArgument, match="exists"):
        rlx_onnx.convert(CNN, out)
    assert out.read_bytes() == b"keep me"
    rlx_onnx.convert(CNN, out, force=True)
    assert rlx_onnx.InferenceSession(str(out)).get_inputs()[0].name


def test_artifacts_keep_the_declared_output_shapes(tmp_path):
    # The decoder declares `total` for its caches, which rlx-onnx infers
    # as `past+seq`: the artifact reports what the model declared.
    model = os.path.join(REPO, "golden", "decoder", "model.onnx")
    out = tmp_path / "d.rlx"
    rlx_onnx.convert(model, out)
    want = [o.shape for o in rlx_onnx.InferenceSession(model).get_outputs()]
    assert ["batch", 2, "total", 8] in want
    assert [o.shape for o in rlx_onnx.InferenceSession(str(out)).get_outputs()] == want


def test_inputs_are_lent_not_copied():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = rlx_onnx.OrtValue.ortvalue_from_numpy(x)
    assert v.data_ptr() == x.ctypes.data
    # A strided view is made contiguous first: a copy, not the view's memory.
    t = rlx_onnx.OrtValue.ortvalue_from_numpy(x.T)
    assert t.data_ptr() != x.ctypes.data
    np.testing.assert_array_equal(t.numpy(), x.T)
    assert v.shape() == [3, 4] and v.data_type() == "tensor(float)" and v.device_name() == "cpu"


def test_ortvalue_and_iobinding_on_the_cpu(ort):
    r = rlx_onnx.InferenceSession(CNN)
    x = read_inputs(os.path.dirname(CNN))[0]
    name, out = r.get_inputs()[0].name, r.get_outputs()[0].name
    want = r.run(None, {name: x})[0]
    v = rlx_onnx.OrtValue.ortvalue_from_numpy(x)
    np.testing.assert_array_equal(r.run(None, {name: v})[0], want)
    b = r.io_binding()
    b.bind_ortvalue_input(name, v)
    b.bind_output(out)
    r.run_with_iobinding(b)
    np.testing.assert_array_equal(b.copy_outputs_to_cpu()[0], want)
    got = r.run_with_ort_values(None, {name: v})
    np.testing.assert_array_equal(got[0].numpy(), want)
    # DLPack out, to numpy (a host copy the consumer owns).
    np.testing.assert_array_equal(np.from_dlpack(got[0]), want)
    back = rlx_onnx.OrtValue.from_dlpack(np.ascontiguousarray(want))
    np.testing.assert_array_equal(back.numpy(), want)


def test_dlpack_capsules_and_raw_input_pointers_on_the_cpu():
    r = rlx_onnx.InferenceSession(CNN)
    x = np.array(read_inputs(os.path.dirname(CNN))[0])  # writable: numpy exports only those
    name = r.get_inputs()[0].name
    want = r.run(None, {name: x})[0]
    # DLPack 1.x's versioned capsule.
    v1 = rlx_onnx.OrtValue.from_dlpack(x.__dlpack__(max_version=(1, 0)))
    np.testing.assert_array_equal(v1.numpy(), x)
    # A bare capsule (what torch.utils.dlpack.to_dlpack gives): taken once.
    capsule = x.__dlpack__()
    v = rlx_onnx.OrtValue.from_dlpack(capsule)
    np.testing.assert_array_equal(v.numpy(), x)
    np.testing.assert_array_equal(r.run(None, {name: v})[0], want)
    with pytest.raises(rlx_onnx.InvalidArgument, match="already consumed"):
        rlx_onnx.OrtValue.from_dlpack(capsule)
    # A strided producer is read through numpy; a strided capsule is refused.
    t = rlx_onnx.OrtValue.from_dlpack(x[:, :, ::2])
    np.testing.assert_array_equal(t.numpy(), x[:, :, ::2])
    with pytest.raises(rlx_onnx.InvalidArgument, match="contiguous"):
        rlx_onnx.OrtValue.from_dlpack(x[:, :, ::2].__dlpack__())
    # Unsigned bytes marked as booleans.
    flags = np.array([0, 1, 1, 0], dtype=np.uint8)
    b = rlx_onnx.OrtValue.from_dlpack(flags.__dlpack__(), is_bool_tensor=True)
    assert b.data_type() == "tensor(bool)"
    np.testing.assert_array_equal(b.numpy(), flags.astype(bool))
    with pytest.raises(TypeError):
        rlx_onnx.OrtValue.from_dlpack([1.0, 2.0])
    # ONNX Runtime's raw pointer binding, on the host: read in place.
    xs = np.ascontiguousarray(x)
    io = r.io_binding()
    io.bind_input(name, "cpu", 0, np.float32, list(xs.shape), xs.ctypes.data)
    io.bind_output(r.get_outputs()[0].name)
    r.run_with_iobinding(io)
    np.testing.assert_array_equal(io.copy_outputs_to_cpu()[0], want)
    with pytest.raises(rlx_onnx.InvalidArgument, match="null"):
        r.io_binding().bind_input(name, "cpu", 0, np.float32, list(xs.shape), 0)


def test_outputs_written_into_the_callers_memory(ort):
    r = rlx_onnx.InferenceSession(CNN)
    x = read_inputs(os.path.dirname(CNN))[0]
    name, out = r.get_inputs()[0].name, r.get_outputs()[0].name
    want = r.run(None, {name: x})[0]
    # Into an OrtValue made for it: the same value comes back, its array filled.
    v = rlx_onnx.OrtValue.ortvalue_from_shape_and_type(want.shape, want.dtype)
    b = r.io_binding()
    b.bind_cpu_input(name, x)
    b.bind_ortvalue_output(out, v)
    r.run_with_iobinding(b)
    (got,) = b.get_outputs()
    assert got is v
    np.testing.assert_array_equal(v.numpy(), want)
    # Into a raw host buffer of the output's type and shape (ONNX type code 1: float).
    buf = np.full(want.shape, np.nan, dtype=np.float32)
    b = r.io_binding()
    b.bind_cpu_input(name, x)
    b.bind_output(out, "cpu", 0, 1, list(want.shape), buf.ctypes.data)
    r.run_with_iobinding(b)
    np.testing.assert_array_equal(buf, want)
    # A value of another shape is an error naming the output; nothing is written.
    small = np.zeros((1, 2), dtype=np.float32)
    b = r.io_binding()
    b.bind_cpu_input(name, x)
    b.bind_ortvalue_output(out, rlx_onnx.OrtValue.ortvalue_from_numpy(small))
    with pytest.raises(rlx_onnx.InvalidArgument, match=out):
        r.run_with_iobinding(b)
    assert not small.any()
    # A read-only array cannot be written into: refused when bound.
    ro = np.zeros(want.shape, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(rlx_onnx.NotImplemented):
        r.io_binding().bind_ortvalue_output(out, rlx_onnx.OrtValue.ortvalue_from_numpy(ro))
    with pytest.raises(rlx_onnx.InvalidArgument, match="element_type and shape"):
        r.io_binding().bind_output(out, "cpu", 0, None, None, buf.ctypes.data)
    with pytest.raises(rlx_onnx.InvalidArgument, match="null"):
        r.io_binding().bind_output(out, "cpu", 0, np.float32, list(want.shape), 0)


@pytest.mark.parametrize("provider", ["VulkanExecutionProvider", "WgpuExecutionProvider"])
def test_gpu_provider_and_device_values(ort, provider):
    if provider not in rlx_onnx.get_available_providers():
        pytest.skip(f"{provider}: no Vulkan device here")
    o = ort.InferenceSession(CNN, providers=["CPUExecutionProvider"])
    r = rlx_onnx.InferenceSession(CNN, providers=[provider])
    assert r.get_providers() == [provider]
    x = read_inputs(os.path.dirname(CNN))[0]
    name, out = r.get_inputs()[0].name, r.get_outputs()[0].name
    want = o.run(None, {name: x})[0]
    assert_close(r.run(None, {name: x})[0], want, 1e-4, 1e-5, provider)
    # Output left on the device, read back when asked.
    device = {"VulkanExecutionProvider": "vulkan", "WgpuExecutionProvider": "wgpu"}[provider]
    b = r.io_binding()
    b.bind_cpu_input(name, x)
    b.bind_output(out, device)
    r.run_with_iobinding(b)
    (y,) = b.get_outputs()
    assert y.device_name() == device
    assert_close(y.numpy(), want, 1e-4, 1e-5, "device output")
    # A value uploaded once is an input of later runs.
    v = rlx_onnx.OrtValue.ortvalue_from_numpy(x, device)
    assert_close(r.run(None, {name: v})[0], want, 1e-4, 1e-5, "device input")


def test_one_session_from_eight_threads(ort):
    r = rlx_onnx.InferenceSession(TRANSFORMER)
    case = os.path.dirname(TRANSFORMER)
    names = [i.name for i in r.get_inputs()]
    base = read_inputs(case)
    rng = np.random.default_rng(0)
    feeds = []
    for _ in range(8):
        feed = {}
        for n, a in zip(names, base):
            feed[n] = (a + rng.standard_normal(a.shape).astype(a.dtype) * 0.1) if a.dtype.kind == "f" else a
        feeds.append(feed)
    want = [r.run(None, f) for f in feeds]
    errors = []

    def worker(i):
        try:
            for _ in range(20):
                for g, w in zip(r.run(None, feeds[i]), want[i]):
                    np.testing.assert_array_equal(g, w)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_module_level_settings_as_onnx_runtime_has_them(ort):
    # Scripts set logging and telemetry before making sessions: the same
    # names, callable the same way, and the enums' values ONNX Runtime's.
    for name in (
        "set_default_logger_severity",
        "set_default_logger_verbosity",
        "enable_telemetry_events",
        "disable_telemetry_events",
        "get_build_info",
    ):
        assert callable(getattr(ort, name)) and callable(getattr(rlx_onnx, name)), name
    rlx_onnx.set_default_logger_severity(3)
    rlx_onnx.set_default_logger_verbosity(0)
    rlx_onnx.disable_telemetry_events()
    rlx_onnx.enable_telemetry_events()
    assert rlx_onnx.get_build_info().startswith("rlx-onnx ")
    with pytest.raises(rlx_onnx.InvalidArgument):
        rlx_onnx.set_default_logger_severity(7)
    for kind in ("ExecutionOrder", "ExecutionMode", "GraphOptimizationLevel"):
        theirs = {m: int(getattr(getattr(ort, kind), m)) for m in dir(getattr(ort, kind)) if m.isupper()}
        mine = {m.name: int(m) for m in getattr(rlx_onnx, kind)}
        assert mine == theirs, kind
    so = rlx_onnx.SessionOptions()
    so.execution_order = rlx_onnx.ExecutionOrder.PRIORITY_BASED
    s = rlx_onnx.InferenceSession(CNN, sess_options=so, providers=["CPUExecutionProvider"])
    assert s.get_inputs()


def test_run_is_native_and_a_subclass_keeps_its_own(ort):
    # The instance's `run` is the native call (no Python frame) with ONNX
    # Runtime's checks; a subclass that defines `run` gets its own.
    x = read_inputs(os.path.dirname(CNN))[0]
    r = rlx_onnx.InferenceSession(CNN)
    feed = {r.get_inputs()[0].name: x}
    o = ort.InferenceSession(CNN, providers=["CPUExecutionProvider"])
    assert_close(r.run(None, feed)[0], o.run(None, feed)[0], 1e-4, 1e-5, "native run")
    assert_close(r.run([], list(feed.items()))[0], o.run(None, feed)[0], 1e-4, 1e-5, "pairs")
    with pytest.raises(ValueError, match=r"Required inputs \(\[.*\]\) are missing from input feed \(\[\]\)"):
        r.run(None, {})

    class Mine(rlx_onnx.InferenceSession):
        def run(self, output_names, input_feed, run_options=None):
            return ["mine", *super().run(output_names, input_feed, run_options)]

    m = Mine(CNN)
    out = m.run(None, feed)
    assert out[0] == "mine"
    assert_close(out[1], o.run(None, feed)[0], 1e-4, 1e-5, "subclass")
