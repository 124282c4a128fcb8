//! Resize on CUDA (`kernels/cuda/resize.cu`): one launch per resampled axis,
//! planned by rlx-gpu's `kernels::resize` (taps from the constant scales,
//! sizes and roi, as the CPU backend computes them). Each pass's tap table
//! is constant data placed in the buffer ([`Cx::constant`]); passes between
//! the first and last write scratch. Every numeric dtype.

use rlx_gpu::kernels::resize::{passes, tap_table, ResizeAxisParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::ops::ResizeTarget;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, num_name, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "resize",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/resize.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![ResizeAxisParams::LAYOUT]
}

pub fn supports(_node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    num_name(d)
        .map(|_| ())
        .ok_or_else(|| format!("resize of {d} has no cuda kernel"))
}

/// The dtype passes between the first and last compute in.
fn between(d: DType) -> DType {
    match d {
        DType::F32 | DType::F16 | DType::BF16 => DType::F32,
        _ => DType::F64,
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::Resize(r) = &cx.node.op.clone() else {
        return Err(format!("`{}` is not a resize", cx.node.op.name()));
    };
    let x = cx.input(0)?.clone();
    let y = cx.output(0)?.clone();
    let rank = x.dims.len();
    let input: Vec<i64> = x.dims.iter().map(|&d| d as i64).collect();
    let roi = if cx.io.ins.len() > 1 && cx.input(1)?.numel() > 0 {
        cx.floats(1)
            .ok_or("the resize roi must be a constant (the cuda plan reads it)")?
    } else {
        Vec::new()
    };
    let (scales, sizes) = match r.target {
        ResizeTarget::Scales => (
            Some(
                cx.floats(2)
                    .ok_or("resize scales must be a constant (the cuda plan reads them)")?,
            ),
            None,
        ),
        ResizeTarget::Sizes => (None, Some(cx.ints(2)?.ok_or("resize sizes must be given")?)),
    };
    let (out, sc) = r
        .resolve(&input, scales.as_deref(), sizes.as_deref(), &roi)
        .map_err(|e| e.to_string())?;
    if out.len() != rank || out.iter().zip(&y.dims).any(|(&a, &b)| a != b as i64) {
        return Err(format!(
            "resize computes output {out:?} where the plan has {:?}",
            y.dims
        ));
    }
    let plans = passes(r, &x.dims, &out, &sc, &roi)?;
    let mid = between(x.dtype);
    let name = |d: DType| num_name(d).ok_or_else(|| format!("resize of {d} has no cuda kernel"));
    let m = cx.modules.of(&SOURCE);
    let (mut src, mut src_t) = (x.range(), x.dtype);
    let count = plans.len();
    for (i, pass) in plans.iter().enumerate() {
        let (p, table, items) = tap_table(pass, r.extrapolation_value)?;
        let taps = cx.constant(table);
        let (dst, dst_t) = if i + 1 == count {
            (y.range(), y.dtype)
        } else {
            let bytes = pass.out_dims().iter().product::<usize>() * mid.size();
            (cx.scratch((bytes as u64).max(8)), mid)
        };
        let entry = format!("resize_{}_{}", name(src_t)?, name(dst_t)?);
        cx.items(m, &entry, items, vec![src, taps, dst], &p);
        (src, src_t) = (dst, dst_t);
    }
    Ok(())
}
