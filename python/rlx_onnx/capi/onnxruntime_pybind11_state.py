"""The exception classes, where ONNX Runtime scripts import them from
(``onnxruntime.capi.onnxruntime_pybind11_state``). Every one derives from
``RlxError``."""

from .._native import (
    EPFail,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    NoModel,
    NoSuchFile,
    NotImplemented,
    RlxError,
    RuntimeException,
)

__all__ = [
    "EPFail",
    "Fail",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "NoModel",
    "NoSuchFile",
    "NotImplemented",
    "RlxError",
    "RuntimeException",
]
