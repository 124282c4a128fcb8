"""ONNX Runtime's module-level settings: logging, telemetry, build info.

rlx-onnx logs nothing from a session (failures raise) and sends no
telemetry, so these keep what they are given and change nothing else;
scripts that call them before creating sessions run unchanged."""

from ._native import InvalidArgument, __version__

_logger = {"severity": 2, "verbosity": 0}


def set_default_logger_severity(severity):
    """ONNX Runtime's levels: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal."""
    level = int(severity)
    if not 0 <= level <= 4:
        raise InvalidArgument(f"logger severity {severity} is not one of 0 (verbose) to 4 (fatal)")
    _logger["severity"] = level


def set_default_logger_verbosity(verbosity):
    """The verbose level's detail (ONNX Runtime's ``vlog`` level)."""
    level = int(verbosity)
    if level < 0:
        raise InvalidArgument(f"logger verbosity {verbosity} is negative")
    _logger["verbosity"] = level


def enable_telemetry_events():
    """rlx-onnx has no telemetry to enable."""


def disable_telemetry_events():
    """rlx-onnx has no telemetry to disable."""


def get_build_info():
    return f"rlx-onnx {__version__}"
