//! Ops that make tensors from shapes and scalars: Shape, Size, ConstantOfShape,
//! Range, EyeLike and the Hann/Hamming/Blackman windows.

use super::{value_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::tensor::Tensor;
use crate::{attr_enum, kinded_op, op_attrs};

op_attrs! {
    /// The input's shape as i64, sliced to `[start, end)` (Python-style bounds).
    pub struct ShapeOf {
        pub start: i64,
        pub end: Option<i64>,
    }
}

impl ShapeOf {
    /// The dims range this op reports for an input of `rank`.
    pub fn range(&self, rank: usize) -> std::ops::Range<usize> {
        let r = rank as i64;
        let fix = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let s = fix(self.start);
        let e = fix(self.end.unwrap_or(r));
        s..e.max(s)
    }
}

impl OpDef for ShapeOf {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let n = self.range(cx.rank(0)).len();
        Ok(vec![TensorType::known(DType::I64, &[n])])
    }
}

op_attrs! {
    /// The input's element count as an i64 scalar.
    pub struct Size {}
}

impl OpDef for Size {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, _: &InferCx) -> Result<Vec<TensorType>, InferError> {
        Ok(vec![TensorType::scalar(DType::I64)])
    }
}

op_attrs! {
    /// A tensor of the shape in input 0 filled with the one-element `value`.
    pub struct ConstantOfShape {
        pub value: Tensor,
    }
}

impl OpDef for ConstantOfShape {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[0]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::I64])?;
        if self.value.numel() != 1 {
            return Err(super::attr_err("value", "must hold exactly one element"));
        }
        let s = match cx.dims_value(0) {
            Some(d) => {
                if d.iter().any(|v| v.known().is_some_and(|x| x < 0)) {
                    return Err(value_err(0, "negative dim"));
                }
                Shape(d)
            }
            None => {
                let n = cx
                    .shape(0)
                    .0
                    .first()
                    .and_then(Dim::known)
                    .ok_or(InferError::NotConstant { port: 0 })?;
                cx.fresh_shape(0, n as usize)?
            }
        };
        Ok(vec![TensorType::new(self.value.dtype(), s)])
    }
}

op_attrs! {
    /// `[start, start+delta, ...)` up to `limit`; three scalar inputs of one dtype.
    pub struct Range {}
}

/// Number of elements of a range over concrete numbers.
pub fn range_len(start: f64, limit: f64, delta: f64) -> i64 {
    ((limit - start) / delta).ceil().max(0.0) as i64
}

impl OpDef for Range {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[0, 1, 2]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(
            0,
            &[
                DType::F32,
                DType::F64,
                DType::F16,
                DType::BF16,
                DType::I16,
                DType::I32,
                DType::I64,
            ],
        )?;
        cx.expect_same_dtype(1, 0)?;
        cx.expect_same_dtype(2, 0)?;
        let len = if d.is_float() {
            match (
                cx.value(0).and_then(|v| v.as_f64s()),
                cx.value(1).and_then(|v| v.as_f64s()),
                cx.value(2).and_then(|v| v.as_f64s()),
            ) {
                (Some(s), Some(l), Some(dl)) if s.len() == 1 && l.len() == 1 && dl.len() == 1 => {
                    if dl[0] == 0.0 {
                        return Err(value_err(2, "delta is zero"));
                    }
                    // NaN or an infinity makes no count of elements.
                    if let Some(i) = [s[0], l[0], dl[0]].iter().position(|v| !v.is_finite()) {
                        return Err(value_err(i, "start, limit and delta must be finite"));
                    }
                    Dim::Known(range_len(s[0], l[0], dl[0]))
                }
                _ => cx.fresh(0, 0),
            }
        } else {
            match (cx.dims_value(0), cx.dims_value(1), cx.dims_value(2)) {
                (Some(s), Some(l), Some(dl)) if s.len() == 1 && l.len() == 1 && dl.len() == 1 => {
                    match (s[0].known(), l[0].known(), dl[0].known()) {
                        (_, _, Some(0)) => return Err(value_err(2, "delta is zero")),
                        (Some(a), Some(b), Some(c)) => {
                            // ceil((limit - start) / delta) in i128: the
                            // difference of two i64 overflows i64.
                            let (x, c) = (i128::from(a) - i128::from(b), i128::from(c));
                            let q = x / c - i128::from(x % c != 0 && (x < 0) != (c < 0));
                            let n = (-q).max(0);
                            Dim::Known(i64::try_from(n).map_err(|_| {
                                value_err(1, "the range has more elements than an i64 counts")
                            })?)
                        }
                        (_, _, Some(c)) if c > 0 => l[0].sub(&s[0]).ceil_div(&Dim::Known(c))?,
                        _ => cx.fresh(0, 0),
                    }
                }
                _ => cx.fresh(0, 0),
            }
        };
        Ok(vec![TensorType::new(d, Shape(vec![len]))])
    }
}

op_attrs! {
    /// A 2-D identity-like tensor shaped like the input, with ones on diagonal `k`.
    pub struct EyeLike {
        pub dtype: DType,
        pub k: i64,
    }
}

impl OpDef for EyeLike {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_rank(0, 2)?;
        Ok(vec![TensorType::new(self.dtype, cx.shape(0).clone())])
    }
}

attr_enum! {
    pub enum WindowKind { Hann = "hann_window", Hamming = "hamming_window", Blackman = "blackman_window" }
}

kinded_op! {
    /// A signal window of the length in scalar input 0.
    pub struct Window [WindowKind] {
        pub periodic: bool,
        pub dtype: DType,
    }
}

impl OpDef for Window {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[0]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let n = match cx.dims_value(0) {
            Some(v) if v.len() == 1 => v[0].clone(),
            _ => cx.fresh(0, 0),
        };
        Ok(vec![TensorType::new(self.dtype, Shape(vec![n]))])
    }
}
