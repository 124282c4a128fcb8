//! Linear algebra: batched, broadcasting matrix products, the fused form with
//! bias and activation, einsum and determinants.

use super::{broadcast, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, op_attrs};

/// Dtypes matrix products accept.
pub const MATMUL_DTYPES: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U32,
    DType::U64,
];

op_attrs! {
    /// Numpy `matmul`: batch dims broadcast, 1-D operands are promoted and the
    /// promoted axis removed from the result.
    pub struct MatMul {}
}

/// The output shape of `a @ b` under numpy rules.
pub fn matmul_shape(a: &Shape, b: &Shape) -> Result<Shape, InferError> {
    if a.rank() == 0 || b.rank() == 0 {
        return Err(InferError::Rank {
            port: if a.rank() == 0 { 0 } else { 1 },
            got: 0,
            expected: ">= 1".into(),
        });
    }
    let a2 = if a.rank() == 1 {
        Shape(vec![Dim::Known(1), a.0[0].clone()])
    } else {
        a.clone()
    };
    let b2 = if b.rank() == 1 {
        Shape(vec![b.0[0].clone(), Dim::Known(1)])
    } else {
        b.clone()
    };
    let (ra, rb) = (a2.rank(), b2.rank());
    let k1 = &a2.0[ra - 1];
    let k2 = &b2.0[rb - 2];
    if k1.is_known() && k2.is_known() && k1 != k2 {
        return Err(InferError::Mismatch {
            what: "matmul inner dims",
            a: k1.to_string(),
            b: k2.to_string(),
        });
    }
    let batch = broadcast(
        &Shape(a2.0[..ra - 2].to_vec()),
        &Shape(b2.0[..rb - 2].to_vec()),
    )?;
    let mut out = batch.0;
    if a.rank() > 1 {
        out.push(a2.0[ra - 2].clone());
    }
    if b.rank() > 1 {
        out.push(b2.0[rb - 1].clone());
    }
    Ok(Shape(out))
}

impl OpDef for MatMul {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, MATMUL_DTYPES)?;
        cx.expect_same_dtype(1, 0)?;
        Ok(vec![TensorType::new(
            d,
            matmul_shape(cx.shape(0), cx.shape(1))?,
        )])
    }
}

op_attrs! {
    /// ONNX MatMulInteger on 8-bit operands, formed by the `fuse-int8-matmul`
    /// pass from its decomposition: `(a - a_zero) @ (b - b_zero)` in i32.
    /// Inputs `a` (u8 or i8, `[..., M, K]`), `b` (u8 or i8, `[..., K, N]`),
    /// `a_zero` (a's dtype; one value, or one per row of a: `[M]`) and
    /// `b_zero` (b's dtype; one value, or one per column of b: `[N]`).
    pub struct MatMulInteger {}
}

/// The shape of a zero point (or a scale) at port `i`: one value, or `per` of them.
fn zero_point_fits(cx: &InferCx, i: usize, per: &Dim) -> Result<(), InferError> {
    let s = cx.shape(i);
    let one = s.numel().known() == Some(1) && s.rank() <= 1;
    let each = s.rank() == 1 && (&s.0[0] == per || !per.is_known() || !s.0[0].is_known());
    if one || each {
        Ok(())
    } else {
        Err(InferError::Rank {
            port: i,
            got: s.rank(),
            expected: format!("one value or [{per}]"),
        })
    }
}

impl OpDef for MatMulInteger {
    fn arity(&self) -> (usize, usize) {
        (4, 4)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::U8, DType::I8])?;
        cx.expect_dtype(1, &[DType::U8, DType::I8])?;
        cx.expect_same_dtype(2, 0)?;
        cx.expect_same_dtype(3, 1)?;
        let (a, b) = (cx.shape(0), cx.shape(1));
        if a.rank() < 2 || b.rank() < 2 {
            return Err(InferError::Rank {
                port: if a.rank() < 2 { 0 } else { 1 },
                got: a.rank().min(b.rank()),
                expected: ">= 2".into(),
            });
        }
        zero_point_fits(cx, 2, &a.0[a.rank() - 2])?;
        zero_point_fits(cx, 3, &b.0[b.rank() - 1])?;
        Ok(vec![TensorType::new(DType::I32, matmul_shape(a, b)?)])
    }
}

op_attrs! {
    /// `activation(f32((a - a_zero) @ (b - b_zero)) * scale + bias)`:
    /// `matmul_integer` with its f32 epilogue (onnxruntime's
    /// MatMulIntegerToFloat), formed by `fuse-matmul` from the `cast`, `mul`,
    /// `add` and activation that follow the product. Inputs as
    /// `matmul_integer`'s, then `scale` and an optional `bias` (f32; one
    /// value, or one per column of b: `[N]`). Each step rounds as the
    /// unfused nodes do: the i32 sum to f32, the product, the sum.
    pub struct FusedMatMulInteger {
        pub activation: Activation,
    }
}

impl OpDef for FusedMatMulInteger {
    fn arity(&self) -> (usize, usize) {
        (5, 6)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let product = MatMulInteger {}.infer(cx)?.remove(0);
        let n = product.shape.0.last().cloned().unwrap_or(Dim::Known(1));
        for port in 4..6 {
            if cx.has(port) {
                cx.expect_dtype(port, &[DType::F32])?;
                zero_point_fits(cx, port, &n)?;
            }
        }
        Ok(vec![TensorType::new(DType::F32, product.shape)])
    }
}

attr_enum! {
    /// An activation applied in a fused epilogue.
    pub enum Activation {
        None = "none", Relu = "relu", Sigmoid = "sigmoid", Tanh = "tanh",
        GeluErf = "gelu_erf", GeluTanh = "gelu_tanh", Silu = "silu",
        /// `x * clip(x / 6 + 1/2, 0, 1)` (ONNX HardSwish).
        HardSwish = "hard_swish",
        /// `clip(x, 0, 6)` (ReLU6: MobileNet's `Clip`); NaN stays NaN.
        Relu6 = "relu6",
    }
}

op_attrs! {
    /// `activation(a @ b + bias)`; inputs `a`, `b` and an optional `bias` that
    /// broadcasts against the product.
    pub struct FusedMatMul {
        pub activation: Activation,
    }
}

impl OpDef for FusedMatMul {
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, MATMUL_DTYPES)?;
        cx.expect_same_dtype(1, 0)?;
        let mut s = matmul_shape(cx.shape(0), cx.shape(1))?;
        if cx.has(2) {
            cx.expect_same_dtype(2, 0)?;
            let b = broadcast(&s, cx.shape(2))?;
            if b != s {
                return Err(InferError::Broadcast {
                    a: s,
                    b: cx.shape(2).clone(),
                });
            }
            s = b;
        }
        if self.activation != Activation::None && !d.is_float() {
            return Err(InferError::DType {
                port: 0,
                got: d,
                expected: "a float for a fused activation".into(),
            });
        }
        Ok(vec![TensorType::new(d, s)])
    }
}

op_attrs! {
    /// Einstein summation over the inputs, in the explicit or implicit form.
    pub struct Einsum {
        pub equation: String,
    }
}

/// A parsed einsum equation: one label string per input and the output labels.
#[derive(Debug, Clone, PartialEq)]
pub struct EinsumSpec {
    pub inputs: Vec<Vec<char>>,
    pub output: Vec<char>,
}

impl Einsum {
    /// Parses the equation for inputs of the given ranks, expanding `...` into
    /// numbered broadcast labels (characters from U+0100 on).
    pub fn spec(&self, ranks: &[usize]) -> Result<EinsumSpec, InferError> {
        let bad = |r: &str| super::attr_err("equation", format!("`{}`: {r}", self.equation));
        let eq: String = self
            .equation
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l.to_string(), Some(r.to_string())),
            None => (eq.clone(), None),
        };
        let terms: Vec<&str> = lhs.split(',').collect();
        if terms.len() != ranks.len() {
            return Err(bad(&format!(
                "{} terms for {} inputs",
                terms.len(),
                ranks.len()
            )));
        }
        // Ellipsis dims are right-aligned across inputs, like numpy broadcasting.
        let mut ell_counts = Vec::new();
        for (t, &rank) in terms.iter().zip(ranks) {
            let letters: Vec<char> = t.replace("...", "").chars().collect();
            if letters.iter().any(|c| !c.is_ascii_alphabetic()) {
                return Err(bad("labels must be letters"));
            }
            let n = if t.contains("...") {
                rank.checked_sub(letters.len())
                    .ok_or_else(|| bad("too many labels for the input rank"))?
            } else if letters.len() != rank {
                return Err(bad(&format!(
                    "term `{t}` has {} labels for rank {rank}",
                    letters.len()
                )));
            } else {
                0
            };
            ell_counts.push(n);
        }
        let ell_rank = ell_counts.iter().copied().max().unwrap_or(0);
        let mut inputs = Vec::new();
        for (t, &n) in terms.iter().zip(&ell_counts) {
            let (pre, post) = t.split_once("...").unwrap_or((t, ""));
            let mut l: Vec<char> = pre.chars().collect();
            l.extend((0..n).map(|i| ell_label(ell_rank - n + i)));
            l.extend(post.chars());
            inputs.push(l);
        }
        let output = match rhs {
            Some(r) => {
                let mut out: Vec<char> = Vec::new();
                let (pre, post) = match r.split_once("...") {
                    Some((a, b)) => (a.to_string(), Some(b.to_string())),
                    None => (r.clone(), None),
                };
                out.extend(pre.chars());
                if let Some(post) = post {
                    out.extend((0..ell_rank).map(ell_label));
                    out.extend(post.chars());
                }
                out
            }
            None => {
                // Implicit form: ellipsis dims, then labels seen once, alphabetically.
                let mut counts = std::collections::BTreeMap::new();
                for l in inputs.iter().flatten() {
                    if (*l as u32) < 0x100 {
                        *counts.entry(*l).or_insert(0) += 1;
                    }
                }
                let mut out: Vec<char> = (0..ell_rank).map(ell_label).collect();
                out.extend(counts.into_iter().filter(|(_, n)| *n == 1).map(|(c, _)| c));
                out
            }
        };
        for c in &output {
            if !inputs.iter().any(|i| i.contains(c)) {
                return Err(bad(&format!("output label `{c}` is not in any input")));
            }
        }
        Ok(EinsumSpec { inputs, output })
    }
}

fn ell_label(i: usize) -> char {
    char::from_u32(0x100 + i as u32).unwrap_or('?')
}

impl OpDef for Einsum {
    fn arity(&self) -> (usize, usize) {
        (1, usize::MAX)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let ranks: Vec<usize> = cx.inputs.iter().map(|t| t.rank()).collect();
        let spec = self.spec(&ranks)?;
        let d = cx.expect_dtype(0, MATMUL_DTYPES)?;
        let mut sizes: std::collections::HashMap<char, Dim> = Default::default();
        for (i, labels) in spec.inputs.iter().enumerate() {
            cx.expect_same_dtype(i, 0)?;
            for (c, dim) in labels.iter().zip(&cx.shape(i).0) {
                let e = sizes.entry(*c).or_insert_with(|| dim.clone());
                *e = super::broadcast_dim(e, dim).ok_or_else(|| InferError::Mismatch {
                    what: "einsum label sizes",
                    a: e.to_string(),
                    b: dim.to_string(),
                })?;
            }
        }
        let shape = spec.output.iter().map(|c| sizes[c].clone()).collect();
        Ok(vec![TensorType::new(d, Shape(shape))])
    }
}

op_attrs! {
    /// Determinant of the square matrices in the last two dims.
    pub struct Det {}
}

impl OpDef for Det {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, &[DType::F32, DType::F64, DType::F16, DType::BF16])?;
        cx.expect_min_rank(0, 2)?;
        let s = &cx.shape(0).0;
        Ok(vec![TensorType::new(d, Shape(s[..s.len() - 2].to_vec()))])
    }
}
