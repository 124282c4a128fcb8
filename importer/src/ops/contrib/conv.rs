//! FusedConv (a convolution with a sum and an activation) and NhwcConv.

use rlx_ir::ops::{BinaryKind as B, Clip, Transpose, Unary, UnaryKind};
use rlx_ir::Value;

use super::MS;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::ops::binary;
use crate::ops::conv::conv_node;
use crate::ops::elementwise::{hard_sigmoid_of, negative_branch};
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add_in(MS, "FusedConv", 1, fused_conv);
    r.add_in(MS, "NhwcConv", 1, nhwc_conv);
}

/// `activation(conv(x, w) + b + z)`, the activation named as ORT's fusion
/// names it, with its parameters in `activation_params`.
fn fused_conv(cx: &mut NodeCtx) -> Result<(), MapError> {
    let act = cx.attr_s("activation")?.unwrap_or_default();
    let params = cx.attr_floats("activation_params")?.unwrap_or_default();
    let (x, w, b) = (cx.req(0)?, cx.req(1)?, cx.input(2)?);
    let mut y = conv_node(cx, x, w, b)?;
    if let Some(z) = cx.input(3)? {
        y = binary(cx, B::Add, y, z)?;
    }
    let y = activation(cx, y, &act, &params)?;
    cx.set_output(0, y);
    Ok(())
}

fn param(cx: &NodeCtx, act: &str, params: &[f32], i: usize) -> Result<f32, MapError> {
    params
        .get(i)
        .copied()
        .ok_or_else(|| MapError::Attr {
            name: "activation_params".into(),
            reason: format!("{act} needs {} parameters", i + 1),
        })
        .or_else(|e| cx.unsupported(e.to_string()))
}

fn activation(cx: &mut NodeCtx, y: Value, act: &str, params: &[f32]) -> Result<Value, MapError> {
    let unary = |cx: &mut NodeCtx, kind| cx.add1(Unary { kind }, &[y]);
    let d = cx.dtype(y);
    match act {
        "" => Ok(y),
        "Relu" => unary(cx, UnaryKind::Relu),
        "Tanh" => unary(cx, UnaryKind::Tanh),
        "Sigmoid" => unary(cx, UnaryKind::Sigmoid),
        "LeakyRelu" => {
            let alpha = param(cx, act, params, 0)?;
            let a = cx.scalar(d, alpha as f64)?;
            let neg = binary(cx, B::Mul, y, a)?;
            negative_branch(cx, y, neg)
        }
        "Clip" => {
            let (lo, hi) = (param(cx, act, params, 0)?, param(cx, act, params, 1)?);
            let (lo, hi) = (cx.scalar(d, lo as f64)?, cx.scalar(d, hi as f64)?);
            cx.add1(Clip {}, &[y, lo, hi])
        }
        "HardSigmoid" => {
            let (alpha, beta) = (param(cx, act, params, 0)?, param(cx, act, params, 1)?);
            hard_sigmoid_of(cx, y, alpha, beta)
        }
        other => cx.unsupported(format!("activation `{other}`")),
    }
}

/// A convolution over `[N, H, W, C]` input, giving `[N, H', W', M]`.
fn nhwc_conv(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, w, b) = (cx.req(0)?, cx.req(1)?, cx.input(2)?);
    let r = cx.rank(x) as i64;
    if r < 3 {
        return cx.unsupported(format!("an input of rank {r}"));
    }
    let to_first: Vec<i64> = [0, r - 1].into_iter().chain(1..r - 1).collect();
    let to_last: Vec<i64> = [0].into_iter().chain(2..r).chain([1]).collect();
    let xt = cx.add1(Transpose { perm: to_first }, &[x])?;
    let y = conv_node(cx, xt, w, b)?;
    let y = cx.add1(Transpose { perm: to_last }, &[y])?;
    cx.set_output(0, y);
    Ok(())
}
