//! RotaryEmbedding on f32 (`kernels/wgsl/rotary.wgsl`), planned by rlx-gpu's
//! `kernels::rotary`.

use rlx_gpu::kernels::rotary::{rotary_params, RotaryParams, ROTARY_OPERANDS};
use rlx_gpu::Params;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only};

const SRC: &str = include_str!("../../../../kernels/wgsl/rotary.wgsl");

/// f32 input and caches; i32 or i64 position ids.
pub fn supports(_node: &Node, inputs: &[TensorType]) -> LResult<()> {
    for i in 0..3 {
        f32_only("rotary_embedding", dtype_of(inputs, i)?)?;
    }
    match inputs.get(3).map(|t| t.dtype) {
        None | Some(DType::I32 | DType::I64) => Ok(()),
        Some(d) => Err(format!(
            "rotary_embedding position ids of {d} have no WGSL kernel"
        )),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::RotaryEmbedding(r) = &cx.node.op else {
        return Err(format!("`{}` is not a rotary_embedding", cx.node.op.name()));
    };
    let x = cx.input(0)?.clone();
    let (cos, sin) = (cx.input(1)?.clone(), cx.input(2)?.clone());
    let ids = cx.ins.get(3).cloned();
    let y = cx.output(0)?.clone();
    let p = rotary_params(
        r,
        &x.dims,
        &cos.dims,
        &sin.dims,
        ids.as_ref().map(|o| (o.numel(), o.dtype)),
        y.numel(),
    )?;
    let ops = vec![
        x.range(),
        cos.range(),
        sin.range(),
        ids.map_or(x.range(), |o| o.range()),
        y.range(),
    ];
    let pipe = cx.typed_pipeline("rotary.f32", ROTARY_OPERANDS, &RotaryParams::LAYOUT, SRC);
    cx.launch_items(pipe, ops, &p, y.numel() as u64);
    Ok(())
}
