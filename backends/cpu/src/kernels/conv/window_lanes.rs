//! 2-D windows over f32 planes with eight planes in the lanes of an AVX2
//! register, for CPUs without AVX-512 (whose `window` path slides along
//! rows instead): depthwise convolution, max and average pooling.
//!
//! Along rows, a plane of a few columns (MobileNet's and ShuffleNet's last
//! stages, 7x7 to 28x28; an OCR model's 3x12) leaves most of a register
//! idle and runs a loop per row and tap, and a strided one gathers lane by
//! lane. Across planes every lane is busy whatever the plane: eight input
//! planes are staged interleaved (`[row][col][8]`, the padding filled, so
//! no tap is bounds-checked; 8×8 transposes in registers), a depthwise
//! tap's eight weights are one register, and four output positions
//! accumulate at a time. The outputs are staged the same way and
//! transposed back to their planes, with the bias and the activation (or
//! the divisor) applied in registers. Large planes run in bands of output
//! rows, so that the staging of a band stays in L2 between its writes and
//! reads.

use std::arch::x86_64::*;

use rlx_ir::ops::Activation;

use super::window::Geom;
use crate::kernels::gemm::microkernel::transpose8;
use crate::kernels::vmath;
use crate::kernels::vmath_avx2::activate;
use crate::par::Disjoint;

/// Planes per register.
const LANES: usize = 8;
/// Output positions accumulated together.
const POSITIONS: usize = 4;
/// Floats of a band's staging, at most (256 KiB).
const BAND_FLOATS: usize = 64 << 10;

/// True when this CPU runs the path (AVX2 and FMA).
pub fn available() -> bool {
    vmath::avx2()
}

/// What a window computes, and from which input plane.
#[derive(Debug, Clone, Copy)]
pub enum Reduce<'a> {
    /// Depthwise convolution: output plane `o` is channel `o % m` of image
    /// `o / m`, over input channel `(o % m) / mult` of that image's
    /// `m / mult`; `act(bias + Σ w[o % m][tap] · x)`.
    Dot {
        w: &'a [f32],
        bias: Option<&'a [f32]>,
        m: usize,
        mult: usize,
        act: Activation,
    },
    /// The maximum (the padding never wins), NaN winning; plane `o` of `o`.
    Max,
    /// The sum times `rows[r] · cols[c]` (reciprocal divisors per output
    /// row and column); plane `o` of `o`.
    Mean { rows: &'a [f32], cols: &'a [f32] },
}

impl Reduce<'_> {
    /// The input plane of output plane `o`.
    fn source(&self, o: usize) -> usize {
        match *self {
            Reduce::Dot { m, mult, .. } => o / m * (m / mult) + o % m / mult,
            Reduce::Max | Reduce::Mean { .. } => o,
        }
    }
}

/// How [`block`] stages its planes: bands of output rows whose input and
/// output rows, in lanes, stay in L2.
struct Bands {
    /// Floats of a padded input row: every tap of every output column.
    wp: usize,
    /// Output rows of a band.
    rows: usize,
    /// Floats of a thread's staging: a band's input and output rows, then
    /// the weights and bias in lanes.
    staging: usize,
}

impl Bands {
    fn of(g: &Geom) -> Bands {
        let [kh, kw] = g.kernel;
        let [ow, sw] = [g.output[1], g.strides[1]];
        let wp = ((ow - 1) * sw + (kw - 1) * g.dilations[1] + 1).max(g.pads[1] + g.input[1]);
        let mut rows = g.output[0];
        while rows > 1 && Bands::floats(g, wp, rows) > BAND_FLOATS {
            rows = rows.div_ceil(2);
        }
        let staging = Bands::floats(g, wp, rows) + (kh * kw + 1) * LANES;
        Bands { wp, rows, staging }
    }

    /// Input rows a band of `rows` output rows reads.
    fn reach(g: &Geom, rows: usize) -> usize {
        (rows - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1
    }

    /// Floats of a band of `rows` output rows, its input and output rows.
    fn floats(g: &Geom, wp: usize, rows: usize) -> usize {
        (Bands::reach(g, rows) * wp + rows * g.output[1]) * LANES
    }
}

/// Scratch a thread takes in a [`run`] over `g` ([`crate::scratch`]).
pub fn scratch(g: &Geom) -> usize {
    match g.output.contains(&0) || g.kernel.contains(&0) {
        true => 0,
        false => crate::scratch::floats_bytes(Bands::of(g).staging),
    }
}

/// `planes` output planes of `g.output` from the input planes of `x`
/// (`g.input` each) into `y`.
pub fn run(g: &Geom, planes: usize, x: &[f32], y: &mut [f32], reduce: Reduce) {
    let ([ih, iw], [oh, ow]) = (g.input, g.output);
    let (sin, sout, taps) = (ih * iw, oh * ow, g.kernel[0] * g.kernel[1]);
    if planes == 0 || sout == 0 {
        return;
    }
    assert!(
        available()
            && taps > 0
            && g.strides.iter().all(|&s| s > 0)
            && y.len() >= planes * sout
            && x.len() >= (reduce.source(planes - 1) + 1) * sin
            && match reduce {
                Reduce::Dot {
                    w, bias, m, mult, ..
                } => {
                    m > 0
                        && mult > 0
                        && m % mult == 0
                        && w.len() >= m * taps
                        && bias.is_none_or(|b| b.len() >= m)
                }
                Reduce::Max => true,
                Reduce::Mean { rows, cols } => rows.len() >= oh && cols.len() >= ow,
            },
        "window lanes: operand too small"
    );
    let blocks = planes.div_ceil(LANES);
    let out = Disjoint::new(y);
    crate::par::for_each(blocks, |b| {
        let o0 = b * LANES;
        let lanes = LANES.min(planes - o0);
        crate::scratch::floats(Bands::of(g).staging, |staging| {
            // SAFETY: the CPU has AVX2 and FMA, and the operands hold what
            // was asserted; blocks write disjoint planes of `y`.
            unsafe { block(g, (o0, lanes), x, reduce, &out, staging) }
        });
    });
}

/// Output planes `o0..o0 + lanes`, in bands of output rows whose staging
/// stays in L2.
///
/// # Safety
/// AVX2 and FMA are present; the operands are as [`run`] asserts.
#[target_feature(enable = "avx2,fma")]
unsafe fn block(
    g: &Geom,
    (o0, lanes): (usize, usize),
    x: &[f32],
    reduce: Reduce,
    out: &Disjoint<f32>,
    staging: &mut [f32],
) {
    let [oh, ow] = g.output;
    let [kh, kw] = g.kernel;
    let sh = g.strides[0];
    let Bands {
        wp,
        rows,
        staging: len,
    } = Bands::of(g);
    let reach = |rows: usize| Bands::reach(g, rows);
    let taps = kh * kw;
    let staging = &mut staging[..len];
    staging.fill(0.0);
    let (band, rest) = staging.split_at_mut(Bands::floats(g, wp, rows));
    // The last lane's planes repeat past `lanes`: every load is in bounds.
    let lane = |l: usize| o0 + l.min(lanes - 1);
    let stage = Stage {
        g,
        sources: std::array::from_fn(|l| reduce.source(lane(l))),
        targets: std::array::from_fn(|l| lane(l)),
        lanes,
        wp,
        fill: if matches!(reduce, Reduce::Max) {
            f32::NEG_INFINITY
        } else {
            0.0
        },
    };
    let dot = match reduce {
        Reduce::Dot {
            w, bias, m, act, ..
        } => {
            let (ws, bs) = rest.split_at_mut(taps * LANES);
            for l in 0..LANES {
                let c = lane(l) % m;
                for t in 0..taps {
                    ws[t * LANES + l] = w[c * taps + t];
                }
                bs[l] = bias.map_or(0.0, |b| b[c]);
            }
            Some(Dot {
                w: ws.as_ptr(),
                bias: _mm256_loadu_ps(bs.as_ptr()),
                act,
            })
        }
        Reduce::Max | Reduce::Mean { .. } => None,
    };
    for r0 in (0..oh).step_by(rows) {
        let r1 = (r0 + rows).min(oh);
        let (xs, ys) = band.split_at_mut(reach(r1 - r0) * wp * LANES);
        stage.input(x, r0 * sh, reach(r1 - r0), xs);
        let ys = &mut ys[..(r1 - r0) * ow * LANES];
        let shape = Band { rows: r1 - r0, wp };
        match (reduce, &dot) {
            (_, Some(dot)) => window(g, shape, xs, dot, ys),
            (Reduce::Mean { rows, cols }, _) => {
                let mean = Mean {
                    rows: &rows[r0..],
                    cols,
                };
                window(g, shape, xs, &mean, ys)
            }
            _ => window(g, shape, xs, &Max, ys),
        }
        stage.output(out, r0, ys);
    }
}

/// Where a block's lanes come from and go.
struct Stage<'a> {
    g: &'a Geom,
    /// Input plane of each lane, and output plane (the last lane's
    /// repeated past `lanes`).
    sources: [usize; LANES],
    targets: [usize; LANES],
    lanes: usize,
    /// Columns of a padded row.
    wp: usize,
    /// The padding's value.
    fill: f32,
}

impl Stage<'_> {
    /// Padded rows `p0..p0 + count` of the block's input planes into `xs`
    /// (`[row][col][lane]`, `fill` on the padding), eight columns at a time
    /// through an 8×8 transpose.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn input(&self, x: &[f32], p0: usize, count: usize, xs: &mut [f32]) {
        let ([ih, iw], [ph, pw]) = (self.g.input, self.g.pads);
        let sin = ih * iw;
        xs.fill(self.fill);
        let planes: [&[f32]; LANES] =
            std::array::from_fn(|l| &x[self.sources[l] * sin..(self.sources[l] + 1) * sin]);
        for pr in p0..p0 + count {
            let Some(r) = pr.checked_sub(ph).filter(|&r| r < ih) else {
                continue;
            };
            let dst = xs[((pr - p0) * self.wp + pw) * LANES..].as_mut_ptr();
            let mut j = 0;
            while j + LANES <= iw {
                let rows =
                    std::array::from_fn(|l| _mm256_loadu_ps(planes[l][r * iw + j..].as_ptr()));
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

    /// Output rows `r0..` of the block's planes from `ys` (`[row][col][lane]`)
    /// to `out`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn output(&self, out: &Disjoint<f32>, r0: usize, ys: &[f32]) {
        let [oh, ow] = self.g.output;
        let planes: [*mut f32; LANES] =
            std::array::from_fn(|l| out.at((self.targets[l] * oh + r0) * ow));
        let count = ys.len() / LANES;
        let src = ys.as_ptr();
        let mut p = 0;
        while p + LANES <= count {
            let cols = std::array::from_fn(|q| _mm256_loadu_ps(src.add((p + q) * LANES)));
            for (l, v) in transpose8(cols).iter().enumerate().take(self.lanes) {
                _mm256_storeu_ps(planes[l].add(p), *v);
            }
            p += LANES;
        }
        for p in p..count {
            for (l, plane) in planes.iter().enumerate().take(self.lanes) {
                *plane.add(p) = ys[p * LANES + l];
            }
        }
    }
}

/// A band's output rows, and the columns of its staged rows.
#[derive(Clone, Copy)]
struct Band {
    rows: usize,
    wp: usize,
}

/// How the taps of a window fold into one register.
trait Fold {
    unsafe fn start(&self) -> __m256;
    /// `acc` with tap `t`'s value `v`.
    unsafe fn tap(&self, acc: __m256, t: usize, v: __m256) -> __m256;
    /// The output of row `r` (of the band) and column `j`.
    unsafe fn finish(&self, acc: __m256, r: usize, j: usize) -> __m256;
}

struct Dot {
    /// `[tap][lane]`.
    w: *const f32,
    bias: __m256,
    act: Activation,
}

impl Fold for Dot {
    #[inline(always)]
    unsafe fn start(&self) -> __m256 {
        self.bias
    }

    #[inline(always)]
    unsafe fn tap(&self, acc: __m256, t: usize, v: __m256) -> __m256 {
        _mm256_fmadd_ps(_mm256_loadu_ps(self.w.add(t * LANES)), v, acc)
    }

    #[inline(always)]
    unsafe fn finish(&self, acc: __m256, _: usize, _: usize) -> __m256 {
        activate(self.act, acc)
    }
}

struct Max;

impl Fold for Max {
    #[inline(always)]
    unsafe fn start(&self) -> __m256 {
        _mm256_set1_ps(f32::NEG_INFINITY)
    }

    #[inline(always)]
    unsafe fn tap(&self, acc: __m256, _: usize, v: __m256) -> __m256 {
        // `maxps` returns its second operand when either is NaN: a NaN tap
        // wins there, and a NaN maximum is kept by the blend.
        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(acc, acc);
        _mm256_blendv_ps(_mm256_max_ps(acc, v), acc, nan)
    }

    #[inline(always)]
    unsafe fn finish(&self, acc: __m256, _: usize, _: usize) -> __m256 {
        acc
    }
}

struct Mean<'a> {
    rows: &'a [f32],
    cols: &'a [f32],
}

impl Fold for Mean<'_> {
    #[inline(always)]
    unsafe fn start(&self) -> __m256 {
        _mm256_setzero_ps()
    }

    #[inline(always)]
    unsafe fn tap(&self, acc: __m256, _: usize, v: __m256) -> __m256 {
        _mm256_add_ps(acc, v)
    }

    #[inline(always)]
    unsafe fn finish(&self, acc: __m256, r: usize, j: usize) -> __m256 {
        _mm256_mul_ps(acc, _mm256_set1_ps(self.rows[r] * self.cols[j]))
    }
}

/// A band's output rows of eight planes from the staged padded rows `xs`
/// into `ys`.
#[inline(always)]
unsafe fn window<F: Fold>(g: &Geom, band: Band, xs: &[f32], fold: &F, ys: &mut [f32]) {
    let ow = g.output[1];
    let [kh, kw] = g.kernel;
    let [sh, sw] = g.strides;
    let [dh, dw] = g.dilations;
    let Band { rows, wp } = band;
    assert!(
        xs.len() >= ((rows - 1) * sh + (kh - 1) * dh + 1) * wp * LANES
            && wp > (ow - 1) * sw + (kw - 1) * dw
            && ys.len() >= rows * ow * LANES,
        "window lanes: staging too small"
    );
    let (xp, yp) = (xs.as_ptr(), ys.as_mut_ptr());
    // Staged position of output (r, j)'s tap (a, b).
    let at =
        |r: usize, j: usize, a: usize, b: usize| ((r * sh + a * dh) * wp + j * sw + b * dw) * LANES;
    for r in 0..rows {
        let mut j = 0;
        while j + POSITIONS <= ow {
            let mut acc = [fold.start(); POSITIONS];
            for a in 0..kh {
                for b in 0..kw {
                    let base = xp.add(at(r, j, a, b));
                    for (q, s) in acc.iter_mut().enumerate() {
                        let v = _mm256_loadu_ps(base.add(q * sw * LANES));
                        *s = fold.tap(*s, a * kw + b, v);
                    }
                }
            }
            for (q, s) in acc.iter().enumerate() {
                let v = fold.finish(*s, r, j + q);
                _mm256_storeu_ps(yp.add((r * ow + j + q) * LANES), v);
            }
            j += POSITIONS;
        }
        for j in j..ow {
            let mut s = fold.start();
            for a in 0..kh {
                for b in 0..kw {
                    s = fold.tap(s, a * kw + b, _mm256_loadu_ps(xp.add(at(r, j, a, b))));
                }
            }
            _mm256_storeu_ps(yp.add((r * ow + j) * LANES), fold.finish(s, r, j));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (planes, input, kernel, stride, dilation, pads): strides,
    /// dilations, pads, plane counts off the lanes, and a plane large
    /// enough to run in bands of output rows.
    const CASES: [(
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
    ); 6] = [
        (8, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1]),
        (13, [9, 12], [5, 5], [2, 2], [1, 1], [2, 2]),
        (5, [3, 12], [3, 3], [1, 2], [1, 1], [1, 0]),
        (16, [6, 6], [3, 3], [1, 1], [2, 2], [2, 2]),
        (3, [10, 5], [2, 3], [2, 1], [1, 1], [0, 1]),
        (11, [160, 150], [3, 3], [2, 2], [1, 1], [1, 1]),
    ];

    fn geom(
        input: [usize; 2],
        kernel: [usize; 2],
        strides: [usize; 2],
        dilations: [usize; 2],
        pads: [usize; 2],
    ) -> Geom {
        let out = |i: usize| {
            (input[i] + 2 * pads[i] - (kernel[i] - 1) * dilations[i] - 1) / strides[i] + 1
        };
        Geom {
            input,
            output: [out(0), out(1)],
            kernel,
            strides,
            dilations,
            pads,
        }
    }

    /// The input values under output `(r, c)`'s taps, as (tap, value).
    fn taps(g: &Geom, x: &[f32], r: usize, c: usize) -> Vec<(usize, f32)> {
        let mut v = Vec::new();
        for a in 0..g.kernel[0] {
            for b in 0..g.kernel[1] {
                let h = (r * g.strides[0] + a * g.dilations[0]).checked_sub(g.pads[0]);
                let w = (c * g.strides[1] + b * g.dilations[1]).checked_sub(g.pads[1]);
                if let (Some(h), Some(w)) = (h, w) {
                    if h < g.input[0] && w < g.input[1] {
                        v.push((a * g.kernel[1] + b, x[h * g.input[1] + w]));
                    }
                }
            }
        }
        v
    }

    /// Runs `reduce` on 1 and 3 threads and compares with `want` (per
    /// output plane, the values of `x`'s source plane).
    fn check(
        g: &Geom,
        planes: usize,
        x: &[f32],
        reduce: Reduce,
        want: &dyn Fn(usize, usize, usize) -> f32,
    ) {
        let pool = crate::par::Pool::new(3).unwrap();
        let sout = g.output[0] * g.output[1];
        for threads in [1, 3] {
            let mut got = vec![f32::NAN; planes * sout];
            let go = || run(g, planes, x, &mut got, reduce);
            if threads == 1 {
                crate::par::inline(go);
            } else {
                pool.install(go);
            }
            for (i, a) in got.iter().enumerate() {
                let (o, r, c) = (i / sout, i % sout / g.output[1], i % g.output[1]);
                let e = want(o, r, c);
                assert!(
                    (a - e).abs() <= 1e-5 || a.is_nan() && e.is_nan(),
                    "{reduce:?} {g:?} plane {o} ({r}, {c}) on {threads} threads: {a} vs {e}"
                );
            }
        }
    }

    #[test]
    fn depthwise_matches_the_definition() {
        if !available() {
            return;
        }
        for (c, input, kernel, strides, dilations, pads) in CASES {
            let g = geom(input, kernel, strides, dilations, pads);
            // Two images, a channel multiplier of 2.
            let (n, mult) = (2, 2);
            let (m, sin) = (c * mult, input[0] * input[1]);
            let taps_n = kernel[0] * kernel[1];
            let x: Vec<f32> = (0..n * c * sin)
                .map(|i| ((i * 7) % 23) as f32 * 0.1 - 1.1)
                .collect();
            let w: Vec<f32> = (0..m * taps_n)
                .map(|i| ((i * 5) % 11) as f32 * 0.05 - 0.25)
                .collect();
            let b: Vec<f32> = (0..m).map(|i| i as f32 * 0.1 - 0.3).collect();
            let act = Activation::HardSwish;
            let reduce = Reduce::Dot {
                w: &w,
                bias: Some(&b),
                m,
                mult,
                act,
            };
            check(&g, n * m, &x, reduce, &|o, r, col| {
                let (img, ch) = (o / m, o % m);
                let src = &x[(img * c + ch / mult) * sin..];
                let s: f32 = b[ch]
                    + taps(&g, src, r, col)
                        .iter()
                        .map(|&(t, v)| w[ch * taps_n + t] * v)
                        .sum::<f32>();
                vmath::hard_swish(s)
            });
        }
    }

    #[test]
    fn pools_match_the_definition() {
        if !available() {
            return;
        }
        for (planes, input, kernel, strides, dilations, pads) in CASES {
            let g = geom(input, kernel, strides, dilations, pads);
            let sin = input[0] * input[1];
            let mut x: Vec<f32> = (0..planes * sin)
                .map(|i| ((i * 7) % 23) as f32 * 0.1 - 1.1)
                .collect();
            // A NaN wins its windows.
            x[sin + 2] = f32::NAN;
            check(&g, planes, &x, Reduce::Max, &|o, r, c| {
                let t = taps(&g, &x[o * sin..], r, c);
                if t.iter().any(|v| v.1.is_nan()) {
                    f32::NAN
                } else {
                    t.iter().map(|v| v.1).fold(f32::NEG_INFINITY, f32::max)
                }
            });
            // Divisors: the taps inside the input (count_include_pad off).
            let count = |d: usize, o: usize| {
                (0..g.kernel[d])
                    .filter(|&k| {
                        let p = o * g.strides[d] + k * g.dilations[d];
                        p >= g.pads[d] && p - g.pads[d] < g.input[d]
                    })
                    .count() as f32
            };
            let rows: Vec<f32> = (0..g.output[0]).map(|r| 1.0 / count(0, r)).collect();
            let cols: Vec<f32> = (0..g.output[1]).map(|c| 1.0 / count(1, c)).collect();
            let reduce = Reduce::Mean {
                rows: &rows,
                cols: &cols,
            };
            check(&g, planes, &x, reduce, &|o, r, c| {
                let t = taps(&g, &x[o * sin..], r, c);
                t.iter().map(|v| v.1).sum::<f32>() * rows[r] * cols[c]
            });
        }
    }
}
