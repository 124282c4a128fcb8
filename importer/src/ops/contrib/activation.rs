//! Gelu, FastGelu, BiasGelu, QuickGelu and BiasAdd.

use rlx_ir::ops::{BinaryKind as B, Gelu, GeluApprox, Unary, UnaryKind};

use super::MS;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::ops::binary;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add_in(MS, "Gelu", 1, gelu);
    r.add_in(MS, "FastGelu", 1, fast_gelu);
    r.add_in(MS, "BiasGelu", 1, bias_gelu);
    r.add_in(MS, "QuickGelu", 1, quick_gelu);
    r.add_in(MS, "BiasAdd", 1, bias_add);
}

/// `x + bias` when the node has input `port`, else `x`.
fn plus_input(cx: &mut NodeCtx, x: rlx_ir::Value, port: usize) -> Result<rlx_ir::Value, MapError> {
    match cx.input(port)? {
        Some(b) => binary(cx, B::Add, x, b),
        None => Ok(x),
    }
}

fn gelu_of(cx: &mut NodeCtx, approximate: GeluApprox) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let x = plus_input(cx, x, 1)?;
    let y = cx.add1(Gelu { approximate }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

/// The exact (erf) GELU.
fn gelu(cx: &mut NodeCtx) -> Result<(), MapError> {
    gelu_of(cx, GeluApprox::None)
}

/// The tanh approximation, of `x` or `x + bias`.
fn fast_gelu(cx: &mut NodeCtx) -> Result<(), MapError> {
    gelu_of(cx, GeluApprox::Tanh)
}

/// The exact GELU of `x + bias`.
fn bias_gelu(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.req(1)?;
    gelu_of(cx, GeluApprox::None)
}

/// `x * sigmoid(alpha * x)`.
fn quick_gelu(cx: &mut NodeCtx) -> Result<(), MapError> {
    let alpha = cx.attr_f("alpha", 1.702)?;
    let x = cx.req(0)?;
    let a = cx.scalar(cx.dtype(x), alpha as f64)?;
    let ax = binary(cx, B::Mul, x, a)?;
    let s = cx.add1(
        Unary {
            kind: UnaryKind::Sigmoid,
        },
        &[ax],
    )?;
    let y = binary(cx, B::Mul, x, s)?;
    cx.set_output(0, y);
    Ok(())
}

/// `x + bias + skip`.
fn bias_add(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, bias, skip) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let xb = binary(cx, B::Add, x, bias)?;
    let y = binary(cx, B::Add, xb, skip)?;
    cx.set_output(0, y);
    Ok(())
}
