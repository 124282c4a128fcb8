//! Reductions (reduce_*, global pools, argmax/argmin) onto the workgroup tree
//! reductions in `kernels/wgsl/reduce.wgsl` (f32) and
//! `kernels/wgsl/reduce_int.wgsl` (32- and 64-bit integers on u32 pairs): one
//! workgroup per output element, planned by rlx-gpu's `kernels::reduce`.

use rlx_gpu::kernels::reduce::{
    reduce_params, reduction, ReduceIntParams, ReduceParams, REDUCE_OPERANDS,
};
use rlx_gpu::Params;
use rlx_ir::ops::ReduceKind;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only};

const SRC: &str = include_str!("../../../../kernels/wgsl/reduce.wgsl");
const SRC_INT: &str = concat!(
    include_str!("../../../../kernels/wgsl/int64.wgsl"),
    "\n",
    include_str!("../../../../kernels/wgsl/reduce_int.wgsl")
);

/// How `op` reduces integers of dtype `d`: the `reduce_int.wgsl` words
/// (wide, signed), or why it has no kernel. Means are exact only where the
/// 64-bit sum cannot overflow (32-bit inputs); float-valued kinds are refused.
pub fn int_mode(op: &Op, d: DType) -> LResult<[u32; 2]> {
    let mode = match d {
        DType::I32 => [0, 1],
        DType::U32 => [0, 0],
        DType::I64 => [1, 1],
        DType::U64 => [1, 0],
        d => {
            return Err(format!(
                "reductions on {d} have no WGSL kernel (f32, 32- and 64-bit integers only)"
            ))
        }
    };
    let why = match op {
        Op::ArgReduce(_) => return Ok(mode),
        Op::Reduce(r) => match r.kind {
            ReduceKind::Sum
            | ReduceKind::Max
            | ReduceKind::Min
            | ReduceKind::Prod
            | ReduceKind::L1
            | ReduceKind::SumSquare => return Ok(mode),
            ReduceKind::Mean if mode[0] == 0 => return Ok(mode),
            ReduceKind::Mean => " (an exact mean needs a sum wider than 64 bits)",
            _ => " (float-valued reductions of integers are not emulated)",
        },
        _ => "",
    };
    Err(format!("`{}` on {d} has no WGSL kernel{why}", op.name()))
}

/// f32 reductions, and integer ones where [`int_mode`] has a kernel.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    match dtype_of(inputs, 0)? {
        DType::F32 => Ok(()),
        _ if matches!(node.op, Op::GlobalPool(_)) => {
            f32_only("global pooling", dtype_of(inputs, 0)?)
        }
        d => int_mode(&node.op, d).map(|_| ()),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    let int = match x.dtype {
        DType::F32 => None,
        d => Some(int_mode(&cx.node.op, d)?),
    };
    let axes = match cx.node.op {
        Op::Reduce(_) => cx.ints(1)?,
        _ => None,
    };
    let (kind, axes, select_last) = reduction(&cx.node.op, x.dims.len(), axes.as_deref())?;
    let p = reduce_params(&x.dims, &axes, kind, select_last)?;
    let ops = vec![x.range(), y.range()];
    let n_out = y.numel() as u64;
    match int {
        Some([wide, signed]) => {
            let pipe = cx.typed_pipeline(
                "reduce.int_tree64",
                REDUCE_OPERANDS,
                &ReduceIntParams::LAYOUT,
                SRC_INT,
            );
            let p = ReduceIntParams::of(p, wide != 0, signed != 0);
            cx.launch_params(pipe, ops, &p, n_out);
        }
        None => {
            let pipe =
                cx.typed_pipeline("reduce.tree64", REDUCE_OPERANDS, &ReduceParams::LAYOUT, SRC);
            cx.launch_params(pipe, ops, &p, n_out);
        }
    }
    Ok(())
}
