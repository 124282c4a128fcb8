//! Data movement on CUDA (`kernels/cuda/movement.cu`): transpose, slice,
//! concat, split, expand, depth/space rearrangement as strided copies of
//! rlx-gpu views (`kernels::movement`), pad and tile as padding. Every dtype:
//! the kernels move elements of 1, 2, 4 or 8 bytes, instantiated per size.

use rlx_gpu::geometry::{axis, broadcast_strides, strides};
use rlx_gpu::kernels::movement::{copy_params, pad_params, CopyParams, PadParams, View};
use rlx_gpu::{Layout, Operand, Params};
use rlx_ir::ops::{slice_params, PadMode};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "movement",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/movement.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![CopyParams::LAYOUT, PadParams::LAYOUT]
}

/// The element size suffix of the byte-moving entry points.
pub fn size_suffix(d: DType) -> LResult<usize> {
    match d.size() {
        s @ (1 | 2 | 4 | 8) => Ok(s),
        s => Err(format!("{d} elements of {s} bytes have no cuda kernel")),
    }
}

/// Every dtype of 1, 2, 4 or 8 bytes (sub-byte dtypes are stored a byte each).
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    size_suffix(d)
        .map(|_| ())
        .map_err(|e| format!("{}: {e}", node.op.name()))
}

/// Merges adjacent dims that stay contiguous in both the input and the
/// output view and drops unit dims: fewer divisions per element.
fn merge(v: &View, ys: &[usize]) -> (View, Vec<usize>) {
    let (mut dims, mut xs, mut yv) = (Vec::new(), Vec::new(), Vec::<usize>::new());
    for d in 0..v.dims.len() {
        if v.dims[d] == 1 {
            continue;
        }
        let n = v.dims[d];
        if let (Some(&lx), Some(&ly)) = (xs.last(), yv.last()) {
            if lx == v.strides[d] * n as i64 && ly == ys[d] * n {
                let l = dims.len() - 1;
                dims[l] *= n;
                xs[l] = v.strides[d];
                yv[l] = ys[d];
                continue;
            }
        }
        dims.push(n);
        xs.push(v.strides[d]);
        yv.push(ys[d]);
    }
    (
        View {
            dims,
            strides: xs,
            start: v.start,
        },
        yv,
    )
}

/// A copy of view `v` of `x` into `y` at element `y0` with strides `ys`.
pub fn emit_copy(
    cx: &mut Cx,
    x: &Operand,
    y: &Operand,
    v: &View,
    ys: &[usize],
    y0: usize,
) -> LResult<()> {
    let size = size_suffix(y.dtype)?;
    let (v, ys) = merge(v, ys);
    // The shared struct's word checks are WGSL's; CUDA moves any size.
    let (mut p, items) = copy_params(&v, &ys, y0, size.max(4), 32)?;
    p.size = size as u32;
    let m = cx.modules.of(&SOURCE);
    cx.items(
        m,
        &format!("copy_{size}"),
        items,
        vec![x.range(), y.range()],
        &p,
    );
    Ok(())
}

/// A dense copy of `x` into `y` (same shape).
pub fn dense_copy(cx: &mut Cx, x: &Operand, y: &Operand) -> LResult<()> {
    plain(cx, x, y, &View::dense(&x.dims))
}

fn plain(cx: &mut Cx, x: &Operand, y: &Operand, v: &View) -> LResult<()> {
    emit_copy(cx, x, y, v, &strides(&v.dims), 0)
}

fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
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
            for i in 0..cx.io.ins.len() {
                let xi = cx.io.ins[i].clone();
                if xi.numel() > 0 {
                    emit_copy(cx, &xi, &y, &View::dense(&xi.dims), &yst, at * yst[a])?;
                }
                at += xi.dims.get(a).copied().unwrap_or(0);
            }
            Ok(())
        }
        Op::Split(s) => {
            let a = axis(s.axis, x.dims.len())?;
            let mut at = 0;
            for (o, read) in cx.io.outs.clone().into_iter().zip(cx.io.read.clone()) {
                let v = View {
                    dims: o.dims.clone(),
                    strides: i64s(&xst),
                    start: at * xst[a],
                };
                // A piece nothing reads (the Q of a packed QKV projection
                // that attention reads in place) is not written.
                if read && o.numel() > 0 {
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
            if p.mode == PadMode::Reflect && x.numel() > 0 {
                for (i, &a) in axes.iter().enumerate() {
                    let n = x.dims[a] as i64;
                    if pads[i] >= n || pads[i + axes.len()] >= n {
                        return Err(format!("reflect pads must be smaller than axis {a} ({n})"));
                    }
                }
            }
            match pad_value(cx, x.dtype)? {
                Some(value) => emit_pad(cx, &x, &y, mode, value, &begin),
                None => {
                    let v = cx.input(2)?.clone();
                    emit_pad_read(cx, &x, &v, &y, mode, &begin)
                }
            }
        }
        Op::Tile(_) => emit_pad(cx, &x, &y, 3, [0, 0], &vec![0; x.dims.len()]),
        Op::CenterCropPad(_) => {
            if x.dims.len() != y.dims.len() {
                return Err("center_crop_pad changes the rank".into());
            }
            // Output coordinate o reads input coordinate o - begin.
            let begin: Vec<i64> = x
                .dims
                .iter()
                .zip(&y.dims)
                .map(|(&n, &m)| {
                    if n >= m {
                        -(((n - m) / 2) as i64)
                    } else {
                        ((m - n) / 2) as i64
                    }
                })
                .collect();
            emit_pad(cx, &x, &y, 0, [0, 0], &begin)
        }
        op => Err(format!("`{}` is not a movement op", op.name())),
    }
}

/// The pad value (input 2) as little-endian words; absent means zero,
/// `None` when it is read on the device.
fn pad_value(cx: &Cx, d: DType) -> LResult<Option<[u32; 2]>> {
    if cx.io.ins.len() <= 2 || cx.io.ins[2].numel() == 0 {
        return Ok(Some([0, 0]));
    }
    match cx.io.values.get(2) {
        Some(Some(t)) => {
            let mut b = [0u8; 8];
            let n = d.size().min(8).min(t.bytes().len());
            b[..n].copy_from_slice(&t.bytes()[..n]);
            Ok(Some([
                u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            ]))
        }
        _ => Ok(None),
    }
}

/// Constant padding whose value (the first element of `v`) is read on the
/// device.
fn emit_pad_read(
    cx: &mut Cx,
    x: &Operand,
    v: &Operand,
    y: &Operand,
    mode: u32,
    begin: &[i64],
) -> LResult<()> {
    if v.dtype != x.dtype {
        return Err(format!("a {} pad value for {} data", v.dtype, x.dtype));
    }
    let size = size_suffix(x.dtype)?;
    let p = pad_params(&x.dims, &y.dims, size.max(4), mode, [0, 0], begin)?;
    let m = cx.modules.of(&SOURCE);
    cx.items(
        m,
        &format!("pad_value_{size}"),
        y.numel() as u64,
        vec![x.range(), v.range(), y.range()],
        &p,
    );
    Ok(())
}

fn emit_pad(
    cx: &mut Cx,
    x: &Operand,
    y: &Operand,
    mode: u32,
    value: [u32; 2],
    begin: &[i64],
) -> LResult<()> {
    let size = size_suffix(x.dtype)?;
    // `words` is WGSL's; CUDA instantiates per size.
    let p = pad_params(&x.dims, &y.dims, size.max(4), mode, value, begin)?;
    let m = cx.modules.of(&SOURCE);
    cx.items(
        m,
        &format!("pad_{size}"),
        y.numel() as u64,
        vec![x.range(), y.range()],
        &p,
    );
    Ok(())
}
