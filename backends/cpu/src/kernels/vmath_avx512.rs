//! [`super::vmath`]'s exponential on the 16 lanes of an AVX-512 register, with
//! fused multiply-adds: the formula and constants of the scalar form, NaN
//! kept as it keeps it (the AVX2 forms are in [`super::vmath_avx2`]).
//!
//! # Safety
//! Every function needs AVX-512F and FMA (the callers' `target_feature`).

// The coefficients are `vmath`'s, digits beyond f32 included.
#![allow(clippy::excessive_precision)]

use std::arch::x86_64::*;

use super::vmath::{LN2_HI, LN2_LO, LOG2E, ROUND};

#[inline(always)]
unsafe fn set(v: f32) -> __m512 {
    _mm512_set1_ps(v)
}

/// `e^x` where `x` lies in [-103.9, 88.72] (no lane's result is 0 or
/// infinite there; a NaN lane stays NaN): what `erf` passes it.
#[inline(always)]
pub unsafe fn exp_in_range(x: __m512) -> __m512 {
    // `maxps`/`minps` return their second operand where either is NaN.
    let c = _mm512_min_ps(set(88.3), _mm512_max_ps(set(-87.3), x));
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

/// `e^x`, as [`super::vmath::exp`]: infinity above 88.72, 0 below -103.9
/// (so `e^-inf` is 0), NaN kept.
#[inline(always)]
pub unsafe fn exp(x: __m512) -> __m512 {
    let y = exp_in_range(x);
    let y = _mm512_mask_mov_ps(
        y,
        _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, set(88.72)),
        set(f32::INFINITY),
    );
    _mm512_mask_mov_ps(
        y,
        _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, set(-103.9)),
        _mm512_setzero_ps(),
    )
}
