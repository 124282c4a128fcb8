//! Indexing: Gather, GatherElements, GatherND, Scatter/ScatterElements,
//! ScatterND, TensorScatter, OneHot, Compress, NonZero, Unique and Trilu.

use rlx_ir::ops::{
    Compress, Gather, GatherElements, GatherNd, NonZero, OneHot, ScatterElements, ScatterNd,
    ScatterReduction, TensorScatter, Trilu, Unique,
};

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("Gather", 1, gather);
    r.add("GatherElements", 11, gather_elements);
    r.add("GatherND", 11, gather_nd);
    r.add("Scatter", 9, scatter_elements);
    r.add("ScatterElements", 11, scatter_elements);
    r.add("ScatterND", 11, scatter_nd);
    r.add("TensorScatter", 24, tensor_scatter);
    r.add("OneHot", 9, one_hot);
    r.add("Compress", 9, compress);
    r.add("NonZero", 9, nonzero);
    r.add("Unique", 11, unique);
    r.add("Trilu", 14, trilu);
}

fn gather(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", 0)?;
    let (x, i) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(Gather { axis }, &[x, i])?;
    cx.set_output(0, y);
    Ok(())
}

fn gather_elements(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", 0)?;
    let (x, i) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(GatherElements { axis }, &[x, i])?;
    cx.set_output(0, y);
    Ok(())
}

fn gather_nd(cx: &mut NodeCtx) -> Result<(), MapError> {
    let batch_dims = cx.attr_i("batch_dims", 0)?;
    let (x, i) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(GatherNd { batch_dims }, &[x, i])?;
    cx.set_output(0, y);
    Ok(())
}

fn reduction(cx: &mut NodeCtx) -> Result<ScatterReduction, MapError> {
    let r = cx.attr_choice("reduction", "none", &["none", "add", "mul", "max", "min"])?;
    Ok(ScatterReduction::from_name(&r).unwrap_or(ScatterReduction::None))
}

fn scatter_elements(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", 0)?;
    let reduction = reduction(cx)?;
    let (x, i, u) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let y = cx.add1(ScatterElements { axis, reduction }, &[x, i, u])?;
    cx.set_output(0, y);
    Ok(())
}

fn scatter_nd(cx: &mut NodeCtx) -> Result<(), MapError> {
    let reduction = reduction(cx)?;
    let (x, i, u) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let y = cx.add1(ScatterNd { reduction }, &[x, i, u])?;
    cx.set_output(0, y);
    Ok(())
}

fn one_hot(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", -1)?;
    let (i, d, v) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let y = cx.add1(OneHot { axis }, &[i, d, v])?;
    cx.set_output(0, y);
    Ok(())
}

fn compress(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i_opt("axis")?;
    let (x, c) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(Compress { axis }, &[x, c])?;
    cx.set_output(0, y);
    Ok(())
}

fn nonzero(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let y = cx.add1(NonZero {}, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

fn unique(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i_opt("axis")?;
    let sorted = cx.attr_bool("sorted", true)?;
    let x = cx.req(0)?;
    let ys = cx.add(Unique { axis, sorted }, &[x])?;
    cx.set_outputs(&ys);
    Ok(())
}

pub(crate) fn trilu(cx: &mut NodeCtx) -> Result<(), MapError> {
    let upper = cx.attr_bool("upper", true)?;
    let x = cx.req(0)?;
    let mut ins = vec![x];
    if let Some(k) = cx.input(1)? {
        ins.push(k);
    }
    let y = cx.add1(Trilu { upper }, &ins)?;
    cx.set_output(0, y);
    Ok(())
}

fn tensor_scatter(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", -2)?;
    let mode = cx.attr_choice("mode", "linear", &["linear", "circular"])?;
    let (past, update) = (cx.req(0)?, cx.req(1)?);
    let indices = cx.input(2)?;
    let mut ins = vec![past, update];
    ins.extend(indices);
    let op = TensorScatter {
        axis,
        circular: mode == "circular",
        has_indices: indices.is_some(),
    };
    let y = cx.add1(op, &ins)?;
    cx.set_output(0, y);
    Ok(())
}
