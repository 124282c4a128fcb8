//! LayerNorm, RmsNorm and ResidualNorm over trailing axes
//! (`kernels/wgsl/norm.wgsl`): a workgroup per row, planned by rlx-gpu's
//! `kernels::norm`. The kernel reads the normalized value through `nx` and
//! finds what else it stores through `kept` and `stats`, which this file
//! prepends per op: a residual norm adds its residual on load and writes the
//! sum for the next residual, in the same pass.

use rlx_gpu::kernels::norm::{norm_params, NormParams, NORM_OPERANDS, RESIDUAL_NORM_OPERANDS};
use rlx_gpu::Params;
use rlx_ir::{Node, Op, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only};

const SRC: &str = include_str!("../../../../kernels/wgsl/norm.wgsl");

/// A norm's element access: x as it is, the statistics when asked for.
const PLAIN: &str = "fn nx(i: u32) -> f32 {\n    return ldf(p.x, i);\n}\n\n\
fn kept() -> u32 {\n    return NONE;\n}\n\n\
fn stats(row: u32, mean: f32, inv: f32) {\n    if (p.stats != 0u) {\n        stf(p.mean, row, mean);\n        stf(p.inv_std, row, inv);\n    }\n}\n";

/// A residual norm's: x + residual, whose sum is kept.
const RESIDUAL: &str =
    "fn nx(i: u32) -> f32 {\n    return ldf(p.x, i) + ldf(p.residual, i);\n}\n\n\
fn kept() -> u32 {\n    return p.sum;\n}\n\n\
fn stats(row: u32, mean: f32, inv: f32) {}\n";

/// f32 inputs and scales; a residual of the input's own shape.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let what = match node.op {
        Op::RmsNorm(_) => "rms_norm",
        Op::ResidualNorm(_) => "residual_norm",
        _ => "layer_norm",
    };
    for i in 0..inputs.len() {
        f32_only(what, dtype_of(inputs, i)?)?;
    }
    if let Op::ResidualNorm(_) = node.op {
        if inputs[1].shape != inputs[0].shape {
            return Err("a residual_norm whose residual broadcasts has no WGSL kernel".into());
        }
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (ax, eps, rms, residual) = match &cx.node.op {
        Op::LayerNorm(l) => (l.axis, l.epsilon, false, false),
        Op::RmsNorm(r) => (r.axis, r.epsilon, true, false),
        Op::ResidualNorm(r) => (r.axis, r.epsilon, r.rms, true),
        op => return Err(format!("`{}` is not a norm", op.name())),
    };
    // Inputs: x, [residual,] scale, [bias].
    let at = usize::from(residual);
    let (x, scale, y) = (
        cx.input(0)?.clone(),
        cx.input(1 + at)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = cx.ins.get(2 + at).cloned();
    let stats = !residual && cx.outs.len() == 3;
    let p = norm_params(
        &x.dims,
        ax,
        eps,
        rms,
        &scale.dims,
        bias.as_ref().map(|b| b.dims.as_slice()),
        stats,
    )?;
    let br = bias.as_ref().map_or(scale.range(), |b| b.range());
    if residual {
        let (r, sum) = (cx.input(1)?.range(), cx.output(1)?.range());
        if r.bytes != x.range().bytes {
            return Err("the residual does not have the input's shape".into());
        }
        let pipe = cx.typed_pipeline(
            "norm.residual_row64",
            RESIDUAL_NORM_OPERANDS,
            &NormParams::LAYOUT,
            &format!("{RESIDUAL}\n{SRC}"),
        );
        let ops = vec![x.range(), r, scale.range(), br, y.range(), sum];
        cx.launch_params(pipe, ops, &p, u64::from(p.rows));
        return Ok(());
    }
    let pipe = cx.typed_pipeline(
        "norm.row64",
        NORM_OPERANDS,
        &NormParams::LAYOUT,
        &format!("{PLAIN}\n{SRC}"),
    );
    let stat = |i: usize| cx.outs.get(i).map_or(y.range(), |o| o.range());
    let ops = vec![x.range(), scale.range(), br, y.range(), stat(1), stat(2)];
    cx.launch_params(pipe, ops, &p, u64::from(p.rows));
    Ok(())
}
