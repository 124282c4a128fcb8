//! NllLoss (`wgsl/loss.wgsl`): per element, or summed / averaged by one
//! workgroup tree reduction.

use rlx_ir::ops::{LossReduction, NllLoss};
use rlx_ir::DType;

use super::{u32_of, Cx, LResult};

const SRC: &str = include_str!("../../../../kernels/wgsl/loss.wgsl");

pub fn lower(cx: &mut Cx, l: &NllLoss) -> LResult<()> {
    let (x, t, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let w = cx.ins.get(2).cloned();
    if x.dtype != DType::F32 {
        return Err(format!("nll_loss on {} has no wgpu kernel", x.dtype));
    }
    let wide = match t.dtype {
        DType::I32 => 0,
        DType::I64 => 1,
        d => return Err(format!("nll_loss targets of {d} have no wgpu kernel")),
    };
    if x.dims.len() < 2 {
        return Err("nll_loss needs an input of rank 2 or more".into());
    }
    let c = x.dims[1];
    if w.as_ref().is_some_and(|w| w.numel() != c) {
        return Err("nll_loss weights do not match the classes".into());
    }
    let inner: usize = x.dims[2..].iter().product();
    let count = t.numel();
    let mode = match l.reduction {
        LossReduction::None => 0,
        LossReduction::Sum => 1,
        LossReduction::Mean => 2,
    };
    let ignore = l.ignore_index.and_then(|v| i32::try_from(v).ok());
    let p = vec![
        u32_of(count, "targets")?,
        u32_of(c, "classes")?,
        u32_of(inner.max(1), "inner size")?,
        wide,
        u32::from(w.is_some()),
        mode,
        u32::from(ignore.is_some()),
        ignore.unwrap_or(0) as u32,
    ];
    let pipe = cx.pipeline("loss.nll", SRC);
    let wr = w.as_ref().map_or(x.range(), |w| w.range());
    let groups = if mode == 0 {
        (count as u64).div_ceil(64)
    } else {
        1
    };
    cx.dispatch(pipe, vec![x.range(), t.range(), wr, y.range()], p, groups);
    Ok(())
}
