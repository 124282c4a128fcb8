//! Max, average and lp pooling (1-D to 3-D, `kernels/wgsl/pool.wgsl`) and
//! LRN (`kernels/wgsl/lrn.wgsl`), planned by rlx-gpu's `kernels::pool`.

use rlx_gpu::kernels::pool::{
    lrn_params, pool_kind, pool_params, LrnParams, PoolParams, LRN_OPERANDS, POOL_OPERANDS,
};
use rlx_gpu::Params;
use rlx_ir::ops::{Lrn, Pool, PoolKind};
use rlx_ir::{Node, Op, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only};

const POOL: &str = include_str!("../../../../kernels/wgsl/pool.wgsl");
const LRN: &str = include_str!("../../../../kernels/wgsl/lrn.wgsl");

/// f32 pooling over 1 to 3 spatial dims (max pooling without indices), and
/// f32 LRN.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    match &node.op {
        Op::Pool(p) => {
            f32_only("pooling", dtype_of(inputs, 0)?)?;
            if p.kind == PoolKind::Max && node.outputs.len() > 1 {
                return Err("max pooling with indices has no WGSL kernel".into());
            }
            let r = inputs.first().map_or(0, |t| t.shape.rank());
            if (3..=5).contains(&r) {
                Ok(())
            } else {
                Err(format!(
                    "pooling over {} spatial dims has no WGSL kernel (1-D to 3-D)",
                    r.saturating_sub(2)
                ))
            }
        }
        Op::Lrn(_) => f32_only("lrn", dtype_of(inputs, 0)?),
        op => Err(format!("`{}` is not a pooling op", op.name())),
    }
}

pub fn lower(cx: &mut Cx, p: &Pool) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    let kind = pool_kind(p.kind, cx.outs.len() > 1)?;
    let params = pool_params(p, kind, &x.dims, &y.dims)?;
    let pipe = cx.typed_pipeline("pool.3d", POOL_OPERANDS, &PoolParams::LAYOUT, POOL);
    cx.launch_items(pipe, vec![x.range(), y.range()], &params, y.numel() as u64);
    Ok(())
}

pub fn lower_lrn(cx: &mut Cx, l: &Lrn) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    let params = lrn_params(l, &x.dims)?;
    let pipe = cx.typed_pipeline("lrn", LRN_OPERANDS, &LrnParams::LAYOUT, LRN);
    cx.launch_items(pipe, vec![x.range(), y.range()], &params, y.numel() as u64);
    Ok(())
}
