//! The inference context and errors shared by every op's `infer`.

use crate::dim::{Dim, DimError};
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::tensor::Tensor;

/// A value known at compile time: a constant tensor, or a small integer tensor
/// whose elements are symbolic dims (the result of shape arithmetic).
#[derive(Debug, Clone, PartialEq)]
pub enum KnownValue {
    Tensor(Tensor),
    Dims {
        dtype: DType,
        shape: Vec<usize>,
        elems: Vec<Dim>,
    },
}

impl KnownValue {
    pub fn dtype(&self) -> DType {
        match self {
            KnownValue::Tensor(t) => t.dtype(),
            KnownValue::Dims { dtype, .. } => *dtype,
        }
    }

    pub fn shape(&self) -> &[usize] {
        match self {
            KnownValue::Tensor(t) => t.dims(),
            KnownValue::Dims { shape, .. } => shape,
        }
    }

    /// Integer elements as dims (symbolic or known); `None` for float tensors.
    pub fn as_dims(&self) -> Option<Vec<Dim>> {
        match self {
            KnownValue::Tensor(t) => Some(t.to_i64_vec()?.into_iter().map(Dim::Known).collect()),
            KnownValue::Dims { elems, .. } => Some(elems.clone()),
        }
    }

    /// Integer elements, if every one is known.
    pub fn as_i64s(&self) -> Option<Vec<i64>> {
        match self {
            KnownValue::Tensor(t) => t.to_i64_vec(),
            KnownValue::Dims { elems, .. } => elems.iter().map(Dim::known).collect(),
        }
    }

    /// Float elements of a standard float tensor, widened to f64.
    pub fn as_f64s(&self) -> Option<Vec<f64>> {
        match self {
            KnownValue::Tensor(t) => t.to_f64_vec(),
            KnownValue::Dims { .. } => None,
        }
    }

    /// The concrete tensor, if every element is known.
    pub fn to_tensor(&self) -> Option<Tensor> {
        match self {
            KnownValue::Tensor(t) => Some(t.clone()),
            KnownValue::Dims {
                dtype,
                shape,
                elems,
            } => {
                let v: Vec<i64> = elems.iter().map(Dim::known).collect::<Option<_>>()?;
                crate::ops::values::int_tensor(*dtype, shape, &v)
            }
        }
    }
}

/// Prefix of the symbols that stand for dims only known at run time (made by
/// [`InferCx::fresh`]); user symbols come from the model's `dim_param`s.
pub const RUNTIME_PREFIX: &str = "$";

/// The most dims of a tensor whose rank comes from a value's length (the
/// shape input of Reshape, Expand, ConstantOfShape, Unsqueeze's axes).
pub const MAX_RANK: usize = 1024;

/// True if `name` is a run-time symbol.
pub fn is_runtime_symbol(name: &str) -> bool {
    name.starts_with(RUNTIME_PREFIX)
}

/// What an op's `infer` sees: its input types, the inputs' values where known,
/// and the node's name (for naming data-dependent dims).
pub struct InferCx<'a> {
    pub inputs: &'a [TensorType],
    pub values: &'a [Option<KnownValue>],
    pub node: &'a str,
    /// The node's current output types; leaves (inputs, weights) keep theirs.
    pub prior: &'a [TensorType],
}

impl<'a> InferCx<'a> {
    pub fn ty(&self, port: usize) -> &TensorType {
        &self.inputs[port]
    }

    pub fn dtype(&self, port: usize) -> DType {
        self.inputs[port].dtype
    }

    pub fn shape(&self, port: usize) -> &Shape {
        &self.inputs[port].shape
    }

    pub fn rank(&self, port: usize) -> usize {
        self.inputs[port].shape.rank()
    }

    pub fn has(&self, port: usize) -> bool {
        port < self.inputs.len()
    }

    pub fn value(&self, port: usize) -> Option<&KnownValue> {
        self.values.get(port).and_then(Option::as_ref)
    }

    /// The integer elements of input `port`, if known.
    pub fn ints(&self, port: usize) -> Option<Vec<i64>> {
        self.value(port)?.as_i64s()
    }

    /// The elements of integer input `port` as dims, if known (possibly symbolic).
    pub fn dims_value(&self, port: usize) -> Option<Vec<Dim>> {
        self.value(port)?.as_dims()
    }

    /// A fresh symbol for a dim that is only known at run time.
    pub fn fresh(&self, output: usize, axis: usize) -> Dim {
        Dim::sym(&format!("{RUNTIME_PREFIX}{}.o{output}.d{axis}", self.node))
    }

    /// A shape of `rank` fresh dims; an error past [`MAX_RANK`] (a rank
    /// read from a tensor's length, which a model may declare as anything).
    pub fn fresh_shape(&self, output: usize, rank: usize) -> Result<Shape, InferError> {
        if rank > MAX_RANK {
            return Err(InferError::TooLarge(format!(
                "an output of rank {rank} (more than {MAX_RANK} dims)"
            )));
        }
        Ok(Shape((0..rank).map(|a| self.fresh(output, a)).collect()))
    }

    /// Requires input `port` to have one of `allowed` dtypes.
    pub fn expect_dtype(&self, port: usize, allowed: &[DType]) -> Result<DType, InferError> {
        let d = self.dtype(port);
        if allowed.contains(&d) {
            Ok(d)
        } else {
            Err(InferError::DType {
                port,
                got: d,
                expected: allowed
                    .iter()
                    .map(|d| d.name())
                    .collect::<Vec<_>>()
                    .join("|"),
            })
        }
    }

    /// Requires input `port` to have the same dtype as input `like`.
    pub fn expect_same_dtype(&self, port: usize, like: usize) -> Result<DType, InferError> {
        let (a, b) = (self.dtype(like), self.dtype(port));
        if a == b {
            Ok(a)
        } else {
            Err(InferError::DType {
                port,
                got: b,
                expected: a.name().to_string(),
            })
        }
    }

    pub fn expect_rank(&self, port: usize, rank: usize) -> Result<(), InferError> {
        if self.rank(port) == rank {
            Ok(())
        } else {
            Err(InferError::Rank {
                port,
                expected: rank.to_string(),
                got: self.rank(port),
            })
        }
    }

    pub fn expect_min_rank(&self, port: usize, rank: usize) -> Result<(), InferError> {
        if self.rank(port) >= rank {
            Ok(())
        } else {
            Err(InferError::Rank {
                port,
                expected: format!(">= {rank}"),
                got: self.rank(port),
            })
        }
    }
}

/// Why an op's output types cannot be inferred.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InferError {
    #[error("expected {min}..={max} inputs, got {got}")]
    Arity { min: usize, max: usize, got: usize },
    #[error("input {port} has dtype {got}, expected {expected}")]
    DType {
        port: usize,
        got: DType,
        expected: String,
    },
    #[error("input {port} has rank {got}, expected {expected}")]
    Rank {
        port: usize,
        got: usize,
        expected: String,
    },
    #[error("shapes {a} and {b} do not broadcast")]
    Broadcast { a: Shape, b: Shape },
    #[error("axis {axis} is out of range for rank {rank}")]
    Axis { axis: i64, rank: usize },
    #[error("{what}: {a} and {b} differ")]
    Mismatch {
        what: &'static str,
        a: String,
        b: String,
    },
    #[error("attribute `{name}`: {reason}")]
    Attr { name: &'static str, reason: String },
    #[error("input {port}: {reason}")]
    Value { port: usize, reason: String },
    #[error("input {port} must be a compile-time constant")]
    NotConstant { port: usize },
    #[error("{0}")]
    TooLarge(String),
    #[error(transparent)]
    Dim(#[from] DimError),
}

/// An attribute error.
pub fn attr_err(name: &'static str, reason: impl Into<String>) -> InferError {
    InferError::Attr {
        name,
        reason: reason.into(),
    }
}

/// A bad input value.
pub fn value_err(port: usize, reason: impl Into<String>) -> InferError {
    InferError::Value {
        port,
        reason: reason.into(),
    }
}

/// Resolves a possibly negative axis against `rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, InferError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(InferError::Axis { axis, rank })
    }
}

/// Resolves a list of axes, rejecting duplicates.
pub fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, InferError> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = norm_axis(a, rank)?;
        if out.contains(&n) {
            return Err(attr_err("axes", format!("axis {a} appears twice")));
        }
        out.push(n);
    }
    Ok(out)
}

/// Numpy broadcasting of two shapes.
pub fn broadcast(a: &Shape, b: &Shape) -> Result<Shape, InferError> {
    let r = a.rank().max(b.rank());
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let da = if i + a.rank() >= r {
            Some(&a.0[i + a.rank() - r])
        } else {
            None
        };
        let db = if i + b.rank() >= r {
            Some(&b.0[i + b.rank() - r])
        } else {
            None
        };
        let d = match (da, db) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(x), Some(y)) => broadcast_dim(x, y).ok_or_else(|| InferError::Broadcast {
                a: a.clone(),
                b: b.clone(),
            })?,
            (None, None) => Dim::Known(1),
        };
        out.push(d);
    }
    Ok(Shape(out))
}

/// Broadcast of two dims: equal, or one is 1. A symbolic dim against a known
/// non-1 dim is assumed to equal it; two different symbols give their maximum.
pub fn broadcast_dim(x: &Dim, y: &Dim) -> Option<Dim> {
    match (x, y) {
        _ if x == y => Some(x.clone()),
        (Dim::Known(1), d) | (d, Dim::Known(1)) => Some(d.clone()),
        (Dim::Known(_), Dim::Known(_)) => None,
        (Dim::Known(k), Dim::Expr(_)) | (Dim::Expr(_), Dim::Known(k)) => Some(Dim::Known(*k)),
        _ => Some(x.max_dim(y)),
    }
}

/// Broadcast of several shapes.
pub fn broadcast_all<'s>(shapes: impl IntoIterator<Item = &'s Shape>) -> Result<Shape, InferError> {
    shapes
        .into_iter()
        .try_fold(Shape::scalar(), |acc, s| broadcast(&acc, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        let s = |d: &[i64]| Shape(d.iter().map(|&v| Dim::Known(v)).collect());
        assert_eq!(
            broadcast(&s(&[2, 1, 4]), &s(&[3, 1])).unwrap(),
            s(&[2, 3, 4])
        );
        assert!(broadcast(&s(&[2]), &s(&[3])).is_err());
        let n = Shape(vec![Dim::sym("N"), Dim::Known(1)]);
        assert_eq!(broadcast(&n, &s(&[5])).unwrap().to_string(), "[N,5]");
        assert_eq!(broadcast(&n, &s(&[7, 1])).unwrap().to_string(), "[7,1]");
    }

    #[test]
    fn axes() {
        assert_eq!(norm_axis(-1, 3).unwrap(), 2);
        assert!(norm_axis(3, 3).is_err());
        assert!(norm_axes(&[0, -3], 3).is_err());
    }
}
