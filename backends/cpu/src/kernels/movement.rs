//! Data movement: views (copied when not aliased), Transpose, Expand, Concat,
//! Split, Slice, Pad, Tile, DepthToSpace, SpaceToDepth, CenterCropPad. All move raw elements
//! of the dtype's width; most reduce to one strided copy.

use rlx_ir::ops::{slice_params, slice_range, DepthToSpaceMode, PadMode};
use rlx_ir::Op;

use super::layout::{axis, par_rows, strides};
pub use super::strided::strided_copy;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_width;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    let f: fn(&Op, &[TensorRef], &mut [TensorMut]) -> Result<(), KernelError> = match spec.op() {
        Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_) => copy,
        Op::Transpose(_) => transpose,
        Op::Expand(_) => expand,
        Op::Concat(_) => concat,
        Op::Split(_) => split,
        Op::Slice(_) => slice,
        Op::Pad(_) => pad,
        Op::Tile(_) => tile,
        Op::DepthToSpace(_) | Op::SpaceToDepth(_) => depth_space,
        Op::CenterCropPad(_) => center_crop_pad,
        op => {
            return Err(KernelError::Internal(format!(
                "{} is not data movement",
                op.name()
            )))
        }
    };
    Ok(fn_kernel(spec, f))
}

fn bytes_of<'a, T: bytemuck::Pod>(t: &TensorRef<'a>) -> Result<&'a [T], KernelError> {
    t.slice::<T>()
}

fn copy(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    outs[0].bytes.copy_from_slice(ins[0].bytes);
    Ok(())
}

fn transpose(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Transpose(t) = op else {
        return Err(KernelError::Internal("not transpose".into()));
    };
    let x = &ins[0];
    let s = strides(x.dims);
    let st: Vec<isize> = t
        .perm
        .iter()
        .map(|&p| s[axis(p, x.rank())] as isize)
        .collect();
    let out = &mut outs[0];
    let dims = out.dims;
    with_width!(x.dtype, T => {
        strided_copy(bytes_of::<T>(x)?, 0, &st, out.slice::<T>()?, dims);
        Ok(())
    })
}

fn expand(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let x = &ins[0];
    let out = &mut outs[0];
    let dims = out.dims;
    let st: Vec<isize> = super::layout::broadcast_strides(x.dims, dims)
        .into_iter()
        .map(|s| s as isize)
        .collect();
    with_width!(x.dtype, T => {
        strided_copy(bytes_of::<T>(x)?, 0, &st, out.slice::<T>()?, dims);
        Ok(())
    })
}

fn concat(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Concat(c) = op else {
        return Err(KernelError::Internal("not concat".into()));
    };
    let out = &mut outs[0];
    let a = axis(c.axis, out.dims.len());
    let outer: usize = out.dims[..a].iter().product();
    let inner: usize = out.dims[a + 1..].iter().product();
    let w = out.dtype.size();
    let row = out.dims[a] * inner * w;
    if out.bytes.len() >= CONCAT_PAR_BYTES && crate::par::parallel() {
        return concat_split(ins, a, inner * w, row, out.bytes);
    }
    let mut at = 0;
    for x in ins {
        let chunk = x.dims[a] * inner * w;
        for o in 0..outer {
            out.bytes[o * row + at..o * row + at + chunk]
                .copy_from_slice(&x.bytes[o * chunk..(o + 1) * chunk]);
        }
        at += chunk;
    }
    Ok(())
}

/// Outputs of at least this many bytes are concatenated by several threads.
const CONCAT_PAR_BYTES: usize = 1 << 18;

/// [`concat`] with the output cut into equal pieces, one task each: a piece
/// copies the parts of the inputs that land in it (a concatenation along the
/// channels of one image is one part per input, however large).
fn concat_split(
    ins: &[TensorRef],
    a: usize,
    slice: usize,
    row: usize,
    out: &mut [u8],
) -> Result<(), KernelError> {
    // Where each input's part starts within an output row.
    let mut starts = Vec::with_capacity(ins.len() + 1);
    starts.push(0);
    for x in ins {
        starts.push(starts[starts.len() - 1] + x.dims[a] * slice);
    }
    if starts[ins.len()] != row {
        return Err(KernelError::Internal(
            "concat parts do not fill a row".into(),
        ));
    }
    let piece = out.len().div_ceil(2 * crate::par::threads()).max(1 << 14);
    crate::par::chunks_mut(out, piece, |c, dst| {
        let (first, end) = (c * piece, c * piece + dst.len());
        let mut p = first;
        while p < end {
            let (o, within) = (p / row, p % row);
            // The last input starting at or before `within`: the non-empty
            // one that covers it.
            let i = starts.partition_point(|&s| s <= within) - 1;
            let take = (starts[i + 1] - within).min(end - p);
            let chunk = starts[i + 1] - starts[i];
            let from = o * chunk + within - starts[i];
            dst[p - first..p - first + take].copy_from_slice(&ins[i].bytes[from..from + take]);
            p += take;
        }
    });
    Ok(())
}

fn split(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Split(s) = op else {
        return Err(KernelError::Internal("not split".into()));
    };
    let x = &ins[0];
    let a = axis(s.axis, x.rank());
    let outer: usize = x.dims[..a].iter().product();
    let inner: usize = x.dims[a + 1..].iter().product();
    let w = x.dtype.size();
    let row = x.dims[a] * inner * w;
    let mut at = 0;
    for out in outs.iter_mut() {
        let chunk = out.dims[a] * inner * w;
        for o in 0..outer {
            out.bytes[o * chunk..(o + 1) * chunk]
                .copy_from_slice(&x.bytes[o * row + at..o * row + at + chunk]);
        }
        at += chunk;
    }
    Ok(())
}

fn slice(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let x = &ins[0];
    let starts = ins[1].to_i64s()?;
    let ends = ins[2].to_i64s()?;
    let axes = ins.get(3).map(|t| t.to_i64s()).transpose()?;
    let steps = ins.get(4).map(|t| t.to_i64s()).transpose()?;
    let params = slice_params(&starts, &ends, axes.as_deref(), steps.as_deref(), x.rank())
        .map_err(|e| KernelError::Value(e.to_string()))?;
    let s = strides(x.dims);
    let mut st: Vec<isize> = s.iter().map(|&v| v as isize).collect();
    let mut base = 0isize;
    for (ax, start, end, step) in params {
        let (first, _) = slice_range(x.dims[ax] as i64, start, end, step);
        base += first as isize * s[ax] as isize;
        // Wrapping: a step past the dim (up to i64::MAX) leaves one element
        // on this axis, whose stride is never used; otherwise the product
        // stays within the tensor.
        st[ax] = (step as isize).wrapping_mul(s[ax] as isize);
    }
    let out = &mut outs[0];
    let dims = out.dims;
    if out.numel() == 0 {
        return Ok(());
    }
    with_width!(x.dtype, T => {
        strided_copy(bytes_of::<T>(x)?, base, &st, out.slice::<T>()?, dims);
        Ok(())
    })
}

/// Source index of padded coordinate `p` (already shifted by the begin pad).
fn pad_source(mode: PadMode, p: i64, n: i64) -> Option<i64> {
    if (0..n).contains(&p) {
        return Some(p);
    }
    if n == 0 {
        return None;
    }
    match mode {
        PadMode::Constant => None,
        PadMode::Edge => Some(p.clamp(0, n - 1)),
        PadMode::Wrap => Some(p.rem_euclid(n)),
        PadMode::Reflect => {
            if n == 1 {
                return Some(0);
            }
            let period = 2 * (n - 1);
            let m = p.rem_euclid(period);
            Some(if m < n { m } else { period - m })
        }
    }
}

fn pad(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Pad(p) = op else {
        return Err(KernelError::Internal("not pad".into()));
    };
    let x = &ins[0];
    let rank = x.rank();
    let pads = ins[1].to_i64s()?;
    let axes: Vec<usize> = match ins.get(3) {
        Some(a) => a.to_i64s()?.into_iter().map(|v| axis(v, rank)).collect(),
        None => (0..rank).collect(),
    };
    let mut begin = vec![0i64; rank];
    for (i, &a) in axes.iter().enumerate() {
        begin[a] = pads[i];
    }
    if p.mode == PadMode::Reflect && x.numel() > 0 {
        for (i, &a) in axes.iter().enumerate() {
            let n = x.dims[a] as i64;
            if pads[i] >= n || pads[i + axes.len()] >= n {
                return Err(KernelError::Value(format!(
                    "reflect pads must be smaller than axis {a} ({n})"
                )));
            }
        }
    }
    let out = &mut outs[0];
    let dims = out.dims.to_vec();
    let s = strides(x.dims);
    with_width!(x.dtype, T => {
        let src = bytes_of::<T>(x)?;
        let Some(v) = ins[2].bytes.get(..std::mem::size_of::<T>()).filter(|_| ins[2].dtype == x.dtype) else {
            return Err(KernelError::Value(format!(
                "the pad value ({} {:?}) is no {} scalar",
                ins[2].dtype, ins[2].dims, x.dtype
            )));
        };
        let value: T = bytemuck::pod_read_unaligned(v);
        let inner = dims.last().copied().unwrap_or(1);
        let last = rank.saturating_sub(1);
        par_rows(out.slice::<T>()?, inner, |r, row| {
            let mut off = 0usize;
            let mut inside = true;
            let mut rem = r;
            for d in (0..last).rev() {
                let o = (rem % dims[d]) as i64;
                rem /= dims[d];
                match pad_source(p.mode, o - begin[d], x.dims[d] as i64) {
                    Some(sidx) => off += sidx as usize * s[d],
                    None => inside = false,
                }
            }
            for (j, v) in row.iter_mut().enumerate() {
                *v = if rank == 0 {
                    src[0]
                } else if !inside {
                    value
                } else {
                    match pad_source(p.mode, j as i64 - begin[last], x.dims[last] as i64) {
                        Some(sidx) => src[off + sidx as usize],
                        None => value,
                    }
                };
            }
        });
        Ok(())
    })
}

fn tile(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let x = &ins[0];
    let out = &mut outs[0];
    let dims = out.dims.to_vec();
    let s = strides(x.dims);
    let rank = dims.len();
    with_width!(x.dtype, T => {
        let src = bytes_of::<T>(x)?;
        let inner = dims.last().copied().unwrap_or(1);
        par_rows(out.slice::<T>()?, inner, |r, row| {
            let mut off = 0usize;
            let mut rem = r;
            for d in (0..rank.saturating_sub(1)).rev() {
                off += (rem % dims[d]) % x.dims[d] * s[d];
                rem /= dims[d];
            }
            let n = x.dims.last().copied().unwrap_or(1).max(1);
            for (j, v) in row.iter_mut().enumerate() {
                *v = src[off + if rank == 0 { 0 } else { j % n }];
            }
        });
        Ok(())
    })
}

fn depth_space(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let x = &ins[0];
    let (n, c, h, w) = (x.dims[0], x.dims[1], x.dims[2], x.dims[3]);
    // Express both ops as a transpose of a 6-D view of the input.
    let (view, perm): (Vec<usize>, [usize; 6]) = match op {
        Op::DepthToSpace(d) => {
            let b = d.blocksize as usize;
            match d.mode {
                DepthToSpaceMode::Dcr => (vec![n, b, b, c / (b * b), h, w], [0, 3, 4, 1, 5, 2]),
                DepthToSpaceMode::Crd => (vec![n, c / (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3]),
            }
        }
        Op::SpaceToDepth(s) => {
            let b = s.blocksize as usize;
            let perm = match s.mode {
                DepthToSpaceMode::Dcr => [0, 3, 5, 1, 2, 4],
                DepthToSpaceMode::Crd => [0, 1, 3, 5, 2, 4],
            };
            (vec![n, c, h / b, b, w / b, b], perm)
        }
        _ => return Err(KernelError::Internal("not depth/space".into())),
    };
    let vs = strides(&view);
    let st: Vec<isize> = perm.iter().map(|&p| vs[p] as isize).collect();
    let dims6: Vec<usize> = perm.iter().map(|&p| view[p]).collect();
    let out = &mut outs[0];
    with_width!(x.dtype, T => {
        strided_copy(bytes_of::<T>(x)?, 0, &st, out.slice::<T>()?, &dims6);
        Ok(())
    })
}

/// Crops (centered, the odd element dropped at the end) or zero-pads (centered,
/// the odd element added at the end) each axis to the output size.
fn center_crop_pad(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let x = &ins[0];
    let out = &mut outs[0];
    let dims = out.dims.to_vec();
    if dims.len() != x.rank() {
        return Err(KernelError::Internal(
            "center_crop_pad changes the rank".into(),
        ));
    }
    // Output coordinate o reads input coordinate o + shift (when inside).
    let shift: Vec<i64> = x
        .dims
        .iter()
        .zip(&dims)
        .map(|(&n, &m)| {
            if n >= m {
                ((n - m) / 2) as i64
            } else {
                -(((m - n) / 2) as i64)
            }
        })
        .collect();
    let s = strides(x.dims);
    let rank = dims.len();
    with_width!(x.dtype, T => {
        let src = bytes_of::<T>(x)?;
        par_rows(out.slice::<T>()?, dims.last().copied().unwrap_or(1), |r, row| {
            let mut off = 0usize;
            let mut inside = true;
            let mut rem = r;
            for d in (0..rank.saturating_sub(1)).rev() {
                let c = (rem % dims[d]) as i64 + shift[d];
                rem /= dims[d];
                if (0..x.dims[d] as i64).contains(&c) {
                    off += c as usize * s[d];
                } else {
                    inside = false;
                }
            }
            for (j, v) in row.iter_mut().enumerate() {
                *v = if rank == 0 {
                    src[0]
                } else {
                    let c = j as i64 + shift[rank - 1];
                    if inside && (0..x.dims[rank - 1] as i64).contains(&c) {
                        src[off + c as usize]
                    } else {
                        T::default()
                    }
                };
            }
        });
        Ok(())
    })
}
