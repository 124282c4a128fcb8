//! ScatterElements and ScatterND (`wgsl/scatter.wgsl`): a dense copy of the
//! data, then the updates in order. Without a reduction any 4- or 8-byte
//! dtype moves; add, mul, max and min are f32 only.

use rlx_ir::ops::ScatterReduction;
use rlx_ir::{DType, Op};

use super::movement::{dense_copy, words};
use super::{axis, strides, u32_of, Cx, LResult};

const SRC: &str = include_str!("../../../../kernels/wgsl/scatter.wgsl");

const MAX_RANK: usize = 8;

fn reduction(r: ScatterReduction, d: DType) -> LResult<u32> {
    let code = match r {
        ScatterReduction::None => return Ok(0),
        ScatterReduction::Add => 1,
        ScatterReduction::Mul => 2,
        ScatterReduction::Max => 3,
        ScatterReduction::Min => 4,
    };
    if d != DType::F32 {
        return Err(format!(
            "scatter with a reduction on {d} has no wgpu kernel (f32 only)"
        ));
    }
    Ok(code)
}

fn wide(d: DType) -> LResult<u32> {
    match d {
        DType::I32 => Ok(0),
        DType::I64 => Ok(1),
        d => Err(format!("scatter indices of {d} have no wgpu kernel")),
    }
}

fn pad8(v: &[usize], what: &str) -> LResult<[u32; MAX_RANK]> {
    let mut o = [1u32; MAX_RANK];
    for (i, &x) in v.iter().enumerate() {
        o[i] = u32_of(x, what)?;
    }
    Ok(o)
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (x, idx, upd, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.input(2)?.clone(),
        cx.output(0)?.clone(),
    );
    let rank = x.dims.len();
    if rank > MAX_RANK || upd.dims.len() > MAX_RANK {
        return Err(format!(
            "scatter over rank {rank} has no wgpu kernel (8 at most)"
        ));
    }
    let w = words(x.dtype)?;
    let iw = wide(idx.dtype)?;
    dense_copy(cx, &x, &y)?;
    if upd.numel() == 0 {
        return Ok(());
    }
    let mut p;
    let items;
    match &cx.node.op.clone() {
        Op::ScatterElements(s) => {
            if idx.dims != upd.dims || upd.dims.len() != rank {
                return Err(
                    "scatter_elements indices and updates must have the data's rank and one shape"
                        .into(),
                );
            }
            let a = axis(s.axis, rank)?;
            items = upd.numel() / upd.dims[a].max(1);
            p = vec![
                0,
                w,
                reduction(s.reduction, x.dtype)?,
                iw,
                u32_of(items, "lines")?,
                rank as u32,
                a as u32,
                u32_of(x.dims[a], "axis size")?,
            ];
            p.extend(pad8(&upd.dims, "a dim")?);
            p.extend(pad8(&strides(&upd.dims), "a stride")?);
            p.extend(pad8(&strides(&x.dims), "a stride")?);
        }
        Op::ScatterNd(s) => {
            let k = *idx
                .dims
                .last()
                .ok_or("scatter_nd indices need rank 1 or more")?;
            if k == 0 || k > rank {
                return Err(format!(
                    "scatter_nd index tuples of {k} for data of rank {rank}"
                ));
            }
            let slice: usize = x.dims[k..].iter().product();
            let tuples = idx.numel() / k;
            if upd.numel() != tuples * slice {
                return Err("scatter_nd updates do not match indices and data".into());
            }
            items = slice;
            p = vec![
                1,
                w,
                reduction(s.reduction, x.dtype)?,
                iw,
                u32_of(items, "slice size")?,
                u32_of(slice, "slice size")?,
                u32_of(tuples, "index tuples")?,
                k as u32,
            ];
            p.extend(pad8(&x.dims, "a dim")?);
            p.extend(pad8(&strides(&x.dims), "a stride")?);
        }
        op => return Err(format!("`{}` is not a scatter", op.name())),
    }
    let pipe = cx.pipeline("scatter", SRC);
    cx.dispatch_items(
        pipe,
        vec![idx.range(), upd.range(), y.range()],
        p,
        items as u64,
    );
    Ok(())
}
