//! Quantization: QuantizeLinear, DequantizeLinear (per-tensor, per-axis and
//! blocked) and DynamicQuantizeLinear.

use super::{attr_err, InferCx, InferError, OpDef};
use crate::dtype::DType;
use crate::op_attrs;
use crate::shape::TensorType;

op_attrs! {
    /// `saturate(round(x / scale) + zero_point)`; inputs `x`, `scale`, `zero_point`
    /// (whose dtype is the output's). `block_size = 0` is per-tensor or per-axis.
    pub struct QuantizeLinear {
        pub axis: i64,
        pub block_size: i64,
        pub saturate: bool,
    }
}

impl OpDef for QuantizeLinear {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::F32, DType::F16, DType::BF16, DType::I32])?;
        if self.block_size < 0 {
            return Err(attr_err("block_size", "must be non-negative"));
        }
        Ok(vec![TensorType::new(cx.dtype(2), cx.shape(0).clone())])
    }
}

op_attrs! {
    /// `(x - zero_point) * scale`; inputs `x`, `scale`, `zero_point`. The output
    /// has the scale's dtype.
    pub struct DequantizeLinear {
        pub axis: i64,
        pub block_size: i64,
    }
}

impl OpDef for DequantizeLinear {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_same_dtype(2, 0)?;
        cx.expect_dtype(1, &[DType::F32, DType::F16, DType::BF16])?;
        Ok(vec![TensorType::new(cx.dtype(1), cx.shape(0).clone())])
    }
}

op_attrs! {
    /// Quantizes f32 to u8 with a scale and zero point computed from the data range.
    pub struct DynamicQuantizeLinear {}
}

impl OpDef for DynamicQuantizeLinear {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::F32])?;
        Ok(vec![
            TensorType::new(DType::U8, cx.shape(0).clone()),
            TensorType::scalar(DType::F32),
            TensorType::scalar(DType::U8),
        ])
    }
}
