//! 2-D windows over f32 planes with a register's lanes holding as many
//! planes (eight in AVX2, sixteen in AVX-512): depthwise convolution, max
//! and average pooling.
//!
//! Along rows, a plane of a few columns (MobileNet's and ShuffleNet's last
//! stages, 7x7 to 28x28; an OCR model's 3x12) leaves most of a register
//! idle and runs a loop per row and tap, and a strided one gathers lane by
//! lane. Across planes every lane is busy whatever the plane: a register's
//! worth of input planes are staged interleaved (`[row][col][lane]`, the
//! padding filled, so no tap is bounds-checked; transposed in registers), a
//! depthwise tap's weights are one register, and four output positions
//! accumulate at a time. The outputs are staged the same way and
//! transposed back to their planes, with the bias and the activation (or
//! the divisor) applied in registers. Large planes run in bands of output
//! rows, so that the staging of a band stays in L2 between its writes and
//! reads. On AVX-512 `conv::window` slides along rows instead, and the
//! callers choose between the two by the plane ([`prefer_lanes`]).

use std::arch::x86_64::*;

use rlx_ir::ops::Activation;

use super::window::Geom;
use crate::kernels::gemm::microkernel::{activate as activate16, transpose16, transpose8};
use crate::kernels::vmath;
use crate::kernels::vmath_avx2;
use crate::par::Disjoint;

/// Planes per register, at most.
const MAX_LANES: usize = 16;
/// Output positions accumulated together: eight independent chains of
/// FMAs keep both FMA ports busy through their latency (a register of
/// each, with the tap's weights and input, fits AVX2's sixteen).
const POSITIONS: usize = 8;
/// Floats of a band's staging, at most (256 KiB).
const BAND_FLOATS: usize = 64 << 10;

/// True when this CPU runs the path (AVX2 and FMA; AVX-512 too, wider).
pub fn available() -> bool {
    vmath::avx2()
}

/// Whether an AVX-512 CPU runs a window over planes of `g` across planes
/// rather than along rows (`conv::window`): where the output rows are at
/// most half a register long, so that sliding along them leaves most lanes
/// idle, and the window is larger than 2x2 (whose few taps the row form's
/// clamped reads take cheaper than the two transposes). Measured on one
/// thread (`rlx-onnx bench`, single-op models, medians of 1,000 to 2,000
/// runs, along rows -> across planes): 5x5 depthwise at stride 2 on 256 x
/// 14x14 (7 columns out) 0.050-0.077 -> 0.029 ms, at stride 1 on 512 x 7x7
/// 0.062-0.086 -> 0.039, a 3x3 max pool at stride 1 on 576 x 7x7 0.045 ->
/// 0.027, at stride 2 on 256 x 14x14 0.031 -> 0.022, a 3x3 average pool on
/// 512 x 7x7 0.037 -> 0.023; slower for 2x2 pools at stride 2 on 14x14
/// (max 0.024 -> 0.034, average 0.019 -> 0.020); at 14 columns out level or
/// slower (5x5 on 256 x 14x14 0.052 / 0.053, 3x3 at stride 2 on 128 x
/// 28x28 0.030 -> 0.040), and at 28 and more slower (3x3 at stride 2 on 32
/// x 112x112 0.11-0.13 -> 0.13-0.15, a 3x3 max pool at stride 2 on 64 x
/// 112x112 0.16-0.18 -> 0.33).
pub fn prefer_lanes(g: &Geom) -> bool {
    g.output[1] <= 8 && g.kernel[0] * g.kernel[1] > 4
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

/// A register of lanes, and what the windows do with one.
trait Reg: Copy {
    const LANES: usize;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn store(self, p: *mut f32);
    unsafe fn splat(v: f32) -> Self;
    /// `a · b + c`.
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self;
    unsafe fn add(self, o: Self) -> Self;
    unsafe fn mul(self, o: Self) -> Self;
    /// `max(acc, v)` where a NaN in either wins.
    unsafe fn max_nan(acc: Self, v: Self) -> Self;
    unsafe fn activate(act: Activation, v: Self) -> Self;
    /// `LANES` registers (`rows`) transposed in place.
    unsafe fn transpose(rows: &mut [Self]);
}

#[derive(Clone, Copy)]
struct Avx2(__m256);

impl Reg for Avx2 {
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx2(_mm256_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm256_storeu_ps(p, self.0)
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Avx2(_mm256_set1_ps(v))
    }
    #[inline(always)]
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self {
        Avx2(_mm256_fmadd_ps(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        Avx2(_mm256_add_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        Avx2(_mm256_mul_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn max_nan(acc: Self, v: Self) -> Self {
        // `maxps` returns its second operand when either is NaN: a NaN tap
        // wins there, and a NaN maximum is kept by the blend.
        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(acc.0, acc.0);
        Avx2(_mm256_blendv_ps(_mm256_max_ps(acc.0, v.0), acc.0, nan))
    }
    #[inline(always)]
    unsafe fn activate(act: Activation, v: Self) -> Self {
        Avx2(vmath_avx2::activate(act, v.0))
    }
    #[inline(always)]
    unsafe fn transpose(rows: &mut [Self]) {
        let t = transpose8(std::array::from_fn(|i| rows[i].0));
        for (r, v) in rows.iter_mut().zip(t) {
            *r = Avx2(v);
        }
    }
}

#[derive(Clone, Copy)]
struct Avx512(__m512);

impl Reg for Avx512 {
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx512(_mm512_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm512_storeu_ps(p, self.0)
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Avx512(_mm512_set1_ps(v))
    }
    #[inline(always)]
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self {
        Avx512(_mm512_fmadd_ps(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        Avx512(_mm512_add_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        Avx512(_mm512_mul_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn max_nan(acc: Self, v: Self) -> Self {
        // As AVX2's: the second operand where either is NaN, then the NaN
        // maximum kept.
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(acc.0, acc.0);
        Avx512(_mm512_mask_mov_ps(_mm512_max_ps(acc.0, v.0), nan, acc.0))
    }
    #[inline(always)]
    unsafe fn activate(act: Activation, v: Self) -> Self {
        Avx512(activate16(act, v.0))
    }
    #[inline(always)]
    unsafe fn transpose(rows: &mut [Self]) {
        let t = transpose16(std::array::from_fn(|i| rows[i].0));
        for (r, v) in rows.iter_mut().zip(t) {
            *r = Avx512(v);
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
    fn of(g: &Geom, lanes: usize) -> Bands {
        let [kh, kw] = g.kernel;
        let [ow, sw] = [g.output[1], g.strides[1]];
        let wp = ((ow - 1) * sw + (kw - 1) * g.dilations[1] + 1).max(g.pads[1] + g.input[1]);
        let mut rows = g.output[0];
        while rows > 1 && Bands::floats(g, wp, rows, lanes) > BAND_FLOATS {
            rows = rows.div_ceil(2);
        }
        let staging = Bands::floats(g, wp, rows, lanes) + (kh * kw + 1) * lanes;
        Bands { wp, rows, staging }
    }

    /// Input rows a band of `rows` output rows reads.
    fn reach(g: &Geom, rows: usize) -> usize {
        (rows - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1
    }

    /// Floats of a band of `rows` output rows, its input and output rows.
    fn floats(g: &Geom, wp: usize, rows: usize, lanes: usize) -> usize {
        (Bands::reach(g, rows) * wp + rows * g.output[1]) * lanes
    }
}

/// Planes a register holds on this CPU.
fn width() -> usize {
    if vmath::avx512() {
        Avx512::LANES
    } else {
        Avx2::LANES
    }
}

/// Scratch a thread takes in a [`run`] over `g` ([`crate::scratch`]).
pub fn scratch(g: &Geom) -> usize {
    match g.output.contains(&0) || g.kernel.contains(&0) {
        true => 0,
        false => crate::scratch::floats_bytes(Bands::of(g, width()).staging),
    }
}

/// `planes` output planes of `g.output` from the input planes of `x`
/// (`g.input` each) into `y`.
pub fn run(g: &Geom, planes: usize, x: &[f32], y: &mut [f32], reduce: Reduce) {
    run_in(width(), g, planes, x, y, reduce)
}

/// [`run`] in registers of `lanes_per` lanes (8, or 16 where the CPU has
/// AVX-512).
fn run_in(lanes_per: usize, g: &Geom, planes: usize, x: &[f32], y: &mut [f32], reduce: Reduce) {
    let ([ih, iw], [oh, ow]) = (g.input, g.output);
    let (sin, sout, taps) = (ih * iw, oh * ow, g.kernel[0] * g.kernel[1]);
    if planes == 0 || sout == 0 {
        return;
    }
    assert!(
        available()
            && (lanes_per == Avx2::LANES || lanes_per == Avx512::LANES && vmath::avx512())
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
    let blocks = planes.div_ceil(lanes_per);
    let out = Disjoint::new(y);
    crate::par::for_each(blocks, |b| {
        let o0 = b * lanes_per;
        let lanes = lanes_per.min(planes - o0);
        crate::scratch::floats(Bands::of(g, lanes_per).staging, |staging| {
            // SAFETY: the CPU has the features `width` chose by, and the
            // operands hold what was asserted; blocks write disjoint planes
            // of `y`.
            unsafe {
                if lanes_per == Avx512::LANES {
                    block_avx512(g, (o0, lanes), x, reduce, &out, staging)
                } else {
                    block_avx2(g, (o0, lanes), x, reduce, &out, staging)
                }
            }
        });
    });
}

#[target_feature(enable = "avx2,fma")]
unsafe fn block_avx2(
    g: &Geom,
    planes: (usize, usize),
    x: &[f32],
    reduce: Reduce,
    out: &Disjoint<f32>,
    staging: &mut [f32],
) {
    block::<Avx2>(g, planes, x, reduce, out, staging)
}

#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn block_avx512(
    g: &Geom,
    planes: (usize, usize),
    x: &[f32],
    reduce: Reduce,
    out: &Disjoint<f32>,
    staging: &mut [f32],
) {
    block::<Avx512>(g, planes, x, reduce, out, staging)
}

/// Output planes `o0..o0 + lanes`, in bands of output rows whose staging
/// stays in L2.
///
/// # Safety
/// The CPU runs `V`; the operands are as [`run`] asserts.
#[inline(always)]
unsafe fn block<V: Reg>(
    g: &Geom,
    (o0, lanes): (usize, usize),
    x: &[f32],
    reduce: Reduce,
    out: &Disjoint<f32>,
    staging: &mut [f32],
) {
    let n = V::LANES;
    let [oh, ow] = g.output;
    let [kh, kw] = g.kernel;
    let sh = g.strides[0];
    let Bands {
        wp,
        rows,
        staging: len,
    } = Bands::of(g, n);
    let reach = |rows: usize| Bands::reach(g, rows);
    let taps = kh * kw;
    // Every float read is written first: the input rows (their padding
    // filled), the output rows, the weights and biases.
    let staging = &mut staging[..len];
    let (band, rest) = staging.split_at_mut(Bands::floats(g, wp, rows, n));
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
            let (ws, bs) = rest.split_at_mut(taps * n);
            for l in 0..n {
                let c = lane(l) % m;
                for t in 0..taps {
                    ws[t * n + l] = w[c * taps + t];
                }
                bs[l] = bias.map_or(0.0, |b| b[c]);
            }
            Some(Dot {
                w: ws.as_ptr(),
                bias: V::load(bs.as_ptr()),
                act,
            })
        }
        Reduce::Max | Reduce::Mean { .. } => None,
    };
    for r0 in (0..oh).step_by(rows) {
        let r1 = (r0 + rows).min(oh);
        let (xs, ys) = band.split_at_mut(reach(r1 - r0) * wp * n);
        stage.input::<V>(x, r0 * sh, reach(r1 - r0), xs);
        let ys = &mut ys[..(r1 - r0) * ow * n];
        let shape = Band { rows: r1 - r0, wp };
        match (reduce, &dot) {
            (_, Some(dot)) => window(g, shape, xs, dot, ys),
            (Reduce::Mean { rows, cols }, _) => {
                let mean = Mean {
                    rows: &rows[r0..],
                    cols,
                };
                window::<V, _>(g, shape, xs, &mean, ys)
            }
            _ => window::<V, _>(g, shape, xs, &Max, ys),
        }
        stage.output::<V>(out, r0, ys);
    }
}

/// Where a block's lanes come from and go.
struct Stage<'a> {
    g: &'a Geom,
    /// Input plane of each lane, and output plane (the last lane's
    /// repeated past `lanes`).
    sources: [usize; MAX_LANES],
    targets: [usize; MAX_LANES],
    lanes: usize,
    /// Columns of a padded row.
    wp: usize,
    /// The padding's value.
    fill: f32,
}

impl Stage<'_> {
    /// Padded rows `p0..p0 + count` of the block's input planes into `xs`
    /// (`[row][col][lane]`, `fill` on the padding). The band's input rows
    /// lie back to back in each plane, so a register's width of positions
    /// at a time goes through a transpose whatever the rows' length: rows
    /// shorter than a register (7x7 planes) were copied lane by lane, as
    /// gathers that took a third of a 3x3 depthwise block's time.
    #[inline(always)]
    unsafe fn input<V: Reg>(&self, x: &[f32], p0: usize, count: usize, xs: &mut [f32]) {
        let n = V::LANES;
        let ([ih, iw], [ph, pw]) = (self.g.input, self.g.pads);
        let sin = ih * iw;
        xs.fill(self.fill);
        let planes: [&[f32]; MAX_LANES] = std::array::from_fn(|l| {
            let s = self.sources[l.min(n - 1)];
            &x[s * sin..(s + 1) * sin]
        });
        // Input rows r_lo..r_hi are padded rows r + ph of the band.
        let r_lo = p0.saturating_sub(ph).min(ih);
        let r_hi = (p0 + count).saturating_sub(ph).min(ih);
        let (f1, dst) = (r_hi * iw, xs.as_mut_ptr());
        let (mut f, mut r, mut c) = (r_lo * iw, r_lo, 0);
        let mut regs = [V::splat(0.0); MAX_LANES];
        let mut tail = [0f32; MAX_LANES];
        while f < f1 {
            let k = (f1 - f).min(n);
            for (l, v) in regs[..n].iter_mut().enumerate() {
                let src = &planes[l][f..f + k];
                *v = if k == n {
                    V::load(src.as_ptr())
                } else {
                    tail[..k].copy_from_slice(src);
                    V::load(tail.as_ptr())
                };
            }
            V::transpose(&mut regs[..n]);
            for v in &regs[..k] {
                let at = ((r + ph - p0) * self.wp + pw + c) * n;
                debug_assert!(at + n <= xs.len());
                v.store(dst.add(at));
                c += 1;
                if c == iw {
                    (r, c) = (r + 1, 0);
                }
            }
            f += k;
        }
    }

    /// Output rows `r0..` of the block's planes from `ys` (`[row][col][lane]`)
    /// to `out`.
    #[inline(always)]
    unsafe fn output<V: Reg>(&self, out: &Disjoint<f32>, r0: usize, ys: &[f32]) {
        let n = V::LANES;
        let [oh, ow] = self.g.output;
        let planes: [*mut f32; MAX_LANES] =
            std::array::from_fn(|l| out.at((self.targets[l.min(n - 1)] * oh + r0) * ow));
        let count = ys.len() / n;
        let src = ys.as_ptr();
        let mut regs = [V::splat(0.0); MAX_LANES];
        let mut p = 0;
        while p + n <= count {
            for (q, v) in regs[..n].iter_mut().enumerate() {
                *v = V::load(src.add((p + q) * n));
            }
            V::transpose(&mut regs[..n]);
            for (l, v) in regs[..self.lanes].iter().enumerate() {
                v.store(planes[l].add(p));
            }
            p += n;
        }
        for p in p..count {
            for (l, plane) in planes[..self.lanes].iter().enumerate() {
                *plane.add(p) = ys[p * n + l];
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
trait Fold<V: Reg> {
    unsafe fn start(&self) -> V;
    /// `acc` with tap `t`'s value `v`.
    unsafe fn tap(&self, acc: V, t: usize, v: V) -> V;
    /// The output of row `r` (of the band) and column `j`.
    unsafe fn finish(&self, acc: V, r: usize, j: usize) -> V;
}

struct Dot<V> {
    /// `[tap][lane]`.
    w: *const f32,
    bias: V,
    act: Activation,
}

impl<V: Reg> Fold<V> for Dot<V> {
    #[inline(always)]
    unsafe fn start(&self) -> V {
        self.bias
    }

    #[inline(always)]
    unsafe fn tap(&self, acc: V, t: usize, v: V) -> V {
        V::fmadd(V::load(self.w.add(t * V::LANES)), v, acc)
    }

    #[inline(always)]
    unsafe fn finish(&self, acc: V, _: usize, _: usize) -> V {
        V::activate(self.act, acc)
    }
}

struct Max;

impl<V: Reg> Fold<V> for Max {
    #[inline(always)]
    unsafe fn start(&self) -> V {
        V::splat(f32::NEG_INFINITY)
    }

    #[inline(always)]
    unsafe fn tap(&self, acc: V, _: usize, v: V) -> V {
        V::max_nan(acc, v)
    }

    #[inline(always)]
    unsafe fn finish(&self, acc: V, _: usize, _: usize) -> V {
        acc
    }
}

struct Mean<'a> {
    rows: &'a [f32],
    cols: &'a [f32],
}

impl<V: Reg> Fold<V> for Mean<'_> {
    #[inline(always)]
    unsafe fn start(&self) -> V {
        V::splat(0.0)
    }

    #[inline(always)]
    unsafe fn tap(&self, acc: V, _: usize, v: V) -> V {
        acc.add(v)
    }

    #[inline(always)]
    unsafe fn finish(&self, acc: V, r: usize, j: usize) -> V {
        acc.mul(V::splat(self.rows[r] * self.cols[j]))
    }
}

/// A band's output rows of a register's planes from the staged padded
/// rows `xs` into `ys`.
#[inline(always)]
unsafe fn window<V: Reg, F: Fold<V>>(g: &Geom, band: Band, xs: &[f32], fold: &F, ys: &mut [f32]) {
    let n = V::LANES;
    let ow = g.output[1];
    let [kh, kw] = g.kernel;
    let [sh, sw] = g.strides;
    let [dh, dw] = g.dilations;
    let Band { rows, wp } = band;
    assert!(
        xs.len() >= ((rows - 1) * sh + (kh - 1) * dh + 1) * wp * n
            && wp > (ow - 1) * sw + (kw - 1) * dw
            && ys.len() >= rows * ow * n,
        "window lanes: staging too small"
    );
    let (xp, yp) = (xs.as_ptr(), ys.as_mut_ptr());
    for r in 0..rows {
        let mut j = 0;
        while j + POSITIONS <= ow {
            positions::<V, F, POSITIONS>(g, wp, xp, yp, fold, r, j);
            j += POSITIONS;
        }
        // The row's last positions together too: each alone was a chain of
        // dependent FMAs one latency per tap (a 5x5 window on 7x7 planes:
        // four positions, then three chains of 25).
        match ow - j {
            0 => {}
            1 => positions::<V, F, 1>(g, wp, xp, yp, fold, r, j),
            2 => positions::<V, F, 2>(g, wp, xp, yp, fold, r, j),
            3 => positions::<V, F, 3>(g, wp, xp, yp, fold, r, j),
            4 => positions::<V, F, 4>(g, wp, xp, yp, fold, r, j),
            5 => positions::<V, F, 5>(g, wp, xp, yp, fold, r, j),
            6 => positions::<V, F, 6>(g, wp, xp, yp, fold, r, j),
            7 => positions::<V, F, 7>(g, wp, xp, yp, fold, r, j),
            _ => unreachable!("fewer than POSITIONS left"),
        }
    }
}

/// Output positions `j .. j + P` of band row `r`, accumulated together.
///
/// # Safety
/// As [`window`]: `xp` holds the band's staged rows (`wp` positions of
/// `V::LANES` floats each), `yp` its output rows, and `j + P <= ow`.
#[inline(always)]
unsafe fn positions<V: Reg, F: Fold<V>, const P: usize>(
    g: &Geom,
    wp: usize,
    xp: *const f32,
    yp: *mut f32,
    fold: &F,
    r: usize,
    j: usize,
) {
    let n = V::LANES;
    let ow = g.output[1];
    let [kh, kw] = g.kernel;
    let [sh, sw] = g.strides;
    let [dh, dw] = g.dilations;
    let mut acc = [fold.start(); P];
    for a in 0..kh {
        for b in 0..kw {
            let base = xp.add(((r * sh + a * dh) * wp + j * sw + b * dw) * n);
            for (q, s) in acc.iter_mut().enumerate() {
                let v = V::load(base.add(q * sw * n));
                *s = fold.tap(*s, a * kw + b, v);
            }
        }
    }
    for (q, s) in acc.iter().enumerate() {
        fold.finish(*s, r, j + q)
            .store(yp.add((r * ow + j + q) * n));
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
    ); 8] = [
        (8, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1]),
        (19, [20, 33], [3, 3], [2, 2], [1, 1], [1, 1]),
        (16, [7, 7], [5, 5], [1, 1], [1, 1], [2, 2]),
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

    /// Runs `reduce` on 1 and 3 threads, in registers of 8 lanes and of 16
    /// where the CPU has them, and compares with `want` (per output plane,
    /// the values of `x`'s source plane).
    fn check(
        g: &Geom,
        planes: usize,
        x: &[f32],
        reduce: Reduce,
        want: &dyn Fn(usize, usize, usize) -> f32,
    ) {
        let pool = crate::par::Pool::new(3).unwrap();
        let sout = g.output[0] * g.output[1];
        let widths: &[usize] = if vmath::avx512() { &[8, 16] } else { &[8] };
        for (threads, &lanes) in [1, 3]
            .into_iter()
            .flat_map(|t| widths.iter().map(move |l| (t, l)))
        {
            let mut got = vec![f32::NAN; planes * sout];
            let go = || run_in(lanes, g, planes, x, &mut got, reduce);
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
                    "{reduce:?} {g:?} plane {o} ({r}, {c}) on {threads} threads, {lanes} lanes: {a} vs {e}"
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
