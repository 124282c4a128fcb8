//! Matrix-vector products over row-major f32 matrices: `out[i] = dot(m[first
//! + i, :], v)`. The recurrent step of RNN/GRU/LSTM is one per time step,
//! with `m` small enough to stay in cache, so the product is bound by how
//! many multiply-adds are in flight: the AVX-512 path keeps eight rows'
//! accumulators in registers and loads each slice of `v` once for all eight
//! (one accumulator per row makes a single row latency-bound).

/// Rows taken together by the AVX-512 path.
const ROWS: usize = 8;
/// Rows at most this long go sixteen at a time, their sums reduced
/// together ([`block16`]): with one or two vectors of products per row, one
/// horizontal sum per row would cost more than the products.
const SHORT: usize = 64;

/// `out[i] = dot(m[(first + i) * n ..][..n], v)` for every `i` of `out`.
///
/// # Panics
/// If `m` has fewer than `(first + out.len()) * n` elements or `v` fewer
/// than `n`.
pub fn rows(m: &[f32], n: usize, v: &[f32], first: usize, out: &mut [f32]) {
    assert!(m.len() >= (first + out.len()) * n && v.len() >= n);
    #[cfg(target_arch = "x86_64")]
    if crate::kernels::vmath::avx512() {
        // SAFETY: the CPU has the features (checked just above) and the
        // bounds hold (asserted above).
        return unsafe { rows_avx512(m, n, v, first, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::kernels::vmath::avx2() {
        // SAFETY: as above.
        return unsafe { rows_avx2(m, n, v, first, out) };
    }
    for (i, x) in out.iter_mut().enumerate() {
        let j = first + i;
        *x = dot8(&m[j * n..(j + 1) * n], v);
    }
}

/// `dot(row, v)` in 8 lanes, so the compiler vectorizes the sum.
#[inline(always)]
fn dot8(row: &[f32], v: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    for (c, x) in row.chunks_exact(8).zip(v.chunks_exact(8)) {
        for l in 0..8 {
            acc[l] += c[l] * x[l];
        }
    }
    let tail = row.len() / 8 * 8;
    let mut s: f32 = acc.iter().sum();
    for i in tail..row.len() {
        s += row[i] * v[i];
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn rows_avx512(m: &[f32], n: usize, v: &[f32], first: usize, out: &mut [f32]) {
    let base = m.as_ptr().add(first * n);
    let mut i = 0;
    if n <= SHORT {
        while i + 16 <= out.len() {
            block16(base.add(i * n), n, v.as_ptr(), &mut out[i..i + 16]);
            i += 16;
        }
    }
    while i + ROWS <= out.len() {
        block::<ROWS>(base.add(i * n), n, v.as_ptr(), &mut out[i..i + ROWS]);
        i += ROWS;
    }
    while i < out.len() {
        block::<1>(base.add(i * n), n, v.as_ptr(), &mut out[i..i + 1]);
        i += 1;
    }
}

/// [`rows`] in AVX2 registers: eight rows at a time, as the AVX-512 path
/// (the baseline form, one row at a time in SSE, left a GRU's step 2.3x
/// behind ONNX Runtime on an AVX2 CPU).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2(m: &[f32], n: usize, v: &[f32], first: usize, out: &mut [f32]) {
    let base = m.as_ptr().add(first * n);
    let mut i = 0;
    while i + ROWS <= out.len() {
        block_avx2::<ROWS>(base.add(i * n), n, v.as_ptr(), &mut out[i..i + ROWS]);
        i += ROWS;
    }
    while i < out.len() {
        block_avx2::<1>(base.add(i * n), n, v.as_ptr(), &mut out[i..i + 1]);
        i += 1;
    }
}

/// `R` rows from `m` (row stride `n`) against `v`, 8 lanes at a time, the
/// last partial slice by masked loads.
///
/// # Safety
/// AVX2 and FMA; `m` holds `R` rows of `n`, `v` holds `n`; `out` has `R`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn block_avx2<const R: usize>(m: *const f32, n: usize, v: *const f32, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_ps(); R];
    let full = n / 8 * 8;
    let mut k = 0;
    while k < full {
        let x = _mm256_loadu_ps(v.add(k));
        for (r, a) in acc.iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(_mm256_loadu_ps(m.add(r * n + k)), x, *a);
        }
        k += 8;
    }
    if k < n {
        let index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((n - k) as i32), index);
        let x = _mm256_maskload_ps(v.add(k), mask);
        for (r, a) in acc.iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(_mm256_maskload_ps(m.add(r * n + k), mask), x, *a);
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        let half = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
        let pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
        *o = _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
    }
}

/// `R` rows from `m` (row stride `n`) against `v`, 16 lanes at a time, the
/// last partial slice under a mask.
///
/// # Safety
/// AVX-512 F and FMA; `m` holds `R` rows of `n`, `v` holds `n`; `out` has `R`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn block<const R: usize>(m: *const f32, n: usize, v: *const f32, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_ps(); R];
    let full = n / 16 * 16;
    let mut k = 0;
    while k < full {
        let x = _mm512_loadu_ps(v.add(k));
        for (r, a) in acc.iter_mut().enumerate() {
            *a = _mm512_fmadd_ps(_mm512_loadu_ps(m.add(r * n + k)), x, *a);
        }
        k += 16;
    }
    if k < n {
        let mask: __mmask16 = ((1u32 << (n - k)) - 1) as __mmask16;
        let x = _mm512_maskz_loadu_ps(mask, v.add(k));
        for (r, a) in acc.iter_mut().enumerate() {
            *a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, m.add(r * n + k)), x, *a);
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o = _mm512_reduce_add_ps(a);
    }
}

/// Sixteen rows of at most [`SHORT`] from `m` (row stride `n`) against
/// `v`: sixteen accumulators, then one transposing sum tree that leaves
/// row `r`'s total in lane `r` (4 levels of 8, 4, 2 and 2 adds instead of
/// sixteen horizontal sums).
///
/// # Safety
/// AVX-512 F and FMA; `m` holds 16 rows of `n`, `v` holds `n`; `out` has 16.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn block16(m: *const f32, n: usize, v: *const f32, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let mut a = [_mm512_setzero_ps(); 16];
    let mut k = 0;
    while k < n {
        let left = n - k;
        let mask: __mmask16 = if left >= 16 {
            !0
        } else {
            ((1u32 << left) - 1) as __mmask16
        };
        let x = _mm512_maskz_loadu_ps(mask, v.add(k));
        for (r, acc) in a.iter_mut().enumerate() {
            *acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, m.add(r * n + k)), x, *acc);
        }
        k += 16;
    }
    // Per 128-bit lane: rows 2i and 2i+1 interleaved, elements 0+2 and 1+3.
    let t: [__m512; 8] = std::array::from_fn(|i| {
        let (x, y) = (a[2 * i], a[2 * i + 1]);
        _mm512_add_ps(_mm512_unpacklo_ps(x, y), _mm512_unpackhi_ps(x, y))
    });
    // Per 128-bit lane: the lane's sums of rows 4j..4j+4.
    let q: [__m512; 4] = std::array::from_fn(|j| {
        let (x, y) = (t[2 * j], t[2 * j + 1]);
        _mm512_add_ps(
            _mm512_shuffle_ps::<0x44>(x, y),
            _mm512_shuffle_ps::<0xEE>(x, y),
        )
    });
    // Lanes 0+1 and 2+3, then across the halves: row r in lane r.
    let pair = |x: __m512, y: __m512| {
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(x, y),
            _mm512_shuffle_f32x4::<0xDD>(x, y),
        )
    };
    let sums = pair(pair(q[0], q[1]), pair(q[2], q[3]));
    _mm512_storeu_ps(out.as_mut_ptr(), sums);
}

/// `out[j] = Σ_k x[k] · b[k * ldb + col + j]`: a vector times columns
/// `col..col + out.len()` of a row-major matrix whose rows are `ldb` apart
/// (`x.len()` of them), the products in registers. A recurrent step's
/// product with `R` stored transposed is one: each output column's sum runs
/// in its own lane, so there is no horizontal sum per row as in [`rows`],
/// and `b` streams through in rows of contiguous vectors.
///
/// # Panics
/// If `b` has fewer than `(x.len() - 1) * ldb + col + out.len()` elements.
pub fn columns(x: &[f32], b: &[f32], ldb: usize, col: usize, out: &mut [f32]) {
    let n = out.len();
    if x.is_empty() || n == 0 {
        out.fill(0.0);
        return;
    }
    assert!(ldb >= col + n && b.len() >= (x.len() - 1) * ldb + col + n);
    #[cfg(target_arch = "x86_64")]
    if crate::kernels::vmath::avx512() {
        // SAFETY: the CPU has the features (checked just above) and the
        // bounds hold (asserted above).
        return unsafe { columns_avx512(x, b, ldb, col, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::kernels::vmath::avx2() {
        // SAFETY: as above.
        return unsafe { columns_avx2(x, b, ldb, col, out) };
    }
    out.fill(0.0);
    for (k, &xk) in x.iter().enumerate() {
        let row = &b[k * ldb + col..k * ldb + col + n];
        for (o, &v) in out.iter_mut().zip(row) {
            *o += xk * v;
        }
    }
}

/// [`columns`] in AVX-512 registers: blocks of 16 vectors (256 columns),
/// then of 4, then single ones, the last under a mask.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn columns_avx512(x: &[f32], b: &[f32], ldb: usize, col: usize, out: &mut [f32]) {
    let n = out.len();
    let base = b.as_ptr().add(col);
    let mut j = 0;
    while j + 256 <= n {
        columns_block::<16>(x, base.add(j), ldb, out[j..].as_mut_ptr(), u16::MAX);
        j += 256;
    }
    while j + 64 <= n {
        columns_block::<4>(x, base.add(j), ldb, out[j..].as_mut_ptr(), u16::MAX);
        j += 64;
    }
    while j < n {
        let left = n - j;
        let mask = if left >= 16 {
            u16::MAX
        } else {
            ((1u32 << left) - 1) as u16
        };
        columns_block::<1>(x, base.add(j), ldb, out[j..].as_mut_ptr(), mask);
        j += 16;
    }
}

/// `V` vectors of columns from `b` (rows `ldb` apart) against every `x[k]`,
/// the last vector's lanes under `last`.
///
/// # Safety
/// AVX-512 F and FMA; `b` holds `x.len()` rows of the block's lanes, `out`
/// the block's lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn columns_block<const V: usize>(
    x: &[f32],
    b: *const f32,
    ldb: usize,
    out: *mut f32,
    last: u16,
) {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_ps(); V];
    let load = |p: *const f32, v: usize| {
        if v + 1 == V && last != u16::MAX {
            _mm512_maskz_loadu_ps(last, p.add(16 * v))
        } else {
            _mm512_loadu_ps(p.add(16 * v))
        }
    };
    for (k, &xk) in x.iter().enumerate() {
        let s = _mm512_set1_ps(xk);
        let row = b.add(k * ldb);
        for (v, a) in acc.iter_mut().enumerate() {
            *a = _mm512_fmadd_ps(load(row, v), s, *a);
        }
    }
    for (v, a) in acc.iter().enumerate() {
        if v + 1 == V && last != u16::MAX {
            _mm512_mask_storeu_ps(out.add(16 * v), last, *a);
        } else {
            _mm512_storeu_ps(out.add(16 * v), *a);
        }
    }
}

/// [`columns`] in AVX2 registers: blocks of 12 vectors (96 columns), then
/// single ones, the last under a mask.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn columns_avx2(x: &[f32], b: &[f32], ldb: usize, col: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let n = out.len();
    let base = b.as_ptr().add(col);
    let mut j = 0;
    while j + 96 <= n {
        let mut acc = [_mm256_setzero_ps(); 12];
        for (k, &xk) in x.iter().enumerate() {
            let s = _mm256_set1_ps(xk);
            let row = base.add(k * ldb + j);
            for (v, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(_mm256_loadu_ps(row.add(8 * v)), s, *a);
            }
        }
        for (v, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.as_mut_ptr().add(j + 8 * v), *a);
        }
        j += 96;
    }
    while j < n {
        let left = (n - j).min(8) as i32;
        let index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), index);
        let mut acc = _mm256_setzero_ps();
        for (k, &xk) in x.iter().enumerate() {
            let row = base.add(k * ldb + j);
            acc = _mm256_fmadd_ps(_mm256_maskload_ps(row, mask), _mm256_set1_ps(xk), acc);
        }
        _mm256_maskstore_ps(out.as_mut_ptr().add(j), mask, acc);
        j += 8;
    }
}

/// Products below this many multiply-adds stay on one thread.
const VEC_MAT_PAR_WORK: usize = 1 << 18;

/// `out[j] (+)= Σ_k x[k] · b[k, j]` for row-major `b` (`[x.len(), n]`): a row
/// vector times a matrix, as a MatMul with one row is (a classifier's fully
/// connected layers at batch 1). It streams `b` once and is bound by memory,
/// so the columns are split in stripes, one per thread, each thread reading
/// its stripe of every row; `accumulate` adds to `out` (a bias already there).
///
/// # Panics
/// If `b` has fewer than `x.len() * n` elements or `out` is not `n` long.
pub fn vec_mat(x: &[f32], b: &[f32], n: usize, out: &mut [f32], accumulate: bool) {
    assert!(b.len() >= x.len() * n && out.len() == n);
    let threads = crate::par::threads();
    let stripe = if threads > 1 && x.len() * n >= VEC_MAT_PAR_WORK {
        n.div_ceil(threads).next_multiple_of(16).max(64)
    } else {
        n.max(1)
    };
    let run = |s: usize, o: &mut [f32]| {
        crate::kernels::vmath::vectorized(|| stripe_of(x, b, n, s * stripe, o, accumulate))
    };
    if stripe < n {
        crate::par::chunks_mut(out, stripe, run);
    } else {
        run(0, out);
    }
}

/// Columns of `out` [`stripe_of`] takes at a time: they stay in L1 while
/// every row of `b` passes over them.
const VEC_MAT_TILE: usize = 2048;

/// Columns `j0..j0 + out.len()` of [`vec_mat`]: in tiles of
/// [`VEC_MAT_TILE`] columns, four rows of `b` at a time, so that four
/// streams from memory are in flight and the output is read and written once
/// per four rows (one row at a time, a single thread reached about 12 GB/s
/// on a decoder's 768 x 50257 head).
#[inline(always)]
fn stripe_of(x: &[f32], b: &[f32], n: usize, j0: usize, out: &mut [f32], accumulate: bool) {
    if !accumulate {
        out.fill(0.0);
    }
    let w = out.len();
    let mut t0 = 0;
    while t0 < w {
        let tw = VEC_MAT_TILE.min(w - t0);
        let o = &mut out[t0..t0 + tw];
        let row = |k: usize| &b[k * n + j0 + t0..k * n + j0 + t0 + tw];
        let mut k = 0;
        while k + 4 <= x.len() {
            let (x0, x1, x2, x3) = (x[k], x[k + 1], x[k + 2], x[k + 3]);
            let (r0, r1, r2, r3) = (row(k), row(k + 1), row(k + 2), row(k + 3));
            for j in 0..tw {
                o[j] += x0 * r0[j] + x1 * r1[j] + x2 * r2[j] + x3 * r3[j];
            }
            k += 4;
        }
        for (k, &xk) in x.iter().enumerate().skip(k) {
            let r = row(k);
            for j in 0..tw {
                o[j] += xk * r[j];
            }
        }
        t0 += tw;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row count around the block size and lengths around the vector
    /// width, against a plain f64 sum.
    #[test]
    fn products_match_plain_sums() {
        for n in [1, 7, 16, 17, 25, 64, 100, 256] {
            for rows_n in [1, 3, 8, 9, 20, 33] {
                let first = 2;
                let m: Vec<f32> = (0..(first + rows_n) * n)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                    .collect();
                let v: Vec<f32> = (0..n)
                    .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
                    .collect();
                let mut out = vec![0f32; rows_n];
                rows(&m, n, &v, first, &mut out);
                for (i, &o) in out.iter().enumerate() {
                    let row = &m[(first + i) * n..(first + i + 1) * n];
                    let want: f64 = row.iter().zip(&v).map(|(&a, &b)| a as f64 * b as f64).sum();
                    assert!(
                        (o as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "n {n} rows {rows_n} row {i}: {o} vs {want}"
                    );
                }
            }
        }
    }

    /// Every width around the register blocks, at an offset into wider
    /// rows, against a plain f64 sum.
    #[test]
    fn columns_match_plain_sums() {
        for n in [1, 15, 16, 17, 63, 64, 100, 255, 256, 300, 512] {
            for k in [1, 2, 25, 128] {
                let (ldb, col) = (n + 37, 5);
                let b: Vec<f32> = (0..k * ldb)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                    .collect();
                let x: Vec<f32> = (0..k)
                    .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
                    .collect();
                let mut out = vec![f32::NAN; n + 1];
                columns(&x, &b, ldb, col, &mut out[..n]);
                assert!(out[n].is_nan(), "n {n} k {k}: wrote past the end");
                for (j, &o) in out[..n].iter().enumerate() {
                    let want: f64 = (0..k)
                        .map(|t| x[t] as f64 * b[t * ldb + col + j] as f64)
                        .sum();
                    assert!(
                        (o as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "n {n} k {k} column {j}: {o} vs {want}"
                    );
                }
            }
        }
    }

    /// Stripes in a two-thread pool, one thread, and with a bias already in
    /// `out`, against a plain f64 sum.
    #[test]
    fn vec_mat_matches_plain_sums() {
        let (k, n) = (300, 1000);
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let x: Vec<f32> = (0..k)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
            .collect();
        let bias: Vec<f32> = (0..n).map(|j| j as f32 / 100.0).collect();
        let want: Vec<f64> = (0..n)
            .map(|j| {
                bias[j] as f64
                    + (0..k)
                        .map(|t| x[t] as f64 * b[t * n + j] as f64)
                        .sum::<f64>()
            })
            .collect();
        let pool = crate::par::Pool::new(2).unwrap();
        for threads in [1, 2] {
            let mut out = bias.clone();
            let run = || vec_mat(&x, &b, n, &mut out, true);
            if threads == 2 {
                pool.install(run);
            } else {
                crate::par::inline(run);
            }
            for (j, (&o, &w)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (o as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "{threads} threads, column {j}: {o} vs {w}"
                );
            }
        }
        let mut out = vec![7f32; n];
        vec_mat(&x, &b, n, &mut out, false);
        assert!((out[3] as f64 - (want[3] - bias[3] as f64)).abs() < 1e-3);
    }
}
