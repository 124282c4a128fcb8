//! Sequences and optionals: SequenceConstruct/Empty/Insert/Erase/At/Length,
//! SplitToSequence, ConcatFromSequence, SequenceMap, Optional,
//! OptionalHasElement and OptionalGetElement, and ai.onnx.ml ZipMap (rows
//! to a sequence of maps).
//!
//! A sequence's type is its elements' dtype and a shape they share, symbolic
//! where they differ; the shape is a hint (ONNX lets elements differ in
//! shape), so these ops run node by node, where each one sees its values.

use super::{attr_err, value_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::graph::Graph;
use crate::op_attrs;
use crate::shape::{Shape, TensorType, ValueKind};
use crate::tensor::Tensor;

/// Requires input `port` to be a sequence (or, with `optional`, an optional sequence).
fn expect_kind(cx: &InferCx, port: usize, kinds: &[ValueKind]) -> Result<(), InferError> {
    let k = cx.ty(port).kind;
    if kinds.contains(&k) {
        Ok(())
    } else {
        Err(value_err(
            port,
            format!(
                "is a {}, expected {}",
                kind_name(k),
                kinds
                    .iter()
                    .map(|k| kind_name(*k))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        ))
    }
}

/// How errors name a kind.
pub fn kind_name(k: ValueKind) -> &'static str {
    match k {
        ValueKind::Tensor => "tensor",
        ValueKind::Sequence => "sequence",
        ValueKind::Optional => "optional tensor",
        ValueKind::OptionalSequence => "optional sequence",
        ValueKind::Map { .. } => "map",
        ValueKind::MapSequence { .. } => "sequence of maps",
    }
}

/// The shape two element shapes share: equal dims stay, others become
/// run-time symbols; elements of another rank leave `a`'s rank.
fn merge(cx: &InferCx, a: &Shape, b: &Shape) -> Shape {
    if a.rank() != b.rank() {
        return Shape((0..b.rank()).map(|i| cx.fresh(0, i)).collect());
    }
    Shape(
        a.0.iter()
            .zip(&b.0)
            .enumerate()
            .map(|(i, (x, y))| if x == y { x.clone() } else { cx.fresh(0, i) })
            .collect(),
    )
}

fn seq(dtype: DType, shape: Shape) -> TensorType {
    TensorType::new(dtype, shape).with_kind(ValueKind::Sequence)
}

op_attrs! {
    /// A sequence of its inputs (tensors of one dtype).
    pub struct SequenceConstruct {}
}

impl OpDef for SequenceConstruct {
    fn arity(&self) -> (usize, usize) {
        (1, usize::MAX)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let mut shape = cx.shape(0).clone();
        for p in 0..cx.inputs.len() {
            expect_kind(cx, p, &[ValueKind::Tensor])?;
            cx.expect_same_dtype(p, 0)?;
            shape = merge(cx, &shape, cx.shape(p));
        }
        Ok(vec![seq(cx.dtype(0), shape)])
    }
}

op_attrs! {
    /// An empty sequence of `dtype`.
    pub struct SequenceEmpty {
        pub dtype: DType,
    }
}

impl OpDef for SequenceEmpty {
    fn arity(&self) -> (usize, usize) {
        (0, 0)
    }
    fn infer(&self, _: &InferCx) -> Result<Vec<TensorType>, InferError> {
        Ok(vec![seq(self.dtype, Shape::scalar())])
    }
}

op_attrs! {
    /// The sequence with tensor input 1 inserted at position input 2 (an
    /// integer scalar, negative from the end; the end when absent).
    pub struct SequenceInsert {}
}

impl OpDef for SequenceInsert {
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_kind(cx, 0, &[ValueKind::Sequence])?;
        expect_kind(cx, 1, &[ValueKind::Tensor])?;
        cx.expect_same_dtype(1, 0)?;
        if cx.has(2) {
            cx.expect_dtype(2, &[DType::I32, DType::I64])?;
        }
        Ok(vec![seq(cx.dtype(0), merge(cx, cx.shape(0), cx.shape(1)))])
    }
}

op_attrs! {
    /// The sequence without the element at position input 1 (the last when absent).
    pub struct SequenceErase {}
}

impl OpDef for SequenceErase {
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_kind(cx, 0, &[ValueKind::Sequence])?;
        if cx.has(1) {
            cx.expect_dtype(1, &[DType::I32, DType::I64])?;
        }
        Ok(vec![cx.ty(0).clone()])
    }
}

op_attrs! {
    /// The element at position input 1 (negative from the end).
    pub struct SequenceAt {}
}

impl OpDef for SequenceAt {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_kind(cx, 0, &[ValueKind::Sequence])?;
        cx.expect_dtype(1, &[DType::I32, DType::I64])?;
        Ok(vec![TensorType::new(cx.dtype(0), cx.shape(0).clone())])
    }
}

op_attrs! {
    /// The number of elements, as an i64 scalar.
    pub struct SequenceLength {}
}

impl OpDef for SequenceLength {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_kind(cx, 0, &[ValueKind::Sequence])?;
        Ok(vec![TensorType::scalar(DType::I64)])
    }
}

op_attrs! {
    /// Splits input 0 along `axis` into a sequence: by the sizes in input 1
    /// (a scalar size, the last piece smaller; or one size per piece), or
    /// into pieces of 1, squeezed unless `keepdims`, without it.
    pub struct SplitToSequence {
        pub axis: i64,
        pub keepdims: bool,
    }
}

impl OpDef for SplitToSequence {
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_kind(cx, 0, &[ValueKind::Tensor])?;
        let r = cx.rank(0);
        let axis = super::norm_axis(self.axis, r)?;
        if cx.has(1) {
            cx.expect_dtype(1, &[DType::I32, DType::I64])?;
        }
        let mut dims = cx.shape(0).0.clone();
        if cx.has(1) || self.keepdims {
            dims[axis] = if cx.has(1) {
                cx.fresh(0, axis)
            } else {
                Dim::Known(1)
            };
        } else {
            dims.remove(axis);
        }
        Ok(vec![seq(cx.dtype(0), Shape(dims))])
    }
}

op_attrs! {
    /// Concatenates a sequence's elements along `axis`, or stacks them along
    /// a new axis `axis` with `new_axis`.
    pub struct ConcatFromSequence {
        pub axis: i64,
        pub new_axis: bool,
    }
}

impl OpDef for ConcatFromSequence {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_kind(cx, 0, &[ValueKind::Sequence])?;
        let r = cx.rank(0) + usize::from(self.new_axis);
        let axis = super::norm_axis(self.axis, r)?;
        let mut dims = cx.shape(0).0.clone();
        if self.new_axis {
            dims.insert(axis, cx.fresh(0, axis));
        } else {
            dims[axis] = cx.fresh(0, axis);
        }
        Ok(vec![TensorType::new(cx.dtype(0), Shape(dims))])
    }
}

op_attrs! {
    /// Runs `body` once per element of the sequence input 0. The other inputs
    /// are sequences (one element each per run) or tensors (the same every
    /// run), then the body's captures; each body output is collected into a
    /// sequence.
    pub struct SequenceMap {
        pub body: Graph,
    }
}

impl OpDef for SequenceMap {
    fn arity(&self) -> (usize, usize) {
        let n = self.body.inputs().len();
        (n, n)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_kind(cx, 0, &[ValueKind::Sequence])?;
        for p in 0..cx.inputs.len() {
            expect_kind(cx, p, &[ValueKind::Tensor, ValueKind::Sequence])?;
        }
        let outs = self.body.outputs();
        if outs.is_empty() {
            return Err(attr_err("body", "the body has no outputs"));
        }
        Ok(outs
            .iter()
            .map(|o| {
                let t = self.body.ty(o.value);
                seq(t.dtype, t.shape.clone())
            })
            .collect())
    }
}

op_attrs! {
    /// An optional: holding input 0, or with no input, empty of the declared
    /// element type (`dtype`, a sequence with `sequence`).
    pub struct Optional {
        pub dtype: DType,
        pub sequence: bool,
    }
}

impl OpDef for Optional {
    fn arity(&self) -> (usize, usize) {
        (0, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        if !cx.has(0) {
            let kind = if self.sequence {
                ValueKind::OptionalSequence
            } else {
                ValueKind::Optional
            };
            return Ok(vec![
                TensorType::new(self.dtype, Shape::scalar()).with_kind(kind)
            ]);
        }
        expect_kind(cx, 0, &[ValueKind::Tensor, ValueKind::Sequence])?;
        let t = cx.ty(0);
        if t.dtype != self.dtype || (t.kind == ValueKind::Sequence) != self.sequence {
            return Err(value_err(
                0,
                format!("is a {t}, not the optional's element type"),
            ));
        }
        Ok(vec![t.clone().with_kind(t.kind.optional())])
    }
}

op_attrs! {
    /// True when the optional input holds a value (any tensor or sequence does).
    pub struct OptionalHasElement {}
}

impl OpDef for OptionalHasElement {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, _: &InferCx) -> Result<Vec<TensorType>, InferError> {
        Ok(vec![TensorType::scalar(DType::Bool)])
    }
}

op_attrs! {
    /// The value an optional holds; an error at run time when it holds none.
    pub struct OptionalGetElement {}
}

impl OpDef for OptionalGetElement {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let t = cx.ty(0);
        Ok(vec![t.clone().with_kind(t.kind.unwrapped())])
    }
}

op_attrs! {
    /// ai.onnx.ml ZipMap: each row of a `[N, C]` (or `[C]`) f32 input as a map
    /// from `labels` (C integers or strings) to its values; a sequence of N maps.
    pub struct ZipMap {
        pub labels: Tensor,
    }
}

impl OpDef for ZipMap {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::F32])?;
        let key = self.labels.dtype();
        if self.labels.dims().len() != 1 || !(key == DType::Str || key == DType::I64) {
            return Err(attr_err("labels", "must be 1-D integers or strings"));
        }
        let s = cx.shape(0);
        let c = match s.rank() {
            1 | 2 => &s.0[s.rank() - 1],
            r => {
                return Err(InferError::Rank {
                    port: 0,
                    got: r,
                    expected: "1 or 2".into(),
                })
            }
        };
        if c.known().is_some_and(|c| c as usize != self.labels.numel()) {
            return Err(value_err(
                0,
                format!("has {c} columns for {} labels", self.labels.numel()),
            ));
        }
        Ok(vec![
            TensorType::new(DType::F32, Shape::scalar()).with_kind(ValueKind::MapSequence { key })
        ])
    }
}

/// True for the ops that take or make sequences and optionals.
pub fn is_container_op(op: &super::Op) -> bool {
    use super::Op::*;
    matches!(
        op,
        SequenceConstruct(_)
            | SequenceEmpty(_)
            | SequenceInsert(_)
            | SequenceErase(_)
            | SequenceAt(_)
            | SequenceLength(_)
            | SplitToSequence(_)
            | ConcatFromSequence(_)
            | SequenceMap(_)
            | Optional(_)
            | OptionalHasElement(_)
            | OptionalGetElement(_)
    )
}
