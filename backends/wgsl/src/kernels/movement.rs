//! Data movement through strided index kernels: transpose, slice, concat,
//! split, expand, depth/space rearrangement (`kernels/wgsl/copy.wgsl`), and
//! pad and tile (`kernels/wgsl/pad.wgsl`), planned by rlx-gpu's
//! `kernels::movement`. Elements of 4 and 8 bytes everywhere; 1- and 2-byte
//! elements in dense copies (not into part of a tensor, not pad or tile).

use rlx_gpu::kernels::movement::{
    copy_params, pad_params, CopyParams, PadParams, View, COPY_OPERANDS, PAD_OPERANDS,
};
use rlx_gpu::Params;
use rlx_ir::ops::{slice_params, PadMode};
use rlx_ir::{DType, Node, Op, TensorType};

use super::elementwise::broadcast_strides;
use super::{axis, strides, Cx, LResult, Operand};
use crate::support::{copyable, dtype_of, movable};

const COPY: &str = include_str!("../../../../kernels/wgsl/copy.wgsl");
const PAD: &str = include_str!("../../../../kernels/wgsl/pad.wgsl");

/// Dense strided copies move 1-, 2-, 4- and 8-byte elements; concat, pad
/// and tile 4- and 8-byte ones.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d0 = dtype_of(inputs, 0)?;
    match node.op {
        Op::Concat(_) | Op::Pad(_) | Op::Tile(_) => movable(node.op.name(), d0),
        _ => copyable(node.op.name(), d0),
    }
}

/// A copy of view `v` of `x` into `y` at element `y0` with strides `ys`.
fn emit_copy(
    cx: &mut Cx,
    x: &Operand,
    y: &Operand,
    v: &View,
    ys: &[usize],
    y0: usize,
) -> LResult<()> {
    let (p, items) = copy_params(v, ys, y0, y.dtype.size(), y.dtype.packed_bits())?;
    let pipe = cx.typed_pipeline("movement.copy", COPY_OPERANDS, &CopyParams::LAYOUT, COPY);
    cx.launch_items(pipe, vec![x.range(), y.range()], &p, items);
    Ok(())
}

/// A dense copy of `x` into `y` (same shape, 4- or 8-byte elements).
pub fn dense_copy(cx: &mut Cx, x: &Operand, y: &Operand) -> LResult<()> {
    plain(cx, x, y, &View::dense(&x.dims))
}

fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

/// A copy of view `v` of `x` into the whole of `y`.
fn plain(cx: &mut Cx, x: &Operand, y: &Operand, v: &View) -> LResult<()> {
    emit_copy(cx, x, y, v, &strides(&v.dims), 0)
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let x = cx.input(0)?.clone();
    let y = cx.output(0)?.clone();
    let xst = strides(&x.dims);
    match &cx.node.op.clone() {
        Op::Transpose(t) => plain(cx, &x, &y, &View::transpose(&x.dims, &t.perm, &y.dims)?),
        Op::Expand(_) => {
            let v = View {
                dims: y.dims.clone(),
                strides: i64s(&broadcast_strides(&x.dims, &y.dims)?),
                start: 0,
            };
            plain(cx, &x, &y, &v)
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
            plain(cx, &x, &y, &View::slice(&x.dims, &y.dims, &ps))
        }
        Op::Concat(c) => {
            let a = axis(c.axis, y.dims.len())?;
            let yst = strides(&y.dims);
            let mut at = 0;
            for i in 0..cx.ins.len() {
                let xi = cx.ins[i].clone();
                emit_copy(cx, &xi, &y, &View::dense(&xi.dims), &yst, at * yst[a])?;
                at += xi.dims.get(a).copied().unwrap_or(0);
            }
            Ok(())
        }
        Op::Split(s) => {
            let a = axis(s.axis, x.dims.len())?;
            let mut at = 0;
            for (o, read) in cx.outs.clone().into_iter().zip(cx.read.clone()) {
                let v = View {
                    dims: o.dims.clone(),
                    strides: i64s(&xst),
                    start: at * xst[a],
                };
                // A piece nothing reads is not written.
                if read {
                    plain(cx, &x, &o, &v)?;
                }
                at += o.dims.get(a).copied().unwrap_or(0);
            }
            Ok(())
        }
        Op::DepthToSpace(d) => {
            let b = usize::try_from(d.blocksize).map_err(|_| "bad blocksize")?;
            plain(cx, &x, &y, &View::depth_to_space(&x.dims, b, d.mode)?)
        }
        Op::SpaceToDepth(s) => {
            let b = usize::try_from(s.blocksize).map_err(|_| "bad blocksize")?;
            plain(cx, &x, &y, &View::space_to_depth(&x.dims, b, s.mode)?)
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
        _ => Err("a non-constant pad value has no WGSL kernel".into()),
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
    let p = pad_params(&x.dims, &y.dims, x.dtype.size(), mode, value, begin)?;
    let pipe = cx.typed_pipeline("movement.pad", PAD_OPERANDS, &PadParams::LAYOUT, PAD);
    cx.launch_items(pipe, vec![x.range(), y.range()], &p, y.numel() as u64);
    Ok(())
}
