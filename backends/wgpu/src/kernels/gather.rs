//! Gather along one axis, with i32 or i64 indices (`wgsl/gather.wgsl`).

use rlx_ir::{DType, Op};

use super::movement::words;
use super::{axis, u32_of, Cx, LResult};

const SRC: &str = include_str!("../../../../kernels/wgsl/gather.wgsl");

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::Gather(g) = &cx.node.op else {
        return Err(format!("`{}` has no wgpu kernel", cx.node.op.name()));
    };
    let (x, idx, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let wide = match idx.dtype {
        DType::I32 => 0,
        DType::I64 => 1,
        d => return Err(format!("gather indices of {d} have no wgpu kernel")),
    };
    let a = axis(g.axis, x.dims.len())?;
    let len = x.dims.get(a).copied().unwrap_or(1);
    let inner: usize = x.dims.get(a + 1..).unwrap_or(&[]).iter().product();
    let n = y.numel();
    let p = vec![
        u32_of(n, "size")?,
        words(x.dtype)?,
        u32_of(len, "axis size")?,
        u32_of(inner, "inner size")?,
        u32_of(idx.numel().max(1), "index count")?,
        wide,
    ];
    let pipe = cx.pipeline("gather.axis", SRC);
    cx.dispatch_items(pipe, vec![x.range(), idx.range(), y.range()], p, n as u64);
    Ok(())
}
