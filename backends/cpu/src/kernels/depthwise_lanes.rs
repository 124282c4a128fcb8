//! f32 depthwise 2-D convolution with eight channels in the lanes of an
//! AVX2 register, for CPUs without AVX-512 (whose `window2d` path slides
//! along rows instead).
//!
//! Along rows, a plane of a few columns (MobileNet's and ShuffleNet's last
//! stages, 7x7 to 28x28; an OCR model's 3x12) leaves most of a register
//! idle and runs a loop per row and tap, and a strided one gathers lane by
//! lane. Across channels every lane is
//! busy whatever the plane: the eight input planes are staged interleaved
//! (`[row][col][8]`, zero on the padding, so no tap is bounds-checked;
//! 8×8 transposes in registers), each tap's eight weights are one
//! register, and four output positions accumulate at a time, sharing the
//! weight's load. The outputs are staged the same way and transposed back
//! to their planes, with the bias and the activation applied in registers.
//! Large planes run in bands of output rows, so that the staging of a band
//! stays in L2 between its writes and reads.

use std::arch::x86_64::*;
use std::cell::RefCell;

use rlx_ir::ops::Activation;

use super::conv::ConvGeom;
use super::vmath;
use super::microkernel::transpose8;
use super::vmath_avx2::activate;
use crate::par::Disjoint;

/// Channels per register.
const LANES: usize = 8;
/// Output positions accumulated together.
const POSITIONS: usize = 4;
/// Whether this path runs `g`: on an AVX2 CPU, every plane (measured
/// against the row path on MobileNetV3's: 1.5 to 6.7 times as fast, the
/// strided ones most, whose row path gathers lane by lane).
pub fn applies(g: &ConvGeom) -> bool {
    vmath::avx2() && g.kernel_size() > 0 && g.spatial_out() > 0
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

/// Output channels `m0..m0 + 8` (fewer at the end) of image `n`, in bands
/// of output rows whose staging stays in L2.
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
    let [oh, ow] = [g.output[0], g.output[1]];
    let [kh, kw] = [g.kernel[0], g.kernel[1]];
    let [sh, sw] = [g.strides[0], g.strides[1]];
    let [dw, pw] = [g.dilations[1], g.pads[1]];
    let lanes = LANES.min(g.m - m0);
    let taps = kh * kw;
    // The padded row covers every tap of every output column.
    let wp = ((ow - 1) * sw + (kw - 1) * dw + 1).max(pw + g.input[1]);
    // Input rows a band of `rows` output rows reads.
    let reach = |rows: usize| (rows - 1) * sh + (kh - 1) * g.dilations[0] + 1;
    let floats = |rows: usize| (reach(rows) * wp + rows * ow) * LANES;
    let mut rows = oh;
    while rows > 1 && floats(rows) > BAND_FLOATS {
        rows = rows.div_ceil(2);
    }
    staging.clear();
    staging.resize(floats(rows) + (taps + 1) * LANES, 0.0);
    let (band, rest) = staging.split_at_mut(floats(rows));
    let (ws, bs) = rest.split_at_mut(taps * LANES);
    let mult = g.m / g.c;
    let channels: [usize; LANES] = std::array::from_fn(|l| (m0 + l.min(lanes - 1)) / mult);
    for l in 0..lanes {
        for t in 0..taps {
            ws[t * LANES + l] = w[(m0 + l) * taps + t];
        }
        bs[l] = bias.map_or(0.0, |b| b[m0 + l]);
    }
    let stage = Stage {
        g,
        n,
        channels,
        lanes,
        wp,
    };
    for r0 in (0..oh).step_by(rows) {
        let r1 = (r0 + rows).min(oh);
        let (xs, ys) = band.split_at_mut(reach(r1 - r0) * wp * LANES);
        stage.input(x, r0 * sh, reach(r1 - r0), xs);
        let ys = &mut ys[..(r1 - r0) * ow * LANES];
        window(g, (r1 - r0, wp), xs, ws, bs, act, ys);
        stage.output(out, m0, r0, ys);
    }
}

/// Floats of a band's staging, at most (256 KiB).
const BAND_FLOATS: usize = 64 << 10;

/// Where a block's lanes come from and go.
struct Stage<'a> {
    g: &'a ConvGeom,
    n: usize,
    /// Input channel of each lane (the last one's repeated past `lanes`).
    channels: [usize; LANES],
    lanes: usize,
    /// Columns of a padded row.
    wp: usize,
}

impl Stage<'_> {
    /// Padded rows `p0..p0 + count` of the block's input channels into `xs`
    /// (`[row][col][lane]`, zero on the padding), eight columns at a time
    /// through an 8×8 transpose.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn input(&self, x: &[f32], p0: usize, count: usize, xs: &mut [f32]) {
        let g = self.g;
        let ([ih, iw], [ph, pw]) = ([g.input[0], g.input[1]], [g.pads[0], g.pads[1]]);
        let sin = ih * iw;
        xs.fill(0.0);
        let planes: [&[f32]; LANES] = std::array::from_fn(|l| {
            let c = self.n * g.c + self.channels[l];
            &x[c * sin..(c + 1) * sin]
        });
        for pr in p0..p0 + count {
            let Some(r) = pr.checked_sub(ph).filter(|&r| r < ih) else {
                continue;
            };
            let dst = xs[((pr - p0) * self.wp + pw) * LANES..].as_mut_ptr();
            let mut j = 0;
            while j + LANES <= iw {
                let rows = std::array::from_fn(|l| _mm256_loadu_ps(planes[l][r * iw + j..].as_ptr()));
                for (q, v) in transpose8(rows).iter().enumerate() {
                    _mm256_storeu_ps(dst.add((j + q) * LANES), *v);
                }
                j += LANES;
            }
            for j in j..iw {
                for (l, plane) in planes.iter().enumerate() {
                    *dst.add(j * LANES + l) = plane[r * iw + j];
                }
            }
        }
    }

    /// Output rows `r0..` of the block's lanes from `ys` (`[row][col][lane]`)
    /// to their planes of `out`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn output(&self, out: &Disjoint<f32>, m0: usize, r0: usize, ys: &[f32]) {
        let g = self.g;
        let ([oh, ow], lanes) = ([g.output[0], g.output[1]], self.lanes);
        let planes: [*mut f32; LANES] =
            std::array::from_fn(|l| out.at(((self.n * g.m + m0 + l.min(lanes - 1)) * oh + r0) * ow));
        let count = ys.len() / LANES;
        let src = ys.as_ptr();
        let mut p = 0;
        while p + LANES <= count {
            let cols = std::array::from_fn(|q| _mm256_loadu_ps(src.add((p + q) * LANES)));
            for (l, v) in transpose8(cols).iter().enumerate().take(lanes) {
                _mm256_storeu_ps(planes[l].add(p), *v);
            }
            p += LANES;
        }
        for p in p..count {
            for (l, plane) in planes.iter().enumerate().take(lanes) {
                *plane.add(p) = ys[p * LANES + l];
            }
        }
    }
}

/// `rows` output rows of eight channels from the staged padded rows `xs`
/// (`wp` columns each) into `ys`: bias, taps, activation.
#[inline(always)]
unsafe fn window(
    g: &ConvGeom,
    (rows, wp): (usize, usize),
    xs: &[f32],
    ws: &[f32],
    bs: &[f32],
    act: Activation,
    ys: &mut [f32],
) {
    let ow = g.output[1];
    let [kh, kw] = [g.kernel[0], g.kernel[1]];
    let [sh, sw] = [g.strides[0], g.strides[1]];
    let [dh, dw] = [g.dilations[0], g.dilations[1]];
    assert!(
        xs.len() >= ((rows - 1) * sh + (kh - 1) * dh + 1) * wp * LANES
            && wp > (ow - 1) * sw + (kw - 1) * dw
            && ws.len() >= kh * kw * LANES
            && ys.len() >= rows * ow * LANES,
        "depthwise staging too small"
    );
    let bias = _mm256_loadu_ps(bs.as_ptr());
    let (xp, wptr, yp) = (xs.as_ptr(), ws.as_ptr(), ys.as_mut_ptr());
    // Staged position of output (r, j)'s tap (a, b).
    let tap = |r: usize, j: usize, a: usize, b: usize| ((r * sh + a * dh) * wp + j * sw + b * dw) * LANES;
    for r in 0..rows {
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
            // In bands of output rows.
            (11, 1, [160, 150], [3, 3], [2, 2], [1, 1], [1, 1]),
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
