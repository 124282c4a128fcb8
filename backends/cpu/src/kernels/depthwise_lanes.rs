//! f32 depthwise 2-D convolution with eight channels in the lanes of an
//! AVX2 register, for CPUs without AVX-512 (whose `window2d` path slides
//! along rows instead).
//!
//! Along rows, a plane of a few columns (MobileNet's and ShuffleNet's last
//! stages, 7x7 to 28x28; an OCR model's 3x12) leaves most of a register
//! idle and runs a loop per row and tap. Across channels every lane is
//! busy whatever the plane: the eight input planes are staged interleaved
//! (`[row][col][8]`, zero on the padding, so no tap is bounds-checked),
//! each tap's eight weights are one register, and four output positions
//! accumulate at a time, sharing the weight's load. The outputs are
//! staged the same way and written back plane by plane, with the bias and
//! the activation applied in registers.

use std::arch::x86_64::*;
use std::cell::RefCell;

use rlx_ir::ops::Activation;

use super::conv::ConvGeom;
use super::vmath;
use super::vmath_avx2::activate;
use crate::par::Disjoint;

/// Channels per register.
const LANES: usize = 8;
/// Output positions accumulated together.
const POSITIONS: usize = 4;
/// Output columns past which rows of the plane already fill registers and
/// the row path is preferred (it stages nothing).
const ROW_COLUMNS: usize = 64;

/// Whether this path runs `g`: an AVX2 CPU and a plane of few columns.
pub fn applies(g: &ConvGeom) -> bool {
    vmath::avx2() && g.output[1] < ROW_COLUMNS && g.kernel_size() > 0
}

thread_local! {
    /// This thread's staged input and output planes of one block.
    static STAGING: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `y[n, m] = act(bias[m] + sum over taps of w[m, tap] * x[n, m / (M/C)])`.
pub fn run(
    g: &ConvGeom,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    y: &mut [f32],
) {
    let (sin, sout, taps) = (g.spatial_in(), g.spatial_out(), g.kernel_size());
    assert!(
        x.len() >= g.n * g.c * sin
            && w.len() >= g.m * taps
            && y.len() >= g.n * g.m * sout
            && bias.is_none_or(|b| b.len() >= g.m),
        "depthwise operand too small"
    );
    let blocks = g.m.div_ceil(LANES);
    let out = Disjoint::new(y);
    crate::par::for_each(g.n * blocks, |task| {
        let (n, m0) = (task / blocks, task % blocks * LANES);
        STAGING.with_borrow_mut(|staging| {
            // SAFETY: the CPU has AVX2 and FMA (`applies`); the operands
            // hold what was asserted; tasks write disjoint planes of `y`.
            unsafe { block(g, (n, m0), x, w, bias, act, &out, staging) }
        });
    });
}

/// Output channels `m0..m0 + 8` (fewer at the end) of image `n`.
///
/// # Safety
/// AVX2 and FMA are present; the operands are as [`run`] asserts.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn block(
    g: &ConvGeom,
    (n, m0): (usize, usize),
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &Disjoint<f32>,
    staging: &mut Vec<f32>,
) {
    let [ih, iw] = [g.input[0], g.input[1]];
    let [oh, ow] = [g.output[0], g.output[1]];
    let [kh, kw] = [g.kernel[0], g.kernel[1]];
    let [sh, sw] = [g.strides[0], g.strides[1]];
    let [dh, dw] = [g.dilations[0], g.dilations[1]];
    let [ph, pw] = [g.pads[0], g.pads[1]];
    let lanes = LANES.min(g.m - m0);
    let mult = g.m / g.c;
    let (sin, sout, taps) = (ih * iw, oh * ow, kh * kw);
    // The padded plane covers every tap of every output (the bottom and
    // right pads as far as the outputs reach).
    let (hp, wp) = ((oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1);
    let (hp, wp) = (hp.max(ph + ih), wp.max(pw + iw));
    let (plane_in, plane_out) = (hp * wp * LANES, sout * LANES);
    staging.clear();
    staging.resize(plane_in + plane_out + taps * LANES + LANES, 0.0);
    let (xs, rest) = staging.split_at_mut(plane_in);
    let (ys, rest) = rest.split_at_mut(plane_out);
    let (ws, bs) = rest.split_at_mut(taps * LANES);
    for l in 0..lanes {
        let (m, c) = (m0 + l, (m0 + l) / mult);
        let src = &x[(n * g.c + c) * sin..(n * g.c + c + 1) * sin];
        for (r, row) in src.chunks_exact(iw).enumerate() {
            let at = ((r + ph) * wp + pw) * LANES + l;
            for (j, v) in row.iter().enumerate() {
                xs[at + j * LANES] = *v;
            }
        }
        for t in 0..taps {
            ws[t * LANES + l] = w[m * taps + t];
        }
        bs[l] = bias.map_or(0.0, |b| b[m]);
    }
    let bias = _mm256_loadu_ps(bs.as_ptr());
    let (xp, wptr, yp) = (xs.as_ptr(), ws.as_ptr(), ys.as_mut_ptr());
    // Input position (row, col) of output (r, j)'s tap (a, b).
    let tap = |r: usize, j: usize, a: usize, b: usize| {
        ((r * sh + a * dh) * wp + j * sw + b * dw) * LANES
    };
    for r in 0..oh {
        let mut j = 0;
        while j + POSITIONS <= ow {
            let mut acc = [bias; POSITIONS];
            for a in 0..kh {
                for b in 0..kw {
                    let wv = _mm256_loadu_ps(wptr.add((a * kw + b) * LANES));
                    let base = xp.add(tap(r, j, a, b));
                    for (q, s) in acc.iter_mut().enumerate() {
                        let v = _mm256_loadu_ps(base.add(q * sw * LANES));
                        *s = _mm256_fmadd_ps(wv, v, *s);
                    }
                }
            }
            for (q, s) in acc.iter().enumerate() {
                _mm256_storeu_ps(yp.add((r * ow + j + q) * LANES), activate(act, *s));
            }
            j += POSITIONS;
        }
        for j in j..ow {
            let mut s = bias;
            for a in 0..kh {
                for b in 0..kw {
                    let wv = _mm256_loadu_ps(wptr.add((a * kw + b) * LANES));
                    s = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xp.add(tap(r, j, a, b))), s);
                }
            }
            _mm256_storeu_ps(yp.add((r * ow + j) * LANES), activate(act, s));
        }
    }
    for l in 0..lanes {
        let plane = out.at((n * g.m + m0 + l) * sout);
        for (p, v) in ys.iter().skip(l).step_by(LANES).enumerate() {
            *plane.add(p) = *v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the portable row path on strides, dilations, pads, a
    /// multiplier and channel counts off the lanes.
    #[test]
    fn matches_the_row_path() {
        if !vmath::avx2() {
            return;
        }
        let pool = crate::par::Pool::new(3).unwrap();
        // (channels, multiplier, input, kernel, stride, dilation, pads)
        let cases = [
            (8, 1, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1]),
            (13, 1, [9, 12], [5, 5], [2, 2], [1, 1], [2, 2]),
            (5, 2, [3, 12], [3, 3], [1, 2], [1, 1], [1, 0]),
            (16, 1, [6, 6], [3, 3], [1, 1], [2, 2], [2, 2]),
            (3, 3, [10, 5], [2, 3], [2, 1], [1, 1], [0, 1]),
        ];
        for (c, mult, input, kernel, strides, dilations, pads) in cases {
            let out = |i: usize| {
                (input[i] + 2 * pads[i] - (kernel[i] - 1) * dilations[i] - 1) / strides[i] + 1
            };
            let g = ConvGeom {
                n: 2,
                c,
                m: c * mult,
                group: c,
                input: input.to_vec(),
                kernel: kernel.to_vec(),
                output: vec![out(0), out(1)],
                strides: strides.to_vec(),
                dilations: dilations.to_vec(),
                pads: pads.to_vec(),
            };
            let x: Vec<f32> = (0..g.n * c * g.spatial_in())
                .map(|i| ((i * 7) % 23) as f32 * 0.1 - 1.1)
                .collect();
            let w: Vec<f32> = (0..g.m * g.kernel_size())
                .map(|i| ((i * 5) % 11) as f32 * 0.05 - 0.25)
                .collect();
            let b: Vec<f32> = (0..g.m).map(|i| i as f32 * 0.1 - 0.3).collect();
            let len = g.n * g.m * g.spatial_out();
            let mut want = vec![0f32; len];
            super::super::depthwise::run_any(&g, &x, &w, Some(&b), &mut want);
            super::super::matmul::activate(Activation::HardSwish, &mut want);
            for threads in [1, 3] {
                let mut got = vec![f32::NAN; len];
                let go = || run(&g, &x, &w, Some(&b), Activation::HardSwish, &mut got);
                if threads == 1 {
                    crate::par::inline(go);
                } else {
                    pool.install(go);
                }
                for (i, (a, e)) in got.iter().zip(&want).enumerate() {
                    assert!((a - e).abs() <= 1e-5, "{g:?} at {i}: {a} vs {e}");
                }
            }
        }
    }
}
