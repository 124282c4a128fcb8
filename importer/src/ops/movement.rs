//! Shape and data movement: Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
//! Expand, Concat, Split, Slice, Pad, Tile, DepthToSpace, SpaceToDepth,
//! ReverseSequence, CenterCropPad, Shape and Size. Operands that older opsets
//! took as attributes become constant inputs.

use rlx_ir::ops::{
    CenterCropPad, Concat, DepthToSpace, DepthToSpaceMode, Expand, Flatten, Pad, PadMode, Reshape,
    ReverseSequence, ShapeOf, Size, Slice, SpaceToDepth, Split, Squeeze, Tile, Transpose,
    Unsqueeze,
};
use rlx_ir::Value;

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("Reshape", 1, reshape);
    r.add("Flatten", 1, flatten);
    r.add("Squeeze", 1, squeeze);
    r.add("Unsqueeze", 1, unsqueeze);
    r.add("Transpose", 1, transpose);
    r.add("Expand", 8, expand);
    r.add("Concat", 1, concat);
    r.add("Split", 1, split);
    r.add("Slice", 1, slice);
    r.add("Pad", 1, pad);
    r.add("Tile", 1, tile);
    r.add("DepthToSpace", 1, depth_to_space);
    r.add("SpaceToDepth", 1, space_to_depth);
    r.add("ReverseSequence", 10, reverse_sequence);
    r.add("CenterCropPad", 18, center_crop_pad);
    r.add("Shape", 1, shape);
    r.add("Size", 1, size);
}

fn required(name: &str) -> MapError {
    MapError::Attr {
        name: name.into(),
        reason: "is required".into(),
    }
}

/// An operand that is an attribute before opset `since` and an input after.
fn ints_operand(
    cx: &mut NodeCtx,
    since: i64,
    attr: &str,
    input: usize,
) -> Result<Option<Value>, MapError> {
    if cx.opset < since {
        Ok(cx.attr_ints(attr)?.map(|v| cx.const_i64(&v)))
    } else {
        cx.input(input)
    }
}

fn reshape(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("consumed_inputs");
    let allowzero = cx.attr_bool("allowzero", false)?;
    let x = cx.req(0)?;
    let s = ints_operand(cx, 5, "shape", 1)?.ok_or_else(|| required("shape"))?;
    let y = cx.add1(Reshape { allowzero }, &[x, s])?;
    cx.set_output(0, y);
    Ok(())
}

fn flatten(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", 1)?;
    let x = cx.req(0)?;
    let y = cx.add1(Flatten { axis }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

fn squeeze(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let mut ins = vec![x];
    ins.extend(ints_operand(cx, 13, "axes", 1)?);
    let y = cx.add1(Squeeze {}, &ins)?;
    cx.set_output(0, y);
    Ok(())
}

fn unsqueeze(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let axes = ints_operand(cx, 13, "axes", 1)?.ok_or_else(|| required("axes"))?;
    let y = cx.add1(Unsqueeze {}, &[x, axes])?;
    cx.set_output(0, y);
    Ok(())
}

fn transpose(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let r = cx.rank(x) as i64;
    let perm = cx
        .attr_ints("perm")?
        .unwrap_or_else(|| (0..r).rev().collect());
    let y = cx.add1(Transpose { perm }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

fn expand(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, s) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(Expand {}, &[x, s])?;
    cx.set_output(0, y);
    Ok(())
}

fn concat(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = if cx.opset < 4 {
        cx.attr_i("axis", 1)?
    } else {
        cx.attr_i_opt("axis")?.ok_or_else(|| required("axis"))?
    };
    let xs = cx.all_inputs()?;
    let y = cx.add1(Concat { axis }, &xs)?;
    cx.set_output(0, y);
    Ok(())
}

fn split(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", 0)?;
    let x = cx.req(0)?;
    let n = cx.num_outputs();
    let sizes = if cx.opset < 13 {
        match cx.attr_ints("split")? {
            Some(v) => Some(cx.const_i64(&v)),
            None if cx.opset < 2 => cx.input(1)?,
            None => None,
        }
    } else {
        cx.input(1)?
    };
    if cx.opset >= 18 {
        if let Some(k) = cx.attr_i_opt("num_outputs")? {
            if k as usize != n {
                return Err(MapError::Attr {
                    name: "num_outputs".into(),
                    reason: format!("{k} but the node has {n} outputs"),
                });
            }
        }
    }
    let mut ins = vec![x];
    ins.extend(sizes);
    let ys = cx.add(
        Split {
            axis,
            num_outputs: n as i64,
        },
        &ins,
    )?;
    cx.set_outputs(&ys);
    Ok(())
}

fn slice(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let mut ins = vec![x];
    if cx.opset < 10 {
        let starts = cx.attr_ints("starts")?.ok_or_else(|| required("starts"))?;
        let ends = cx.attr_ints("ends")?.ok_or_else(|| required("ends"))?;
        let axes = cx.attr_ints("axes")?;
        let s = cx.const_i64(&starts);
        let e = cx.const_i64(&ends);
        ins.extend([s, e]);
        if let Some(a) = axes {
            let a = cx.const_i64(&a);
            ins.push(a);
        }
    } else {
        let (s, e) = (cx.req(1)?, cx.req(2)?);
        ins.extend([s, e]);
        let axes = cx.input(3)?;
        let steps = cx.input(4)?;
        match (axes, steps) {
            (Some(a), Some(st)) => ins.extend([a, st]),
            (Some(a), None) => ins.push(a),
            (None, Some(st)) => {
                let n = cx
                    .ty(s)
                    .shape
                    .0
                    .first()
                    .and_then(|d| d.known())
                    .ok_or_else(|| MapError::Unsupported("starts needs a known length".into()))?;
                let a = cx.const_i64(&(0..n).collect::<Vec<_>>());
                ins.extend([a, st]);
            }
            (None, None) => {}
        }
    }
    let y = cx.add1(Slice {}, &ins)?;
    cx.set_output(0, y);
    Ok(())
}

fn pad(cx: &mut NodeCtx) -> Result<(), MapError> {
    let allowed: &[&str] = if cx.opset >= 19 {
        &["constant", "reflect", "edge", "wrap"]
    } else {
        &["constant", "reflect", "edge"]
    };
    let mode = cx.attr_choice("mode", "constant", allowed)?;
    let mode = PadMode::from_name(&mode).unwrap_or(PadMode::Constant);
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    let (pads, value, axes) = if cx.opset < 11 {
        let name = if cx.opset < 2 { "paddings" } else { "pads" };
        let p = cx.attr_ints(name)?.ok_or_else(|| required(name))?;
        let v = cx.attr_f("value", 0.0)?;
        let pv = cx.const_i64(&p);
        let vv = cx.scalar(d, v as f64)?;
        (pv, vv, None)
    } else {
        let p = cx.req(1)?;
        let v = match cx.input(2)? {
            Some(v) => v,
            None => cx.scalar(d, 0.0)?,
        };
        (p, v, cx.input(3)?)
    };
    let mut ins = vec![x, pads, value];
    ins.extend(axes);
    let y = cx.add1(Pad { mode }, &ins)?;
    cx.set_output(0, y);
    Ok(())
}

fn tile(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let repeats = if cx.opset < 6 {
        let (tiles, axis) = (cx.req(1)?, cx.req(2)?);
        let (Some(t), Some(a)) = (cx.known_ints(tiles), cx.known_ints(axis)) else {
            return cx.unsupported("Tile-1 needs constant tiles and axis");
        };
        let r = cx.rank(x);
        let mut rep = vec![1i64; r];
        let a = if a[0] < 0 { a[0] + r as i64 } else { a[0] } as usize;
        *rep.get_mut(a)
            .ok_or_else(|| MapError::Unsupported("axis out of range".into()))? = t[0];
        cx.const_i64(&rep)
    } else {
        cx.req(1)?
    };
    let y = cx.add1(Tile {}, &[x, repeats])?;
    cx.set_output(0, y);
    Ok(())
}

fn depth_to_space(cx: &mut NodeCtx) -> Result<(), MapError> {
    let blocksize = cx
        .attr_i_opt("blocksize")?
        .ok_or_else(|| required("blocksize"))?;
    let mode = block_mode(cx)?;
    let x = cx.req(0)?;
    let y = cx.add1(DepthToSpace { blocksize, mode }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

/// The `mode` of DepthToSpace (opset 11) and SpaceToDepth (opset 28).
fn block_mode(cx: &mut NodeCtx) -> Result<DepthToSpaceMode, MapError> {
    let mode = cx.attr_choice("mode", "DCR", &["DCR", "CRD"])?;
    Ok(if mode == "CRD" {
        DepthToSpaceMode::Crd
    } else {
        DepthToSpaceMode::Dcr
    })
}

fn space_to_depth(cx: &mut NodeCtx) -> Result<(), MapError> {
    let blocksize = cx
        .attr_i_opt("blocksize")?
        .ok_or_else(|| required("blocksize"))?;
    let mode = block_mode(cx)?;
    let x = cx.req(0)?;
    let y = cx.add1(SpaceToDepth { blocksize, mode }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

fn reverse_sequence(cx: &mut NodeCtx) -> Result<(), MapError> {
    let batch_axis = cx.attr_i("batch_axis", 1)?;
    let time_axis = cx.attr_i("time_axis", 0)?;
    let (x, lens) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(
        ReverseSequence {
            batch_axis,
            time_axis,
        },
        &[x, lens],
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn center_crop_pad(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axes = cx.attr_ints("axes")?.unwrap_or_default();
    let (x, s) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(CenterCropPad { axes }, &[x, s])?;
    cx.set_output(0, y);
    Ok(())
}

fn shape(cx: &mut NodeCtx) -> Result<(), MapError> {
    let start = cx.attr_i("start", 0)?;
    let end = cx.attr_i_opt("end")?;
    let x = cx.req(0)?;
    let y = cx.add1(ShapeOf { start, end }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

fn size(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let y = cx.add1(Size {}, &[x])?;
    cx.set_output(0, y);
    Ok(())
}
