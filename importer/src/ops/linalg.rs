//! MatMul, Gemm (decomposed into MatMul, scaling and bias), MatMulInteger,
//! Einsum and Det.

use rlx_ir::ops::{BinaryKind as B, Cast, Det, Einsum, MatMul, RoundMode, Transpose};
use rlx_ir::{DType, Value};

use super::{binary, legacy_broadcast};
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("MatMul", 1, matmul);
    r.add("Gemm", 1, gemm);
    r.add("MatMulInteger", 10, matmul_integer);
    r.add("Einsum", 12, einsum);
    r.add("Det", 11, det);
}

fn matmul(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (a, b) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(MatMul {}, &[a, b])?;
    cx.set_output(0, y);
    Ok(())
}

/// Swaps the last two axes of a 2-D value.
fn transpose2(cx: &mut NodeCtx, v: Value) -> Result<Value, MapError> {
    cx.add1(Transpose { perm: vec![1, 0] }, &[v])
}

/// `alpha * A' @ B' + beta * C`.
fn gemm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let alpha = cx.attr_f("alpha", 1.0)?;
    let beta = cx.attr_f("beta", 1.0)?;
    let trans_a = cx.attr_bool("transA", false)?;
    let trans_b = cx.attr_bool("transB", false)?;
    let (mut a, mut b) = (cx.req(0)?, cx.req(1)?);
    if cx.rank(a) != 2 || cx.rank(b) != 2 {
        return cx.unsupported("Gemm needs 2-D A and B");
    }
    if trans_a {
        a = transpose2(cx, a)?;
    }
    if trans_b {
        b = transpose2(cx, b)?;
    }
    let mut y = cx.add1(MatMul {}, &[a, b])?;
    let d = cx.dtype(y);
    if alpha != 1.0 {
        let s = cx.scalar(d, alpha as f64)?;
        y = binary(cx, B::Mul, y, s)?;
    }
    if let Some(mut c) = cx.input(2)? {
        c = legacy_broadcast(cx, y, c)?;
        if beta != 1.0 {
            let s = cx.scalar(d, beta as f64)?;
            c = binary(cx, B::Mul, c, s)?;
        }
        if beta != 0.0 {
            y = binary(cx, B::Add, y, c)?;
        }
    } else if cx.opset < 7 {
        cx.ignore_attr("broadcast");
    }
    cx.set_output(0, y);
    Ok(())
}

fn to_i32(cx: &mut NodeCtx, v: Value) -> Result<Value, MapError> {
    cx.add1(
        Cast {
            to: DType::I32,
            saturate: false,
            round_mode: RoundMode::Nearest,
        },
        &[v],
    )
}

/// `(A - a_zero) @ (B - b_zero)` in i32. A per-row (A) or per-column (B) zero
/// point is reshaped to broadcast.
pub(crate) fn int_matmul(
    cx: &mut NodeCtx,
    a: Value,
    b: Value,
    a_zero: Option<Value>,
    b_zero: Option<Value>,
) -> Result<Value, MapError> {
    let mut a32 = to_i32(cx, a)?;
    let mut b32 = to_i32(cx, b)?;
    if let Some(za) = a_zero {
        let mut z = to_i32(cx, za)?;
        if cx.rank(za) == 1 && cx.ty(za).shape.numel().known() != Some(1) {
            z = super::unsqueeze(cx, z, &[1])?;
        }
        a32 = binary(cx, B::Sub, a32, z)?;
    }
    if let Some(zb) = b_zero {
        let z = to_i32(cx, zb)?;
        b32 = binary(cx, B::Sub, b32, z)?;
    }
    cx.add1(MatMul {}, &[a32, b32])
}

fn matmul_integer(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (a, b) = (cx.req(0)?, cx.req(1)?);
    let (za, zb) = (cx.input(2)?, cx.input(3)?);
    let y = int_matmul(cx, a, b, za, zb)?;
    cx.set_output(0, y);
    Ok(())
}

fn einsum(cx: &mut NodeCtx) -> Result<(), MapError> {
    let equation = cx.attr_s("equation")?.ok_or_else(|| MapError::Attr {
        name: "equation".into(),
        reason: "is required".into(),
    })?;
    let xs = cx.all_inputs()?;
    let y = cx.add1(Einsum { equation }, &xs)?;
    cx.set_output(0, y);
    Ok(())
}

fn det(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let y = cx.add1(Det {}, &[x])?;
    cx.set_output(0, y);
    Ok(())
}
