//! rlx-onnx
