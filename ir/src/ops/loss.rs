//! Loss functions kept as ops: negative log-likelihood. (SoftmaxCrossEntropyLoss
//! is imported as LogSoftmax followed by this op.)

use super::{InferCx, InferError, OpDef};
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, op_attrs};

attr_enum! {
    pub enum LossReduction { None = "none", Sum = "sum", Mean = "mean" }
}

op_attrs! {
    /// `-input[n, target[n, ...], ...] * weight[target]`, reduced; inputs
    /// `input [N,C,*]` (log-probabilities), `target [N,*]`, optional `weight [C]`.
    pub struct NllLoss {
        pub reduction: LossReduction,
        pub ignore_index: Option<i64>,
    }
}

impl OpDef for NllLoss {
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, &[DType::F32, DType::F64, DType::F16, DType::BF16])?;
        cx.expect_dtype(1, &[DType::I32, DType::I64])?;
        cx.expect_min_rank(0, 2)?;
        cx.expect_rank(1, cx.rank(0) - 1)?;
        let s = match self.reduction {
            LossReduction::None => cx.shape(1).clone(),
            _ => Shape::scalar(),
        };
        Ok(vec![TensorType::new(d, s)])
    }
}
