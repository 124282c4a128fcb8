//! GELU (the erf form) over a slice in AVX-512 registers (AVX2 ones on
//! CPUs without AVX-512): the formulas of [`vmath::gelu_erf`] with fused
//! multiply-adds, two vectors per iteration.
//! Compiled from the scalar form, each vector is one chain of about forty
//! dependent operations (two polynomials, a division, an exponential)
//! that leaves the FMA units idle; an FFN's GELU took as long as its GEMM.

// The coefficients are `vmath::erf`'s, digits beyond f32 included.
#![allow(clippy::excessive_precision)]

use super::vmath;

/// `x = gelu_erf(x)` for every element of `xs`, in parallel chunks.
// A closure, not the function item: see `vmath::map`.
#[allow(clippy::redundant_closure)]
pub fn gelu_erf_slice(xs: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if vmath::avx512() {
        super::layout::par_rows(xs, 1 << 14, |_, chunk| {
            // SAFETY: the CPU has AVX-512F.
            unsafe { avx512::gelu_erf(chunk) }
        });
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if vmath::avx2() {
        super::layout::par_rows(xs, 1 << 14, |_, chunk| {
            // SAFETY: the CPU has AVX2 and FMA. (The scalar form behind
            // `vmath::map_in_place` stayed a call per element, in SSE.)
            unsafe { avx2::gelu_erf(chunk) }
        });
        return;
    }
    vmath::map_in_place(xs, |v| vmath::gelu_erf(v));
}

/// `o = gelu_erf(x)` for every element of `o` (`x` at least as long), in
/// parallel chunks: one pass over both.
#[allow(clippy::redundant_closure)]
pub fn gelu_erf_into(x: &[f32], o: &mut [f32]) {
    const ROW: usize = 1 << 14;
    let src = |r: usize, n: usize| &x[r * ROW..r * ROW + n];
    #[cfg(target_arch = "x86_64")]
    if vmath::avx512() {
        super::layout::par_rows(o, ROW, |r, chunk| {
            // SAFETY: the CPU has AVX-512F.
            unsafe { avx512::gelu_erf_into(src(r, chunk.len()), chunk) }
        });
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if vmath::avx2() {
        super::layout::par_rows(o, ROW, |r, chunk| {
            // SAFETY: the CPU has AVX2 and FMA.
            unsafe { avx2::gelu_erf_into(src(r, chunk.len()), chunk) }
        });
        return;
    }
    vmath::map(x, o, |v| vmath::gelu_erf(v));
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use std::arch::x86_64::*;

    use super::super::vmath_avx512::exp_in_range;

    /// # Safety
    /// AVX-512F and FMA are present.
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    pub unsafe fn gelu_erf(xs: &mut [f32]) {
        super::super::vmath_avx512::map_in_place(xs, |v| gelu(v))
    }

    /// # Safety
    /// AVX-512F and FMA are present.
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    pub unsafe fn gelu_erf_into(x: &[f32], o: &mut [f32]) {
        super::super::vmath_avx512::map_into(x, o, |v| gelu(v))
    }

    #[inline(always)]
    unsafe fn set(v: f32) -> __m512 {
        _mm512_set1_ps(v)
    }

    /// `acc * x + c` over the coefficients, highest first.
    #[inline(always)]
    unsafe fn horner(x: __m512, coeffs: &[f32]) -> __m512 {
        let mut acc = set(coeffs[0]);
        for &c in &coeffs[1..] {
            acc = _mm512_fmadd_ps(acc, x, set(c));
        }
        acc
    }

    /// `0.5 x (1 + erf(x / sqrt 2))` on 16 lanes, as [`super::vmath::gelu_erf`]
    /// (also the microkernels' epilogue).
    ///
    /// # Safety
    /// AVX-512F and FMA are present (the caller is compiled with them).
    #[inline(always)]
    pub(in crate::kernels) unsafe fn gelu(x: __m512) -> __m512 {
        let sign = _mm512_set1_epi32(i32::MIN);
        let abs = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(x)));
        let e = erfc_nonneg(_mm512_mul_ps(abs, set(std::f32::consts::FRAC_1_SQRT_2)));
        // 1 + erf: erfc(|z|) below 0, 2 - erfc(|z|) from 0 (NaN: either,
        // and the product below is NaN).
        let negative = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_setzero_ps());
        let q = _mm512_mask_blend_ps(negative, _mm512_sub_ps(set(2.0), e), e);
        _mm512_mul_ps(_mm512_mul_ps(set(0.5), x), q)
    }

    /// [`super::vmath::erfc_nonneg`], lane by lane; 1 / (1 + a/2) by the
    /// 14-bit reciprocal and a Newton step (a division took a third of the
    /// GELU's time).
    #[inline(always)]
    unsafe fn erfc_nonneg(abs: __m512) -> __m512 {
        // `min` returns its second operand for a NaN: 10.
        let a = _mm512_min_ps(abs, set(10.0));
        let d = _mm512_fmadd_ps(set(0.5), a, set(1.0));
        let r = _mm512_rcp14_ps(d);
        let t = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, set(2.0)));
        let poly = horner(
            t,
            &[
                0.170_872_77,
                -0.822_152_23,
                1.488_515_87,
                -1.135_203_98,
                0.278_868_07,
                -0.186_288_06,
                0.096_784_18,
                0.374_091_96,
                1.000_023_7,
                -1.265_512_2,
            ],
        );
        _mm512_mul_ps(t, exp_in_range(_mm512_fnmadd_ps(a, a, poly)))
    }
}

/// The erf GELU over a slice in AVX2 registers ([`super::vmath_avx2`]).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::vmath_avx2::gelu_erf as gelu;

    /// # Safety
    /// AVX2 and FMA are present.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn gelu_erf(xs: &mut [f32]) {
        super::super::vmath_avx2::map_in_place(xs, |v| gelu(v))
    }

    /// # Safety
    /// AVX2 and FMA are present.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn gelu_erf_into(x: &[f32], o: &mut [f32]) {
        super::super::vmath_avx2::map_into(x, o, |v| gelu(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scalar form against erfc in f64 (`1 + erf(z) = erfc(-z)`):
    /// within 3e-7 of the value (the erfc's 1.2e-7 and the roundings) plus
    /// the f32 roundings of the exponential's argument, about `z²` (a few
    /// 2^-24 of it, relative: 1e-5 at x = -12), where `1 + erf` computed as
    /// a sum lost every digit below -4.
    #[test]
    fn the_scalar_form_holds_to_f64() {
        for i in -12_000..12_000 {
            let x = i as f32 * 1e-3;
            let want = 0.5 * f64::from(x) * libm::erfc(-f64::from(x) / std::f64::consts::SQRT_2);
            let got = f64::from(vmath::gelu_erf(x));
            let z2 = f64::from(x) * f64::from(x) / 2.0;
            let rel = 3e-7 + (z2 + 2.0) * 2f64.powi(-22);
            assert!(
                (got - want).abs() <= rel * want.abs() + 1e-38,
                "gelu({x}) = {got}, f64 {want}"
            );
        }
    }

    #[test]
    fn matches_the_scalar_form() {
        let mut xs: Vec<f32> = (-4000..4000).map(|i| i as f32 * 0.003).collect();
        xs.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            0.5,
            -0.5,
            30.0,
            -30.0,
        ]);
        let want: Vec<f32> = xs.iter().map(|&x| vmath::gelu_erf(x)).collect();
        let mut got = xs.clone();
        gelu_erf_slice(&mut got);
        let mut into = vec![0.0; xs.len()];
        gelu_erf_into(&xs, &mut into);
        for (a, b) in got.iter().zip(&into) {
            assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        }
        for (x, (g, w)) in xs.iter().zip(got.iter().zip(&want)) {
            assert!(
                g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= 2e-7 * (1.0 + w.abs()),
                "gelu({x}) = {g}, scalar {w}"
            );
        }
    }
}
