//! Resize (`kernels/wgsl/resize.wgsl`): f32 resampling one axis per
//! dispatch, planned by rlx-gpu's `kernels::resize` (taps computed here from
//! the constant scales, sizes and roi, carried in the dispatch's params);
//! intermediate axes go to scratch.

use rlx_gpu::kernels::resize::{pass_params, passes, RESIZE_OPERANDS};
use rlx_ir::ops::ResizeTarget;
use rlx_ir::{Node, Op, TensorType};

use super::{Cx, LResult, Operand};
use crate::support::{dtype_of, f32_only};

const SRC: &str = include_str!("../../../../kernels/wgsl/resize.wgsl");

/// f32 only.
pub fn supports(_node: &Node, inputs: &[TensorType]) -> LResult<()> {
    f32_only("resize", dtype_of(inputs, 0)?)
}

fn floats(cx: &Cx, i: usize) -> Option<Vec<f64>> {
    match cx.values.get(i) {
        Some(Some(t)) => t.to_f64_vec(),
        _ => None,
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::Resize(r) = &cx.node.op.clone() else {
        return Err(format!("`{}` is not a resize", cx.node.op.name()));
    };
    let x: Operand = cx.input(0)?.clone();
    let y: Operand = cx.output(0)?.clone();
    let rank = x.dims.len();
    let input: Vec<i64> = x.dims.iter().map(|&d| d as i64).collect();
    let roi = if cx.ins.len() > 1 && cx.input(1)?.numel() > 0 {
        floats(cx, 1).ok_or("the resize roi must be a constant (the WGSL plan reads it)")?
    } else {
        Vec::new()
    };
    let (scales, sizes) = match r.target {
        ResizeTarget::Scales => (
            Some(
                floats(cx, 2)
                    .ok_or("resize scales must be a constant (the WGSL plan reads them)")?,
            ),
            None,
        ),
        ResizeTarget::Sizes => (None, Some(cx.ints(2)?.ok_or("resize sizes must be given")?)),
    };
    let (out, sc) = r
        .resolve(&input, scales.as_deref(), sizes.as_deref(), &roi)
        .map_err(|e| e.to_string())?;
    if out.len() != rank || out.iter().zip(&y.dims).any(|(&a, &b)| a != b as i64) {
        return Err(format!(
            "resize computes output {out:?} where the plan has {:?}",
            y.dims
        ));
    }
    let plans = passes(r, &x.dims, &out, &sc, &roi)?;
    let fill = r.extrapolation_value;
    let mut src = x.range();
    let count = plans.len();
    for (i, pass) in plans.iter().enumerate() {
        let dst = if i + 1 == count {
            y.range()
        } else {
            let bytes = pass.out_dims().iter().product::<usize>() as u64 * 4;
            cx.scratch(bytes.max(4))
        };
        let (params, items) = pass_params(pass, fill)?;
        let pipe = cx.typed_pipeline("resize.axis", RESIZE_OPERANDS, &params.layout, SRC);
        cx.launch(
            pipe,
            vec![src, dst],
            params,
            items.div_ceil(crate::plan::WG),
        );
        src = dst;
    }
    Ok(())
}
