//! Matrix-vector products over row-major f32 matrices: `out[i] = dot(m[first
//! + i, :], v)`. The recurrent step of RNN/GRU/LSTM is one per time step,
//! with `m` small enough to stay in cache, so the product is bound by how
//! many multiply-adds are in flight: the AVX-512 path keeps eight rows'
//! accumulators in registers and loads each slice of `v` once for all eight
//! (one accumulator per row makes a single row latency-bound).

/// Rows taken together by the AVX-512 path.
const ROWS: usize = 8;

/// `out[i] = dot(m[(first + i) * n ..][..n], v)` for every `i` of `out`.
///
/// # Panics
/// If `m` has fewer than `(first + out.len()) * n` elements or `v` fewer
/// than `n`.
pub fn rows(m: &[f32], n: usize, v: &[f32], first: usize, out: &mut [f32]) {
    assert!(m.len() >= (first + out.len()) * n && v.len() >= n);
    #[cfg(target_arch = "x86_64")]
    if super::vmath::avx512() {
        // SAFETY: the CPU has the features (checked just above) and the
        // bounds hold (asserted above).
        return unsafe { rows_avx512(m, n, v, first, out) };
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
    while i + ROWS <= out.len() {
        block::<ROWS>(base.add(i * n), n, v.as_ptr(), &mut out[i..i + ROWS]);
        i += ROWS;
    }
    while i < out.len() {
        block::<1>(base.add(i * n), n, v.as_ptr(), &mut out[i..i + 1]);
        i += 1;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row count around the block size and lengths around the vector
    /// width, against a plain f64 sum.
    #[test]
    fn products_match_plain_sums() {
        for n in [1, 7, 16, 17, 64, 100, 256] {
            for rows_n in [1, 3, 8, 9, 20] {
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
}
