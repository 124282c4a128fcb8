//! Leaves: graph inputs, weights from the weight store, and inline constants.

use super::{InferCx, InferError, OpDef};
use crate::op_attrs;
use crate::shape::TensorType;
use crate::tensor::Tensor;

op_attrs! {
    /// A graph input; its type is the declared one.
    pub struct Input {
        pub name: String,
    }
}

op_attrs! {
    /// A tensor of the weight store, by name; its type is the stored tensor's.
    pub struct Weight {
        pub name: String,
    }
}

op_attrs! {
    /// A small constant held inline (shape vectors, scalars).
    pub struct Constant {
        pub value: Tensor,
    }
}

impl OpDef for Input {
    fn arity(&self) -> (usize, usize) {
        (0, 0)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        Ok(cx.prior.to_vec())
    }
}

impl OpDef for Weight {
    fn arity(&self) -> (usize, usize) {
        (0, 0)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        Ok(cx.prior.to_vec())
    }
}

impl OpDef for Constant {
    fn arity(&self) -> (usize, usize) {
        (0, 0)
    }
    fn infer(&self, _: &InferCx) -> Result<Vec<TensorType>, InferError> {
        Ok(vec![self.value.ty()])
    }
}
