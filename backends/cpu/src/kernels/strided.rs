//! The strided copy under Transpose, Expand, Slice and DepthToSpace:
//! `dst[i] = src[base + Σ i_d · strides_d]`. Size-1 dims are dropped and
//! dims the source walks contiguously merged first; then rows the source
//! holds contiguously are copied whole, a transpose (the source's unit stride
//! on another dim than the last) goes tile by tile so both sides stay in
//! cache, and anything else (a broadcast row) element by element.

use super::layout::PAR_MIN;

/// Square tiles of a transposed copy: 16 rows of 16 elements on each side.
const TILE: usize = 16;

/// `dims` without size-1 dims and with each dim merged into the next when the
/// source steps over both as one (`st[d] == st[d + 1] * dims[d + 1]`); the
/// destination is contiguous, so it always does.
fn collapse(dims: &[usize], st: &[isize]) -> (Vec<usize>, Vec<isize>) {
    let (mut d_out, mut s_out): (Vec<usize>, Vec<isize>) = (Vec::new(), Vec::new());
    for d in (0..dims.len()).rev() {
        if dims[d] == 1 {
            continue;
        }
        match (d_out.first_mut(), s_out.first()) {
            (Some(n), Some(&s)) if st[d] == s * *n as isize => *n *= dims[d],
            _ => {
                d_out.insert(0, dims[d]);
                s_out.insert(0, st[d]);
            }
        }
    }
    (d_out, s_out)
}

/// The source offset of index `k` over `dims` (row-major) with strides `st`.
fn index_offset(k: usize, dims: &[usize], st: &[isize]) -> isize {
    let (mut off, mut rem) = (0, k);
    for d in (0..dims.len()).rev() {
        off += (rem % dims[d]) as isize * st[d];
        rem /= dims[d];
    }
    off
}

/// The source offset of the first element of destination row `r` (a row is
/// the last dim) over `dims`/`st`.
fn row_offset(r: usize, dims: &[usize], st: &[isize], base: isize) -> isize {
    let outer = dims.len().saturating_sub(1);
    base + index_offset(r, &dims[..outer], &st[..outer])
}

/// `dst[i] = src[base + Σ i_d · strides_d]` over `dims`.
pub fn strided_copy<T: Copy + Send + Sync>(
    src: &[T],
    base: isize,
    st: &[isize],
    dst: &mut [T],
    dims: &[usize],
) {
    if dst.is_empty() {
        return;
    }
    let (dims, st) = collapse(dims, st);
    let inner = dims.last().copied().unwrap_or(1);
    let is = st.last().copied().unwrap_or(0);
    let parallel = dst.len() >= PAR_MIN && crate::par::parallel();
    if is == 1 || dims.is_empty() {
        let row = |r: usize, out: &mut [T]| {
            let o = row_offset(r, &dims, &st, base) as usize;
            out.copy_from_slice(&src[o..o + inner]);
        };
        let per = rows_per_task::<T>(dst.len(), inner);
        chunks(dst, per, parallel, |c, out| {
            for (k, r) in out.chunks_mut(inner).enumerate() {
                row(c * (per / inner) + k, r);
            }
        });
        return;
    }
    if let Some(a) = st.iter().position(|&s| s == 1) {
        transposed(src, base, &dims, &st, a, dst, parallel);
        return;
    }
    let per = rows_per_task::<T>(dst.len(), inner);
    chunks(dst, per, parallel, |c, out| {
        for (k, row) in out.chunks_mut(inner).enumerate() {
            let off = row_offset(c * (per / inner) + k, &dims, &st, base);
            for (j, x) in row.iter_mut().enumerate() {
                *x = src[(off + j as isize * is) as usize];
            }
        }
    });
}

/// Elements per task of a copy by rows of `inner`: whole rows, at least a few
/// KiB (short rows make no short jobs) and at most two tasks per thread (each
/// task handed out costs a contended increment).
fn rows_per_task<T>(len: usize, inner: usize) -> usize {
    let inner = inner.max(1);
    let kib = (4096 / (inner * std::mem::size_of::<T>()).max(1)).max(1);
    let share = len.div_ceil(inner).div_ceil(2 * crate::par::threads());
    kib.max(share) * inner
}

/// Runs `f(chunk index, chunk)` over `dst` in chunks of `per` elements, on the
/// pool when `parallel`.
fn chunks<T: Send>(dst: &mut [T], per: usize, parallel: bool, f: impl Fn(usize, &mut [T]) + Sync) {
    if parallel {
        crate::par::chunks_mut(dst, per, f);
    } else {
        for (c, s) in dst.chunks_mut(per).enumerate() {
            f(c, s);
        }
    }
}

/// The copy where the source is contiguous along destination dim `a` (not the
/// last, `L`): for every index of the dims before `a` (a "slab" of the
/// destination), TILE x TILE tiles of (a, L) read along `a` and write along
/// `L`, with the dims between `a` and `L` walked inside each tile row.
fn transposed<T: Copy + Send + Sync>(
    src: &[T],
    base: isize,
    dims: &[usize],
    st: &[isize],
    a: usize,
    dst: &mut [T],
    parallel: bool,
) {
    let last = dims.len() - 1;
    let (na, nl, sl) = (dims[a], dims[last], st[last]);
    // Destination: [outer..., a, mid..., L]; `mid` dims sit between a and L.
    let mid_dims = &dims[a + 1..last];
    let mid_st = &st[a + 1..last];
    let mid: usize = mid_dims.iter().product();
    let slab = na * mid * nl;
    let outer_dims = &dims[..a];
    let outer_st = &st[..a];
    // Rows i0..i1 of `a` (each with its `mid` x L block) into `out`, from
    // source offset `off`, tile by tile.
    let rows = |off: isize, i0: usize, i1: usize, out: &mut [T]| {
        for m in 0..mid {
            let moff = off + index_offset(m, mid_dims, mid_st);
            for t0 in (i0..i1).step_by(TILE) {
                for j0 in (0..nl).step_by(TILE) {
                    let j1 = (j0 + TILE).min(nl);
                    for i in t0..(t0 + TILE).min(i1) {
                        let row = &mut out[((i - i0) * mid + m) * nl..][..nl];
                        let from = moff + i as isize;
                        for (j, x) in row[j0..j1].iter_mut().enumerate() {
                            *x = src[(from + (j0 + j) as isize * sl) as usize];
                        }
                    }
                }
            }
        }
    };
    if mid == 1 && sl == na as isize && (2..=4).contains(&na) {
        // A few interleaved rows (NHWC to NCHW of 2 to 4 channels): each
        // slab's source is contiguous; split it member by member (one task
        // per slab: this runs at memory speed).
        let slab_of = |s: usize, out: &mut [T]| {
            let off = (base + index_offset(s, outer_dims, outer_st)) as usize;
            deinterleave(&src[off..off + slab], out, na);
        };
        if parallel && dst.len() / slab > 1 {
            crate::par::chunks_mut(dst, slab, slab_of);
        } else {
            dst.chunks_mut(slab)
                .enumerate()
                .for_each(|(s, out)| slab_of(s, out));
        }
        return;
    }
    let do_slab =
        |s: usize, out: &mut [T]| rows(base + index_offset(s, outer_dims, outer_st), 0, na, out);
    if parallel && dst.len() / slab > 1 {
        crate::par::chunks_mut(dst, slab, do_slab);
    } else if parallel {
        // One slab: split it by TILE rows of `a`.
        crate::par::chunks_mut(dst, TILE * mid * nl, |b, out| {
            rows(base, b * TILE, (b * TILE + TILE).min(na), out)
        });
    } else {
        for (s, out) in dst.chunks_mut(slab).enumerate() {
            do_slab(s, out);
        }
    }
}

/// `out[i][j] = src[j * n + i]`: `n` (2 to 4) rows of `out` from as many
/// interleaved in `src`.
fn deinterleave<T: Copy>(src: &[T], out: &mut [T], n: usize) {
    let nl = out.len() / n.max(1);
    for (i, row) in out.chunks_exact_mut(nl.max(1)).enumerate() {
        match (n, i) {
            (2, 0) => member::<T, 2, 0>(src, row),
            (2, _) => member::<T, 2, 1>(src, row),
            (3, 0) => member::<T, 3, 0>(src, row),
            (3, 1) => member::<T, 3, 1>(src, row),
            (3, _) => member::<T, 3, 2>(src, row),
            (_, 0) => member::<T, 4, 0>(src, row),
            (_, 1) => member::<T, 4, 1>(src, row),
            (_, 2) => member::<T, 4, 2>(src, row),
            _ => member::<T, 4, 3>(src, row),
        }
    }
}

/// `row[j] = src[j * N + I]`, both known here, so the loop vectorizes as
/// loads of whole groups and shuffles.
fn member<T: Copy, const N: usize, const I: usize>(src: &[T], row: &mut [T]) {
    super::vmath::vectorized(|| {
        for (o, group) in row.iter_mut().zip(src.chunks_exact(N)) {
            *o = group[I];
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, element by element.
    fn naive(src: &[u32], base: isize, st: &[isize], dims: &[usize]) -> Vec<u32> {
        let n: usize = dims.iter().product();
        (0..n)
            .map(|i| {
                let (mut rem, mut off) = (i, base);
                for d in (0..dims.len()).rev() {
                    off += (rem % dims[d]) as isize * st[d];
                    rem /= dims[d];
                }
                src[off as usize]
            })
            .collect()
    }

    fn strides(dims: &[usize]) -> Vec<isize> {
        let mut s = vec![1isize; dims.len()];
        for d in (0..dims.len().saturating_sub(1)).rev() {
            s[d] = s[d + 1] * dims[d + 1] as isize;
        }
        s
    }

    #[test]
    fn transposes_expands_and_slices_match_the_definition() {
        let src: Vec<u32> = (0..70_000).collect();
        // (source dims, permutation); the last two are large enough to split.
        let perms: [(&[usize], &[usize]); 13] = [
            // NHWC to NCHW of 2 to 4 channels (interleaved rows), batched too.
            (&[1, 50, 155, 3], &[0, 3, 1, 2]),
            (&[2, 7, 9, 2], &[0, 3, 1, 2]),
            (&[1, 30, 31, 4], &[0, 3, 1, 2]),
            (&[3, 100, 3], &[0, 2, 1]),
            (&[1, 1, 50, 128], &[0, 3, 2, 1]),
            (&[1, 128, 50, 1], &[0, 3, 2, 1]),
            (&[37, 41], &[1, 0]),
            (&[3, 17, 5, 19], &[0, 2, 3, 1]),
            (&[3, 17, 5, 19], &[3, 1, 0, 2]),
            (&[2, 3, 4, 5, 6], &[4, 0, 2, 1, 3]),
            (&[64, 300], &[1, 0]),
            (&[200, 300], &[1, 0]),
            (&[2, 200, 100], &[0, 2, 1]),
        ];
        for (sd, perm) in perms {
            let s = strides(sd);
            let st: Vec<isize> = perm.iter().map(|&p| s[p]).collect();
            let dims: Vec<usize> = perm.iter().map(|&p| sd[p]).collect();
            let want = naive(&src, 0, &st, &dims);
            let mut dst = vec![0u32; dims.iter().product()];
            crate::par::inline(|| strided_copy(&src, 0, &st, &mut dst, &dims));
            assert_eq!(dst, want, "{sd:?} {perm:?}");
            let pool = crate::par::Pool::new(3).unwrap();
            let mut dst = vec![0u32; dims.iter().product()];
            pool.install(|| strided_copy(&src, 0, &st, &mut dst, &dims));
            assert_eq!(dst, want, "{sd:?} {perm:?} on three threads");
        }
        // A broadcast (stride 0) and an offset slice with steps.
        let cases: [(isize, &[isize], &[usize]); 3] = [
            (0, &[0, 1], &[7, 33]),
            (5, &[3, 0], &[9, 40]),
            (100, &[200, 2, 7], &[4, 10, 11]),
        ];
        for (base, st, dims) in cases {
            let mut dst = vec![0u32; dims.iter().product()];
            strided_copy(&src, base, st, &mut dst, dims);
            assert_eq!(dst, naive(&src, base, st, dims), "{st:?} {dims:?}");
        }
    }
}
