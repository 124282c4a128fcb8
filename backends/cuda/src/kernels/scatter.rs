//! ScatterElements and ScatterND on CUDA (`kernels/cuda/scatter.cu`): a
//! dense copy of the data, then the updates in order (duplicates as the CPU
//! backend applies them), planned by rlx-gpu's `kernels::scatter`. Every
//! numeric dtype with every reduction; bool without one.

use rlx_gpu::kernels::scatter::{elements_params, nd_params, Scatter, ScatterParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::ops::ScatterReduction;
use rlx_ir::{DType, Node, Op, TensorType};

use super::movement::dense_copy;
use super::{dtype_of, num_name, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "scatter",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/scatter.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![ScatterParams::LAYOUT]
}

fn reduction(op: &Op) -> LResult<ScatterReduction> {
    match op {
        Op::ScatterElements(s) => Ok(s.reduction),
        Op::ScatterNd(s) => Ok(s.reduction),
        op => Err(format!("`{}` is not a scatter", op.name())),
    }
}

/// The kernel's reduction code (rlx-gpu's numbering, every dtype).
fn code(r: ScatterReduction) -> u32 {
    match r {
        ScatterReduction::None => 0,
        ScatterReduction::Add => 1,
        ScatterReduction::Mul => 2,
        ScatterReduction::Max => 3,
        ScatterReduction::Min => 4,
    }
}

/// The entry's dtype name: bool moves as u8 (no reduction).
fn entry_type(d: DType, r: ScatterReduction) -> LResult<&'static str> {
    if d == DType::Bool && r == ScatterReduction::None {
        return Ok("u8");
    }
    num_name(d).ok_or_else(|| format!("scatter `{}` on {d} has no cuda kernel", r.name()))
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let r = reduction(&node.op)?;
    entry_type(dtype_of(inputs, 0)?, r)?;
    match dtype_of(inputs, 1)? {
        DType::I32 | DType::I64 => Ok(()),
        d => Err(format!(
            "{} indices of {d} have no cuda kernel",
            node.op.name()
        )),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (x, idx, upd, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.input(2)?.clone(),
        cx.output(0)?.clone(),
    );
    let r = reduction(&cx.node.op)?;
    let t = entry_type(x.dtype, r)?;
    dense_copy(cx, &x, &y)?;
    if upd.numel() == 0 {
        return Ok(());
    }
    // `words` is WGSL's; CUDA instantiates per dtype.
    let s = Scatter {
        size: x.dtype.size().max(4),
        reduction: code(r),
        wide: idx.dtype == DType::I64,
    };
    let p = match &cx.node.op {
        Op::ScatterElements(e) => elements_params(s, &x.dims, &idx.dims, &upd.dims, e.axis)?,
        _ => nd_params(s, &x.dims, &idx.dims, upd.numel())?,
    };
    let m = cx.modules.of(&SOURCE);
    let ops = vec![idx.range(), upd.range(), y.range()];
    cx.items(m, &format!("scatter_{t}"), u64::from(p.items), ops, &p);
    Ok(())
}
