//! The QLinear elementwise family (Add, Mul, Sigmoid, LeakyRelu), pooling and
//! concatenation on quantized tensors, as dequantize -> float op -> quantize;
//! and the contrib QuantizeLinear, DequantizeLinear and Trilu, which are the
//! standard ops.

use rlx_ir::ops::{BinaryKind as B, Concat, QuantizeLinear, Reduce, ReduceKind, Unary, UnaryKind};
use rlx_ir::Value;

use super::MS;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::ops::binary;
use crate::ops::elementwise::negative_branch;
use crate::ops::quant::{deq, dequantize, quantize};
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add_in(MS, "QLinearAdd", 1, qlinear_add);
    r.add_in(MS, "QLinearMul", 1, qlinear_mul);
    r.add_in(MS, "QLinearSigmoid", 1, qlinear_sigmoid);
    r.add_in(MS, "QLinearLeakyRelu", 1, qlinear_leaky_relu);
    r.add_in(
        MS,
        "QLinearGlobalAveragePool",
        1,
        qlinear_global_average_pool,
    );
    r.add_in(MS, "QLinearConcat", 1, qlinear_concat);
    r.add_in(MS, "QuantizeLinear", 1, quantize);
    r.add_in(MS, "DequantizeLinear", 1, dequantize);
    r.add_in(MS, "Trilu", 1, crate::ops::indexing::trilu);
}

/// The float value of the quantized triple at ports `at..at+3`; a missing
/// zero point is zero of the input's dtype.
fn input_f(cx: &mut NodeCtx, at: usize) -> Result<Value, MapError> {
    let (x, s) = (cx.req(at)?, cx.req(at + 1)?);
    let z = zero_point(cx, at + 2, x)?;
    deq(cx, x, s, z, 1)
}

fn zero_point(cx: &mut NodeCtx, port: usize, like: Value) -> Result<Value, MapError> {
    match cx.input(port)? {
        Some(z) => Ok(z),
        None => {
            let t = rlx_ir::Tensor::zeros(cx.dtype(like), &[])
                .map_err(|e| MapError::Unsupported(e.to_string()))?;
            Ok(cx.constant(t))
        }
    }
}

/// Quantizes `y` with the scale at `port` and the zero point after it (its
/// dtype that of `like`).
fn output_q(cx: &mut NodeCtx, y: Value, port: usize, like: Value) -> Result<(), MapError> {
    let s = cx.req(port)?;
    let z = zero_point(cx, port + 1, like)?;
    let q = cx.add1(
        QuantizeLinear {
            axis: 1,
            block_size: 0,
            saturate: true,
        },
        &[y, s, z],
    )?;
    cx.set_output(0, q);
    Ok(())
}

fn qlinear_binary(cx: &mut NodeCtx, kind: B) -> Result<(), MapError> {
    let a = input_f(cx, 0)?;
    let b = input_f(cx, 3)?;
    let y = binary(cx, kind, a, b)?;
    let like = cx.req(0)?;
    output_q(cx, y, 6, like)
}

fn qlinear_add(cx: &mut NodeCtx) -> Result<(), MapError> {
    qlinear_binary(cx, B::Add)
}

fn qlinear_mul(cx: &mut NodeCtx) -> Result<(), MapError> {
    qlinear_binary(cx, B::Mul)
}

fn qlinear_sigmoid(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = input_f(cx, 0)?;
    let y = cx.add1(
        Unary {
            kind: UnaryKind::Sigmoid,
        },
        &[x],
    )?;
    let like = cx.req(0)?;
    output_q(cx, y, 3, like)
}

fn qlinear_leaky_relu(cx: &mut NodeCtx) -> Result<(), MapError> {
    let alpha = cx.attr_f("alpha", 0.01)?;
    let x = input_f(cx, 0)?;
    let a = cx.scalar(cx.dtype(x), alpha as f64)?;
    let neg = binary(cx, B::Mul, x, a)?;
    let y = negative_branch(cx, x, neg)?;
    let like = cx.req(0)?;
    output_q(cx, y, 3, like)
}

/// The mean over the spatial dims, kept as size 1 (`[N,C,1,1]`, or
/// `[N,1,1,C]` with `channels_last`).
fn qlinear_global_average_pool(cx: &mut NodeCtx) -> Result<(), MapError> {
    let channels_last = cx.attr_bool("channels_last", false)?;
    let x = input_f(cx, 0)?;
    let r = cx.rank(x) as i64;
    if r < 3 {
        return cx.unsupported(format!("an input of rank {r}"));
    }
    let axes: Vec<i64> = if channels_last {
        (1..r - 1).collect()
    } else {
        (2..r).collect()
    };
    let axes = cx.const_i64(&axes);
    let y = cx.add1(
        Reduce {
            kind: ReduceKind::Mean,
            keepdims: true,
            noop_with_empty_axes: false,
        },
        &[x, axes],
    )?;
    let like = cx.req(0)?;
    output_q(cx, y, 3, like)
}

/// Inputs `y_scale, y_zero_point`, then one (x, scale, zero point) triple per
/// part.
fn qlinear_concat(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", 0)?;
    let n = cx.num_inputs();
    if n < 5 || !(n - 2).is_multiple_of(3) {
        return cx.unsupported(format!("{n} inputs (expected 2 + 3 per part)"));
    }
    let mut parts = Vec::new();
    for at in (2..n).step_by(3) {
        parts.push(input_f(cx, at)?);
    }
    let y = cx.add1(Concat { axis }, &parts)?;
    let like = cx.req(2)?;
    output_q(cx, y, 0, like)
}
