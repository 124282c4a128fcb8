"""``OrtValue`` and ``IOBinding``: values that may stay on a device between
runs, and DLPack both ways."""

import ctypes

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


def _dtype(element_type):
    """A numpy dtype from a numpy dtype, type or name, or an ONNX element
    type code."""
    if isinstance(element_type, int) and not isinstance(element_type, bool):
        if element_type not in _ELEMENT_TYPES:
            raise InvalidArgument(f"ONNX element type {element_type} has no numpy dtype here")
        element_type = _ELEMENT_TYPES[element_type]
    try:
        return np.dtype(element_type)
    except TypeError as e:
        raise InvalidArgument(f"element type {element_type!r}: {e}") from e


def _host_array(name, ortvalue):
    """The writable numpy array a host ``ortvalue`` shares its memory with,
    for an output written into it."""
    a = ortvalue._array
    if (
        ortvalue.device_name() != "cpu"
        or a is None
        or not a.flags.c_contiguous
        or not a.flags.writeable
        or a.ctypes.data != ortvalue.data_ptr()
    ):
        raise _NotImplemented(
            f"output `{name}`: only host OrtValues made from a writable C-contiguous numpy array "
            "(ortvalue_from_numpy, ortvalue_from_shape_and_type) are written in place; bind the "
            "output by device (bind_output) and read it from get_outputs()"
        )
    return a


def _dims(name, shape):
    dims = [int(s) for s in shape]
    if any(s < 0 for s in dims):
        raise InvalidArgument(f"`{name}`: shape {dims} has a negative dim")
    return dims


def _host_view(buffer_ptr, dtype, dims):
    """The caller's host memory at ``buffer_ptr`` as an array (no copy)."""
    nbytes = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    raw = (ctypes.c_char * nbytes).from_address(int(buffer_ptr))
    return np.frombuffer(raw, dtype=dtype).reshape(dims)


def _device(device_type):
    d = _DEVICES.get(str(device_type).lower())
    if d is None:
        raise InvalidArgument(
            f"unknown device type `{device_type}`; rlx-onnx's are {', '.join(sorted(set(_DEVICES)))}"
        )
    return d


# DLPack's device type of CUDA memory.
_DLPACK_CUDA = 2


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


class OrtValue:
    """A tensor on the host or a device. Device values are shared by every
    session on their device: the output of one run can be the input of the
    next without passing through the host."""

    __slots__ = ("_value", "_array")

    def __init__(self, value, array=None):
        if not isinstance(value, _native.Value):
            raise TypeError("use OrtValue.ortvalue_from_numpy (or from_dlpack) to make an OrtValue")
        self._value = value
        # The numpy array a host value was made from (an output bound to
        # the value is written into it).
        self._array = array

    @staticmethod
    def ortvalue_from_numpy(numpy_obj, device_type="cpu", device_id=0, vendor_id=-1):
        """The array on ``device_type`` (on the CPU the array is lent, not
        copied: keep it unchanged while the value is used)."""
        d = _device(device_type)
        if d == "cpu":
            return OrtValue(_native.Value.from_array(numpy_obj), numpy_obj)
        return OrtValue(_native.upload(numpy_obj, d, int(device_id)))

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0, vendor_id=-1):
        """Zeros of ``shape`` and ``element_type`` (a numpy dtype or an ONNX
        element type code) on ``device_type``."""
        return OrtValue.ortvalue_from_numpy(np.zeros(shape, dtype=_dtype(element_type)), device_type, device_id)

    @staticmethod
    def from_dlpack(data, is_bool_tensor=False):
        """A value of a DLPack producer's tensor (``torch.Tensor``, a CuPy or
        JAX array, numpy) or of a DLPack capsule. A CUDA tensor is taken
        without a copy: sessions read it in place, so leave it unwritten
        while the value is used. A host tensor is copied."""
        if not _is_capsule(data) and not hasattr(data, "__dlpack__"):
            raise TypeError("from_dlpack takes a DLPack capsule or an object with __dlpack__")
        if not _is_capsule(data) and data.__dlpack_device__()[0] not in (_DLPACK_CUDA,):
            # The host: numpy reads any strides; the value owns its copy.
            arr = np.array(np.from_dlpack(data), copy=True)
            return OrtValue(_native.Value.from_array(arr.astype(bool) if is_bool_tensor else arr))
        return OrtValue(_native.Value.from_dlpack(data, bool(is_bool_tensor)))

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
    host or on the session's device, or written into the caller's host
    memory (``bind_ortvalue_output``, ``bind_output`` with ``buffer_ptr``)."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}
        self._outputs = []  # (name, device)
        # Outputs written into the caller's memory: name -> OrtValue.
        self._into = {}
        self._results = None

    def bind_cpu_input(self, name, arr_on_cpu):
        self._inputs[name] = arr_on_cpu

    def bind_ortvalue_input(self, name, ortvalue):
        self._inputs[name] = ortvalue._value

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        """Binds input ``name`` to the caller's memory at ``buffer_ptr`` on
        ``device_type`` (a ``torch.Tensor``'s ``data_ptr()``), read in place
        at every run: keep it allocated and unwritten while bound. As in
        ONNX Runtime the address cannot be checked; a null one is refused."""
        d = _device(device_type)
        dtype = _dtype(element_type)
        dims = _dims(name, shape)
        if int(buffer_ptr) == 0:
            raise InvalidArgument(f"input `{name}`: buffer_ptr is null")
        if d == "cpu":
            self._inputs[name] = _host_view(buffer_ptr, dtype, dims)
        elif d == "cuda":
            self._inputs[name] = _native.Value.from_cuda_pointer(name, int(buffer_ptr), dtype, dims, int(device_id))
        else:
            raise _NotImplemented(
                f"input `{name}`: {d} memory has no address to bind; bind an OrtValue "
                "(bind_ortvalue_input) instead"
            )

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None):
        """Binds output ``name`` to a device (read it from ``get_outputs()``),
        or, with ``buffer_ptr``, to the caller's host memory of
        ``element_type`` and ``shape`` that every run writes into."""
        d = _device(device_type)
        if buffer_ptr is not None:
            if element_type is None or shape is None:
                raise InvalidArgument(
                    f"output `{name}`: a buffer_ptr needs its element_type and shape"
                )
            # The address itself cannot be checked (as in ONNX Runtime, the
            # caller vouches for it); a null one can.
            if int(buffer_ptr) == 0:
                raise InvalidArgument(f"output `{name}`: buffer_ptr is null")
            dtype, dims = _dtype(element_type), _dims(name, shape)
            if d == "cpu":
                self.bind_ortvalue_output(name, OrtValue.ortvalue_from_numpy(_host_view(buffer_ptr, dtype, dims)))
                return
            if d != "cuda":
                raise _NotImplemented(
                    f"output `{name}`: {d} memory has no address to write into; bind the "
                    f"output to {d} and read it from get_outputs()"
                )
            self._bind_device(name, d)
            self._into[name] = ("cuda", int(buffer_ptr), dtype, dims, int(device_id), None)
            return
        self._bind_device(name, d)
        self._into.pop(name, None)

    def _bind_device(self, name, d):
        target = self._session._sess.target
        if d not in ("cpu", target):
            raise InvalidArgument(
                f"output `{name}` is bound to {d}, but the session runs on {target}"
            )
        self._outputs = [(n, dev) for n, dev in self._outputs if n != name] + [(name, d)]

    def bind_ortvalue_output(self, name, ortvalue):
        """Binds output ``name`` to the caller's ``ortvalue``: every run
        writes the output into its memory (its shape and type must be the
        output's), and ``get_outputs()`` returns that value. A host value must
        share a writable numpy array's memory; a CUDA value is written device
        to device, so a value bound as a decoder's past input and as its
        present output is updated in place, as in ONNX Runtime. wgpu and
        Vulkan values have no address to write into."""
        d = ortvalue.device_name()
        if d == "cuda":
            # Everything that can raise first: a refused binding changes nothing.
            dims = [int(s) for s in ortvalue.shape()]
            dtype = _dtype(ortvalue.element_type())
            ordinal = int(ortvalue.__dlpack_device__()[1])
            ptr = int(ortvalue.data_ptr())
            self._bind_device(name, "cuda")
            self._into[name] = ("cuda", ptr, dtype, dims, ordinal, ortvalue)
            return
        if d != "cpu":
            raise _NotImplemented(
                f"output `{name}`: a {d} OrtValue has no address to write into; bind the "
                f"output to {d} (bind_output) and read it from get_outputs()"
            )
        _host_array(name, ortvalue)
        self._outputs = [(n, dev) for n, dev in self._outputs if n != name] + [(name, "cpu")]
        self._into[name] = ortvalue

    def clear_binding_inputs(self):
        self._inputs = {}

    def clear_binding_outputs(self):
        self._outputs = []
        self._into = {}
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
        results = []
        for n, v in zip(names, values):
            into = self._into.get(n)
            if into is None:
                results.append(OrtValue(v))
                continue
            if isinstance(into, tuple):  # the caller's CUDA memory
                _, ptr, dtype, dims, device_id, bound = into
                v.copy_to_cuda_pointer(n, ptr, dtype, dims, device_id)
                if bound is None:
                    bound = OrtValue(_native.Value.from_cuda_pointer(n, ptr, dtype, dims, device_id))
                results.append(bound)
                continue
            got, a = v.numpy(), _host_array(n, into)
            if got.shape != a.shape or got.dtype != a.dtype:
                raise InvalidArgument(
                    f"output `{n}` is {got.dtype}{list(got.shape)}, but the value bound to it "
                    f"is {a.dtype}{list(a.shape)}"
                )
            np.copyto(a, got)
            results.append(into)
        self._results = results

    def get_outputs(self):
        if self._results is None:
            raise InvalidArgument("no results: call run_with_iobinding first")
        return list(self._results)

    def copy_outputs_to_cpu(self):
        return [v.numpy() for v in self.get_outputs()]
