//! Gather along one axis, with i32 or i64 indices (`kernels/wgsl/gather.wgsl`),
//! planned by rlx-gpu's `kernels::gather`.

use rlx_gpu::kernels::gather::{gather_params, GatherParams, GATHER_OPERANDS};
use rlx_gpu::Params;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, movable};

const SRC: &str = include_str!("../../../../kernels/wgsl/gather.wgsl");

/// 4- and 8-byte elements, i32 or i64 indices.
pub fn supports(_node: &Node, inputs: &[TensorType]) -> LResult<()> {
    movable("gather", dtype_of(inputs, 0)?)?;
    match dtype_of(inputs, 1)? {
        DType::I32 | DType::I64 => Ok(()),
        d => Err(format!("gather indices of {d} have no WGSL kernel")),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::Gather(g) = &cx.node.op else {
        return Err(format!("`{}` has no WGSL kernel", cx.node.op.name()));
    };
    let (x, idx, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let n = y.numel();
    let p = gather_params(
        &x.dims,
        g.axis,
        x.dtype.size(),
        idx.numel(),
        idx.dtype == DType::I64,
        n,
    )?;
    let pipe = cx.typed_pipeline("gather.axis", GATHER_OPERANDS, &GatherParams::LAYOUT, SRC);
    cx.launch_items(pipe, vec![x.range(), idx.range(), y.range()], &p, n as u64);
    Ok(())
}
