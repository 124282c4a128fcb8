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
from .options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from .providers import get_all_providers, get_available_providers, get_device
from .runtime import (
    disable_telemetry_events,
    enable_telemetry_events,
    get_build_info,
    set_default_logger_severity,
    set_default_logger_verbosity,
)
from .session import InferenceSession, ModelMetadata, NodeArg, convert
from .values import IOBinding, OrtValue

__all__ = [
    "ExecutionMode",
    "ExecutionOrder",
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
    "disable_telemetry_events",
    "enable_telemetry_events",
    "get_all_providers",
    "get_available_providers",
    "get_build_info",
    "get_device",
    "set_default_logger_severity",
    "set_default_logger_verbosity",
] + _errors.__all__
