//! Index arithmetic shared by kernels: strides, broadcasting, parallel loops.

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

/// Elements per task when `len` elements of cheap work split over the
/// threads: two tasks per thread (each task handed out costs a contended
/// increment), none tiny.
pub fn per_task(len: usize) -> usize {
    len.div_ceil(2 * crate::par::threads()).max(PAR_MIN / 16)
}

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
    if out.len() >= PAR_MIN && crate::par::parallel() {
        let per = per_task(out.len());
        crate::par::chunks_mut(out, per, |c, o| {
            for (k, v) in o.iter_mut().enumerate() {
                *v = f(c * per + k);
            }
        });
    } else {
        for (i, o) in out.iter_mut().enumerate() {
            *o = f(i);
        }
    }
}

/// [`par_fill`] for outputs that each cost `cost` elements of work (a
/// reduction over `cost` values): split when the total work is large, in jobs
/// of at least `PAR_MIN / 4` elements of work (however few the outputs) and
/// at most two per thread.
pub fn par_fill_costly<T: Send>(out: &mut [T], cost: usize, f: impl Fn(usize) -> T + Sync) {
    let cost = cost.max(1);
    if out.len() > 1 && out.len().saturating_mul(cost) >= PAR_MIN && crate::par::parallel() {
        let per = (PAR_MIN / 4 / cost).max(out.len().div_ceil(2 * crate::par::threads()));
        crate::par::chunks_mut(out, per, |c, o| {
            for (k, v) in o.iter_mut().enumerate() {
                *v = f(c * per + k);
            }
        });
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
    if out.len() >= PAR_MIN && crate::par::parallel() {
        // Several rows per task when rows are short.
        let rows = (per_task(out.len()) / row_len).max(1);
        crate::par::chunks_mut(out, rows * row_len, |c, block| {
            for (k, row) in block.chunks_mut(row_len).enumerate() {
                f(c * rows + k, row);
            }
        });
    } else {
        for (r, s) in out.chunks_mut(row_len).enumerate() {
            f(r, s);
        }
    }
}

/// `f(first_row, block)` over blocks of whole rows of `row_len` elements
/// (all of `out` at once where the work is small), for rows too short to
/// pay for a call each.
pub fn par_row_blocks<T: Send>(
    out: &mut [T],
    row_len: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if row_len == 0 {
        return;
    }
    if out.len() >= PAR_MIN && crate::par::parallel() {
        let rows = (per_task(out.len()) / row_len).max(1);
        crate::par::chunks_mut(out, rows * row_len, |c, block| f(c * rows, block));
    } else {
        f(0, out);
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

/// Merges adjacent dims that every operand walks contiguously (or broadcasts
/// over together), and drops size-1 dims, so loops get long inner rows.
pub fn collapse(dims: &[usize], strides: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_dims: Vec<usize> = Vec::new();
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::new(); strides.len()];
    for d in (0..dims.len()).rev() {
        if dims[d] == 1 {
            continue;
        }
        let mergeable = !out_dims.is_empty()
            && strides
                .iter()
                .zip(&out_strides)
                .all(|(s, o)| s[d] == o[0] * out_dims[0]);
        if mergeable {
            out_dims[0] *= dims[d];
        } else {
            out_dims.insert(0, dims[d]);
            for (o, s) in out_strides.iter_mut().zip(strides) {
                o.insert(0, s[d]);
            }
        }
    }
    (out_dims, out_strides)
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
    // The loops run compiled for the CPU's vector width
    // ([`super::vmath::vectorized`]): built for the x86-64 baseline, an i64
    // comparison (a one-hot `Equal`) had no vector form and ran a lane at a
    // time.
    let n = out.len();
    let (whole_a, whole_b) = (a.len() == n, b.len() == n);
    if (whole_a || a.len() == 1) && (whole_b || b.len() == 1) {
        // One small closure a loop: a larger one was not inlined into the
        // vector-width function and kept the baseline's code.
        let run = |c: usize, per: usize, o: &mut [O]| match (whole_a, whole_b) {
            (true, true) => super::vmath::vectorized(|| {
                for ((o, x), y) in o.iter_mut().zip(&a[c * per..]).zip(&b[c * per..]) {
                    *o = f(*x, *y);
                }
            }),
            (true, false) => super::vmath::vectorized(|| {
                for (o, x) in o.iter_mut().zip(&a[c * per..]) {
                    *o = f(*x, b[0]);
                }
            }),
            (false, true) => super::vmath::vectorized(|| {
                for (o, y) in o.iter_mut().zip(&b[c * per..]) {
                    *o = f(a[0], *y);
                }
            }),
            (false, false) => o.iter_mut().for_each(|o| *o = f(a[0], b[0])),
        };
        if n >= PAR_MIN && crate::par::parallel() {
            let per = per_task(n);
            crate::par::chunks_mut(out, per, |c, o| run(c, per, o));
        } else {
            run(0, n, out);
        }
        return;
    }
    let (dims, st) = collapse(
        out_dims,
        &[
            broadcast_strides(a_dims, out_dims),
            broadcast_strides(b_dims, out_dims),
        ],
    );
    let (sa, sb) = (&st[0], &st[1]);
    let inner = dims.last().copied().unwrap_or(1);
    let (ia, ib) = (
        sa.last().copied().unwrap_or(0),
        sb.last().copied().unwrap_or(0),
    );
    par_rows(out, inner, |r, row| {
        let (oa, ob) = (
            offset_of(r * inner, &dims, sa),
            offset_of(r * inner, &dims, sb),
        );
        match (ia, ib) {
            (1, 0) => {
                let y = b[ob];
                super::vmath::vectorized(|| {
                    for (o, x) in row.iter_mut().zip(&a[oa..oa + inner]) {
                        *o = f(*x, y);
                    }
                })
            }
            (0, 1) => {
                let x = a[oa];
                super::vmath::vectorized(|| {
                    for (o, y) in row.iter_mut().zip(&b[ob..ob + inner]) {
                        *o = f(x, *y);
                    }
                })
            }
            (1, 1) => super::vmath::vectorized(|| {
                for ((o, x), y) in row
                    .iter_mut()
                    .zip(&a[oa..oa + inner])
                    .zip(&b[ob..ob + inner])
                {
                    *o = f(*x, *y);
                }
            }),
            _ => {
                for (j, o) in row.iter_mut().enumerate() {
                    *o = f(a[oa + j * ia], b[ob + j * ib]);
                }
            }
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

    #[test]
    fn collapse_merges_contiguous_and_broadcast_runs() {
        // [N=2, C=3, H=4, W=5] against a per-channel [3,1,1].
        let out = [2, 3, 4, 5];
        let (d, s) = collapse(&out, &[strides(&out), broadcast_strides(&[3, 1, 1], &out)]);
        assert_eq!(d, vec![2, 3, 20]);
        assert_eq!(s, vec![vec![60, 20, 1], vec![0, 1, 0]]);
        // Full contiguity collapses to one dim; a scalar operand keeps stride 0.
        let (d, s) = collapse(&out, &[strides(&out), vec![0; 4]]);
        assert_eq!((d, s), (vec![120], vec![vec![1], vec![0]]));
        let mut o = vec![0f32; 120];
        let a: Vec<f32> = (0..120).map(|i| i as f32).collect();
        zip2(
            &a,
            &out,
            &[10f32, 20.0, 30.0],
            &[3, 1, 1],
            &mut o,
            &out,
            |x, y| x + y,
        );
        assert_eq!(o[0], 10.0);
        assert_eq!(o[20], 40.0);
        assert_eq!(o[60], 70.0);
        assert_eq!(o[119], 149.0);
    }
}
