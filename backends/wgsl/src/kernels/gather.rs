//! Gather along one axis, with i32 or i64 indices (`kernels/wgsl/gather.wgsl`
//! for 4- and 8-byte elements, `kernels/wgsl/gather_bytes.wgsl` for 1- and
//! 2-byte ones: bool masks, int8, f16), planned by rlx-gpu's `kernels::gather`.

use rlx_gpu::kernels::gather::{
    gather_bytes_params, gather_nd_params, gather_params, GatherBytesParams, GatherNdParams,
    GatherParams, GATHER_ND_OPERANDS, GATHER_OPERANDS,
};
use rlx_gpu::Params;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, LResult};
use crate::support::{copyable, dtype_of};

const SRC: &str = include_str!("../../../../kernels/wgsl/gather.wgsl");
const BYTES: &str = include_str!("../../../../kernels/wgsl/gather_bytes.wgsl");
const ND: &str = include_str!("../../../../kernels/wgsl/gather_nd.wgsl");
const ND_BYTES: &str = include_str!("../../../../kernels/wgsl/gather_nd_bytes.wgsl");
const ND_TUPLE: &str = include_str!("../../../../kernels/wgsl/gather_nd_tuple.wgsl");

/// 1-, 2-, 4- and 8-byte elements, i32 or i64 indices.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    copyable(node.op.name(), dtype_of(inputs, 0)?)?;
    match dtype_of(inputs, 1)? {
        DType::I32 | DType::I64 => Ok(()),
        d => Err(format!("gather indices of {d} have no WGSL kernel")),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let g = match &cx.node.op {
        Op::Gather(g) => g,
        Op::GatherNd(_) => return lower_nd(cx),
        op => return Err(format!("`{}` has no WGSL kernel", op.name())),
    };
    let (x, idx, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let n = y.numel();
    let size = x.dtype.size();
    if matches!(size, 1 | 2) {
        let p = gather_bytes_params(
            &x.dims,
            g.axis,
            size,
            idx.numel(),
            idx.dtype == DType::I64,
            n,
        )?;
        let pipe = cx.typed_pipeline(
            "gather.bytes",
            GATHER_OPERANDS,
            &GatherBytesParams::LAYOUT,
            BYTES,
        );
        let words = (n * size).div_ceil(4);
        cx.launch_items(
            pipe,
            vec![x.range(), idx.range(), y.range()],
            &p,
            words as u64,
        );
        return Ok(());
    }
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

/// GatherND (one pipeline per element size: words per element, or bytes
/// per packed element, are a constant of the kernel).
fn lower_nd(cx: &mut Cx) -> LResult<()> {
    let Op::GatherNd(g) = &cx.node.op else {
        return Err(format!("`{}` is not a gather_nd", cx.node.op.name()));
    };
    let (x, idx, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let b = usize::try_from(g.batch_dims).map_err(|_| "negative batch_dims")?;
    let p = gather_nd_params(&x.dims, &idx.dims, b, idx.dtype == DType::I64)?;
    let n = y.numel();
    if p.n as usize != n {
        return Err(format!("gather_nd gives {} elements, the plan {n}", p.n));
    }
    let size = x.dtype.size();
    // Words of 4- and 8-byte elements, or elements of 1 and 2 bytes packed
    // per output word.
    let (name, body, items) = match size {
        4 | 8 => {
            let words = size / 4;
            let body = format!("const WORDS: u32 = {words}u;\n{ND_TUPLE}\n{ND}");
            (format!("gather_nd.w{words}"), body, n)
        }
        1 | 2 => {
            let body = format!("const SIZE: u32 = {size}u;\n{ND_TUPLE}\n{ND_BYTES}");
            (format!("gather_nd.b{size}"), body, (n * size).div_ceil(4))
        }
        _ => {
            return Err(format!(
                "gather_nd of {} elements has no WGSL kernel",
                x.dtype
            ))
        }
    };
    let pipe = cx.typed_pipeline(&name, GATHER_ND_OPERANDS, &GatherNdParams::LAYOUT, &body);
    cx.launch_items(
        pipe,
        vec![x.range(), idx.range(), y.range()],
        &p,
        items as u64,
    );
    Ok(())
}
