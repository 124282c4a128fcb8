//! f32 `exp`, sigmoid, tanh and erf, branch-free so the compiler vectorizes
//! them: Cephes' polynomials, within 2 ulp of the libm results (tanh: 2 ulp
//! relative for |x| < 0.625, where it is a polynomial, 1e-7 absolute above;
//! erf: a Taylor polynomial below 0.5, Numerical Recipes' erfc fit above,
//! within 2e-7 relative). The recurrent layers, softmax, GELU and the
//! element-wise kernels spend much of their time here.

// The coefficients are Cephes' as published, digits beyond f32 included.
#![allow(clippy::excessive_precision)]

pub(super) const LOG2E: f32 = std::f32::consts::LOG2_E;
pub(super) const LN2_HI: f32 = 0.693_359_4;
pub(super) const LN2_LO: f32 = -2.121_944_4e-4;
/// Adding then subtracting 1.5 * 2^23 rounds an f32 to the nearest integer.
pub(super) const ROUND: f32 = 12_582_912.0;

/// `x` rounded half to even, for `|x| < 2^22` (the rounding mode's own
/// rounding of the sum; no libm call, so loops over it vectorize).
#[inline(always)]
pub fn round_small(x: f32) -> f32 {
    (x + ROUND) - ROUND
}

/// Above this `e^x` passes `f32::MAX` (`ln(f32::MAX)` is 88.7228391).
pub(super) const EXP_TOP: f32 = 88.722_83;
/// Past this `2^n` of the reduction would be `2^128`, beyond f32's
/// exponents: `e^x` is taken as `2 e^(x - ln 2)` there.
pub(super) const EXP_HALVED: f32 = 88.3;

/// `e^x`: infinity above [`EXP_TOP`] (where f32 overflows), 0 below -103.9,
/// and `e^-87.3` (about 1e-38) between, where the result would be
/// subnormal; NaN kept.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // 2^128 has no exponent: above EXP_HALVED, e^x = 2 e^(x - ln 2) (ln 2
    // in two parts). Selects, not branches, so loops over it vectorize.
    let high = x > EXP_HALVED;
    let y = exp_reduced(if high { x - LN2_HI - LN2_LO } else { x });
    let y = if high { y * 2.0 } else { y };
    if x > EXP_TOP {
        f32::INFINITY
    } else if x < -103.9 {
        0.0
    } else {
        y
    }
}

/// `e^x` for `x` at most 0 (a softmax row less its maximum): [`exp`]
/// without the selects for the top of the range, which such arguments
/// never reach.
#[inline(always)]
pub fn exp_nonpositive(x: f32) -> f32 {
    if x < -103.9 {
        0.0
    } else {
        exp_reduced(x)
    }
}

/// `e^x` for `x` clamped to [-87.3, 88.3] (2^n normal).
#[inline(always)]
fn exp_reduced(x: f32) -> f32 {
    let c = x.clamp(-87.3, EXP_HALVED);
    // `t`'s low mantissa bits hold n (in -126..=127) in two's complement.
    let t = c * LOG2E + ROUND;
    let n = t - ROUND;
    let r = c - n * LN2_HI - n * LN2_LO;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 5.000_000_1e-1;
    let y = p * r * r + r + 1.0;
    // 2^n from those bits: adding 127 and shifting the sum into the
    // exponent field leaves ROUND's bits behind (its low 9 bits are 0).
    // Integer lanes: `n as i32` is a saturating conversion, one lane at a
    // time, which kept every loop over this function scalar in part.
    y * f32::from_bits(t.to_bits().wrapping_add(127) << 23)
}

/// `x * min(max(x * (1/6) + 1/2, 0), 1)`: ONNX HardSwish, in the order of the
/// operations of its `elementwise_region` form (so both round alike).
#[inline(always)]
pub fn hard_swish(x: f32) -> f32 {
    let t = x * (1.0f32 / 6.0) + 0.5;
    // A NaN `x` makes `t` clamp to a number; the product is NaN again.
    x * t.max(0.0).min(1.0)
}

/// `x · sigmoid(x)`.
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// GELU with the exact (erf) form, `x/2 (1 + erf(x/√2))`, where `1 +
/// erf(z)` is `erfc(-z)` for `z < 0` and `2 - erfc(z)` otherwise: no
/// cancellation where erf nears -1, and no small-argument branch (GELU
/// needs erf to an absolute 1e-7 near 0, not a relative one).
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    let e = erfc_nonneg(x.abs() * std::f32::consts::FRAC_1_SQRT_2);
    0.5 * x * if x < 0.0 { e } else { 2.0 - e }
}

/// `erfc(a)` for `a >= 0` (a NaN as 10), Numerical Recipes' `erfcc`
/// (relative error below 1.2e-7), `a` capped at 10 (where it is 2e-45).
#[inline(always)]
pub fn erfc_nonneg(a: f32) -> f32 {
    let a = a.min(10.0);
    let t = 1.0 / (1.0 + 0.5 * a);
    let poly = -1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    t * exp(-a * a + poly)
}

/// GELU with the tanh approximation, `x/2 (1 + tanh(u))`, computed as
/// `x sigmoid(2u)` (the same function): where `tanh(u)` nears -1 the first
/// form keeps only the rounding of `1 + tanh(u)`.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    x * sigmoid(1.595_769_2 * (x + 0.044715 * x * x * x))
}

/// `min(max(x, 0), 6)` (ONNX Clip to [0, 6]), NaN passing through.
#[inline(always)]
pub fn relu6(x: f32) -> f32 {
    let v = if x < 0.0 { 0.0 } else { x };
    if v > 6.0 {
        6.0
    } else {
        v
    }
}

/// `max(x, 0)`, NaN passing through.
#[inline(always)]
pub fn relu(x: f32) -> f32 {
    if x < 0.0 {
        0.0
    } else {
        x
    }
}

/// `erf(x)`: `x · P(x²)` (the Taylor series to x¹⁵) for |x| < 0.5, else
/// `1 - erfc(|x|)` with Numerical Recipes' `erfcc` (relative error below
/// 1.2e-7), with the sign.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let z = x * x;
    let small = x
        * (1.128_379_2
            + z * (-0.376_126_4
                + z * (0.112_837_92
                    + z * (-0.026_866_172
                        + z * (0.005_223_977 + z * (-0.000_854_834_7 + z * 0.000_120_549_76))))));
    let large = (1.0 - erfc_nonneg(x.abs())).copysign(x);
    // NaN takes the first branch (and stays NaN there).
    if !(x.abs() >= 0.5) {
        small
    } else {
        large
    }
}

/// `1 / (1 + e^-x)`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `tanh(x)`: a [13/6] rational function of `x` clamped to +-9, as ONNX
/// Runtime's MLAS computes it (Eigen's coefficients, which hold to 1e-8
/// that far; Horner steps as fused multiply-adds): seven FMAs, four more
/// and one division a value, no exponential and no branch (the
/// polynomial-or-exponential form it replaces cost three times as much in
/// AVX-512 lanes). From 9 on, +-1 (what f32's tanh rounds to); NaN stays
/// NaN (the clamp's comparisons are false for it).
/// [`tanh`]'s numerator (odd: in `x^2` from the highest power down, then
/// times `x`) and denominator (even) coefficients.
pub const TANH_NUM: [f32; 7] = [
    -2.760_768_5e-16,
    2.000_187_9e-13,
    -8.604_671_5e-11,
    5.122_297e-8,
    1.485_722_4e-5,
    6.372_619_3e-4,
    4.893_524_6e-3,
];
pub const TANH_DEN: [f32; 4] = [
    1.198_258_4e-6,
    1.185_347_1e-4,
    2.268_434_6e-3,
    4.893_525_2e-3,
];

#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    const CLAMP: f32 = 9.0;
    let c = if x > CLAMP {
        CLAMP
    } else if x < -CLAMP {
        -CLAMP
    } else {
        x
    };
    let z = c * c;
    let mut p = TANH_NUM[0];
    for &k in &TANH_NUM[1..] {
        p = p.mul_add(z, k);
    }
    let mut q = TANH_DEN[0];
    for &k in &TANH_DEN[1..] {
        q = q.mul_add(z, k);
    }
    if x.abs() >= CLAMP {
        1.0f32.copysign(x)
    } else {
        p * c / q
    }
}

/// `tanh(x)` to within 2e-7 everywhere: a polynomial near 0, `1 - 2 /
/// (e^2|x| + 1)` (with the sign) elsewhere. The recurrent cells use it:
/// their states pass through it every step, and a dynamically quantized
/// cell rounds them to 8 bits each time, so their outputs follow the
/// reference's (ONNX Runtime's RNN kernels) only as closely as their tanh
/// does; [`tanh`] is the faster form elsewhere.
#[inline(always)]
pub fn tanh_exp(x: f32) -> f32 {
    let z = x * x;
    let small =
        ((((-5.704_988_7e-3 * z + 2.063_908_9e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
            - 3.333_328_2e-1)
            * z
            * x
            + x;
    // Not `min`, which would turn a NaN into 44 (and tanh(NaN) into ±1).
    let a = if x.abs() > 44.0 { 44.0 } else { x.abs() };
    let large = (1.0 - 2.0 / (exp(2.0 * a) + 1.0)).copysign(x);
    if x.abs() < 0.625 {
        small
    } else {
        large
    }
}

/// True when this CPU has every feature the AVX-512 copies of loops here and
/// in the kernels are compiled with (AVX-512 F, DQ and BW, AVX2, FMA: every
/// AVX-512 CPU since Skylake-SP and Zen 4). The result is cached by std.
pub fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512dq")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True when this CPU has AVX2 and FMA (every x86-64 CPU since Haswell and
/// Zen 1): the tier below [`avx512`], whose copies of the loops run 8 lanes
/// wide with fused multiply-adds instead of the baseline's 4 without.
pub fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Runs `f` compiled for AVX-512 where the CPU has it ([`avx512`]), else for
/// AVX2 and FMA ([`avx2`]): `f` is inlined into a function with those
/// target features, so the loops in it vectorize 16 (8) lanes wide (the
/// crate itself is built for the x86-64 baseline).
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { call_avx512(f) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { call_avx2(f) };
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn call_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn call_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Elements per parallel chunk of [`map`] and [`map_in_place`].
const CHUNK: usize = 1 << 14;

/// `out[i] = f(xs[i])` in parallel chunks, the loop compiled for AVX-512 where
/// the CPU has it. Pass a closure (`|v| vmath::exp(v)`): it is inlined into
/// the loop, where a function item's `Fn::call` shim is not.
pub fn map(xs: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32 + Sync + Copy) {
    let n = out.len().min(xs.len());
    super::layout::par_rows(&mut out[..n], CHUNK, |c, o| {
        let xs = &xs[c * CHUNK..c * CHUNK + o.len()];
        #[cfg(target_arch = "x86_64")]
        {
            if avx512() {
                // SAFETY: the CPU has AVX-512F.
                return unsafe { map_avx512(xs, o, f) };
            }
            if avx2() {
                // SAFETY: the CPU has AVX2 and FMA.
                return unsafe { map_avx2(xs, o, f) };
            }
        }
        map_plain(xs, o, f)
    });
}

/// `out[i] = f(xs[i])` for a function too large to inline into [`map`]'s
/// AVX-512 copy ([`tanh_slice`], [`sigmoid_slice`]: they would run one call
/// an element): each chunk copied, then mapped in place.
pub fn map_slices(xs: &[f32], out: &mut [f32], f: fn(&mut [f32])) {
    let n = out.len().min(xs.len());
    super::layout::par_rows(&mut out[..n], CHUNK, |c, o| {
        o.copy_from_slice(&xs[c * CHUNK..c * CHUNK + o.len()]);
        f(o);
    });
}

/// `xs[i] = f(xs[i])`, as [`map`].
pub fn map_in_place(xs: &mut [f32], f: impl Fn(f32) -> f32 + Sync + Copy) {
    super::layout::par_rows(xs, CHUNK, |_, o| {
        #[cfg(target_arch = "x86_64")]
        {
            if avx512() {
                // SAFETY: the CPU has AVX-512F.
                return unsafe { map_in_place_avx512(o, f) };
            }
            if avx2() {
                // SAFETY: the CPU has AVX2 and FMA.
                return unsafe { map_in_place_avx2(o, f) };
            }
        }
        map_in_place_plain(o, f)
    });
}

#[inline(always)]
fn map_plain(xs: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    for (o, x) in out.iter_mut().zip(xs) {
        *o = f(*x);
    }
}

#[inline(always)]
fn map_in_place_plain(xs: &mut [f32], f: impl Fn(f32) -> f32) {
    for v in xs {
        *v = f(*v);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
unsafe fn map_avx512(xs: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    map_plain(xs, out, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
unsafe fn map_in_place_avx512(xs: &mut [f32], f: impl Fn(f32) -> f32) {
    map_in_place_plain(xs, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn map_avx2(xs: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    map_plain(xs, out, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn map_in_place_avx2(xs: &mut [f32], f: impl Fn(f32) -> f32) {
    map_in_place_plain(xs, f)
}

/// `out[i] = e^(xs[i] - m)` for `m` at least every `xs[i]` (a row's
/// maximum), returning the sum (16 f32 lanes, then f64), [`vectorized`].
pub fn exp_shifted(xs: &[f32], m: f32, out: &mut [f32]) -> f64 {
    // A closure this large is not inlined into `vectorized`'s AVX-512 copy,
    // so it gets a target-feature function of its own.
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { exp_shifted_avx512(xs, m, out) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { exp_shifted_avx2(xs, m, out) };
        }
    }
    exp_shifted_plain(xs, m, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
unsafe fn exp_shifted_avx512(xs: &[f32], m: f32, out: &mut [f32]) -> f64 {
    exp_shifted_plain(xs, m, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_shifted_avx2(xs: &[f32], m: f32, out: &mut [f32]) -> f64 {
    exp_shifted_plain(xs, m, out)
}

#[inline(always)]
fn exp_shifted_plain(xs: &[f32], m: f32, out: &mut [f32]) -> f64 {
    let mut lanes = [0f32; 16];
    for (chunk, dst) in xs.chunks(16).zip(out.chunks_mut(16)) {
        for ((l, x), d) in lanes.iter_mut().zip(chunk).zip(dst) {
            let e = exp_nonpositive(x - m);
            *d = e;
            *l += e;
        }
    }
    lanes.iter().map(|&v| v as f64).sum()
}

/// `sigmoid` over a slice, as [`curve_slice`].
pub fn sigmoid_slice(xs: &mut [f32]) {
    curve_slice(Curve::Sigmoid, xs)
}

/// `silu` over a slice, as [`curve_slice`].
pub fn silu_slice(xs: &mut [f32]) {
    curve_slice(Curve::Silu, xs)
}

/// The tanh form of GELU over a slice, as [`curve_slice`].
pub fn gelu_tanh_slice(xs: &mut [f32]) {
    curve_slice(Curve::GeluTanh, xs)
}

/// The functions of a sigmoid that run in registers over slices.
#[derive(Debug, Clone, Copy)]
enum Curve {
    Sigmoid,
    Silu,
    GeluTanh,
}

/// `curve` over a slice: in AVX-512 registers where the CPU has them, else
/// AVX2 ones (the reciprocal by an estimate and a Newton step, not a
/// division: [`super::vmath_avx512::sigmoid`]), else in lanes of the scalar
/// form.
// Closures, not function items: see [`map`].
#[allow(clippy::redundant_closure)]
fn curve_slice(curve: Curve, xs: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { curve_avx512(curve, xs) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { curve_avx2(curve, xs) };
        }
    }
    match curve {
        Curve::Sigmoid => in_lanes(xs, |x| sigmoid(x)),
        Curve::Silu => in_lanes(xs, |x| silu(x)),
        Curve::GeluTanh => in_lanes(xs, |x| gelu_tanh(x)),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
unsafe fn curve_avx512(curve: Curve, xs: &mut [f32]) {
    use super::vmath_avx512::{gelu_tanh, map_in_place, sigmoid, silu};
    match curve {
        Curve::Sigmoid => map_in_place(xs, |v| sigmoid(v)),
        Curve::Silu => map_in_place(xs, |v| silu(v)),
        Curve::GeluTanh => map_in_place(xs, |v| gelu_tanh(v)),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn curve_avx2(curve: Curve, xs: &mut [f32]) {
    use super::vmath_avx2::{gelu_tanh, map_in_place, sigmoid, silu};
    match curve {
        Curve::Sigmoid => map_in_place(xs, |v| sigmoid(v)),
        Curve::Silu => map_in_place(xs, |v| silu(v)),
        Curve::GeluTanh => map_in_place(xs, |v| gelu_tanh(v)),
    }
}

/// [`tanh_exp`] over a slice, in AVX-512 lanes where the CPU has them.
pub fn tanh_exp_slice(xs: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { tanh_exp_avx512(xs) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { tanh_exp_avx2(xs) };
        }
    }
    in_lanes(xs, |x| tanh_exp(x))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
unsafe fn tanh_exp_avx512(xs: &mut [f32]) {
    super::vmath_avx512::map_in_place(xs, |v| super::vmath_avx512::tanh_exp(v))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tanh_exp_avx2(xs: &mut [f32]) {
    super::vmath_avx2::map_in_place(xs, |v| super::vmath_avx2::tanh_exp(v))
}

/// `tanh` over a slice, in AVX-512 lanes where the CPU has them.
pub fn tanh_slice(xs: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { tanh_avx512(xs) };
        }
        if avx2() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { tanh_avx2(xs) };
        }
    }
    in_lanes(xs, |x| tanh(x))
}

// Functions of their own: closures this large are not inlined into
// `vectorized`'s AVX-512 copy.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
unsafe fn tanh_avx512(xs: &mut [f32]) {
    in_lanes_avx512(xs, |x| tanh(x))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tanh_avx2(xs: &mut [f32]) {
    in_lanes(xs, |x| tanh(x))
}

/// [`in_lanes`] with the last lanes moved by masked loads and stores (two
/// instructions, where copying a few floats is two calls of `memmove`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn in_lanes_avx512(xs: &mut [f32], f: impl Fn(f32) -> f32) {
    use std::arch::x86_64::*;
    let mut chunks = xs.chunks_exact_mut(16);
    for c in &mut chunks {
        for x in c.iter_mut() {
            *x = f(*x);
        }
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let mask: __mmask16 = (1u16 << rest.len()) - 1;
        let mut pad = [0f32; 16];
        // SAFETY: the mask covers the `rest.len() < 16` elements of `rest`.
        _mm512_storeu_ps(pad.as_mut_ptr(), _mm512_maskz_loadu_ps(mask, rest.as_ptr()));
        for x in pad.iter_mut() {
            *x = f(*x);
        }
        _mm512_mask_storeu_ps(rest.as_mut_ptr(), mask, _mm512_loadu_ps(pad.as_ptr()));
    }
}

/// `xs[i] = f(xs[i])` sixteen at a time, the last few through a padded
/// copy: a recurrent cell's gates are often shorter than a remainder loop
/// is worth (hidden 25: 9 of every 25 elements would go one at a time).
#[inline(always)]
fn in_lanes(xs: &mut [f32], f: impl Fn(f32) -> f32) {
    let mut chunks = xs.chunks_exact_mut(16);
    for c in &mut chunks {
        for x in c.iter_mut() {
            *x = f(*x);
        }
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let mut pad = [0f32; 16];
        pad[..rest.len()].copy_from_slice(rest);
        for x in pad.iter_mut() {
            *x = f(*x);
        }
        rest.copy_from_slice(&pad[..rest.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_libm() {
        let mut x = -6.0f32;
        while x < 6.0 {
            let want = libm::erf(x as f64);
            let got = erf(x) as f64;
            assert!(
                (got - want).abs() <= 2.5e-7 * want.abs().max(1e-30),
                "erf({x}): {got} vs {want}"
            );
            x += 0.00731;
        }
        assert!(
            erf(1e-20) > 0.0 && erf(0.0) == 0.0 && erf(-30.0) == -1.0 && erf(f32::NAN).is_nan()
        );
    }

    /// As the HardSwish region computes it, operation by operation (NaN
    /// propagating through its max and min).
    #[test]
    fn hard_swish_is_its_region() {
        let region = |x: f32| {
            let t = x * 0.1666666716337204f64 as f32 + 0.5;
            let clamp = |v: f32, lo: f32, hi: f32| if v.is_nan() { v } else { v.max(lo).min(hi) };
            x * clamp(t, 0.0, 1.0)
        };
        let mut x = -8.0f32;
        while x < 8.0 {
            assert_eq!(
                hard_swish(x).to_bits(),
                region(x).to_bits(),
                "hard_swish({x})"
            );
            x += 0.0371;
        }
        for x in [0.0, -0.0, 3.0, -3.0, f32::INFINITY, f32::MAX] {
            assert_eq!(
                hard_swish(x).to_bits(),
                region(x).to_bits(),
                "hard_swish({x})"
            );
        }
        assert!(hard_swish(f32::NAN).is_nan() && hard_swish(f32::NEG_INFINITY).is_nan());
    }

    /// The top of the range, where `2^n` of the reduction would be `2^128`:
    /// e^88.7 is 3.3e38, which came out as e^88.3's 2.0e38 (the clamp).
    #[test]
    fn exp_holds_to_the_top_of_f32() {
        let mut x = 87.0f32;
        while x <= EXP_TOP {
            let want = (x as f64).exp();
            let got = exp(x) as f64;
            assert!(
                (got - want).abs() <= 4e-6 * want,
                "exp({x}): {got} vs {want}"
            );
            x += 0.0137;
        }
        for x in [88.3f32, 88.300_01, 88.7, EXP_TOP] {
            let want = (x as f64).exp();
            assert!(((exp(x) as f64) - want).abs() <= 4e-6 * want, "exp({x})");
        }
        assert_eq!(exp(88.722_84), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan() && exp(f32::INFINITY) == f32::INFINITY);
    }

    #[test]
    fn matches_libm() {
        let mut x = -30.0f32;
        while x < 30.0 {
            let e = x.exp();
            assert!((exp(x) - e).abs() <= 3.0 * f32::EPSILON * e, "exp({x})");
            let s = 1.0 / (1.0 + (-x).exp());
            assert!(
                (sigmoid(x) - s).abs() <= 3.0 * f32::EPSILON * s.max(1e-30) + 1e-30,
                "sigmoid({x})"
            );
            let t = x.tanh();
            // The rational form in f32: within 3 eps relative near 0, and
            // within 4e-7 (6 ulps of 1) where it nears +-1, which is what
            // MLAS's tanh gives ONNX Runtime (the exponential form it
            // replaced held 2e-7 at three times the cost).
            let tol = if x.abs() < 0.625 {
                3.0 * f32::EPSILON * t.abs()
            } else {
                4e-7
            };
            assert!((tanh(x) - t).abs() <= tol, "tanh({x}): {} vs {t}", tanh(x));
            let tol = if x.abs() < 0.625 {
                3.0 * f32::EPSILON * t.abs()
            } else {
                2e-7
            };
            assert!(
                (tanh_exp(x) - t).abs() <= tol,
                "tanh_exp({x}): {} vs {t}",
                tanh_exp(x)
            );
            x += 0.0137;
        }
        assert_eq!(exp(-200.0), 0.0_f32.max(exp(-200.0)));
        assert!(
            exp(-200.0) == 0.0 && exp(-95.0) < 1e-37 && tanh(100.0) == 1.0 && tanh(-100.0) == -1.0
        );
        assert!(
            exp(89.0) == f32::INFINITY
                && exp(f32::INFINITY) == f32::INFINITY
                && exp(f32::NAN).is_nan()
        );
        assert_eq!(sigmoid(-200.0), 0.0_f32.max(sigmoid(-200.0)));
    }
}
