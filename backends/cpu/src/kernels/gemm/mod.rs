//! Matrix products. This file: through the `gemm` crate (f32, f64), with
//! row-major operands and optional accumulation into the destination, for
//! run-time operands and CPUs without the microkernels. The folder:
//! - [`microkernel`]: the f32 register tiles (AVX-512, AVX2) every packed
//!   product runs on;
//! - [`packed`]: products whose constant left operand (a convolution's
//!   filters) is packed once, the right one streamed;
//! - [`weights`]: the mirror, a constant right operand (MatMul, recurrent
//!   weights) packed once;
//! - [`panel_row`]: one row against [`weights`]' packed panels (a decoder's
//!   step, a classifier at batch 1);
//! - [`gemv`]: matrix-vector products over plain row-major matrices (a
//!   recurrent step, one-row MatMuls whose weights are not constant).
//!
//! Imports run one way: `microkernel` <- `packed` <- `weights` <-> `panel_row`
//! (the layout's owner and its one-row kernel); nothing here
//! knows the convolution code that uses it.

pub(crate) mod gemv;
pub(crate) mod microkernel;
pub mod packed;
pub(crate) mod panel_row;
pub mod weights;

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
    // SAFETY: the assertion above bounds every access the strides allow.
    unsafe {
        split(
            m,
            n,
            k,
            Operand(c.as_mut_ptr()),
            (ldc, 1),
            accumulate,
            Operand(a.as_ptr().cast_mut()),
            (lda, 1),
            Operand(b.as_ptr().cast_mut()),
            (ldb, 1),
        )
    }
}

/// An operand's address, shared by the tasks of one product (each reads or
/// writes its own part).
struct Operand<T>(*mut T);
impl<T> Clone for Operand<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Operand<T> {}
impl<T> Operand<T> {
    /// The address (a method, so that closures capture the whole `Operand`).
    fn at(self, offset: usize) -> *mut T {
        self.0.wrapping_add(offset)
    }
}
// SAFETY: the tasks of `split` write disjoint blocks of `c` and only read `a`
// and `b`.
unsafe impl<T> Send for Operand<T> {}
unsafe impl<T> Sync for Operand<T> {}

/// `c (+)= a · b` with (row, column) strides, split into blocks of rows (or
/// of columns, for a wide product) over [`crate::par::threads`], at least
/// 2^19 multiply-adds each: a small product split over sixteen threads spends
/// more handing out work than computing.
///
/// # Safety
/// Every element the strides reach for `m`, `n`, `k` is in bounds.
#[allow(clippy::too_many_arguments)]
unsafe fn split<T: GemmElem>(
    m: usize,
    n: usize,
    k: usize,
    c: Operand<T>,
    (c_rs, c_cs): (usize, usize),
    accumulate: bool,
    a: Operand<T>,
    (a_rs, a_cs): (usize, usize),
    b: Operand<T>,
    (b_rs, b_cs): (usize, usize),
) {
    let block = |(r0, r1): (usize, usize), (j0, j1): (usize, usize)| {
        // SAFETY: rows r0..r1 and columns j0..j1 are inside the product.
        unsafe {
            gemm::gemm(
                r1 - r0,
                j1 - j0,
                k,
                c.at(r0 * c_rs + j0 * c_cs),
                c_cs as isize,
                c_rs as isize,
                accumulate,
                a.at(r0 * a_rs),
                a_cs as isize,
                a_rs as isize,
                b.at(j0 * b_cs),
                b_cs as isize,
                b_rs as isize,
                if accumulate { T::ONE } else { T::ZERO },
                T::ONE,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    };
    let tasks = crate::par::threads().min((m * n * k) >> 19).max(1);
    if tasks == 1 {
        return block((0, m), (0, n));
    }
    if m >= n {
        let per = m.div_ceil(tasks).next_multiple_of(8);
        crate::par::for_each(m.div_ceil(per), |t| {
            block((t * per, ((t + 1) * per).min(m)), (0, n))
        });
    } else {
        let per = n.div_ceil(tasks).next_multiple_of(16);
        crate::par::for_each(n.div_ceil(per), |t| {
            block((0, m), (t * per, ((t + 1) * per).min(n)))
        });
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
    // SAFETY: the assertion above bounds every access the strides allow.
    unsafe {
        split(
            m,
            n,
            k,
            Operand(c.as_mut_ptr()),
            (ldc, 1),
            accumulate,
            Operand(a.as_ptr().cast_mut()),
            (a_rs, a_cs),
            Operand(b.as_ptr().cast_mut()),
            (b_rs, b_cs),
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
