//! Shapes and tensor types.

use std::fmt;

use crate::dim::{Bindings, Dim, DimError};
use crate::dtype::DType;

/// An ordered list of dimensions. A rank-0 shape is a scalar.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub Vec<Dim>);

impl Shape {
    pub fn known(dims: &[usize]) -> Shape {
        Shape(dims.iter().map(|&d| Dim::from(d)).collect())
    }

    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }

    pub fn rank(&self) -> usize {
        self.0.len()
    }

    pub fn dims(&self) -> &[Dim] {
        &self.0
    }

    /// The concrete sizes, if every dim is known and non-negative.
    pub fn as_known(&self) -> Option<Vec<usize>> {
        self.0
            .iter()
            .map(|d| d.known().and_then(|v| usize::try_from(v).ok()))
            .collect()
    }

    pub fn is_known(&self) -> bool {
        self.0.iter().all(Dim::is_known)
    }

    /// The number of elements, as a dim.
    pub fn numel(&self) -> Dim {
        self.0.iter().fold(Dim::Known(1), |acc, d| acc.mul(d))
    }

    /// Substitutes symbols by their bound values.
    pub fn substitute(&self, f: &dyn Fn(&str) -> Option<Dim>) -> Result<Shape, DimError> {
        self.0
            .iter()
            .map(|d| d.substitute(f))
            .collect::<Result<_, _>>()
            .map(Shape)
    }

    pub fn bind(&self, b: &Bindings) -> Result<Shape, DimError> {
        self.substitute(&|s| b.get(s).map(|v| Dim::Known(*v)))
    }

    /// Every symbol any dim mentions, sorted and deduplicated.
    pub fn symbols(&self) -> Vec<String> {
        let mut out: Vec<String> = self.0.iter().flat_map(Dim::symbols).collect();
        out.sort();
        out.dedup();
        out
    }
}

impl From<Vec<Dim>> for Shape {
    fn from(v: Vec<Dim>) -> Shape {
        Shape(v)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// What a value holds besides a plain tensor: a sequence of tensors, an
/// optional (a tensor or nothing), or an optional sequence, as ONNX's
/// `sequence_type` and `optional_type` say. Only ops made for them (the
/// `sequence_*` and `optional_*` ops, identity and control flow) take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ValueKind {
    #[default]
    Tensor,
    Sequence,
    Optional,
    OptionalSequence,
    /// A map from keys of dtype `key` to scalars of the type's dtype (ONNX's
    /// `map_type`, which ai.onnx.ml's DictVectorizer takes).
    Map {
        key: DType,
    },
    /// A sequence of such maps (ai.onnx.ml ZipMap's output).
    MapSequence {
        key: DType,
    },
}

impl ValueKind {
    /// The kind inside an optional (`self` when not optional).
    pub fn unwrapped(self) -> ValueKind {
        match self {
            ValueKind::Optional => ValueKind::Tensor,
            ValueKind::OptionalSequence => ValueKind::Sequence,
            k => k,
        }
    }

    /// The optional of this kind (`self` when already optional).
    pub fn optional(self) -> ValueKind {
        match self {
            ValueKind::Tensor => ValueKind::Optional,
            ValueKind::Sequence => ValueKind::OptionalSequence,
            k => k,
        }
    }

    pub fn is_optional(self) -> bool {
        matches!(self, ValueKind::Optional | ValueKind::OptionalSequence)
    }
}

/// The type of a value: element type and shape, and for a sequence or an
/// optional, its kind (the shape is then each element's shape).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Shape,
    pub kind: ValueKind,
}

impl TensorType {
    pub fn new(dtype: DType, shape: Shape) -> TensorType {
        TensorType {
            dtype,
            shape,
            kind: ValueKind::Tensor,
        }
    }

    pub fn known(dtype: DType, dims: &[usize]) -> TensorType {
        TensorType::new(dtype, Shape::known(dims))
    }

    pub fn scalar(dtype: DType) -> TensorType {
        TensorType::new(dtype, Shape::scalar())
    }

    /// This type with another kind.
    pub fn with_kind(mut self, kind: ValueKind) -> TensorType {
        self.kind = kind;
        self
    }

    /// True for a plain tensor of a dtype with bytes (not a string, a
    /// sequence or an optional): what arenas, kernels and GPUs hold.
    pub fn is_plain(&self) -> bool {
        self.kind == ValueKind::Tensor && self.dtype != DType::Str
    }

    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// Bytes this tensor occupies, when its shape is known; `None` for the
    /// values that have no bytes (strings, sequences, optionals).
    pub fn byte_size(&self) -> Option<usize> {
        if !self.is_plain() {
            return None;
        }
        let dims = self.shape.as_known()?;
        dims.iter()
            .try_fold(self.dtype.size(), |acc, &d| acc.checked_mul(d))
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind.prefix())?;
        write!(f, "{}{}", self.dtype, self.shape)
    }
}

impl ValueKind {
    /// The words the text form writes before a type of this kind.
    pub fn prefix(self) -> String {
        match self {
            ValueKind::Tensor => String::new(),
            ValueKind::Sequence => "seq ".into(),
            ValueKind::Optional => "opt ".into(),
            ValueKind::OptionalSequence => "opt seq ".into(),
            ValueKind::Map { key } => format!("map({key}) "),
            ValueKind::MapSequence { key } => format!("seq map({key}) "),
        }
    }
}

impl fmt::Debug for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Row-major strides, in elements, of a concrete shape.
pub fn strides_of(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_numel() {
        let s = Shape(vec![Dim::sym("N"), Dim::Known(3), Dim::Known(4)]);
        assert_eq!(s.to_string(), "[N,3,4]");
        assert_eq!(s.numel().to_string(), "12*N");
        assert_eq!(TensorType::known(DType::F32, &[]).to_string(), "f32[]");
        assert_eq!(strides_of(&[2, 3, 4]), vec![12, 4, 1]);
    }
}
