//! LayerNorm and RmsNorm over trailing axes (`kernels/wgsl/norm.wgsl`): a
//! workgroup tree reduction per row, planned by rlx-gpu's `kernels::norm`.

use rlx_gpu::kernels::norm::{norm_params, NormParams, NORM_OPERANDS};
use rlx_gpu::Params;
use rlx_ir::{Node, Op, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only};

const SRC: &str = include_str!("../../../../kernels/wgsl/norm.wgsl");

/// f32 inputs and scales.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let what = match node.op {
        Op::RmsNorm(_) => "rms_norm",
        _ => "layer_norm",
    };
    f32_only(what, dtype_of(inputs, 0)?)?;
    f32_only(what, dtype_of(inputs, 1)?)
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (ax, eps, rms) = match &cx.node.op {
        Op::LayerNorm(l) => (l.axis, l.epsilon, false),
        Op::RmsNorm(r) => (r.axis, r.epsilon, true),
        op => return Err(format!("`{}` is not a norm", op.name())),
    };
    let (x, scale, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = cx.ins.get(2).cloned();
    let stats = cx.outs.len() == 3;
    let p = norm_params(
        &x.dims,
        ax,
        eps,
        rms,
        &scale.dims,
        bias.as_ref().map(|b| b.dims.as_slice()),
        stats,
    )?;
    let pipe = cx.typed_pipeline("norm.row64", NORM_OPERANDS, &NormParams::LAYOUT, SRC);
    let br = bias.as_ref().map_or(scale.range(), |b| b.range());
    let stat = |i: usize| cx.outs.get(i).map_or(y.range(), |o| o.range());
    let ops = vec![x.range(), scale.range(), br, y.range(), stat(1), stat(2)];
    cx.launch_params(pipe, ops, &p, u64::from(p.rows));
    Ok(())
}
