//! Index arithmetic shared by kernels: strides, broadcasting, parallel loops.

use rayon::prelude::*;

/// Row-major strides of `dims`.
pub fn strides(dims: &[usize]) -> Vec<usize> {
    rlx_ir::shape::strides_of(dims)
}

/// Strides of an input broadcast to `out` dims (0 where the input has size 1
/// or lacks the axis).
pub fn broadcast_strides(input: &[usize], out: &[usize]) -> Vec<usize> {
    let s = strides(input);
    let off = out.len() - input.len();
    (0..out.len())
        .map(|i| {
            if i < off || input[i - off] == 1 {
                0
            } else {
                s[i - off]
            }
        })
        .collect()
}

/// Elements above which loops split across threads.
pub const PAR_MIN: usize = 1 << 15;

/// Calls `f(offsets, out_range)` for each chunk of rows of the innermost dim:
/// `offsets[k]` is the element offset of operand `k` at the row start.
/// Operands are given by their strides over `out` dims.
pub fn for_each_row(
    out: &[usize],
    operand_strides: &[&[usize]],
    mut f: impl FnMut(&[usize], usize, usize),
) {
    let rank = out.len();
    let total: usize = out.iter().product();
    if total == 0 {
        return;
    }
    let inner = if rank == 0 { 1 } else { out[rank - 1] };
    let rows = total / inner.max(1);
    let mut idx = vec![0usize; rank.saturating_sub(1)];
    let mut offs = vec![0usize; operand_strides.len()];
    for r in 0..rows {
        f(&offs, r * inner, inner);
        // Advance the multi-index over all but the last dim.
        for d in (0..rank.saturating_sub(1)).rev() {
            idx[d] += 1;
            for (k, s) in operand_strides.iter().enumerate() {
                offs[k] += s[d];
            }
            if idx[d] < out[d] {
                break;
            }
            for (k, s) in operand_strides.iter().enumerate() {
                offs[k] -= s[d] * out[d];
            }
            idx[d] = 0;
        }
    }
}

/// The element offset of flat index `i` of `out` dims under `strides`.
pub fn offset_of(mut i: usize, out: &[usize], strides: &[usize]) -> usize {
    let mut off = 0;
    for d in (0..out.len()).rev() {
        let n = out[d].max(1);
        off += (i % n) * strides[d];
        i /= n;
    }
    off
}

/// Maps `out[i] = f(i)` in parallel for large outputs.
pub fn par_fill<T: Send>(out: &mut [T], f: impl Fn(usize) -> T + Sync) {
    if out.len() >= PAR_MIN {
        out.par_iter_mut().enumerate().for_each(|(i, o)| *o = f(i));
    } else {
        for (i, o) in out.iter_mut().enumerate() {
            *o = f(i);
        }
    }
}

/// Splits `out` into `rows` equal rows and runs `f(row, slice)` in parallel
/// when the work is large.
pub fn par_rows<T: Send>(out: &mut [T], row_len: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if row_len == 0 {
        return;
    }
    if out.len() >= PAR_MIN {
        out.par_chunks_mut(row_len)
            .enumerate()
            .for_each(|(r, s)| f(r, s));
    } else {
        for (r, s) in out.chunks_mut(row_len).enumerate() {
            f(r, s);
        }
    }
}

/// Normalizes a possibly negative axis (already validated by inference).
pub fn axis(a: i64, rank: usize) -> usize {
    if a < 0 {
        (a + rank as i64) as usize
    } else {
        a as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_visit_broadcast_offsets() {
        let out = [2, 3];
        let a = broadcast_strides(&[2, 1], &out);
        let b = broadcast_strides(&[3], &out);
        let mut seen = Vec::new();
        for_each_row(&out, &[&a, &b], |o, start, n| {
            seen.push((o.to_vec(), start, n))
        });
        assert_eq!(seen, vec![(vec![0, 0], 0, 3), (vec![1, 0], 3, 3)]);
        assert_eq!(offset_of(4, &out, &strides(&out)), 4);
        assert_eq!(offset_of(4, &out, &a), 1);
    }
}

/// `out[i] = f(a[ia], b[ib])` with numpy broadcasting of `a` and `b` to `out`.
pub fn zip2<A: Copy + Sync, B: Copy + Sync, O: Send>(
    a: &[A],
    a_dims: &[usize],
    b: &[B],
    b_dims: &[usize],
    out: &mut [O],
    out_dims: &[usize],
    f: impl Fn(A, B) -> O + Sync,
) {
    let n = out.len();
    if a.len() == n && b.len() == n {
        if n >= PAR_MIN {
            out.par_iter_mut()
                .zip(a.par_iter().zip(b.par_iter()))
                .for_each(|(o, (x, y))| *o = f(*x, *y));
        } else {
            for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
                *o = f(*x, *y);
            }
        }
        return;
    }
    if b.len() == 1 && a.len() == n {
        let y = b[0];
        par_fill(out, |i| f(a[i], y));
        return;
    }
    if a.len() == 1 && b.len() == n {
        let x = a[0];
        par_fill(out, |i| f(x, b[i]));
        return;
    }
    let sa = broadcast_strides(a_dims, out_dims);
    let sb = broadcast_strides(b_dims, out_dims);
    let inner = out_dims.last().copied().unwrap_or(1);
    let (ia, ib) = (
        sa.last().copied().unwrap_or(0),
        sb.last().copied().unwrap_or(0),
    );
    par_rows(out, inner, |r, row| {
        let (oa, ob) = (
            offset_of(r * inner, out_dims, &sa),
            offset_of(r * inner, out_dims, &sb),
        );
        for (j, o) in row.iter_mut().enumerate() {
            *o = f(a[oa + j * ia], b[ob + j * ib]);
        }
    });
}

/// `out[i] = f(a[.], b[.], c[.])` with numpy broadcasting of all three.
#[allow(clippy::too_many_arguments)]
pub fn zip3<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, O: Send>(
    a: &[A],
    a_dims: &[usize],
    b: &[B],
    b_dims: &[usize],
    c: &[C],
    c_dims: &[usize],
    out: &mut [O],
    out_dims: &[usize],
    f: impl Fn(A, B, C) -> O + Sync,
) {
    let sa = broadcast_strides(a_dims, out_dims);
    let sb = broadcast_strides(b_dims, out_dims);
    let sc = broadcast_strides(c_dims, out_dims);
    let inner = out_dims.last().copied().unwrap_or(1);
    let last = |s: &[usize]| s.last().copied().unwrap_or(0);
    let (ia, ib, ic) = (last(&sa), last(&sb), last(&sc));
    par_rows(out, inner, |r, row| {
        let s = r * inner;
        let (oa, ob, oc) = (
            offset_of(s, out_dims, &sa),
            offset_of(s, out_dims, &sb),
            offset_of(s, out_dims, &sc),
        );
        for (j, o) in row.iter_mut().enumerate() {
            *o = f(a[oa + j * ia], b[ob + j * ib], c[oc + j * ic]);
        }
    });
}

/// Copies `src` broadcast to `dst_dims` into `dst`.
pub fn broadcast_into<T: Copy + Send + Sync>(
    src: &[T],
    src_dims: &[usize],
    dst: &mut [T],
    dst_dims: &[usize],
) {
    if src.len() == dst.len() {
        dst.copy_from_slice(src);
        return;
    }
    if src.len() == 1 {
        dst.fill(src[0]);
        return;
    }
    let s = broadcast_strides(src_dims, dst_dims);
    let inner = dst_dims.last().copied().unwrap_or(1);
    let is = s.last().copied().unwrap_or(0);
    par_rows(dst, inner, |r, row| {
        let o = offset_of(r * inner, dst_dims, &s);
        if is == 1 {
            row.copy_from_slice(&src[o..o + inner]);
        } else {
            for (j, x) in row.iter_mut().enumerate() {
                *x = src[o + j * is];
            }
        }
    });
}

/// The part of `buf` starting at the first `align`-byte boundary.
pub fn aligned_mut(buf: &mut [u8], align: usize) -> &mut [u8] {
    let skip = buf.as_ptr().align_offset(align).min(buf.len());
    &mut buf[skip..]
}
