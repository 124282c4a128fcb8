//! NllLoss (`kernels/wgsl/loss.wgsl`): per element, or summed / averaged by
//! one workgroup tree reduction, planned by rlx-gpu's `kernels::loss`.

use rlx_gpu::kernels::loss::{nll_groups, nll_params, NllLossParams, NLL_OPERANDS};
use rlx_gpu::Params;
use rlx_ir::ops::NllLoss;
use rlx_ir::{DType, Node, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only};

const SRC: &str = include_str!("../../../../kernels/wgsl/loss.wgsl");

/// f32 inputs, i32 or i64 targets.
pub fn supports(_node: &Node, inputs: &[TensorType]) -> LResult<()> {
    f32_only("nll_loss", dtype_of(inputs, 0)?)?;
    match dtype_of(inputs, 1)? {
        DType::I32 | DType::I64 => Ok(()),
        d => Err(format!("nll_loss targets of {d} have no WGSL kernel")),
    }
}

pub fn lower(cx: &mut Cx, l: &NllLoss) -> LResult<()> {
    let (x, t, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let w = cx.ins.get(2).cloned();
    let p = nll_params(
        l,
        &x.dims,
        t.numel(),
        t.dtype == DType::I64,
        w.as_ref().map(|w| w.numel()),
    )?;
    let pipe = cx.typed_pipeline("loss.nll", NLL_OPERANDS, &NllLossParams::LAYOUT, SRC);
    let wr = w.as_ref().map_or(x.range(), |w| w.range());
    let ops = vec![x.range(), t.range(), wr, y.range()];
    cx.launch_params(pipe, ops, &p, nll_groups(&p));
    Ok(())
}
