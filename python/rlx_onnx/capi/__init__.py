"""ONNX Runtime's ``capi`` names, for scripts that import from there."""
