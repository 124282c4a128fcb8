"""The CUDA provider from Python, against PyTorch on the same GPU: outputs,
device values, DLPack into torch without a copy, one session from several
threads. Skipped where no CUDA device opens (CI); `scripts/gpu-check.sh
python` runs it on the lent GPU (also as a plain script, where pytest is not
installed)."""

import os
import tempfile
import threading

import numpy as np

import rlx_onnx

try:
    import pytest
except ImportError:  # the lent GPU machine may not have it: run as a script
    pytest = None


def _skip(why):
    if pytest is None:
        raise SystemExit(f"skipped: {why}")
    pytest.skip(why, allow_module_level=True)


try:
    import torch
except ImportError:
    _skip("no torch here")
if "CUDAExecutionProvider" not in rlx_onnx.get_available_providers() or not torch.cuda.is_available():
    _skip("no CUDA device here")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def exported():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    net = Net().eval()
    path = os.path.join(tempfile.mkdtemp(), "net.onnx")
    x = torch.randn(2, 3, 16, 16)
    torch.onnx.export(net, (x,), path, input_names=["x"], output_names=["y"], dynamo=False)
    with torch.no_grad():
        want = net.cuda()(x.cuda()).cpu().numpy()
    return path, x.numpy(), want


PATH, X, WANT = exported()


def session():
    return rlx_onnx.InferenceSession(PATH, providers=["CUDAExecutionProvider"])


def test_cuda_matches_torch():
    s = session()
    assert s.get_providers() == ["CUDAExecutionProvider"]
    np.testing.assert_allclose(s.run(None, {"x": X})[0], WANT, rtol=1e-4, atol=1e-5)
    both = rlx_onnx.InferenceSession(PATH, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert both.get_providers()[0] == "CUDAExecutionProvider"


def test_device_outputs_go_to_torch_without_a_copy():
    s = session()
    b = s.io_binding()
    b.bind_cpu_input("x", X)
    b.bind_output("y", "cuda")
    s.run_with_iobinding(b)
    (y,) = b.get_outputs()
    assert y.device_name() == "cuda"
    t = torch.from_dlpack(y)
    assert t.device.type == "cuda"
    assert t.data_ptr() == y.data_ptr()
    np.testing.assert_allclose(t.cpu().numpy(), WANT, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(t.cpu().numpy(), y.numpy())


def test_device_inputs_are_taken_in_place():
    s = session()
    v = rlx_onnx.OrtValue.ortvalue_from_numpy(X, "cuda", 0)
    assert v.device_name() == "cuda"
    np.testing.assert_allclose(s.run(None, {"x": v})[0], WANT, rtol=1e-4, atol=1e-5)
    # A device output of one session is the input of another on the device.
    b = s.io_binding()
    b.bind_ortvalue_input("x", v)
    b.bind_output("y", "cuda")
    s.run_with_iobinding(b)
    np.testing.assert_allclose(b.copy_outputs_to_cpu()[0], WANT, rtol=1e-4, atol=1e-5)


def test_torch_tensors_are_taken_in_place():
    s = session()
    # Made by torch's stream just before: the value's reads wait for it.
    x = (torch.from_numpy(X).cuda() * 2.0) / 2.0
    v = rlx_onnx.OrtValue.from_dlpack(x)
    assert v.device_name() == "cuda"
    assert v.data_ptr() == x.data_ptr()
    assert v.shape() == list(X.shape)
    np.testing.assert_allclose(s.run(None, {"x": v})[0], WANT, rtol=1e-4, atol=1e-5)
    # The value keeps torch's memory: dropping torch's tensor frees nothing.
    ptr = x.data_ptr()
    del x
    torch.cuda.empty_cache()
    torch.randn(8, 1 << 20, device="cuda")  # would reuse freed memory
    assert v.data_ptr() == ptr
    np.testing.assert_array_equal(v.numpy(), X)
    # A bare capsule (torch.utils.dlpack), written before it was made.
    y = torch.from_numpy(X).cuda()
    torch.cuda.synchronize()
    c = rlx_onnx.OrtValue.from_dlpack(torch.utils.dlpack.to_dlpack(y))
    np.testing.assert_allclose(s.run(None, {"x": c})[0], WANT, rtol=1e-4, atol=1e-5)
    # Strided tensors are refused, not read wrong.
    with pytest_raises(rlx_onnx.InvalidArgument, "contiguous"):
        rlx_onnx.OrtValue.from_dlpack(torch.from_numpy(X).cuda().transpose(2, 3))
    # Round trip: rlx -> torch -> rlx reads the same memory.
    back = rlx_onnx.OrtValue.from_dlpack(torch.from_dlpack(v))
    assert back.data_ptr() == v.data_ptr()


def test_raw_cuda_pointers_as_onnx_runtime_binds_them():
    s = session()
    x = torch.from_numpy(X).cuda()
    y = torch.full(WANT.shape, float("nan"), device="cuda")
    b = s.io_binding()
    b.bind_input("x", "cuda", 0, np.float32, list(x.shape), x.data_ptr())
    b.bind_output("y", "cuda", 0, np.float32, list(y.shape), y.data_ptr())
    s.run_with_iobinding(b)
    np.testing.assert_allclose(y.cpu().numpy(), WANT, rtol=1e-4, atol=1e-5)
    (out,) = b.get_outputs()
    assert out.data_ptr() == y.data_ptr()
    # A buffer of the wrong shape is refused, and left unwritten.
    z = torch.zeros(1, 3, device="cuda")
    b = s.io_binding()
    b.bind_input("x", "cuda", 0, np.float32, list(x.shape), x.data_ptr())
    b.bind_output("y", "cuda", 0, np.float32, [1, 3], z.data_ptr())
    with pytest_raises(rlx_onnx.InvalidArgument, "y"):
        s.run_with_iobinding(b)
    assert not z.any()


def test_cuda_ortvalues_bound_as_outputs_are_written_in_place():
    # ONNX Runtime's decoder loop binds one device OrtValue as both a past
    # input and the present output; here an output bound to a CUDA OrtValue
    # is written into its memory, and get_outputs() returns that value.
    s = session()
    y = rlx_onnx.OrtValue.ortvalue_from_shape_and_type(list(WANT.shape), np.float32, "cuda", 0)
    b = s.io_binding()
    b.bind_ortvalue_input("x", rlx_onnx.OrtValue.ortvalue_from_numpy(X, "cuda", 0))
    b.bind_ortvalue_output("y", y)
    s.run_with_iobinding(b)
    (out,) = b.get_outputs()
    assert out is y and out.data_ptr() == y.data_ptr()
    np.testing.assert_allclose(y.numpy(), WANT, rtol=1e-4, atol=1e-5)


class pytest_raises:
    """`pytest.raises(kind, match=...)` where pytest may be missing."""

    def __init__(self, kind, match):
        self.kind, self.match = kind, match

    def __enter__(self):
        return self

    def __exit__(self, kind, e, tb):
        if kind is None:
            raise AssertionError(f"{self.kind.__name__} not raised")
        if not issubclass(kind, self.kind) or self.match not in str(e):
            return False
        return True


def test_one_cuda_session_from_eight_threads():
    s = session()
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal(X.shape).astype(np.float32) for _ in range(8)]
    want = [s.run(None, {"x": f})[0] for f in feeds]
    errors = []

    def worker(i):
        try:
            for _ in range(20):
                np.testing.assert_array_equal(s.run(None, {"x": feeds[i]})[0], want[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


if __name__ == "__main__":
    failed = 0
    for name, f in sorted(globals().items()):
        if name.startswith("test_") and callable(f):
            try:
                f()
                print(f"ok    {name}")
            except Exception as e:  # noqa: BLE001 - printed, counted
                failed += 1
                print(f"FAIL  {name}: {type(e).__name__}: {e}")
    raise SystemExit(1 if failed else 0)
