//! ONNX op mappers, one module per op family. Each module registers its ops with
//! the opset at which their semantics (as far as the mapper cares) begin.

mod contrib;
mod control;
pub(crate) mod conv;
pub(crate) mod elementwise;
mod generators;
pub(crate) mod indexing;
mod labels;
pub(crate) mod linalg;
mod loss;
mod ml;
mod movement;
pub(crate) mod norm;
pub(crate) mod quant;
pub(crate) mod recurrent;
mod reduce;
mod resize;
mod sequence;
mod signal;
mod strings;
mod svm;
mod training;
mod transformer;
mod trees;
mod unsupported;

use rlx_ir::ops::{Binary, BinaryKind, Unsqueeze};
use rlx_ir::Value;

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

/// Registers every family.
pub fn register_all(r: &mut Registry) {
    contrib::register(r);
    control::register(r);
    conv::register(r);
    elementwise::register(r);
    generators::register(r);
    indexing::register(r);
    linalg::register(r);
    loss::register(r);
    ml::register(r);
    trees::register(r);
    svm::register(r);
    movement::register(r);
    norm::register(r);
    quant::register(r);
    recurrent::register(r);
    reduce::register(r);
    resize::register(r);
    sequence::register(r);
    signal::register(r);
    strings::register(r);
    training::register(r);
    transformer::register(r);
    unsupported::register(r);
}

/// `a <kind> b`.
pub(crate) fn binary(
    cx: &mut NodeCtx,
    kind: BinaryKind,
    a: Value,
    b: Value,
) -> Result<Value, MapError> {
    cx.add1(Binary { kind }, &[a, b])
}

/// `v` cast to `to` (itself when it has that dtype already).
pub(crate) fn cast(cx: &mut NodeCtx, v: Value, to: rlx_ir::DType) -> Result<Value, MapError> {
    if cx.dtype(v) == to {
        return Ok(v);
    }
    cx.add1(
        rlx_ir::ops::Cast {
            to,
            saturate: false,
            round_mode: rlx_ir::ops::RoundMode::Nearest,
        },
        &[v],
    )
}

/// Inserts size-1 axes at `axes` of `v`.
pub(crate) fn unsqueeze(cx: &mut NodeCtx, v: Value, axes: &[i64]) -> Result<Value, MapError> {
    let a = cx.const_i64(axes);
    cx.add1(Unsqueeze {}, &[v, a])
}

/// Opset < 7 elementwise ops broadcast only with `broadcast=1`, aligning `b`'s
/// dims at `axis` of `a` (numpy suffix alignment when `axis` is absent).
pub(crate) fn legacy_broadcast(cx: &mut NodeCtx, a: Value, b: Value) -> Result<Value, MapError> {
    if cx.opset >= 7 {
        return Ok(b);
    }
    let broadcast = cx.attr_i("broadcast", 0)?;
    let axis = cx.attr_i_opt("axis")?;
    cx.ignore_attr("consumed_inputs");
    if broadcast == 0 {
        if cx.ty(a).shape != cx.ty(b).shape && cx.ty(b).shape.numel().known() != Some(1) {
            return cx.unsupported("without broadcast=1, legacy elementwise ops need equal shapes");
        }
        return Ok(b);
    }
    let (ra, rb) = (cx.rank(a), cx.rank(b));
    let Some(axis) = axis else { return Ok(b) };
    let axis = if axis < 0 { axis + ra as i64 } else { axis };
    let trailing = ra as i64 - axis - rb as i64;
    if axis < 0 || trailing < 0 {
        return Err(MapError::Attr {
            name: "axis".into(),
            reason: format!("{axis} does not align rank {rb} inside rank {ra}"),
        });
    }
    if trailing == 0 {
        return Ok(b);
    }
    let axes: Vec<i64> = (0..trailing).map(|i| rb as i64 + i).collect();
    unsqueeze(cx, b, &axes)
}
