//! [`super::vmath`]'s functions on the 8 lanes of an AVX2 register, with
//! fused multiply-adds: the formulas and constants of the scalar forms, NaN
//! kept as they keep it. For loops that cannot rely on the compiler to
//! vectorize the scalar form (an 8-lane loop inside a microkernel's
//! epilogue stayed scalar, each element a chain of forty operations).
//!
//! # Safety
//! Every function needs AVX2 and FMA (the callers' `target_feature`).

// The coefficients are `vmath`'s, digits beyond f32 included.
#![allow(clippy::excessive_precision)]

use std::arch::x86_64::*;

use rlx_ir::ops::Activation;

use super::vmath::{self, LN2_HI, LN2_LO, LOG2E, ROUND};

#[inline(always)]
unsafe fn set(v: f32) -> __m256 {
    _mm256_set1_ps(v)
}

/// `acc * x + c` over the coefficients, highest first.
#[inline(always)]
unsafe fn horner(x: __m256, coeffs: &[f32]) -> __m256 {
    let mut acc = set(coeffs[0]);
    for &c in &coeffs[1..] {
        acc = _mm256_fmadd_ps(acc, x, set(c));
    }
    acc
}

/// `min(max(x, lo), hi)` with a NaN lane kept NaN (`maxps` and `minps`
/// return their second operand when either is NaN).
#[inline(always)]
unsafe fn clamp(x: __m256, lo: f32, hi: f32) -> __m256 {
    _mm256_min_ps(set(hi), _mm256_max_ps(set(lo), x))
}

/// `e^x` for `x` at most `EXP_HALVED` (the sigmoid's and erf's arguments),
/// 0 below -103.9: [`super::vmath::exp`] without the top of the range.
#[inline(always)]
pub unsafe fn exp_low(x: __m256) -> __m256 {
    _mm256_blendv_ps(
        exp_reduced(x),
        _mm256_setzero_ps(),
        _mm256_cmp_ps::<_CMP_LT_OQ>(x, set(-103.9)),
    )
}

/// `e^x` for `x` clamped to [-87.3, 88.3] (2^n normal).
#[inline(always)]
unsafe fn exp_reduced(x: __m256) -> __m256 {
    let c = clamp(x, -87.3, vmath::EXP_HALVED);
    let t = _mm256_fmadd_ps(c, set(LOG2E), set(ROUND));
    let n = _mm256_sub_ps(t, set(ROUND));
    let r = _mm256_fnmadd_ps(n, set(LN2_HI), c);
    let r = _mm256_fnmadd_ps(n, set(LN2_LO), r);
    let p = horner(
        r,
        &[
            1.987_569_1e-4,
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            5.000_000_1e-1,
        ],
    );
    let y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), set(1.0));
    let bits = _mm256_slli_epi32::<23>(_mm256_add_epi32(
        _mm256_castps_si256(t),
        _mm256_set1_epi32(127),
    ));
    _mm256_mul_ps(y, _mm256_castsi256_ps(bits))
}

/// `1 / (1 + e^-x)`, the reciprocal by the 12-bit estimate and one Newton
/// step (within an ulp or two of the division, which costs as much as the
/// exponential): lanes below -87 give 0 (the true value is below 1.7e-38;
/// the sum stays finite, so the step has no infinity to meet), NaN stays NaN.
#[inline(always)]
pub unsafe fn sigmoid(x: __m256) -> __m256 {
    // `maxps` returns its second operand where either is NaN: `x`.
    let c = _mm256_max_ps(set(-87.0), x);
    let d = _mm256_add_ps(set(1.0), exp_low(_mm256_xor_ps(c, set(-0.0))));
    let r = _mm256_rcp_ps(d);
    let s = _mm256_fmadd_ps(r, _mm256_fnmadd_ps(d, r, set(1.0)), r);
    _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(x, set(-87.0)), s)
}

/// `x · sigmoid(x)`.
#[inline(always)]
pub unsafe fn silu(x: __m256) -> __m256 {
    _mm256_mul_ps(x, sigmoid(x))
}

/// `tanh(x)`, as [`super::vmath::tanh`]: a [13/6] rational function of `x`
/// clamped to +-9.
#[inline(always)]
pub unsafe fn tanh(x: __m256) -> __m256 {
    let sign = set(-0.0);
    let abs = _mm256_andnot_ps(sign, x);
    let c = clamp(x, -9.0, 9.0);
    let z = _mm256_mul_ps(c, c);
    let p = horner(z, &super::vmath::TANH_NUM);
    let q = horner(z, &super::vmath::TANH_DEN);
    let r = _mm256_div_ps(_mm256_mul_ps(p, c), q);
    // From 9 on, +-1. NaN compares false and stays in `r`.
    let one = _mm256_or_ps(set(1.0), _mm256_and_ps(sign, x));
    _mm256_blendv_ps(r, one, _mm256_cmp_ps::<_CMP_GE_OQ>(abs, set(9.0)))
}

/// `tanh(x)` as [`super::vmath::tanh_exp`] (a recurrent cell's tanh): an
/// odd polynomial below 0.625, `1 - 2 / (e^2|x| + 1)` with the sign of `x`
/// from there (|x| taken at most 44), the reciprocal by the 12-bit
/// estimate and one Newton step; NaN stays NaN.
#[inline(always)]
pub unsafe fn tanh_exp(x: __m256) -> __m256 {
    let sign = _mm256_and_ps(x, set(-0.0));
    let abs = _mm256_andnot_ps(set(-0.0), x);
    let z = _mm256_mul_ps(x, x);
    let p = horner(
        z,
        &[
            -5.704_988_7e-3,
            2.063_908_9e-2,
            -5.373_971_6e-2,
            1.333_144_2e-1,
            -3.333_328_2e-1,
        ],
    );
    let small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
    // `minps` returns its second operand where either is NaN: `abs`.
    let a = _mm256_min_ps(set(44.0), abs);
    let d = _mm256_add_ps(exp_low(_mm256_add_ps(a, a)), set(1.0));
    let r = _mm256_rcp_ps(d);
    let r = _mm256_fmadd_ps(r, _mm256_fnmadd_ps(d, r, set(1.0)), r);
    let large = _mm256_or_ps(_mm256_fnmadd_ps(set(2.0), r, set(1.0)), sign);
    _mm256_blendv_ps(large, small, _mm256_cmp_ps::<_CMP_LT_OQ>(abs, set(0.625)))
}

/// GELU with the exact (erf) form, as [`super::vmath::gelu_erf`]: `1 +
/// erf(z)` as `erfc(-z)` below 0 and `2 - erfc(z)` from 0.
#[inline(always)]
pub unsafe fn gelu_erf(x: __m256) -> __m256 {
    let abs = _mm256_andnot_ps(set(-0.0), x);
    let e = erfc_nonneg(_mm256_mul_ps(abs, set(std::f32::consts::FRAC_1_SQRT_2)));
    let negative = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_setzero_ps());
    let q = _mm256_blendv_ps(_mm256_sub_ps(set(2.0), e), e, negative);
    _mm256_mul_ps(_mm256_mul_ps(set(0.5), x), q)
}

/// [`super::vmath::erfc_nonneg`], lane by lane.
#[inline(always)]
unsafe fn erfc_nonneg(abs: __m256) -> __m256 {
    // `min` returns its second operand for a NaN: 10.
    let a = _mm256_min_ps(abs, set(10.0));
    let t = _mm256_div_ps(set(1.0), _mm256_fmadd_ps(set(0.5), a, set(1.0)));
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
    _mm256_mul_ps(t, exp_low(_mm256_fnmadd_ps(a, a, poly)))
}

/// GELU with the tanh approximation, as [`super::vmath::gelu_tanh`]:
/// `x sigmoid(2u)`.
#[inline(always)]
pub unsafe fn gelu_tanh(x: __m256) -> __m256 {
    let cube = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    let inner = _mm256_mul_ps(set(1.595_769_2), _mm256_fmadd_ps(set(0.044715), cube, x));
    _mm256_mul_ps(x, sigmoid(inner))
}

/// `max(x, 0)` with NaN kept, as `vmath::relu`.
#[inline(always)]
unsafe fn relu_keep_nan(x: __m256) -> __m256 {
    let keep = _mm256_cmp_ps::<_CMP_NLT_UQ>(x, _mm256_setzero_ps());
    _mm256_and_ps(keep, x)
}

/// `act` on 8 lanes, in the register.
#[inline(always)]
pub unsafe fn activate(act: Activation, v: __m256) -> __m256 {
    match act {
        Activation::None => v,
        Activation::Relu => relu_keep_nan(v),
        Activation::Sigmoid => sigmoid(v),
        Activation::Tanh => tanh(v),
        Activation::Silu => silu(v),
        Activation::GeluErf => gelu_erf(v),
        Activation::GeluTanh => gelu_tanh(v),
        // min_ps returns its second operand where either is NaN: a NaN lane stays.
        Activation::Relu6 => _mm256_min_ps(_mm256_set1_ps(6.0), relu_keep_nan(v)),
        Activation::HardSwish => {
            // As vmath::hard_swish: a NaN lane stays NaN through the last product.
            let t = _mm256_add_ps(
                _mm256_mul_ps(v, _mm256_set1_ps(1.0 / 6.0)),
                _mm256_set1_ps(0.5),
            );
            let t = _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), _mm256_set1_ps(1.0));
            _mm256_mul_ps(v, t)
        }
    }
}

/// `xs[i] = f(xs[i])` eight lanes at a time, the last lanes through a
/// padded copy.
#[inline(always)]
pub unsafe fn map_in_place(xs: &mut [f32], f: impl Fn(__m256) -> __m256) {
    let mut chunks = xs.chunks_exact_mut(16);
    for c in &mut chunks {
        let p = c.as_mut_ptr();
        let (a, b) = (f(_mm256_loadu_ps(p)), f(_mm256_loadu_ps(p.add(8))));
        _mm256_storeu_ps(p, a);
        _mm256_storeu_ps(p.add(8), b);
    }
    for c in chunks.into_remainder().chunks_mut(8) {
        let mut pad = [0f32; 8];
        pad[..c.len()].copy_from_slice(c);
        _mm256_storeu_ps(pad.as_mut_ptr(), f(_mm256_loadu_ps(pad.as_ptr())));
        let n = c.len();
        c.copy_from_slice(&pad[..n]);
    }
}

/// `dst[i] = f(src[i])` eight lanes at a time (`src` at least as long as
/// `dst`), the last lanes through a padded copy.
#[inline(always)]
pub unsafe fn map_into(src: &[f32], dst: &mut [f32], f: impl Fn(__m256) -> __m256) {
    let src = &src[..dst.len()];
    let mut chunks = dst.chunks_exact_mut(16);
    let mut from = src.chunks_exact(16);
    for (c, s) in (&mut chunks).zip(&mut from) {
        let (p, q) = (c.as_mut_ptr(), s.as_ptr());
        let (a, b) = (f(_mm256_loadu_ps(q)), f(_mm256_loadu_ps(q.add(8))));
        _mm256_storeu_ps(p, a);
        _mm256_storeu_ps(p.add(8), b);
    }
    let rest = from.remainder();
    for (c, s) in chunks.into_remainder().chunks_mut(8).zip(rest.chunks(8)) {
        let mut pad = [0f32; 8];
        pad[..s.len()].copy_from_slice(s);
        _mm256_storeu_ps(pad.as_mut_ptr(), f(_mm256_loadu_ps(pad.as_ptr())));
        let n = c.len();
        c.copy_from_slice(&pad[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::super::vmath;
    use super::*;

    /// Each function against its scalar form, NaN and the infinities included.
    #[test]
    fn match_the_scalar_forms() {
        if !vmath::avx2() {
            return;
        }
        let mut xs: Vec<f32> = (-3000..3000).map(|i| i as f32 * 0.037).collect();
        xs.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            0.625,
            -0.625,
        ]);
        xs.extend([
            88.8, -88.8, 104.0, -104.0, 0.5, -0.5, 44.5, -44.5, 88.5, 88.7, 88.722_83,
        ]);
        type Pair = (&'static str, unsafe fn(__m256) -> __m256, fn(f32) -> f32);
        let pairs: [Pair; 9] = [
            ("tanh_exp", |v| unsafe { tanh_exp(v) }, vmath::tanh_exp),
            // Below the top of the range, as its callers use it.
            (
                "exp_low",
                |v| unsafe { exp_low(_mm256_min_ps(v, set(vmath::EXP_HALVED))) },
                |x| vmath::exp(x.min(vmath::EXP_HALVED)),
            ),
            ("sigmoid", |v| unsafe { sigmoid(v) }, vmath::sigmoid),
            ("silu", |v| unsafe { silu(v) }, vmath::silu),
            ("tanh", |v| unsafe { tanh(v) }, vmath::tanh),
            ("gelu_erf", |v| unsafe { gelu_erf(v) }, vmath::gelu_erf),
            ("gelu_tanh", |v| unsafe { gelu_tanh(v) }, vmath::gelu_tanh),
            (
                "relu",
                |v| unsafe { activate(Activation::Relu, v) },
                vmath::relu,
            ),
            (
                "relu6",
                |v| unsafe { activate(Activation::Relu6, v) },
                vmath::relu6,
            ),
        ];
        for (name, vector, scalar) in pairs {
            for chunk in xs.chunks(8) {
                let mut lanes = [0f32; 8];
                lanes[..chunk.len()].copy_from_slice(chunk);
                // SAFETY: the CPU has AVX2 and FMA (checked above).
                let got = unsafe {
                    let mut out = [0f32; 8];
                    _mm256_storeu_ps(out.as_mut_ptr(), vector(_mm256_loadu_ps(lanes.as_ptr())));
                    out
                };
                for (x, g) in lanes.iter().zip(got) {
                    let w = scalar(*x);
                    assert!(
                        g == w
                            || (g.is_nan() && w.is_nan())
                            || (g - w).abs() <= 4e-7 * (1.0 + w.abs()),
                        "{name}({x}) = {g}, scalar {w}"
                    );
                }
            }
        }
    }
}
