//! Reductions: Reduce* (axes as attribute before opset 13/18, as input after),
//! ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax (opset < 13 flattens to 2-D at
//! `axis`), CumSum/CumProd and TopK.

use rlx_ir::ops::{
    ArgReduce, ArgReduceKind, Cumulative, CumulativeKind, Flatten, Reduce, ReduceKind, Reshape,
    ShapeOf, Softmax, SoftmaxKind, TopK,
};

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    for op in [
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceSumSquare",
    ] {
        r.add(op, 1, reduce);
    }
    r.add("ArgMax", 1, arg_reduce);
    r.add("ArgMin", 1, arg_reduce);
    for op in ["Softmax", "LogSoftmax", "Hardmax"] {
        r.add(op, 1, softmax_legacy);
        r.add(op, 13, softmax);
    }
    r.add("CumSum", 11, cumulative);
    r.add("CumProd", 26, cumulative);
    r.add("TopK", 1, topk);
}

fn reduce(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = match cx.op_type() {
        "ReduceSum" => ReduceKind::Sum,
        "ReduceMean" => ReduceKind::Mean,
        "ReduceMax" => ReduceKind::Max,
        "ReduceMin" => ReduceKind::Min,
        "ReduceProd" => ReduceKind::Prod,
        "ReduceL1" => ReduceKind::L1,
        "ReduceL2" => ReduceKind::L2,
        "ReduceLogSum" => ReduceKind::LogSum,
        "ReduceLogSumExp" => ReduceKind::LogSumExp,
        _ => ReduceKind::SumSquare,
    };
    let keepdims = cx.attr_bool("keepdims", true)?;
    let noop_with_empty_axes = cx.attr_bool("noop_with_empty_axes", false)?;
    let axes_from_input = (kind == ReduceKind::Sum && cx.opset >= 13) || cx.opset >= 18;
    let x = cx.req(0)?;
    let mut ins = vec![x];
    if axes_from_input {
        if let Some(a) = cx.input(1)? {
            ins.push(a);
        }
    } else if let Some(a) = cx.attr_ints("axes")? {
        let c = cx.const_i64(&a);
        ins.push(c);
    }
    let y = cx.add1(
        Reduce {
            kind,
            keepdims,
            noop_with_empty_axes,
        },
        &ins,
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn arg_reduce(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = if cx.op_type() == "ArgMax" {
        ArgReduceKind::Max
    } else {
        ArgReduceKind::Min
    };
    let axis = cx.attr_i("axis", 0)?;
    let keepdims = cx.attr_bool("keepdims", true)?;
    let select_last_index = cx.attr_bool("select_last_index", false)?;
    let x = cx.req(0)?;
    let y = cx.add1(
        ArgReduce {
            kind,
            axis,
            keepdims,
            select_last_index,
        },
        &[x],
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn softmax_kind(op: &str) -> SoftmaxKind {
    match op {
        "Softmax" => SoftmaxKind::Softmax,
        "LogSoftmax" => SoftmaxKind::LogSoftmax,
        _ => SoftmaxKind::Hardmax,
    }
}

fn softmax(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = softmax_kind(cx.op_type());
    let axis = cx.attr_i("axis", -1)?;
    let x = cx.req(0)?;
    let y = cx.add1(Softmax { kind, axis }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

/// Opset < 13: the input is coerced to 2-D at `axis` (default 1), normalized
/// over the flattened trailing dims, and reshaped back.
fn softmax_legacy(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = softmax_kind(cx.op_type());
    let axis = cx.attr_i("axis", 1)?;
    let x = cx.req(0)?;
    let rank = cx.rank(x) as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if a == rank - 1 {
        let y = cx.add1(Softmax { kind, axis: -1 }, &[x])?;
        cx.set_output(0, y);
        return Ok(());
    }
    let flat = cx.add1(Flatten { axis }, &[x])?;
    let s = cx.add1(Softmax { kind, axis: 1 }, &[flat])?;
    let shape = cx.add1(
        ShapeOf {
            start: 0,
            end: None,
        },
        &[x],
    )?;
    let y = cx.add1(Reshape { allowzero: false }, &[s, shape])?;
    cx.set_output(0, y);
    Ok(())
}

fn cumulative(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = if cx.op_type() == "CumSum" {
        CumulativeKind::Sum
    } else {
        CumulativeKind::Prod
    };
    let exclusive = cx.attr_bool("exclusive", false)?;
    let reverse = cx.attr_bool("reverse", false)?;
    let (x, axis) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(
        Cumulative {
            kind,
            exclusive,
            reverse,
        },
        &[x, axis],
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn topk(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", -1)?;
    let largest = cx.attr_bool("largest", true)?;
    let sorted = cx.attr_bool("sorted", true)?;
    let x = cx.req(0)?;
    let k = if cx.opset < 10 {
        let k = cx.attr_i_opt("k")?.ok_or_else(|| MapError::Attr {
            name: "k".into(),
            reason: "is required".into(),
        })?;
        cx.const_i64(&[k])
    } else {
        cx.req(1)?
    };
    let ys = cx.add(
        TopK {
            axis,
            largest,
            sorted,
        },
        &[x, k],
    )?;
    cx.set_outputs(&ys);
    Ok(())
}
