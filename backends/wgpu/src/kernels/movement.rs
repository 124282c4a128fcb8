//! Data movement through strided index kernels: transpose, slice, concat,
//! split, expand, depth/space rearrangement (`wgsl/copy.wgsl`), and pad and
//! tile (`wgsl/pad.wgsl`). Elements of 4 and 8 bytes everywhere; 1- and 2-byte
//! elements in dense copies (not into part of a tensor, not pad or tile).

use rlx_ir::ops::{slice_params, slice_range, DepthToSpaceMode, PadMode};
use rlx_ir::{DType, Op};

use super::elementwise::broadcast_strides;
use super::{axis, strides, u32_of, Cx, LResult, Operand};
use crate::schedule::Range;

const COPY: &str = include_str!("../../../../kernels/wgsl/copy.wgsl");
const PAD: &str = include_str!("../../../../kernels/wgsl/pad.wgsl");
const MAX_RANK: usize = 8;

/// Words per element of `d`.
pub fn words(d: DType) -> LResult<u32> {
    match d.size() {
        4 => Ok(1),
        8 => Ok(2),
        _ => Err(format!(
            "moving {d} elements has no wgpu kernel (4- and 8-byte dtypes only)"
        )),
    }
}

/// One strided copy: `dims` of the output view, element strides and starts.
struct Copy<'a> {
    x: Range,
    y: Range,
    dtype: DType,
    dims: &'a [usize],
    xs: &'a [i64],
    ys: &'a [usize],
    x0: usize,
    y0: usize,
}

fn emit_copy(cx: &mut Cx, c: Copy) -> LResult<()> {
    if c.dims.len() > MAX_RANK {
        return Err(format!(
            "movement over rank {} has no wgpu kernel",
            c.dims.len()
        ));
    }
    let n: usize = c.dims.iter().product();
    let size = c.dtype.size();
    let sub_word = matches!(size, 1 | 2) && c.dtype.packed_bits() == size * 8;
    if !sub_word {
        words(c.dtype)?;
    } else if c.y0 != 0 || c.ys != strides(c.dims).as_slice() {
        return Err(format!(
            "writing {} elements into part of a tensor (concat) has no wgpu kernel",
            c.dtype
        ));
    }
    let items = if sub_word { n.div_ceil(4 / size) } else { n };
    let mut p = vec![
        u32_of(n, "size")?,
        size as u32,
        c.dims.len() as u32,
        u32_of(c.x0, "offset")?,
        u32_of(c.y0, "offset")?,
    ];
    let mut dims = [1u32; MAX_RANK];
    let mut xs = [0u32; MAX_RANK];
    let mut ys = [0u32; MAX_RANK];
    for i in 0..c.dims.len() {
        dims[i] = u32_of(c.dims[i], "a dim")?;
        xs[i] = i32::try_from(c.xs[i]).map_err(|_| "stride out of the i32 range")? as u32;
        ys[i] = u32_of(c.ys[i], "a stride")?;
    }
    p.extend(dims);
    p.extend(xs);
    p.extend(ys);
    let pipe = cx.pipeline("movement.copy", COPY);
    cx.dispatch_items(pipe, vec![c.x, c.y], p, items as u64);
    Ok(())
}

/// A dense copy of `x` into `y` (same shape, 4- or 8-byte elements).
pub fn dense_copy(cx: &mut Cx, x: &Operand, y: &Operand) -> LResult<()> {
    let xs = i64s(&strides(&x.dims));
    plain(cx, x, y, &x.dims, &xs, 0)
}

fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

fn plain(
    cx: &mut Cx,
    x: &Operand,
    y: &Operand,
    dims: &[usize],
    xs: &[i64],
    x0: usize,
) -> LResult<()> {
    emit_copy(
        cx,
        Copy {
            x: x.range(),
            y: y.range(),
            dtype: y.dtype,
            dims,
            xs,
            ys: &strides(dims),
            x0,
            y0: 0,
        },
    )
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let x = cx.input(0)?.clone();
    let y = cx.output(0)?.clone();
    if matches!(cx.node.op, Op::Pad(_) | Op::Tile(_)) {
        words(x.dtype)?;
    }
    let xst = strides(&x.dims);
    match &cx.node.op.clone() {
        Op::Transpose(t) => {
            let perm: Vec<usize> = if t.perm.is_empty() {
                (0..x.dims.len()).rev().collect()
            } else {
                t.perm
                    .iter()
                    .map(|&p| axis(p, x.dims.len()))
                    .collect::<LResult<_>>()?
            };
            let xs: Vec<i64> = perm.iter().map(|&p| xst[p] as i64).collect();
            plain(cx, &x, &y, &y.dims, &xs, 0)
        }
        Op::Expand(_) => {
            let xs = i64s(&broadcast_strides(&x.dims, &y.dims)?);
            plain(cx, &x, &y, &y.dims, &xs, 0)
        }
        Op::Slice(_) => {
            let starts = cx.ints(1)?.ok_or("slice needs starts")?;
            let ends = cx.ints(2)?.ok_or("slice needs ends")?;
            let axes = cx.ints(3)?;
            let steps = cx.ints(4)?;
            let ps = slice_params(
                &starts,
                &ends,
                axes.as_deref(),
                steps.as_deref(),
                x.dims.len(),
            )
            .map_err(|e| e.to_string())?;
            let mut xs = i64s(&xst);
            let mut x0: i64 = 0;
            for (a, s, e, step) in ps {
                let (start, _) = slice_range(x.dims[a] as i64, s, e, step);
                x0 += start * xst[a] as i64;
                xs[a] *= step;
            }
            plain(cx, &x, &y, &y.dims, &xs, x0 as usize)
        }
        Op::Concat(c) => {
            let a = axis(c.axis, y.dims.len())?;
            let yst = strides(&y.dims);
            let mut at = 0;
            for i in 0..cx.ins.len() {
                let xi = cx.ins[i].clone();
                emit_copy(
                    cx,
                    Copy {
                        x: xi.range(),
                        y: y.range(),
                        dtype: y.dtype,
                        dims: &xi.dims,
                        xs: &i64s(&strides(&xi.dims)),
                        ys: &yst,
                        x0: 0,
                        y0: at * yst[a],
                    },
                )?;
                at += xi.dims.get(a).copied().unwrap_or(0);
            }
            Ok(())
        }
        Op::Split(s) => {
            let a = axis(s.axis, x.dims.len())?;
            let mut at = 0;
            for o in cx.outs.clone() {
                plain(cx, &x, &o, &o.dims, &i64s(&xst), at * xst[a])?;
                at += o.dims.get(a).copied().unwrap_or(0);
            }
            Ok(())
        }
        Op::DepthToSpace(d) => {
            let [n, c, h, w] = dims4(&x)?;
            let b = usize::try_from(d.blocksize).map_err(|_| "bad blocksize")?;
            let cc = c / (b * b).max(1);
            let view = [n, cc, h, b, w, b];
            let xs = match d.mode {
                DepthToSpaceMode::Dcr => [c * h * w, h * w, w, cc * h * w * b, 1, cc * h * w],
                DepthToSpaceMode::Crd => [c * h * w, b * b * h * w, w, b * h * w, 1, h * w],
            };
            plain(cx, &x, &y, &view, &i64s(&xs), 0)
        }
        Op::SpaceToDepth(s) => {
            let [n, c, h, w] = dims4(&x)?;
            let b = usize::try_from(s.blocksize).map_err(|_| "bad blocksize")?;
            let view = [n, b, b, c, h / b.max(1), w / b.max(1)];
            let xs = [c * h * w, w, 1, h * w, b * w, b];
            plain(cx, &x, &y, &view, &i64s(&xs), 0)
        }
        Op::Pad(p) => {
            let mode = match p.mode {
                PadMode::Constant => 0,
                PadMode::Edge => 1,
                PadMode::Reflect => 2,
                PadMode::Wrap => 3,
            };
            let pads = cx.ints(1)?.ok_or("pad needs pads")?;
            let rank = x.dims.len();
            let axes = match cx.ints(3)? {
                Some(a) => a
                    .iter()
                    .map(|&v| axis(v, rank))
                    .collect::<LResult<Vec<_>>>()?,
                None => (0..rank).collect(),
            };
            if pads.len() != 2 * axes.len() {
                return Err("pads do not match the axes".into());
            }
            let mut begin = vec![0i64; rank];
            for (i, &a) in axes.iter().enumerate() {
                begin[a] = pads[i];
            }
            let value = constant_bits(cx, x.dtype)?;
            emit_pad(cx, &x, &y, mode, value, &begin)
        }
        Op::Tile(_) => emit_pad(cx, &x, &y, 3, [0, 0], &vec![0; x.dims.len()]),
        op => Err(format!("`{}` is not a movement op", op.name())),
    }
}

fn dims4(x: &Operand) -> LResult<[usize; 4]> {
    match x.dims[..] {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err("depth/space rearrangement needs a 4-D input".into()),
    }
}

/// The pad value (input 2) as element words; absent means zero.
fn constant_bits(cx: &Cx, d: DType) -> LResult<[u32; 2]> {
    if cx.ins.len() <= 2 {
        return Ok([0, 0]);
    }
    match cx.values.get(2) {
        Some(Some(t)) => {
            let b = t.bytes();
            let w = |i: usize| {
                b.get(i..i + 4)
                    .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
            };
            Ok(match d.size() {
                8 => [w(0), w(4)],
                _ => [w(0), 0],
            })
        }
        _ => Err("a non-constant pad value has no wgpu kernel".into()),
    }
}

fn emit_pad(
    cx: &mut Cx,
    x: &Operand,
    y: &Operand,
    mode: u32,
    value: [u32; 2],
    begin: &[i64],
) -> LResult<()> {
    let rank = x.dims.len();
    if rank > MAX_RANK {
        return Err(format!("padding rank {rank} has no wgpu kernel"));
    }
    let n = y.numel();
    let mut p = vec![
        u32_of(n, "size")?,
        words(x.dtype)?,
        rank as u32,
        mode,
        value[0],
        value[1],
    ];
    let (mut od, mut id, mut pb) = ([1u32; MAX_RANK], [1u32; MAX_RANK], [0u32; MAX_RANK]);
    for i in 0..rank {
        od[i] = u32_of(y.dims[i], "a dim")?;
        id[i] = u32_of(x.dims[i], "a dim")?;
        pb[i] = i32::try_from(begin[i]).map_err(|_| "pad out of the i32 range")? as u32;
    }
    p.extend(od);
    p.extend(id);
    p.extend(pb);
    let pipe = cx.pipeline("movement.pad", PAD);
    cx.dispatch_items(pipe, vec![x.range(), y.range()], p, n as u64);
    Ok(())
}
