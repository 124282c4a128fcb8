//! Reductions: Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum/CumProd, TopK.

use super::{norm_axis, value_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, kinded_op, op_attrs};

attr_enum! {
    pub enum ReduceKind {
        Sum = "reduce_sum", Mean = "reduce_mean", Max = "reduce_max", Min = "reduce_min",
        Prod = "reduce_prod", L1 = "reduce_l1", L2 = "reduce_l2", LogSum = "reduce_log_sum",
        LogSumExp = "reduce_log_sum_exp", SumSquare = "reduce_sum_square",
    }
}

kinded_op! {
    /// Reduces over the axes given by the optional constant input 1; with no axes,
    /// over all axes unless `noop_with_empty_axes`.
    pub struct Reduce [ReduceKind] {
        pub keepdims: bool,
        pub noop_with_empty_axes: bool,
    }
}

impl Reduce {
    /// The reduced axes for an input of `rank`, given the axes input if any.
    /// An axis named twice (`[-2, 0]` at rank 2) is reduced once, as ONNX
    /// Runtime reduces it.
    pub fn axes(&self, axes: Option<&[i64]>, rank: usize) -> Result<Vec<usize>, InferError> {
        match axes {
            Some(a) if !a.is_empty() => {
                let mut v = a
                    .iter()
                    .map(|&x| norm_axis(x, rank))
                    .collect::<Result<Vec<_>, _>>()?;
                v.sort();
                v.dedup();
                Ok(v)
            }
            _ if self.noop_with_empty_axes => Ok(Vec::new()),
            _ => Ok((0..rank).collect()),
        }
    }
}

impl OpDef for Reduce {
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.dtype(0);
        let bool_ok = d == DType::Bool && matches!(self.kind, ReduceKind::Max | ReduceKind::Min);
        if !d.is_standard() || (d == DType::Bool && !bool_ok) {
            return Err(InferError::DType {
                port: 0,
                got: d,
                expected: "a number".into(),
            });
        }
        let x = cx.shape(0);
        let axes = if cx.has(1) {
            match cx.ints(1) {
                Some(a) => self.axes(Some(&a), x.rank())?,
                None if cx.shape(1).0.first().and_then(Dim::known) == Some(0) => {
                    self.axes(None, x.rank())?
                }
                None => {
                    // Unknown axes: the sizes are only known at run time.
                    let n = cx
                        .shape(1)
                        .0
                        .first()
                        .and_then(Dim::known)
                        .ok_or(InferError::NotConstant { port: 1 })?
                        as usize;
                    let r = if self.keepdims {
                        x.rank()
                    } else {
                        x.rank().saturating_sub(n)
                    };
                    return Ok(vec![TensorType::new(d, cx.fresh_shape(0, r)?)]);
                }
            }
        } else {
            self.axes(None, x.rank())?
        };
        Ok(vec![TensorType::new(
            d,
            reduced_shape(x, &axes, self.keepdims),
        )])
    }
}

/// `shape` with `axes` removed, or set to 1 when `keepdims`.
pub fn reduced_shape(shape: &Shape, axes: &[usize], keepdims: bool) -> Shape {
    let mut out = Vec::new();
    for (i, d) in shape.0.iter().enumerate() {
        if axes.contains(&i) {
            if keepdims {
                out.push(Dim::Known(1));
            }
        } else {
            out.push(d.clone());
        }
    }
    Shape(out)
}

attr_enum! {
    pub enum ArgReduceKind { Max = "argmax", Min = "argmin" }
}

kinded_op! {
    /// Index of the extreme value along `axis`, as i64.
    pub struct ArgReduce [ArgReduceKind] {
        pub axis: i64,
        pub keepdims: bool,
        pub select_last_index: bool,
    }
}

impl OpDef for ArgReduce {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        let axis = norm_axis(self.axis, x.rank())?;
        if x.dims()[axis].known() == Some(0) {
            return Err(InferError::Value {
                port: 0,
                reason: format!(
                    "{} over an empty axis {axis} has no index to give",
                    self.kind.name()
                ),
            });
        }
        Ok(vec![TensorType::new(
            DType::I64,
            reduced_shape(x, &[axis], self.keepdims),
        )])
    }
}

attr_enum! {
    pub enum SoftmaxKind { Softmax = "softmax", LogSoftmax = "log_softmax", Hardmax = "hardmax" }
}

kinded_op! {
    /// Softmax, log-softmax or hardmax along one axis (opset-13 semantics).
    pub struct Softmax [SoftmaxKind] {
        pub axis: i64,
    }
}

impl OpDef for Softmax {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::F32, DType::F64, DType::F16, DType::BF16])?;
        norm_axis(self.axis, cx.rank(0))?;
        Ok(vec![cx.ty(0).clone()])
    }
}

attr_enum! {
    pub enum CumulativeKind { Sum = "cumsum", Prod = "cumprod" }
}

kinded_op! {
    /// Running sum or product along the axis given by the scalar input 1.
    pub struct Cumulative [CumulativeKind] {
        pub exclusive: bool,
        pub reverse: bool,
    }
}

impl OpDef for Cumulative {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, &[DType::I32, DType::I64])?;
        if let Some(a) = cx.ints(1) {
            let [a] = a[..] else {
                return Err(value_err(1, "the axis must be one value"));
            };
            norm_axis(a, cx.rank(0))?;
        }
        Ok(vec![cx.ty(0).clone()])
    }
}

op_attrs! {
    /// The `k` (input 1) largest or smallest values along `axis`, and their i64 indices.
    pub struct TopK {
        pub axis: i64,
        pub largest: bool,
        pub sorted: bool,
    }
}

impl OpDef for TopK {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, &[DType::I64])?;
        let x = cx.shape(0);
        let axis = norm_axis(self.axis, x.rank())?;
        let mut s = x.clone();
        s.0[axis] = match cx.ints(1) {
            Some(k) if k.len() == 1 => {
                if k[0] < 0 {
                    return Err(value_err(1, "k must be non-negative"));
                }
                if let Some(n) = x.0[axis].known() {
                    if k[0] > n {
                        return Err(value_err(
                            1,
                            format!("k = {} exceeds the axis size {n}", k[0]),
                        ));
                    }
                }
                Dim::Known(k[0])
            }
            Some(_) => return Err(value_err(1, "k must be one value")),
            None => cx.fresh(0, axis),
        };
        Ok(vec![
            TensorType::new(cx.dtype(0), s.clone()),
            TensorType::new(DType::I64, s),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Axes are resolved, sorted and each reduced once (ONNX Runtime's
    /// reading of `[-2, 0]` at rank 2); one out of range is an error.
    #[test]
    fn an_axis_named_twice_is_reduced_once() {
        let r = Reduce {
            kind: ReduceKind::Sum,
            keepdims: true,
            noop_with_empty_axes: false,
        };
        assert_eq!(r.axes(Some(&[-2, 0]), 2).unwrap(), [0]);
        assert_eq!(r.axes(Some(&[2, -1, 0, 2]), 3).unwrap(), [0, 2]);
        assert_eq!(r.axes(None, 2).unwrap(), [0, 1]);
        assert!(r.axes(Some(&[2]), 2).is_err());
    }
}
