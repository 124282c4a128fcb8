//! Indexing: Gather, GatherElements, GatherND, ScatterElements, ScatterND, OneHot,
//! Trilu, TensorScatter (KV-cache writes), and the data-dependent Compress,
//! NonZero and Unique.

use super::{attr_err, norm_axis, value_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, op_attrs};

const INDICES: &[DType] = &[DType::I32, DType::I64];

op_attrs! {
    /// Takes slices along `axis` at the given (possibly negative) indices.
    pub struct Gather {
        pub axis: i64,
    }
}

impl OpDef for Gather {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, INDICES)?;
        let x = cx.shape(0);
        let axis = norm_axis(self.axis, x.rank())?;
        let mut s = x.0[..axis].to_vec();
        s.extend(cx.shape(1).0.iter().cloned());
        s.extend(x.0[axis + 1..].iter().cloned());
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

op_attrs! {
    /// `out[i][j][k] = data[index[i][j][k]][j][k]` along `axis` (numpy take_along_axis).
    pub struct GatherElements {
        pub axis: i64,
    }
}

impl OpDef for GatherElements {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, INDICES)?;
        cx.expect_rank(1, cx.rank(0))?;
        norm_axis(self.axis, cx.rank(0))?;
        Ok(vec![TensorType::new(cx.dtype(0), cx.shape(1).clone())])
    }
}

op_attrs! {
    /// Gathers slices addressed by the last dim of `indices`, after `batch_dims` batch dims.
    pub struct GatherNd {
        pub batch_dims: i64,
    }
}

impl OpDef for GatherNd {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, &[DType::I64])?;
        let (x, idx) = (cx.shape(0), cx.shape(1));
        let b = self.batch_dims as usize;
        if idx.rank() < 1 || b >= idx.rank() || b >= x.rank() {
            return Err(attr_err("batch_dims", "must be less than both ranks"));
        }
        let last = idx.0[idx.rank() - 1]
            .known()
            .ok_or_else(|| value_err(1, "the last dim of indices must be known"))?
            as usize;
        if b + last > x.rank() {
            return Err(value_err(
                1,
                format!("index depth {last} exceeds the data rank"),
            ));
        }
        let mut s = idx.0[..idx.rank() - 1].to_vec();
        s.extend(x.0[b + last..].iter().cloned());
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

attr_enum! {
    pub enum ScatterReduction { None = "none", Add = "add", Mul = "mul", Max = "max", Min = "min" }
}

op_attrs! {
    /// Writes `updates` into a copy of `data` at `indices` along `axis`.
    pub struct ScatterElements {
        pub axis: i64,
        pub reduction: ScatterReduction,
    }
}

impl OpDef for ScatterElements {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, INDICES)?;
        cx.expect_same_dtype(2, 0)?;
        norm_axis(self.axis, cx.rank(0))?;
        Ok(vec![cx.ty(0).clone()])
    }
}

op_attrs! {
    /// Writes `updates` slices into a copy of `data` at the N-d `indices`.
    pub struct ScatterNd {
        pub reduction: ScatterReduction,
    }
}

impl OpDef for ScatterNd {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, &[DType::I64])?;
        cx.expect_same_dtype(2, 0)?;
        Ok(vec![cx.ty(0).clone()])
    }
}

op_attrs! {
    /// One-hot encoding: inputs `indices`, scalar `depth`, `values = [off, on]`;
    /// the new axis is inserted at `axis`.
    pub struct OneHot {
        pub axis: i64,
    }
}

impl OpDef for OneHot {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let idx = cx.shape(0);
        let rank = idx.rank() + 1;
        let axis = norm_axis(self.axis, rank)?;
        let depth = match cx.value(1) {
            Some(v) => match v.as_dims() {
                Some(d) if d.len() == 1 => d[0].clone(),
                Some(_) => return Err(value_err(1, "depth must be one value")),
                None => {
                    let f = v.as_f64s().unwrap_or_default();
                    let [f] = f[..] else {
                        return Err(value_err(1, "depth must be one value"));
                    };
                    Dim::Known(f as i64)
                }
            },
            None => cx.fresh(0, axis),
        };
        let mut s = idx.0.clone();
        s.insert(axis, depth);
        Ok(vec![TensorType::new(cx.dtype(2), Shape(s))])
    }
}

op_attrs! {
    /// Lower (`upper = false`) or upper triangle of the last two dims; optional
    /// scalar diagonal offset `k` as input 1.
    pub struct Trilu {
        pub upper: bool,
    }
}

impl OpDef for Trilu {
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_min_rank(0, 2)?;
        Ok(vec![cx.ty(0).clone()])
    }
}

op_attrs! {
    /// Keeps the slices along `axis` (or of the flattened input) where the bool
    /// condition holds; the output length is only known at run time.
    pub struct Compress {
        pub axis: Option<i64>,
    }
}

impl OpDef for Compress {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, &[DType::Bool])?;
        let s = match self.axis {
            Some(a) => {
                let ax = norm_axis(a, cx.rank(0))?;
                let mut s = cx.shape(0).clone();
                s.0[ax] = cx.fresh(0, ax);
                s
            }
            None => Shape(vec![cx.fresh(0, 0)]),
        };
        Ok(vec![TensorType::new(cx.dtype(0), s)])
    }
}

op_attrs! {
    /// Indices of the non-zero elements, `[rank, count]` in i64.
    pub struct NonZero {}
}

impl OpDef for NonZero {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let s = Shape(vec![Dim::Known(cx.rank(0) as i64), cx.fresh(0, 1)]);
        Ok(vec![TensorType::new(DType::I64, s)])
    }
}

op_attrs! {
    /// Unique values (or slices along `axis`): outputs `Y`, `indices`,
    /// `inverse_indices`, `counts`.
    pub struct Unique {
        pub axis: Option<i64>,
        pub sorted: bool,
    }
}

impl OpDef for Unique {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        let n = cx.fresh(0, 0);
        let (y, inv_len) = match self.axis {
            Some(a) => {
                let ax = norm_axis(a, x.rank())?;
                let mut s = x.clone();
                s.0[ax] = cx.fresh(0, ax);
                (s.clone(), x.0[ax].clone())
            }
            None => (Shape(vec![n.clone()]), x.numel()),
        };
        let count = match self.axis {
            Some(a) => y.0[norm_axis(a, x.rank())?].clone(),
            None => n,
        };
        Ok(vec![
            TensorType::new(cx.dtype(0), y),
            TensorType::new(DType::I64, Shape(vec![count.clone()])),
            TensorType::new(DType::I64, Shape(vec![inv_len])),
            TensorType::new(DType::I64, Shape(vec![count])),
        ])
    }
}

op_attrs! {
    /// ONNX TensorScatter (KV-cache update): a copy of `past_cache` with
    /// `update` written along `axis` from each batch row's write index (input
    /// `write_indices [batch]` if `has_indices`, else 0), wrapping modulo the
    /// axis length when `circular`. Output shaped like `past_cache`.
    pub struct TensorScatter {
        pub axis: i64,
        pub circular: bool,
        pub has_indices: bool,
    }
}

impl OpDef for TensorScatter {
    fn arity(&self) -> (usize, usize) {
        let n = 2 + usize::from(self.has_indices);
        (n, n)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_same_dtype(1, 0)?;
        let (past, upd) = (cx.shape(0), cx.shape(1));
        cx.expect_rank(1, past.rank())?;
        let axis = norm_axis(self.axis, past.rank())?;
        if axis == 0 {
            return Err(attr_err("axis", "cannot be the batch axis 0"));
        }
        for (i, (p, u)) in past.0.iter().zip(&upd.0).enumerate() {
            if let (Some(p), Some(u)) = (p.known(), u.known()) {
                if (i == axis && u > p) || (i != axis && u != p) {
                    return Err(value_err(
                        1,
                        format!("update dim {i} is {u}, the cache's is {p}"),
                    ));
                }
            }
        }
        if self.has_indices {
            cx.expect_dtype(2, &[DType::I64])?;
            cx.expect_rank(2, 1)?;
            if let (Some(n), Some(b)) = (cx.shape(2).0[0].known(), past.0[0].known()) {
                if n != b {
                    return Err(value_err(2, format!("{n} write indices for batch {b}")));
                }
            }
        }
        Ok(vec![cx.ty(0).clone()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;

    fn infer(op: impl Into<Op>, ins: &[TensorType]) -> Result<Vec<TensorType>, InferError> {
        let values = vec![None; ins.len()];
        let cx = InferCx {
            inputs: ins,
            values: &values,
            node: "n",
            prior: &[],
        };
        op.into().infer(&cx)
    }

    #[test]
    fn tensor_scatter_checks_update_shape() {
        let op = TensorScatter {
            axis: -2,
            circular: false,
            has_indices: true,
        };
        let cache = TensorType::known(DType::F32, &[2, 3, 4, 5]);
        let idx = TensorType::known(DType::I64, &[2]);
        let ok = [
            cache.clone(),
            TensorType::known(DType::F32, &[2, 3, 1, 5]),
            idx.clone(),
        ];
        assert_eq!(infer(op.clone(), &ok).unwrap(), vec![cache.clone()]);
        let long = [
            cache.clone(),
            TensorType::known(DType::F32, &[2, 3, 5, 5]),
            idx.clone(),
        ];
        assert!(infer(op.clone(), &long).is_err());
        let wide = [
            cache.clone(),
            TensorType::known(DType::F32, &[2, 3, 1, 6]),
            idx,
        ];
        assert!(infer(op.clone(), &wide).is_err());
        let batch_axis = TensorScatter { axis: 0, ..op };
        let two = [cache.clone(), cache];
        assert!(infer(
            TensorScatter {
                has_indices: false,
                ..batch_axis
            },
            &two
        )
        .is_err());
    }
}
