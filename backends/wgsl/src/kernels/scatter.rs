//! ScatterElements and ScatterND (`kernels/wgsl/scatter.wgsl`): a dense copy
//! of the data, then the updates in order, planned by rlx-gpu's
//! `kernels::scatter`. Without a reduction any 4- or 8-byte dtype moves;
//! add, mul, max and min are f32 only.

use rlx_gpu::kernels::scatter::{
    elements_params, nd_params, reduction_code, Scatter, ScatterParams, SCATTER_OPERANDS,
};
use rlx_gpu::Params;
use rlx_ir::ops::ScatterReduction;
use rlx_ir::{DType, Node, Op, TensorType};

use super::movement::dense_copy;
use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only, movable};

const SRC: &str = include_str!("../../../../kernels/wgsl/scatter.wgsl");

/// 4- and 8-byte data (f32 with a reduction), i32 or i64 indices.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let r = match &node.op {
        Op::ScatterElements(s) => s.reduction,
        Op::ScatterNd(s) => s.reduction,
        op => return Err(format!("`{}` is not a scatter", op.name())),
    };
    let d = dtype_of(inputs, 0)?;
    movable("scatter", d)?;
    if r != ScatterReduction::None {
        f32_only("scatter with a reduction", d)?;
    }
    match dtype_of(inputs, 1)? {
        DType::I32 | DType::I64 => Ok(()),
        d => Err(format!("scatter indices of {d} have no WGSL kernel")),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (x, idx, upd, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.input(2)?.clone(),
        cx.output(0)?.clone(),
    );
    let reduction = match &cx.node.op {
        Op::ScatterElements(s) => s.reduction,
        Op::ScatterNd(s) => s.reduction,
        op => return Err(format!("`{}` is not a scatter", op.name())),
    };
    let s = Scatter {
        size: x.dtype.size(),
        reduction: reduction_code(reduction, x.dtype == DType::F32)?,
        wide: idx.dtype == DType::I64,
    };
    dense_copy(cx, &x, &y)?;
    if upd.numel() == 0 {
        return Ok(());
    }
    let p = match &cx.node.op {
        Op::ScatterElements(e) => elements_params(s, &x.dims, &idx.dims, &upd.dims, e.axis)?,
        _ => nd_params(s, &x.dims, &idx.dims, upd.numel())?,
    };
    let pipe = cx.typed_pipeline("scatter", SCATTER_OPERANDS, &ScatterParams::LAYOUT, SRC);
    let ops = vec![idx.range(), upd.range(), y.range()];
    cx.launch_items(pipe, ops, &p, u64::from(p.items));
    Ok(())
}
