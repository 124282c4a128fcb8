"""rlx_onnx: an ONNX compiler toolchain with ONNX Runtime's Python API.

``import rlx_onnx as ort`` runs ONNX Runtime scripts: ``InferenceSession``,
``SessionOptions``, ``get_inputs``/``get_outputs``, ``run``, ``OrtValue``,
``io_binding``. Providers pick the target: ``CPUExecutionProvider``,
``CUDAExecutionProvider``, and rlx-onnx's ``WgpuExecutionProvider`` and
``VulkanExecutionProvider``.
"""

from . import _native
from ._native import __version__
from .capi import onnxruntime_pybind11_state as _errors
from .capi.onnxruntime_pybind11_state import *  # noqa: F403 - ORT's exception classes
from .options import ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions
from .providers import get_all_providers, get_available_providers, get_device
from .session import InferenceSession, ModelMetadata, NodeArg, convert
from .values import IOBinding, OrtValue

__all__ = [
    "ExecutionMode",
    "GraphOptimizationLevel",
    "InferenceSession",
    "IOBinding",
    "ModelMetadata",
    "NodeArg",
    "OrtValue",
    "RunOptions",
    "SessionOptions",
    "__version__",
    "convert",
    "get_all_providers",
    "get_available_providers",
    "get_device",
] + _errors.__all__
