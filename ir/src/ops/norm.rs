//! Normalizations: LayerNorm, RmsNorm, GroupNorm and InstanceNorm.
//! (BatchNorm is decomposed by the importer into a per-channel multiply-add.)

use super::{attr_err, norm_axis, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::op_attrs;
use crate::shape::{Shape, TensorType};

const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

op_attrs! {
    /// Normalizes over the dims from `axis` on; inputs `x`, `scale`, optional `bias`.
    /// With `stats`, also outputs the f32 mean and inverse standard deviation.
    pub struct LayerNorm {
        pub axis: i64,
        pub epsilon: f32,
        pub stats: bool,
    }
}

impl OpDef for LayerNorm {
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, FLOATS)?;
        cx.expect_same_dtype(1, 0)?;
        if cx.has(2) {
            cx.expect_same_dtype(2, 0)?;
        }
        let x = cx.shape(0);
        let axis = norm_axis(self.axis, x.rank())?;
        let mut v = vec![cx.ty(0).clone()];
        if self.stats {
            let mut s = x.0[..axis].to_vec();
            s.extend((axis..x.rank()).map(|_| Dim::Known(1)));
            v.push(TensorType::new(DType::F32, Shape(s.clone())));
            v.push(TensorType::new(DType::F32, Shape(s)));
        }
        Ok(v)
    }
}

op_attrs! {
    /// Root-mean-square normalization over the dims from `axis` on; inputs `x`, `scale`.
    pub struct RmsNorm {
        pub axis: i64,
        pub epsilon: f32,
    }
}

impl OpDef for RmsNorm {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, FLOATS)?;
        cx.expect_same_dtype(1, 0)?;
        norm_axis(self.axis, cx.rank(0))?;
        Ok(vec![cx.ty(0).clone()])
    }
}

op_attrs! {
    /// Group normalization; inputs `x [N,C,*]`, per-channel `scale [C]` and `bias [C]`.
    pub struct GroupNorm {
        pub num_groups: i64,
        pub epsilon: f32,
    }
}

impl OpDef for GroupNorm {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, FLOATS)?;
        cx.expect_min_rank(0, 2)?;
        if self.num_groups < 1 {
            return Err(attr_err("num_groups", "must be positive"));
        }
        if let Some(c) = cx.shape(0).0[1].known() {
            if c % self.num_groups != 0 {
                return Err(attr_err(
                    "num_groups",
                    format!("{c} channels do not split into {} groups", self.num_groups),
                ));
            }
        }
        Ok(vec![cx.ty(0).clone()])
    }
}

op_attrs! {
    /// Instance normalization; inputs `x [N,C,*]`, `scale [C]`, `bias [C]`.
    pub struct InstanceNorm {
        pub epsilon: f32,
    }
}

impl OpDef for InstanceNorm {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, FLOATS)?;
        cx.expect_min_rank(0, 3)?;
        Ok(vec![cx.ty(0).clone()])
    }
}

op_attrs! {
    /// Residual add fused with a normalization: `sum = x + residual`, then
    /// LayerNorm (or RmsNorm with `rms`) of `sum` over the dims from `axis` on.
    /// Inputs `x`, `residual`, `scale`, optional `bias` (LayerNorm only);
    /// outputs the normalized `y` and `sum` (for the next residual).
    pub struct ResidualNorm {
        pub axis: i64,
        pub epsilon: f32,
        pub rms: bool,
    }
}

impl OpDef for ResidualNorm {
    fn arity(&self) -> (usize, usize) {
        (3, 4)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, FLOATS)?;
        for p in 1..cx.inputs.len() {
            cx.expect_same_dtype(p, 0)?;
        }
        if self.rms && cx.has(3) {
            return Err(attr_err("rms", "an RMS norm takes no bias"));
        }
        let s = super::broadcast(cx.shape(0), cx.shape(1))?;
        norm_axis(self.axis, s.rank())?;
        let t = TensorType::new(cx.dtype(0), s);
        Ok(vec![t.clone(), t])
    }
}
