//! f32 `exp`, sigmoid and tanh over slices, branch-free so the compiler
//! vectorizes them: Cephes' polynomials, within 2 ulp of the libm results
//! (tanh: 2 ulp relative for |x| < 0.625, where it is a polynomial, 1e-7
//! absolute above). The recurrent layers spend much of their time here.

// The coefficients are Cephes' as published, digits beyond f32 included.
#![allow(clippy::excessive_precision)]

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Adding then subtracting 1.5 * 2^23 rounds an f32 to the nearest integer.
const ROUND: f32 = 12_582_912.0;

/// `e^x`, saturating to 0 below -87.3 and to `2^127 * e^0.35` above 88.3.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.3);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 5.000_000_1e-1;
    let y = p * r * r + r + 1.0;
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// `1 / (1 + e^-x)`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `tanh(x)`: a polynomial near 0, `1 - 2 / (e^2|x| + 1)` (with the sign)
/// elsewhere.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let z = x * x;
    let small =
        ((((-5.704_988_7e-3 * z + 2.063_908_9e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
            - 3.333_328_2e-1)
            * z
            * x
            + x;
    let a = x.abs().min(44.0);
    let large = (1.0 - 2.0 / (exp(2.0 * a) + 1.0)).copysign(x);
    if x.abs() < 0.625 {
        small
    } else {
        large
    }
}

pub fn sigmoid_slice(xs: &mut [f32]) {
    for x in xs {
        *x = sigmoid(*x);
    }
}

pub fn tanh_slice(xs: &mut [f32]) {
    for x in xs {
        *x = tanh(*x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let tol = if x.abs() < 0.625 {
                3.0 * f32::EPSILON * t.abs()
            } else {
                2e-7
            };
            assert!((tanh(x) - t).abs() <= tol, "tanh({x}): {} vs {t}", tanh(x));
            x += 0.0137;
        }
        assert_eq!(exp(-200.0), 0.0_f32.max(exp(-200.0)));
        assert!(exp(-200.0) < 1e-37 && tanh(100.0) == 1.0 && tanh(-100.0) == -1.0);
        assert_eq!(sigmoid(-200.0), 0.0_f32.max(sigmoid(-200.0)));
    }
}
