//! Softmax and LogSoftmax over one axis: a workgroup tree reduction per row.

use rlx_ir::ops::{Softmax, SoftmaxKind};
use rlx_ir::DType;

use super::{axis, u32_of, Cx, LResult};

const SRC: &str = include_str!("../../../../kernels/wgsl/softmax.wgsl");

pub fn lower(cx: &mut Cx, s: &Softmax) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    if x.dtype != DType::F32 {
        return Err(format!("softmax on {} has no wgpu kernel", x.dtype));
    }
    let kind = match s.kind {
        SoftmaxKind::Softmax => 0,
        SoftmaxKind::LogSoftmax => 1,
        SoftmaxKind::Hardmax => 2,
    };
    let a = axis(s.axis, x.dims.len())?;
    let len = x.dims.get(a).copied().unwrap_or(1);
    let inner: usize = x.dims.get(a + 1..).unwrap_or(&[]).iter().product();
    let rows = x.numel() / len.max(1);
    let p = vec![
        u32_of(rows, "rows")?,
        u32_of(len, "row length")?,
        u32_of(inner.max(1), "inner size")?,
        kind,
    ];
    let pipe = cx.pipeline("softmax.tree64", SRC);
    cx.dispatch(pipe, vec![x.range(), y.range()], p, rows as u64);
    Ok(())
}
