"""``OrtValue`` and ``IOBinding``: values that may stay on a device between
runs, and DLPack both ways."""

import numpy as np

from . import _native
from ._native import InvalidArgument
from ._native import NotImplemented as _NotImplemented

_DEVICES = {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda", "vulkan": "vulkan", "wgpu": "wgpu"}

# ONNX element type codes -> numpy dtype names (ONNX Runtime's
# ortvalue_from_shape_and_type takes either).
_ELEMENT_TYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
}


def _device(device_type):
    d = _DEVICES.get(str(device_type).lower())
    if d is None:
        raise InvalidArgument(
            f"unknown device type `{device_type}`; rlx-onnx's are {', '.join(sorted(set(_DEVICES)))}"
        )
    return d


class OrtValue:
    """A tensor on the host or a device. Device values are shared by every
    session on their device: the output of one run can be the input of the
    next without passing through the host."""

    __slots__ = ("_value",)

    def __init__(self, value):
        if not isinstance(value, _native.Value):
            raise TypeError("use OrtValue.ortvalue_from_numpy (or from_dlpack) to make an OrtValue")
        self._value = value

    @staticmethod
    def ortvalue_from_numpy(numpy_obj, device_type="cpu", device_id=0, vendor_id=-1):
        """The array on ``device_type`` (on the CPU the array is lent, not
        copied: keep it unchanged while the value is used)."""
        d = _device(device_type)
        if d == "cpu":
            return OrtValue(_native.Value.from_array(numpy_obj))
        return OrtValue(_native.upload(numpy_obj, d, int(device_id)))

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0, vendor_id=-1):
        """Zeros of ``shape`` and ``element_type`` (a numpy dtype or an ONNX
        element type code) on ``device_type``."""
        dtype = _ELEMENT_TYPES.get(element_type, element_type) if isinstance(element_type, int) else element_type
        return OrtValue.ortvalue_from_numpy(np.zeros(shape, dtype=dtype), device_type, device_id)

    @staticmethod
    def from_dlpack(data, is_bool_tensor=False):
        """A value of a DLPack producer's host tensor (a copy; device tensors
        from other libraries are refused)."""
        try:
            arr = np.from_dlpack(data)
        except (RuntimeError, BufferError, TypeError) as e:
            raise _NotImplemented(
                f"from_dlpack takes host (kDLCPU) tensors only: {e}"
            ) from e
        if is_bool_tensor:
            arr = arr.astype(bool)
        return OrtValue(_native.Value.from_array(np.array(arr, copy=True)))

    def numpy(self):
        """A numpy copy (read back from the device)."""
        return self._value.numpy()

    def shape(self):
        return self._value.shape()

    def data_type(self):
        return self._value.data_type()

    def element_type(self):
        return self._value.element_type()

    def device_name(self):
        return self._value.device_name()

    def data_ptr(self):
        return self._value.data_ptr()

    def is_tensor(self):
        return self._value.data_type().startswith("tensor(")

    def is_tensor_sequence(self):
        return self._value.data_type().startswith("seq(")

    def has_value(self):
        return True

    def to_dlpack(self):
        return self._value.__dlpack__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self._value.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return self._value.__dlpack_device__()

    def __repr__(self):
        return repr(self._value).replace("Value(", "OrtValue(", 1)


class IOBinding:
    """Inputs and outputs bound before a run: inputs from numpy arrays or
    ``OrtValue``s (device values are taken in place), outputs left on the
    host or on the session's device."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}
        self._outputs = []  # (name, device)
        self._results = None

    def bind_cpu_input(self, name, arr_on_cpu):
        self._inputs[name] = arr_on_cpu

    def bind_ortvalue_input(self, name, ortvalue):
        self._inputs[name] = ortvalue._value

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        raise _NotImplemented(
            f"input `{name}`: binding a raw buffer pointer is not supported; "
            "bind an OrtValue (bind_ortvalue_input) or a numpy array (bind_cpu_input)"
        )

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None):
        if buffer_ptr is not None:
            raise _NotImplemented(
                f"output `{name}`: writing into a caller's buffer is not supported; "
                "bind the output by device and read it from get_outputs()"
            )
        d = _device(device_type)
        target = self._session._sess.target
        if d not in ("cpu", target):
            raise InvalidArgument(
                f"output `{name}` is bound to {d}, but the session runs on {target}"
            )
        self._outputs = [(n, dev) for n, dev in self._outputs if n != name] + [(name, d)]

    def bind_ortvalue_output(self, name, ortvalue):
        raise _NotImplemented(
            f"output `{name}`: writing into a caller's OrtValue is not supported; "
            "bind the output by device (bind_output) and read it from get_outputs()"
        )

    def clear_binding_inputs(self):
        self._inputs = {}

    def clear_binding_outputs(self):
        self._outputs = []
        self._results = None

    def synchronize_inputs(self):
        """Nothing to wait for: uploads complete before they return."""

    def synchronize_outputs(self):
        """Nothing to wait for: every run ends with its device synchronized."""

    def _run(self, run_options):
        if not self._outputs:
            raise InvalidArgument("no outputs are bound: bind_output(name, device_type) first")
        names = [n for n, _ in self._outputs]
        on_device = [n for n, d in self._outputs if d != "cpu"]
        values = self._session._sess.run_values(names, dict(self._inputs), on_device)
        self._results = [OrtValue(v) for v in values]

    def get_outputs(self):
        if self._results is None:
            raise InvalidArgument("no results: call run_with_iobinding first")
        return list(self._results)

    def copy_outputs_to_cpu(self):
        return [v.numpy() for v in self.get_outputs()]
