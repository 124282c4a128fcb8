//! ConvTranspose (1-D to 3-D, groups, dilations, pads, output padding and
//! shape): the gather form in `kernels/wgsl/conv_transpose.wgsl`, one
//! invocation per output element, so no scatter and no atomics. Planned by
//! rlx-gpu (`kernels::conv_transpose`).

use rlx_gpu::kernels::conv_transpose::{plan, ConvTransposeParams, CONV_TRANSPOSE_OPERANDS};
use rlx_gpu::Params;
use rlx_ir::ops::ConvTranspose;
use rlx_ir::{DType, Node, TensorType};

use super::{Cx, LResult};

const SRC: &str = include_str!("../../../../kernels/wgsl/conv_transpose.wgsl");

/// f32 input and weights, 1 to 3 spatial dims.
pub fn supports(_: &Node, inputs: &[TensorType]) -> LResult<()> {
    for i in 0..2 {
        let d = inputs
            .get(i)
            .map(|t| t.dtype)
            .ok_or_else(|| format!("input {i} is missing"))?;
        if d != DType::F32 {
            return Err(format!(
                "conv_transpose on {d} has no WGSL kernel (f32 only)"
            ));
        }
    }
    let r = inputs.first().map_or(0, |t| t.shape.rank());
    if (3..=5).contains(&r) {
        Ok(())
    } else {
        Err(format!(
            "conv_transpose over {} spatial dims has no WGSL kernel (1-D to 3-D)",
            r.saturating_sub(2)
        ))
    }
}

pub fn lower(cx: &mut Cx, ct: &ConvTranspose) -> LResult<()> {
    let (x, w, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = cx.ins.get(2).cloned();
    if x.dtype != DType::F32 || w.dtype != DType::F32 {
        return Err(format!(
            "conv_transpose on {} has no WGSL kernel (f32 only)",
            x.dtype
        ));
    }
    let params = plan(ct, &x.dims, &w.dims, &y.dims, bias.is_some())?;
    let pipe = cx.typed_pipeline(
        "conv_transpose.gather",
        CONV_TRANSPOSE_OPERANDS,
        &ConvTransposeParams::LAYOUT,
        SRC,
    );
    let b = bias.as_ref().map_or(y.range(), |b| b.range());
    cx.launch_items(
        pipe,
        vec![y.range(), x.range(), w.range(), b],
        &params,
        y.numel() as u64,
    );
    Ok(())
}
