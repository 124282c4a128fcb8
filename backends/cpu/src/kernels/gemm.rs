//! Matrix products through the `gemm` crate (f32, f64), with row-major
//! operands and optional accumulation into the destination.

/// `c[m×n] (+)= a[m×k] · b[k×n]`, all row-major with leading dims `lda`, `ldb`, `ldc`.
/// Threads: those of [`crate::par::threads`] when the product is large.
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: GemmElem>(
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    c: &mut [T],
    ldc: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for r in 0..m {
                c[r * ldc..r * ldc + n].fill(T::ZERO);
            }
        }
        return;
    }
    assert!(
        a.len() >= (m - 1) * lda + k
            && b.len() >= (k - 1) * ldb + n
            && c.len() >= (m - 1) * ldc + n,
        "gemm operand too small"
    );
    let work = m * n * k;
    let par = if work >= 1 << 18 && crate::par::parallel() {
        gemm::Parallelism::Rayon(crate::par::threads())
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the assertion above bounds every access the strides allow.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            ldc as isize,
            accumulate,
            a.as_ptr(),
            1,
            lda as isize,
            b.as_ptr(),
            1,
            ldb as isize,
            if accumulate { T::ONE } else { T::ZERO },
            T::ONE,
            false,
            false,
            false,
            par,
        )
    }
}

/// `c[m×n] (+)= A · B` with explicit (row, column) strides of `a` and `b`, so
/// either operand can be read transposed. `c` is row-major with `ldc`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_strided<T: GemmElem>(
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    (a_rs, a_cs): (usize, usize),
    b: &[T],
    (b_rs, b_cs): (usize, usize),
    c: &mut [T],
    ldc: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 || k == 0 {
        if k == 0 && !accumulate {
            for r in 0..m {
                c[r * ldc..r * ldc + n].fill(T::ZERO);
            }
        }
        return;
    }
    let last = |r: usize, c: usize, rs: usize, cs: usize| (r - 1) * rs + (c - 1) * cs;
    assert!(
        a.len() > last(m, k, a_rs, a_cs)
            && b.len() > last(k, n, b_rs, b_cs)
            && c.len() > last(m, n, ldc, 1),
        "gemm operand too small"
    );
    // At least 2^19 multiply-adds per thread: a small product split over
    // sixteen threads spends more waking them than computing.
    let threads = crate::par::threads().min((m * n * k) >> 19);
    let par = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the assertion above bounds every access the strides allow.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            ldc as isize,
            accumulate,
            a.as_ptr(),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            if accumulate { T::ONE } else { T::ZERO },
            T::ONE,
            false,
            false,
            false,
            par,
        )
    }
}

/// Element types the gemm crate multiplies.
pub trait GemmElem: Copy + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
}

impl GemmElem for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
}

impl GemmElem for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_product_matches_naive() {
        let (m, n, k) = (3, 5, 4);
        let a: Vec<f32> = (0..m * k).map(|i| i as f32 * 0.5 - 2.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 - 3.0).collect();
        let mut c = vec![0f32; m * n];
        gemm(m, n, k, &a, k, &b, n, &mut c, n, false);
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                assert!((c[i * n + j] - want).abs() < 1e-5);
            }
        }
        let mut acc = c.clone();
        gemm(m, n, k, &a, k, &b, n, &mut acc, n, true);
        assert!(acc.iter().zip(&c).all(|(x, y)| (x - 2.0 * y).abs() < 1e-4));
    }
}
