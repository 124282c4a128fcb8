//! [`super::vmath`]'s exponential on the 16 lanes of an AVX-512 register, with
//! fused multiply-adds: the formula and constants of the scalar form, NaN
//! kept as it keeps it (the AVX2 forms are in [`super::vmath_avx2`]).
//!
//! # Safety
//! Every function needs AVX-512F and FMA (the callers' `target_feature`).

// The coefficients are `vmath`'s, digits beyond f32 included.
#![allow(clippy::excessive_precision)]

use std::arch::x86_64::*;

use super::vmath::{self, LN2_HI, LN2_LO, LOG2E, ROUND};

#[inline(always)]
unsafe fn set(v: f32) -> __m512 {
    _mm512_set1_ps(v)
}

/// `e^x` where `x` lies in [-103.9, 88.72] (no lane's result is 0 or
/// infinite there; a NaN lane stays NaN): what `erf` passes it.
#[inline(always)]
pub unsafe fn exp_in_range(x: __m512) -> __m512 {
    // `maxps`/`minps` return their second operand where either is NaN.
    let c = _mm512_min_ps(set(vmath::EXP_HALVED), _mm512_max_ps(set(-87.3), x));
    let t = _mm512_fmadd_ps(c, set(LOG2E), set(ROUND));
    let n = _mm512_sub_ps(t, set(ROUND));
    let r = _mm512_fnmadd_ps(n, set(LN2_HI), c);
    let r = _mm512_fnmadd_ps(n, set(LN2_LO), r);
    let mut p = set(1.987_569_1e-4);
    for k in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        5.000_000_1e-1,
    ] {
        p = _mm512_fmadd_ps(p, r, set(k));
    }
    let y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), set(1.0));
    let bits = _mm512_slli_epi32::<23>(_mm512_add_epi32(
        _mm512_castps_si512(t),
        _mm512_set1_epi32(127),
    ));
    _mm512_mul_ps(y, _mm512_castsi512_ps(bits))
}

/// `e^x` for `x` at most `EXP_HALVED` (a softmax row less its maximum), 0
/// below -103.9, NaN kept: [`super::vmath::exp`] without the top of the
/// range.
#[inline(always)]
pub unsafe fn exp_low(x: __m512) -> __m512 {
    _mm512_mask_mov_ps(
        exp_in_range(x),
        _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, set(-103.9)),
        _mm512_setzero_ps(),
    )
}

/// `1 / d` for `d` from 1 up to about `e^87`: the 14-bit estimate and one
/// Newton step (relative error near 2^-28 before rounding, so within an ulp
/// or two of the division). A 16-lane division is one instruction of about
/// 16 cycles on a single port of Intel's cores; this is three of 2 to 4.
#[inline(always)]
unsafe fn recip(d: __m512) -> __m512 {
    let r = _mm512_rcp14_ps(d);
    _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, set(1.0)), r)
}

/// `1 / (1 + e^-x)`, as [`super::vmath::sigmoid`] to an ulp or two: lanes
/// below -87 give 0 (the true value is below 1.7e-38, where the scalar form
/// gives 0 from -88.7), NaN stays NaN.
#[inline(always)]
pub unsafe fn sigmoid(x: __m512) -> __m512 {
    // `maxps` returns its second operand where either is NaN: `x`.
    let c = _mm512_max_ps(set(-87.0), x);
    let e = exp_in_range(_mm512_sub_ps(_mm512_setzero_ps(), c));
    let s = recip(_mm512_add_ps(set(1.0), e));
    _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_NLT_UQ>(x, set(-87.0)), s)
}

/// `x · sigmoid(x)`.
#[inline(always)]
pub unsafe fn silu(x: __m512) -> __m512 {
    _mm512_mul_ps(x, sigmoid(x))
}

/// GELU with the tanh approximation, as [`super::vmath::gelu_tanh`]:
/// `x sigmoid(2u)`.
#[inline(always)]
pub unsafe fn gelu_tanh(x: __m512) -> __m512 {
    let cube = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    let inner = _mm512_mul_ps(set(1.595_769_2), _mm512_fmadd_ps(set(0.044715), cube, x));
    _mm512_mul_ps(x, sigmoid(inner))
}

/// `tanh(x)` as [`super::vmath::tanh_exp`] (a recurrent cell's tanh): an
/// odd polynomial below 0.625, `1 - 2 / (e^2|x| + 1)` with the sign of `x`
/// from there (|x| taken at most 44), the reciprocal by [`recip`]; NaN
/// stays NaN.
#[inline(always)]
pub unsafe fn tanh_exp(x: __m512) -> __m512 {
    let sign = _mm512_and_ps(x, set(-0.0));
    let abs = _mm512_andnot_ps(set(-0.0), x);
    let z = _mm512_mul_ps(x, x);
    let mut p = set(-5.704_988_7e-3);
    for k in [
        2.063_908_9e-2,
        -5.373_971_6e-2,
        1.333_144_2e-1,
        -3.333_328_2e-1,
    ] {
        p = _mm512_fmadd_ps(p, z, set(k));
    }
    let small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
    // `minps` returns its second operand where either is NaN: `abs`.
    let a = _mm512_min_ps(set(44.0), abs);
    let e = exp_in_range(_mm512_add_ps(a, a));
    let large = _mm512_fnmadd_ps(set(2.0), recip(_mm512_add_ps(e, set(1.0))), set(1.0));
    let large = _mm512_or_ps(large, sign);
    _mm512_mask_blend_ps(
        _mm512_cmp_ps_mask::<_CMP_LT_OQ>(abs, set(0.625)),
        large,
        small,
    )
}

/// `xs[i] = f(xs[i])` sixteen lanes at a time, the last lanes by masked
/// loads and stores.
#[inline(always)]
pub unsafe fn map_in_place(xs: &mut [f32], f: impl Fn(__m512) -> __m512) {
    let mut chunks = xs.chunks_exact_mut(32);
    for c in &mut chunks {
        let p = c.as_mut_ptr();
        let (a, b) = (f(_mm512_loadu_ps(p)), f(_mm512_loadu_ps(p.add(16))));
        _mm512_storeu_ps(p, a);
        _mm512_storeu_ps(p.add(16), b);
    }
    for c in chunks.into_remainder().chunks_mut(16) {
        let keep = ((1u32 << c.len()) - 1) as __mmask16;
        let v = _mm512_maskz_loadu_ps(keep, c.as_ptr());
        _mm512_mask_storeu_ps(c.as_mut_ptr(), keep, f(v));
    }
}

/// `dst[i] = f(src[i])` sixteen lanes at a time (`src` at least as long as
/// `dst`), the last lanes masked: one pass where a copy and
/// [`map_in_place`] made two.
#[inline(always)]
pub unsafe fn map_into(src: &[f32], dst: &mut [f32], f: impl Fn(__m512) -> __m512) {
    let src = &src[..dst.len()];
    let mut chunks = dst.chunks_exact_mut(32);
    let mut from = src.chunks_exact(32);
    for (c, s) in (&mut chunks).zip(&mut from) {
        let (p, q) = (c.as_mut_ptr(), s.as_ptr());
        let (a, b) = (f(_mm512_loadu_ps(q)), f(_mm512_loadu_ps(q.add(16))));
        _mm512_storeu_ps(p, a);
        _mm512_storeu_ps(p.add(16), b);
    }
    let rest = from.remainder();
    for (c, s) in chunks.into_remainder().chunks_mut(16).zip(rest.chunks(16)) {
        let keep = ((1u32 << c.len()) - 1) as __mmask16;
        let v = _mm512_maskz_loadu_ps(keep, s.as_ptr());
        _mm512_mask_storeu_ps(c.as_mut_ptr(), keep, f(v));
    }
}

#[cfg(test)]
mod tests {
    use super::super::vmath;
    use super::*;

    /// Each function against its scalar form (which divides), NaN, the
    /// infinities and both ends of the exponential's range included.
    #[test]
    fn match_the_scalar_forms() {
        if !vmath::avx512() {
            return;
        }
        let mut xs: Vec<f32> = (-3000..3000).map(|i| i as f32 * 0.037).collect();
        xs.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0]);
        xs.extend([
            86.9, -86.9, 87.1, -87.1, 88.8, -88.8, 104.0, -104.0, 1e30, -1e30, 88.5, 88.7,
            88.722_83,
        ]);
        // Each with the argument of its sigmoid, computed before it with
        // rounding (0 where it is exact): a sigmoid's relative error grows
        // with that rounding times the argument (GELU's cube, FMA'd in the
        // vector form, moves a result near 1e-30 by a few 1e-6).
        type Pair = (
            &'static str,
            unsafe fn(__m512) -> __m512,
            fn(f32) -> f32,
            fn(f32) -> f32,
        );
        let pairs: [Pair; 4] = [
            (
                "tanh_exp",
                |v| unsafe { tanh_exp(v) },
                vmath::tanh_exp,
                |_| 0.0,
            ),
            (
                "sigmoid",
                |v| unsafe { sigmoid(v) },
                vmath::sigmoid,
                |_| 0.0,
            ),
            ("silu", |v| unsafe { silu(v) }, vmath::silu, |_| 0.0),
            (
                "gelu_tanh",
                |v| unsafe { gelu_tanh(v) },
                vmath::gelu_tanh,
                |x| 1.6 * (x + 0.044715 * x * x * x),
            ),
        ];
        for (name, vector, scalar, rounded) in pairs {
            let mut got = xs.clone();
            // SAFETY: the CPU has AVX-512F (checked above).
            unsafe { map_in_place(&mut got, |v| vector(v)) };
            for (x, g) in xs.iter().zip(got) {
                let w = scalar(*x);
                // Two ulps of the result (and the argument's rounding),
                // or 1e-35 where it is all but 0 (below -87 the vector
                // forms give 0, the true silu is under 1.5e-36 there).
                let tol = 2.0 * f32::EPSILON * w.abs() * (1.0 + rounded(*x).abs()) + 1e-35;
                assert!(
                    g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol,
                    "{name}({x}): {g} against {w}"
                );
            }
        }
    }
}
