//! Layer and RMS normalization of f32 rows with one scale (and bias) per
//! position of the row, the common form of LayerNormalization and the
//! fused residual norm: the statistics in f64 over eight independent lanes
//! (so the sums vectorize), the normalization in f32, the loops compiled
//! for AVX-512 where the CPU has it.

use super::layout::par_rows;

/// Normalizes each row of `len` elements of `x` into `y`:
/// `(x - mean) / sqrt(var + eps) * scale + bias` (`rms`: no mean), with
/// `scale` and `bias` of `len` elements.
pub fn f32_rows(
    x: &[f32],
    y: &mut [f32],
    len: usize,
    eps: f64,
    rms: bool,
    scale: &[f32],
    bias: Option<&[f32]>,
) {
    par_rows(y, len, |r, out| {
        let xs = &x[r * len..(r + 1) * len];
        #[cfg(target_arch = "x86_64")]
        if super::vmath::avx512() {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { row_avx512(xs, out, eps, rms, scale, bias) };
        }
        row(xs, out, eps, rms, scale, bias)
    });
}

/// `f(v)` summed over `xs` in eight independent f64 lanes.
#[inline(always)]
fn lanes(xs: &[f32], f: impl Fn(f32) -> f64) -> f64 {
    let mut acc = [0f64; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(v);
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| f(v)).sum();
    acc.iter().sum::<f64>() + tail
}

#[inline(always)]
fn row(xs: &[f32], out: &mut [f32], eps: f64, rms: bool, scale: &[f32], bias: Option<&[f32]>) {
    let n = xs.len() as f64;
    let mean = if rms { 0.0 } else { lanes(xs, f64::from) / n };
    let var = lanes(xs, |v| (f64::from(v) - mean).powi(2)) / n;
    let (m, inv) = (mean as f32, (1.0 / (var + eps).sqrt()) as f32);
    let scale = &scale[..xs.len()];
    match bias {
        Some(b) => {
            let b = &b[..xs.len()];
            for (((o, &v), &s), &b) in out.iter_mut().zip(xs).zip(scale).zip(b) {
                *o = (v - m) * inv * s + b;
            }
        }
        None => {
            for ((o, &v), &s) in out.iter_mut().zip(xs).zip(scale) {
                *o = (v - m) * inv * s;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
unsafe fn row_avx512(
    xs: &[f32],
    out: &mut [f32],
    eps: f64,
    rms: bool,
    scale: &[f32],
    bias: Option<&[f32]>,
) {
    row(xs, out, eps, rms, scale, bias)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_match_the_f64_formula() {
        let (rows, len) = (3, 37);
        let x: Vec<f32> = (0..rows * len)
            .map(|i| ((i * 29) % 17) as f32 * 0.37 - 2.5)
            .collect();
        let scale: Vec<f32> = (0..len).map(|i| 0.5 + i as f32 * 0.01).collect();
        let bias: Vec<f32> = (0..len).map(|i| i as f32 * -0.02).collect();
        for rms in [false, true] {
            let mut y = vec![0f32; x.len()];
            f32_rows(&x, &mut y, len, 1e-5, rms, &scale, Some(&bias));
            for r in 0..rows {
                let xs: Vec<f64> = x[r * len..(r + 1) * len]
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect();
                let mean = if rms {
                    0.0
                } else {
                    xs.iter().sum::<f64>() / len as f64
                };
                let var = xs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / len as f64;
                for i in 0..len {
                    let want = (xs[i] - mean) / (var + 1e-5).sqrt() * f64::from(scale[i])
                        + f64::from(bias[i]);
                    let got = f64::from(y[r * len + i]);
                    assert!(
                        (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                        "{got} vs {want}"
                    );
                }
            }
        }
    }
}
