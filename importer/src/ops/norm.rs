//! Normalizations. BatchNormalization (inference form) becomes `x * a + b` with
//! per-channel `a = scale / sqrt(var + eps)`, `b = bias - mean * a`, which constant
//! folding reduces to two constants; LpNormalization and MeanVarianceNormalization
//! are decomposed; the others map to RLX ops.

use rlx_ir::ops::{
    BinaryKind as B, GroupNorm, InstanceNorm, LayerNorm, Reduce, ReduceKind, RmsNorm,
    UnaryKind as U,
};
use rlx_ir::{DType, Value};

use super::elementwise::un;
use super::{binary, unsqueeze};
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("BatchNormalization", 1, batch_norm);
    r.add("LayerNormalization", 17, layer_norm);
    r.add("RMSNormalization", 23, rms_norm);
    r.add("GroupNormalization", 18, group_norm);
    r.add("InstanceNormalization", 1, instance_norm);
    r.add("LpNormalization", 1, lp_norm);
    r.add("MeanVarianceNormalization", 9, mvn);
}

/// Reshapes a per-channel vector `[C]` to `[C, 1, ...]` for an input of `rank`.
fn per_channel(cx: &mut NodeCtx, v: Value, rank: usize) -> Result<Value, MapError> {
    if rank <= 2 {
        return Ok(v);
    }
    let axes: Vec<i64> = (1..rank as i64 - 1).collect();
    unsqueeze(cx, v, &axes)
}

/// Refuses per-channel parameters (inputs 1.. of a BatchNormalization)
/// that are not `[C]` for `x`'s `C` channels: the decomposition would
/// broadcast a `[1]` over every channel where ONNX Runtime refuses it.
fn per_channel_params(cx: &NodeCtx, x: Value, params: &[Value]) -> Result<(), MapError> {
    let c = cx.ty(x).shape.0.get(1).and_then(|d| d.known());
    for (i, &p) in params.iter().enumerate() {
        let shape = &cx.ty(p).shape;
        let len = shape.0.first().and_then(|d| d.known());
        let fits = shape.rank() == 1 && (c.is_none() || len.is_none() || len == c);
        if !fits {
            let want = c.map_or("C".to_string(), |c| c.to_string());
            return Err(MapError::Infer(rlx_ir::InferError::Mismatch {
                what: "a per-channel parameter (scale, bias, mean, var) vs the input's channels",
                a: format!("input {}: {shape}", i + 1),
                b: format!("[{want}]"),
            }));
        }
    }
    Ok(())
}

fn batch_norm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let momentum = cx.attr_f("momentum", 0.9)?;
    cx.ignore_attr("consumed_inputs");
    let eps = cx.attr_f("epsilon", 1e-5)?;
    if cx.opset < 7 {
        if cx.attr_i("is_test", 0)? == 0 && cx.opset < 6 {
            // Opset 1-5 without is_test computes batch statistics.
            return cx.unsupported("BatchNormalization in training mode (is_test=0)");
        }
        cx.ignore_attr("is_test");
    }
    if cx.opset < 9 && !cx.attr_bool("spatial", true)? {
        return cx.unsupported("BatchNormalization with spatial=0");
    }
    let training = if cx.opset >= 14 {
        cx.attr_bool("training_mode", false)?
    } else {
        // Before opset 14, asking for the statistics outputs selects training mode.
        (1..cx.num_outputs()).any(|i| cx.output_used(i))
    };
    if training {
        return batch_norm_training(cx, eps, momentum);
    }
    if (1..cx.num_outputs()).any(|i| cx.output_used(i)) {
        return cx.unsupported("the running mean/variance outputs exist only in training mode");
    }
    let (x, scale, bias, mean, var) = (cx.req(0)?, cx.req(1)?, cx.req(2)?, cx.req(3)?, cx.req(4)?);
    per_channel_params(cx, x, &[scale, bias, mean, var])?;
    let rank = cx.rank(x);
    let d = cx.dtype(x);
    let e = cx.scalar(cx.dtype(var), eps as f64)?;
    let ve = binary(cx, B::Add, var, e)?;
    let sd = un(cx, U::Sqrt, ve)?;
    let a = binary(cx, B::Div, scale, sd)?;
    let ma = binary(cx, B::Mul, mean, a)?;
    let b = binary(cx, B::Sub, bias, ma)?;
    let (mut a, mut b) = (per_channel(cx, a, rank)?, per_channel(cx, b, rank)?);
    if cx.dtype(a) != d {
        let c = rlx_ir::ops::Cast {
            to: d,
            saturate: false,
            round_mode: rlx_ir::ops::RoundMode::Nearest,
        };
        a = cx.add1(c.clone(), &[a])?;
        b = cx.add1(c, &[b])?;
    }
    let xa = binary(cx, B::Mul, x, a)?;
    let y = binary(cx, B::Add, xa, b)?;
    cx.set_output(0, y);
    Ok(())
}

fn stash(cx: &mut NodeCtx) -> Result<(), MapError> {
    match cx.attr_i("stash_type", 1)? {
        1 => Ok(()),
        t => cx.unsupported(format!(
            "stash_type {t} (only float32 statistics are supported)"
        )),
    }
}

pub(crate) fn layer_norm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", -1)?;
    let epsilon = cx.attr_f("epsilon", 1e-5)?;
    stash(cx)?;
    let (x, scale) = (cx.req(0)?, cx.req(1)?);
    let mut ins = vec![x, scale];
    if let Some(b) = cx.input(2)? {
        ins.push(b);
    }
    let stats = cx.output_used(1) || cx.output_used(2);
    let ys = cx.add(
        LayerNorm {
            axis,
            epsilon,
            stats,
        },
        &ins,
    )?;
    cx.set_outputs(&ys);
    Ok(())
}

fn rms_norm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", -1)?;
    let epsilon = cx.attr_f("epsilon", 1e-5)?;
    stash(cx)?;
    let (x, scale) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(RmsNorm { axis, epsilon }, &[x, scale])?;
    cx.set_output(0, y);
    Ok(())
}

fn group_norm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let num_groups = cx.attr_i_opt("num_groups")?.ok_or_else(|| MapError::Attr {
        name: "num_groups".into(),
        reason: "is required".into(),
    })?;
    let epsilon = cx.attr_f("epsilon", 1e-5)?;
    if cx.opset >= 21 {
        stash(cx)?;
    }
    let (x, mut scale, mut bias) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    if cx.opset < 21 {
        // Opset 18 scales per group: repeat each group's value over its channels.
        let c = cx
            .ty(x)
            .shape
            .0
            .get(1)
            .and_then(|d| d.known())
            .ok_or_else(|| {
                MapError::Unsupported("GroupNormalization-18 needs a known channel count".into())
            })?;
        let per = c / num_groups.max(1);
        let rep = |cx: &mut NodeCtx, v: Value| -> Result<Value, MapError> {
            let v2 = unsqueeze(cx, v, &[1])?;
            let shape = cx.const_i64(&[num_groups, per]);
            let e = cx.add1(rlx_ir::ops::Expand {}, &[v2, shape])?;
            let flat = cx.const_i64(&[c]);
            cx.add1(rlx_ir::ops::Reshape { allowzero: false }, &[e, flat])
        };
        scale = rep(cx, scale)?;
        bias = rep(cx, bias)?;
    }
    let y = cx.add1(
        GroupNorm {
            num_groups,
            epsilon,
        },
        &[x, scale, bias],
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn instance_norm(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("consumed_inputs");
    let epsilon = cx.attr_f("epsilon", 1e-5)?;
    let (x, s, b) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let y = cx.add1(InstanceNorm { epsilon }, &[x, s, b])?;
    cx.set_output(0, y);
    Ok(())
}

/// `x / ||x||_p` along `axis`.
fn lp_norm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", -1)?;
    let p = cx.attr_i("p", 2)?;
    let kind = match p {
        1 => ReduceKind::L1,
        2 => ReduceKind::L2,
        _ => return cx.unsupported(format!("LpNormalization with p={p} (only 1 and 2 exist)")),
    };
    let x = cx.req(0)?;
    let axes = cx.const_i64(&[axis]);
    let n = cx.add1(
        Reduce {
            kind,
            keepdims: true,
            noop_with_empty_axes: false,
        },
        &[x, axes],
    )?;
    // A zero norm gives zeros, not NaN (as the ONNX reference does).
    let q = binary(cx, B::Div, x, n)?;
    let zero = cx.scalar(cx.dtype(x), 0.0)?;
    let is_zero = cx.add1(
        rlx_ir::ops::Compare {
            kind: rlx_ir::ops::CompareKind::Equal,
        },
        &[n, zero],
    )?;
    let y = cx.add1(rlx_ir::ops::Where {}, &[is_zero, zero, q])?;
    cx.set_output(0, y);
    Ok(())
}

/// `(x - E[x]) / (sqrt(E[x²] - E[x]²) + 1e-9)` over `axes`.
fn mvn(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axes = cx.attr_ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    if d != DType::F32 && d != DType::F64 && d != DType::F16 && d != DType::BF16 {
        return cx.unsupported(format!("MeanVarianceNormalization on {d}"));
    }
    let ax = cx.const_i64(&axes);
    let mean_op = Reduce {
        kind: ReduceKind::Mean,
        keepdims: true,
        noop_with_empty_axes: false,
    };
    let mean = cx.add1(mean_op.clone(), &[x, ax])?;
    let sq = binary(cx, B::Mul, x, x)?;
    let ex2 = cx.add1(mean_op, &[sq, ax])?;
    let mean2 = binary(cx, B::Mul, mean, mean)?;
    let var = binary(cx, B::Sub, ex2, mean2)?;
    let sd = un(cx, U::Sqrt, var)?;
    let eps = cx.scalar(d, 1e-9)?;
    let den = binary(cx, B::Add, sd, eps)?;
    let num = binary(cx, B::Sub, x, mean)?;
    let y = binary(cx, B::Div, num, den)?;
    cx.set_output(0, y);
    Ok(())
}

/// Training mode: normalizes by the batch's own mean and (biased) variance per
/// channel, and blends them into the running statistics with `momentum`.
/// Outputs: Y, running mean, running variance (and before opset 14 the batch
/// mean and variance).
fn batch_norm_training(cx: &mut NodeCtx, eps: f32, momentum: f32) -> Result<(), MapError> {
    let (x, scale, bias, mean, var) = (cx.req(0)?, cx.req(1)?, cx.req(2)?, cx.req(3)?, cx.req(4)?);
    per_channel_params(cx, x, &[scale, bias, mean, var])?;
    let rank = cx.rank(x);
    if rank < 2 {
        return cx.unsupported("BatchNormalization needs an input of rank 2 or more");
    }
    let d = cx.dtype(x);
    let axes: Vec<i64> = std::iter::once(0).chain(2..rank as i64).collect();
    let reduce_mean = |cx: &mut NodeCtx, v: Value| -> Result<Value, MapError> {
        let a = cx.const_i64(&axes);
        cx.add1(
            Reduce {
                kind: ReduceKind::Mean,
                keepdims: false,
                noop_with_empty_axes: false,
            },
            &[v, a],
        )
    };
    let batch_mean = reduce_mean(cx, x)?;
    let m = per_channel(cx, batch_mean, rank)?;
    let centered = binary(cx, B::Sub, x, m)?;
    let sq = binary(cx, B::Mul, centered, centered)?;
    let batch_var = reduce_mean(cx, sq)?;
    let e = cx.scalar(d, eps as f64)?;
    let ve = binary(cx, B::Add, batch_var, e)?;
    let sd = un(cx, U::Sqrt, ve)?;
    let a = binary(cx, B::Div, scale, sd)?;
    let a = per_channel(cx, a, rank)?;
    let b = per_channel(cx, bias, rank)?;
    let ya = binary(cx, B::Mul, centered, a)?;
    let y = binary(cx, B::Add, ya, b)?;
    cx.set_output(0, y);
    let blend = |cx: &mut NodeCtx, running: Value, batch: Value| -> Result<Value, MapError> {
        let rd = cx.dtype(running);
        let k = cx.scalar(rd, momentum as f64)?;
        let k1 = cx.scalar(rd, 1.0 - momentum as f64)?;
        let old = binary(cx, B::Mul, running, k)?;
        let batch = super::cast(cx, batch, rd)?;
        let new = binary(cx, B::Mul, batch, k1)?;
        binary(cx, B::Add, old, new)
    };
    let running_mean = blend(cx, mean, batch_mean)?;
    let running_var = blend(cx, var, batch_var)?;
    cx.set_output(1, running_mean);
    cx.set_output(2, running_var);
    if cx.opset < 14 {
        cx.set_output(3, batch_mean);
        cx.set_output(4, batch_var);
    }
    Ok(())
}
