//! Pooling on CUDA (`kernels/cuda/pool.cu`): max, average and lp pooling
//! over 1 to 3 spatial dims (ceil mode, count_include_pad, dilations) and
//! LRN, planned by rlx-gpu's `kernels::pool` (the structs the WGSL kernels
//! read). Own kernels rather than cuDNN pooling, whose ceil mode, dilations
//! and NaN handling differ from the CPU backend's.

use rlx_gpu::geometry::LResult;
use rlx_gpu::kernels::pool::{lrn_params, pool_kind, pool_params, LrnParams, PoolParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::ops::PoolKind;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, Source};

pub const SOURCE: Source = Source {
    name: "pool",
    source: concat!(include_str!("../../../../kernels/cuda/pool.cu")),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![PoolParams::LAYOUT, LrnParams::LAYOUT]
}

fn suffix(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I8 => "i8",
        DType::U8 => "u8",
        _ => return None,
    })
}

/// The entry point of `node` on `d`, or why there is none.
fn entry(node: &Node, d: DType, outputs: usize) -> LResult<String> {
    let refuse = |what: &str| format!("{what} on {d} has no cuda kernel");
    let s = suffix(d).ok_or_else(|| refuse(node.op.name()))?;
    let float = d.is_float();
    match &node.op {
        Op::Pool(p) => {
            if p.kind == PoolKind::Max && (p.with_indices || outputs > 1) {
                return Err("max pooling with indices has no cuda kernel".into());
            }
            match p.kind {
                PoolKind::Max => Ok(format!("pool_max_{s}")),
                _ if float => Ok(format!("pool_avg_{s}")),
                _ => Err(refuse(node.op.name())),
            }
        }
        Op::Lrn(_) if float => Ok(format!("lrn_{s}")),
        op => Err(refuse(op.name())),
    }
}

/// Pooling on floats (max also on i8 and u8) over 1 to 3 spatial dims,
/// without the indices output; LRN on floats.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let x = inputs.first().ok_or("the input is missing")?;
    entry(node, x.dtype, node.outputs.len())?;
    if let Op::Pool(_) = node.op {
        let sp = x.shape.rank().saturating_sub(2);
        if !(1..=3).contains(&sp) {
            return Err(format!(
                "pooling over {sp} spatial dims has no cuda kernel (1-D to 3-D)"
            ));
        }
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    let entry = entry(cx.node, x.dtype, cx.io.outs.len())?;
    let m = cx.modules.of(&SOURCE);
    let blocks = (y.numel() as u64).div_ceil(256).clamp(1, 65535 * 16);
    let operands = vec![y.range(), x.range()];
    match &cx.node.op {
        Op::Pool(p) => {
            let kind = pool_kind(p.kind, p.with_indices)?;
            let params = pool_params(p, kind, &x.dims, &y.dims)?;
            cx.kernel_params(m, &entry, blocks, 256, operands, &params);
        }
        Op::Lrn(l) => {
            let params = lrn_params(l, &x.dims)?;
            cx.kernel_params(m, &entry, blocks, 256, operands, &params);
        }
        op => return Err(format!("`{}` is not a pooling op", op.name())),
    }
    Ok(())
}
