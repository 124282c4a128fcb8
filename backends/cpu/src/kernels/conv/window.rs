//! 2-D sliding windows over one f32 plane at a time, for depthwise
//! convolution and max/average pooling on AVX-512 CPUs.
//!
//! The plane is copied once into a bordered buffer (zeros, or -inf for max)
//! whose rows start on cache lines, so no tap needs a bounds check; then
//! every 16 outputs of a row are one register that takes all the window's
//! taps (two loads and a permute at stride 2, a gather at larger strides)
//! and is stored once. 3×3 and 5×5 windows are unrolled, a partial sum per
//! window row; a 3×3 window at stride 1 loads each row's vector once and
//! shifts it for the other two taps. 2×2 and 3×3 maxima at stride 2 (the
//! pools of most CNNs) are maxima over columns, then over rows; they read a
//! padded plane in place too (rows clamped to it, columns past it as -inf)
//! where its copy would not stay in L1.

/// The window geometry of a 2-D conv or pool, per plane.
#[derive(Debug, Clone, Copy)]
pub struct Geom {
    pub input: [usize; 2],
    pub output: [usize; 2],
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// Begin pads.
    pub pads: [usize; 2],
}

impl Geom {
    /// Rows and columns of the bordered plane: every tap of every output, and the input.
    fn padded(&self) -> (usize, usize) {
        let ext = |d: usize| {
            ((self.output[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1)
                .max(self.input[d] + self.pads[d])
        };
        (ext(0), ext(1))
    }
}

/// What a window computes.
#[derive(Debug, Clone, Copy)]
pub enum Reduce<'a> {
    /// `bias + Σ w[tap] · x` (row-major `kernel` taps), optionally ReLU'd.
    Dot { w: &'a [f32], bias: f32, relu: bool },
    /// The maximum, NaN winning.
    Max,
    /// The sum times `rows[r] · cols[c]` (reciprocal divisors per output row and
    /// column; `cols` has room for [`mean_cols`] entries).
    Mean { rows: &'a [f32], cols: &'a [f32] },
}

/// Entries of a [`Reduce::Mean`]'s `cols` for `ow` output columns.
pub fn mean_cols(ow: usize) -> usize {
    ow.div_ceil(16) * 16
}

/// True when this CPU runs the vector path.
pub fn available() -> bool {
    crate::kernels::vmath::avx512()
}

/// Scratch a thread takes in a [`plane`] over `g` ([`crate::scratch`]):
/// the bordered copy of the plane, and three rows of column maxima taken
/// over it (a separable 3×3 maximum).
pub fn scratch(g: &Geom) -> usize {
    // `plane` takes nothing for an empty output (nor `Geom::padded` holds).
    if g.output.contains(&0) || g.kernel.contains(&0) {
        return 0;
    }
    let (rows, width) = g.padded();
    let bordered = rows * width.div_ceil(16) * 16 + SLACK;
    crate::scratch::floats_bytes(bordered) + crate::scratch::floats_bytes(maxima(g))
}

/// Floats of the rows of column maxima of a separable 3×3 maximum.
fn maxima(g: &Geom) -> usize {
    3 * g.output[1].div_ceil(16) * 16
}

/// Floats read past the bordered plane by a row's last vector: the second
/// load at stride 2, and room.
const SLACK: usize = 64;

/// Bytes of a bordered copy that stays in L1 (see [`plane`]'s maxima).
const BORDERED_MAX_BYTES: usize = 32 << 10;

/// Bytes of a bordered copy up to which it is filled with the border first
/// and its rows copied over it; a larger one is written once, line by line
/// (one thread, 2026-12-01: a 3x3 depthwise on 32 x 112x112 at stride 2
/// 0.127 -> 0.101 ms, at stride 1 0.152 -> 0.122; the line-by-line copy of
/// 14x14 and 7x7 planes 10-20% slower than filling first).
const FILL_FIRST_BYTES: usize = 16 << 10;

/// Computes one output plane `out` (output rows × cols) from the input plane
/// at the start of `x` (which may go on: the planes after it). A window that
/// stays inside the input (no pads) reads the plane in place when `x` has
/// [`SLACK`] floats after it to over-read; otherwise the plane is copied into
/// a bordered buffer first. Callers check [`available`] first.
pub fn plane(g: &Geom, x: &[f32], out: &mut [f32], reduce: Reduce) {
    let ([ih, iw], [oh, ow]) = (g.input, g.output);
    if oh == 0 || ow == 0 || x.len() < ih * iw || out.len() < oh * ow {
        return;
    }
    let taps = g.kernel[0] * g.kernel[1];
    match reduce {
        Reduce::Dot { w, .. } => assert!(w.len() >= taps, "window2d: too few weights"),
        Reduce::Mean { rows, cols } => assert!(
            rows.len() >= oh && cols.len() >= mean_cols(ow),
            "window2d: too few divisors"
        ),
        Reduce::Max => {}
    }
    let (rows, width) = g.padded();
    let in_place = g.pads == [0, 0] && (rows, width) == (ih, iw) && x.len() >= ih * iw + SLACK;
    // A 3×3 maximum at stride 2 reads its plane clamped where the plane
    // would be copied and is larger than L1: a bordered copy of a small
    // plane, then windows over the copy, measured faster than clamped reads
    // (MTCNN's 48x48 pools 11 vs 16 us), a large one slower (ResNet-50's
    // stem pool on 112x112 220 vs 122 us). 2×2 ones always read clamped.
    if let (Reduce::Max, Some(side)) = (reduce, clamped_max(g)) {
        if side == 2 || !in_place && rows * width * 4 > BORDERED_MAX_BYTES {
            assert!(available(), "window2d::plane needs AVX-512");
            // SAFETY: AVX-512F is present; every output's window holds a
            // row of the plane (`clamped_max`); `x` holds ih*iw floats (and
            // may go on), `out` oh*ow.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                avx512::max_s2_in_place(g, x, out, side)
            };
            return;
        }
    }
    if in_place {
        assert!(available(), "window2d::plane needs AVX-512");
        // SAFETY: AVX-512F is present; `x` holds every tap of the outputs in
        // rows of `iw` (no window leaves the input) plus SLACK floats of
        // over-read; `out` holds oh*ow floats.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            avx512::plane(g, x, iw, out, reduce)
        };
        return;
    }
    // Rows start on cache lines: a vector of 16 outputs at a multiple of 16
    // then loads its taps' lines whole.
    let cols = width.div_ceil(16) * 16;
    let border = match reduce {
        Reduce::Max => f32::NEG_INFINITY,
        _ => 0.0,
    };
    crate::scratch::floats(rows * cols + SLACK, |buf| {
        assert!(available(), "window2d::plane needs AVX-512");
        // SAFETY: AVX-512F is present; `buf` holds rows*cols floats and more.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            avx512::border(g, &x[..ih * iw], buf, cols, border)
        };
        assert!(available(), "window2d::plane needs AVX-512");
        // SAFETY: AVX-512F is present; `buf` holds every tap of the outputs
        // (see `Geom::padded`) in rows of `cols`, plus SLACK floats of
        // over-read; `out` holds oh*ow floats.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            avx512::plane(g, buf, cols, out, reduce)
        };
    });
}

/// The side of a 2×2 or 3×3 maximum at stride 2 that reads its plane in
/// place: rows past the plane clamped to its edge (a maximum may take a row
/// twice), columns past it loaded as -inf. `None` for other windows, and
/// where some window holds no row of the plane.
fn clamped_max(g: &Geom) -> Option<usize> {
    let side = g.kernel[0];
    let fits = g.kernel == [side, side]
        && (side == 2 || side == 3)
        && g.strides == [2, 2]
        && g.dilations == [1, 1]
        && g.pads[0] < side
        && g.pads[1] < side
        && 2 * (g.output[0] - 1) < g.input[0] + g.pads[0];
    fits.then_some(side)
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{Geom, Reduce};

    /// Copies plane `x` into `buf` (rows of `cols`) after `pads`, `border`
    /// around it and to the end of `buf`, 16 floats a store.
    ///
    /// # Safety
    /// AVX-512F is present; `buf` holds `g.padded()` rows of `cols` floats.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn border(g: &Geom, x: &[f32], buf: &mut [f32], cols: usize, border: f32) {
        let [ih, iw] = g.input;
        let [top, left] = g.pads;
        let fill = _mm512_set1_ps(border);
        let len = buf.len();
        let dst = buf.as_mut_ptr();
        let rows = (len / cols.max(1)).min(g.padded().0);
        if len * 4 <= super::FILL_FIRST_BYTES {
            // A plane in L1: the border everywhere in whole stores, then
            // the rows over it (fewer instructions than the masks below).
            let mut i = 0;
            while i < len {
                _mm512_mask_storeu_ps(dst.add(i), lanes(len - i), fill);
                i += 16;
            }
            let n = iw.min(cols.saturating_sub(left));
            for h in 0..ih.min(rows.saturating_sub(top)) {
                let (src, to) = (x.as_ptr().add(h * iw), dst.add((top + h) * cols + left));
                let mut c = 0;
                while c < n {
                    let keep = lanes(n - c);
                    _mm512_mask_storeu_ps(to.add(c), keep, _mm512_maskz_loadu_ps(keep, src.add(c)));
                    c += 16;
                }
            }
            return;
        }
        let n = iw.min(cols.saturating_sub(left)) as isize;
        // A larger plane: each vector of the copy once, at its own (aligned) place: the
        // input's columns under it, the border in the lanes outside them
        // (a masked load leaves those lanes to `fill` and reads nothing
        // there). Filling the border everywhere and copying the rows over
        // it, `left` floats off the lines, split every store across two
        // lines and wrote the plane twice: a stride-2 depthwise 3x3 on
        // 112x112 spent 57% of its time here.
        for r in 0..rows {
            let row = dst.add(r * cols);
            let h = r.wrapping_sub(top);
            let mut c = 0;
            if h >= ih {
                while c < cols {
                    _mm512_storeu_ps(row.add(c), fill);
                    c += 16;
                }
                continue;
            }
            let src = x.as_ptr().add(h * iw);
            while c < cols {
                // Input columns lo .. lo + 16 fall under this vector.
                let lo = c as isize - left as isize;
                let first = (-lo).clamp(0, 16) as u32;
                let last = (n - lo).clamp(0, 16) as u32;
                let keep = if last > first {
                    (((1u32 << last) - 1) & !((1u32 << first) - 1)) as __mmask16
                } else {
                    0
                };
                let v = _mm512_mask_loadu_ps(fill, keep, src.wrapping_offset(lo));
                _mm512_storeu_ps(row.add(c), v);
                c += 16;
            }
        }
        let mut i = rows * cols;
        while i < len {
            _mm512_mask_storeu_ps(dst.add(i), lanes(len - i), fill);
            i += 16;
        }
    }

    /// What a window computes, on registers.
    trait Window {
        type Acc: Copy;
        fn init(&self) -> Self::Acc;
        /// What [`Window::combine`] leaves unchanged: the start of every
        /// partial result but the first (which starts from `init`).
        fn neutral(&self) -> Self::Acc;
        /// Takes tap `t`'s vector.
        unsafe fn step(&self, acc: Self::Acc, v: __m512, t: usize) -> Self::Acc;
        /// Joins two partial results.
        unsafe fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
        /// The result for output row `r`, columns `j..j + 16`.
        unsafe fn finish(&self, acc: Self::Acc, r: usize, j: usize) -> __m512;
    }

    struct Dot<'a> {
        w: &'a [f32],
        bias: f32,
        relu: bool,
    }

    impl Window for Dot<'_> {
        type Acc = __m512;
        fn init(&self) -> __m512 {
            // SAFETY: AVX-512F is present (`plane` is only entered then).
            unsafe { _mm512_set1_ps(self.bias) }
        }
        fn neutral(&self) -> __m512 {
            // SAFETY: as above.
            unsafe { _mm512_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn step(&self, acc: __m512, v: __m512, t: usize) -> __m512 {
            _mm512_fmadd_ps(_mm512_set1_ps(*self.w.get_unchecked(t)), v, acc)
        }
        #[inline(always)]
        unsafe fn combine(&self, a: __m512, b: __m512) -> __m512 {
            _mm512_add_ps(a, b)
        }
        #[inline(always)]
        unsafe fn finish(&self, acc: __m512, _: usize, _: usize) -> __m512 {
            if self.relu {
                _mm512_max_ps(acc, _mm512_setzero_ps())
            } else {
                acc
            }
        }
    }

    /// The maximum; `max(v, acc)` keeps acc when either is NaN, so a NaN tap
    /// is remembered in a mask and restored at the end.
    struct Max;

    impl Window for Max {
        type Acc = (__m512, __mmask16);
        fn init(&self) -> Self::Acc {
            // SAFETY: AVX-512F is present (`plane` is only entered then).
            (unsafe { _mm512_set1_ps(f32::NEG_INFINITY) }, 0)
        }
        fn neutral(&self) -> Self::Acc {
            self.init()
        }
        #[inline(always)]
        unsafe fn step(&self, (acc, seen): Self::Acc, v: __m512, _: usize) -> Self::Acc {
            (
                _mm512_max_ps(v, acc),
                seen | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v),
            )
        }
        #[inline(always)]
        unsafe fn combine(&self, (a, sa): Self::Acc, (b, sb): Self::Acc) -> Self::Acc {
            (_mm512_max_ps(a, b), sa | sb)
        }
        #[inline(always)]
        unsafe fn finish(&self, (acc, seen): Self::Acc, _: usize, _: usize) -> __m512 {
            _mm512_mask_blend_ps(seen, acc, _mm512_set1_ps(f32::NAN))
        }
    }

    struct Mean<'a> {
        rows: &'a [f32],
        cols: &'a [f32],
    }

    impl Window for Mean<'_> {
        type Acc = __m512;
        fn init(&self) -> __m512 {
            // SAFETY: AVX-512F is present (`plane` is only entered then).
            unsafe { _mm512_setzero_ps() }
        }
        fn neutral(&self) -> __m512 {
            self.init()
        }
        #[inline(always)]
        unsafe fn step(&self, acc: __m512, v: __m512, _: usize) -> __m512 {
            _mm512_add_ps(acc, v)
        }
        #[inline(always)]
        unsafe fn combine(&self, a: __m512, b: __m512) -> __m512 {
            _mm512_add_ps(a, b)
        }
        #[inline(always)]
        unsafe fn finish(&self, acc: __m512, r: usize, j: usize) -> __m512 {
            let rows = _mm512_set1_ps(*self.rows.get_unchecked(r));
            _mm512_mul_ps(
                _mm512_mul_ps(acc, rows),
                _mm512_loadu_ps(self.cols.as_ptr().add(j)),
            )
        }
    }

    /// The 16 taps of a vector of outputs at `at`, `S` floats apart (0: any
    /// stride, `sw`, gathered).
    #[inline(always)]
    unsafe fn taps<const S: usize>(at: *const f32, keep: __mmask16, sw: usize) -> __m512 {
        match S {
            1 => _mm512_loadu_ps(at),
            2 => {
                let even =
                    _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                _mm512_permutex2var_ps(_mm512_loadu_ps(at), even, _mm512_loadu_ps(at.add(16)))
            }
            _ => {
                let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                let step = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(sw as i32));
                _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), keep, step, at)
            }
        }
    }

    /// The lanes of a row's last, partial vector.
    #[inline(always)]
    fn lanes(n: usize) -> __mmask16 {
        if n >= 16 {
            0xffff
        } else {
            ((1u32 << n) - 1) as u16
        }
    }

    /// Every output row, 16 outputs at a time. With the window's side `K`
    /// known here, its taps are unrolled and each of its rows sums into a
    /// chain of its own (one chain would wait on every add's latency; the
    /// out-of-order core overlaps these with the next vector's).
    #[inline(always)]
    unsafe fn walk<W: Window, const S: usize, const K: usize>(
        g: &Geom,
        base: *const f32,
        cols: usize,
        out: &mut [f32],
        win: &W,
    ) {
        let [oh, ow] = g.output;
        let [kh, kw] = if K > 0 { [K, K] } else { g.kernel };
        let ([sh, sw], [dh, dw]) = (g.strides, g.dilations);
        for r in 0..oh {
            let orow = out.as_mut_ptr().add(r * ow);
            let line = base.add(r * sh * cols);
            let mut j = 0;
            while j < ow {
                let keep = lanes(ow - j);
                let at = line.add(j * sw);
                let mut chains = [win.neutral(); CHAINS];
                chains[0] = win.init();
                for ta in 0..kh {
                    let c = &mut chains[if K > 0 { ta % CHAINS } else { 0 }];
                    for tb in 0..kw {
                        let v = taps::<S>(at.add(ta * dh * cols + tb * dw), keep, sw);
                        *c = win.step(*c, v, ta * kw + tb);
                    }
                }
                let mut acc = chains[0];
                if K > 0 {
                    for c in &chains[1..kh.min(CHAINS)] {
                        acc = win.combine(acc, *c);
                    }
                }
                let y = win.finish(acc, r, j);
                if keep == 0xffff {
                    _mm512_storeu_ps(orow.add(j), y);
                } else {
                    _mm512_mask_storeu_ps(orow.add(j), keep, y);
                }
                j += 16;
            }
        }
    }

    /// A 3×3 window at stride and dilation 1, rows aligned: each window row
    /// loads one vector per 16 outputs (its next is the one after's first)
    /// and shifts the pair by one and two lanes, where loading the three
    /// taps would split two loads over cache lines.
    #[inline(always)]
    unsafe fn slide3<W: Window>(g: &Geom, base: *const f32, cols: usize, out: &mut [f32], win: &W) {
        let [oh, ow] = g.output;
        let shift = |next: __m512, cur: __m512, by: i32| {
            let (n, c) = (_mm512_castps_si512(next), _mm512_castps_si512(cur));
            _mm512_castsi512_ps(match by {
                1 => _mm512_alignr_epi32::<1>(n, c),
                _ => _mm512_alignr_epi32::<2>(n, c),
            })
        };
        for r in 0..oh {
            let orow = out.as_mut_ptr().add(r * ow);
            let lines = [0, 1, 2].map(|i| base.add((r + i) * cols));
            let mut cur = lines.map(|l| _mm512_loadu_ps(l));
            let mut j = 0;
            while j < ow {
                let next = lines.map(|l| _mm512_loadu_ps(l.add(j + 16)));
                let mut chains = [win.neutral(); CHAINS];
                chains[0] = win.init();
                for (i, c) in chains.iter_mut().enumerate() {
                    *c = win.step(*c, cur[i], 3 * i);
                    *c = win.step(*c, shift(next[i], cur[i], 1), 3 * i + 1);
                    *c = win.step(*c, shift(next[i], cur[i], 2), 3 * i + 2);
                }
                let acc = win.combine(win.combine(chains[0], chains[1]), chains[2]);
                let y = win.finish(acc, r, j);
                let keep = lanes(ow - j);
                if keep == 0xffff {
                    _mm512_storeu_ps(orow.add(j), y);
                } else {
                    _mm512_mask_storeu_ps(orow.add(j), keep, y);
                }
                cur = next;
                j += 16;
            }
        }
    }

    /// Partial sums of a vector of outputs, one per window row.
    const CHAINS: usize = 3;

    /// A 2×2 or 3×3 (`side`) maximum at stride 2 over plane `x` in place.
    /// Rows before or after the plane are its first or last (see
    /// [`super::clamped_max`]); columns outside it load as -inf. A NaN tap
    /// makes its output NaN, as in [`Max`].
    ///
    /// # Safety
    /// AVX-512F is present; `x` starts with the `g.input` plane (and may go
    /// on: the next planes, over-read where no kept lane depends on them),
    /// `out` holds the output plane; [`super::clamped_max`] accepts `g` with
    /// this `side`.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn max_s2_in_place(g: &Geom, x: &[f32], out: &mut [f32], side: usize) {
        if side == 2 {
            return max2s2(g, x, out);
        }
        let width = g.output[1].div_ceil(16) * 16;
        crate::scratch::floats(super::maxima(g), |rows| {
            max3s2_clamped(g, x, out, rows, width)
        })
    }

    /// The input row of window row `t` of output row `r`, clamped to the plane.
    #[inline(always)]
    fn clamped_row(g: &Geom, r: usize, t: usize) -> usize {
        let i = (2 * r + t) as isize - g.pads[0] as isize;
        i.clamp(0, g.input[0] as isize - 1) as usize
    }

    /// A 2×2 maximum at stride 2: per 16 outputs, the maxima of the two
    /// rows' vectors, then of their even and odd lanes.
    #[target_feature(enable = "avx512f")]
    unsafe fn max2s2(g: &Geom, x: &[f32], out: &mut [f32]) {
        let ([_, iw], [oh, ow]) = (g.input, g.output);
        let left = g.pads[1];
        let (even, odd) = lane_parities();
        for r in 0..oh {
            let [i0, i1] = [0, 1].map(|t| clamped_row(g, r, t));
            let [l0, l1] = [i0, i1].map(|i| x.as_ptr().add(i * iw));
            // Floats readable from the lower of the two rows on.
            let room = x.len() - i0.max(i1) * iw;
            let orow = out.as_mut_ptr().add(r * ow);
            let mut j = 0;
            while j < ow {
                let kept = (j + 16).min(ow) - 1;
                let (a, b) =
                    if 2 * j >= left && 2 * j - left + 32 <= room && 2 * kept + 2 <= iw + left {
                        let (p0, p1) = (l0.add(2 * j - left), l1.add(2 * j - left));
                        (
                            max2(_mm512_loadu_ps(p0), _mm512_loadu_ps(p1)),
                            max2(_mm512_loadu_ps(p0.add(16)), _mm512_loadu_ps(p1.add(16))),
                        )
                    } else {
                        let s = (2 * j) as isize - left as isize;
                        (
                            max2(edge_load(l0, s, iw), edge_load(l1, s, iw)),
                            max2(edge_load(l0, s + 16, iw), edge_load(l1, s + 16, iw)),
                        )
                    };
                let v = max2(
                    _mm512_permutex2var_ps(a, even, b),
                    _mm512_permutex2var_ps(a, odd, b),
                );
                store(orow.add(j), ow - j, v);
                j += 16;
            }
        }
    }

    /// A 3×3 maximum at stride 2, separably: each input row's maxima over
    /// three columns at stride 2 once (every other input row is shared by
    /// two windows) into `rows` (input row `i`'s at `(i % 3) * width`), then
    /// three of those rows per output row, where the window by taps would
    /// permute and compare nine strided vectors per output vector.
    #[target_feature(enable = "avx512f")]
    unsafe fn max3s2_clamped(g: &Geom, x: &[f32], out: &mut [f32], rows: &mut [f32], width: usize) {
        let ([_, iw], [oh, ow]) = (g.input, g.output);
        // Input rows `..done` have their maxima made (the last three kept).
        let mut done = 0;
        for r in 0..oh {
            let last = clamped_row(g, r, 2);
            while done <= last {
                let line = x.as_ptr().add(done * iw);
                let room = x.len() - done * iw;
                let dst = rows.as_mut_ptr().add(done % 3 * width);
                column_maxima_clamped(line, (iw, room), g.pads[1], ow, dst);
                done += 1;
            }
            let h = rows.as_ptr();
            let [a, b, c] = [0, 1, 2].map(|t| clamped_row(g, r, t) % 3 * width);
            let orow = out.as_mut_ptr().add(r * ow);
            let mut j = 0;
            while j < ow {
                let p = _mm512_loadu_ps(h.add(a + j));
                let q = _mm512_loadu_ps(h.add(b + j));
                let s = _mm512_loadu_ps(h.add(c + j));
                store(orow.add(j), ow - j, max3(p, q, s));
                j += 16;
            }
        }
    }

    /// `dst[j]` = the maximum of `line[2j - left ..][..3]`, columns outside
    /// `0..iw` as -inf, for `j < n`, sixteen at a time (lanes past `n` up to
    /// the next 16 are written too).
    #[inline(always)]
    unsafe fn column_maxima_clamped(
        line: *const f32,
        (iw, room): (usize, usize),
        left: usize,
        n: usize,
        dst: *mut f32,
    ) {
        let (even, odd) = lane_parities();
        let maxima = |a: __m512, b: __m512, c: __m512, d: __m512| {
            max3(
                _mm512_permutex2var_ps(a, even, b),
                _mm512_permutex2var_ps(a, odd, b),
                _mm512_permutex2var_ps(c, even, d),
            )
        };
        // Vectors whose kept lanes read only the row, and whose 34 columns
        // are in the plane (`room` floats from `line` on), load plainly;
        // those at the row's ends, masked.
        let inside = |j: usize| {
            let kept = (j + 16).min(n) - 1;
            2 * j >= left && 2 * j - left + 34 <= room && 2 * kept + 3 <= iw + left
        };
        let mut j = 0;
        while j < n {
            let v = if inside(j) {
                let at = line.add(2 * j - left);
                maxima(
                    _mm512_loadu_ps(at),
                    _mm512_loadu_ps(at.add(16)),
                    _mm512_loadu_ps(at.add(2)),
                    _mm512_loadu_ps(at.add(18)),
                )
            } else {
                let s = (2 * j) as isize - left as isize;
                maxima(
                    edge_load(line, s, iw),
                    edge_load(line, s + 16, iw),
                    edge_load(line, s + 2, iw),
                    edge_load(line, s + 18, iw),
                )
            };
            _mm512_storeu_ps(dst.add(j), v);
            j += 16;
        }
    }

    /// The permutes that pick the even and the odd lanes of two vectors.
    #[inline(always)]
    unsafe fn lane_parities() -> (__m512i, __m512i) {
        (
            _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
            _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31),
        )
    }

    /// 16 floats of a row of `iw` from column `s` on, -inf outside the row.
    #[inline(always)]
    unsafe fn edge_load(line: *const f32, s: isize, iw: usize) -> __m512 {
        if s >= 0 && s as usize + 16 <= iw {
            return _mm512_loadu_ps(line.add(s as usize));
        }
        let lo = (-s).clamp(0, 16) as u32;
        let hi = (iw as isize - s).clamp(0, 16) as u32;
        let keep = (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as u16;
        // Lanes outside `keep` are not read (masked loads do not fault).
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        _mm512_mask_loadu_ps(ninf, keep, line.wrapping_offset(s))
    }

    /// Stores the first `n` (all, from 16 on) lanes of `v` at `at`.
    #[inline(always)]
    unsafe fn store(at: *mut f32, n: usize, v: __m512) {
        let keep = lanes(n);
        if keep == 0xffff {
            _mm512_storeu_ps(at, v);
        } else {
            _mm512_mask_storeu_ps(at, keep, v);
        }
    }

    /// The lane-wise maximum of two vectors; NaN where either is.
    #[inline(always)]
    unsafe fn max2(x: __m512, y: __m512) -> __m512 {
        let bad = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, y);
        _mm512_mask_blend_ps(bad, _mm512_max_ps(x, y), _mm512_set1_ps(f32::NAN))
    }

    /// A 3×3 maximum at stride 2, separably: each input row's maxima over
    /// three columns at stride 2 once (every other input row is shared by
    /// two windows), then three of those rows per output row, where the
    /// window by taps permutes and compares nine strided vectors per output
    /// vector. A NaN tap makes its output NaN, as in [`Max`].
    ///
    /// # Safety
    /// As [`plane`]: `base` (rows of `cols`) holds every tap of the outputs
    /// plus `SLACK` floats, which the strided loads here read no further
    /// than the window's own do.
    #[target_feature(enable = "avx512f")]
    unsafe fn max3s2(g: &Geom, base: *const f32, cols: usize, out: &mut [f32]) {
        let ow = g.output[1];
        let width = ow.div_ceil(16) * 16;
        // Three rows of column maxima, input row `i` at `(i % 3) * width`
        // (this thread's, kept from plane to plane).
        crate::scratch::floats(super::maxima(g), |rows| {
            max3s2_rows(g, base, cols, out, rows, width)
        })
    }

    /// [`max3s2`] with its rows of column maxima in `rows`.
    ///
    /// # Safety
    /// As [`max3s2`]; `rows` holds three rows of `width`.
    #[target_feature(enable = "avx512f")]
    unsafe fn max3s2_rows(
        g: &Geom,
        base: *const f32,
        cols: usize,
        out: &mut [f32],
        rows: &mut [f32],
        width: usize,
    ) {
        let [oh, ow] = g.output;
        let at = |i: usize| (i % 3) * width;
        if oh > 0 {
            column_maxima(base, ow, rows.as_mut_ptr());
        }
        for r in 0..oh {
            for i in [2 * r + 1, 2 * r + 2] {
                column_maxima(base.add(i * cols), ow, rows.as_mut_ptr().add(at(i)));
            }
            let h = rows.as_ptr();
            let [x, y, z] = [0, 1, 2].map(|t| h.add(at(2 * r + t)));
            let orow = out.as_mut_ptr().add(r * ow);
            let mut j = 0;
            while j < ow {
                let v = max3(
                    _mm512_loadu_ps(x.add(j)),
                    _mm512_loadu_ps(y.add(j)),
                    _mm512_loadu_ps(z.add(j)),
                );
                let keep = lanes(ow - j);
                if keep == 0xffff {
                    _mm512_storeu_ps(orow.add(j), v);
                } else {
                    _mm512_mask_storeu_ps(orow.add(j), keep, v);
                }
                j += 16;
            }
        }
    }

    /// `dst[j] = max(line[2j], line[2j + 1], line[2j + 2])` for `j < n`,
    /// sixteen at a time (lanes past `n` up to the next 16 are written too).
    #[inline(always)]
    unsafe fn column_maxima(line: *const f32, n: usize, dst: *mut f32) {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let mut j = 0;
        while j < n {
            let at = line.add(2 * j);
            let (a, b) = (_mm512_loadu_ps(at), _mm512_loadu_ps(at.add(16)));
            let (c, d) = (_mm512_loadu_ps(at.add(2)), _mm512_loadu_ps(at.add(18)));
            let v = max3(
                _mm512_permutex2var_ps(a, even, b),
                _mm512_permutex2var_ps(a, odd, b),
                _mm512_permutex2var_ps(c, even, d),
            );
            _mm512_storeu_ps(dst.add(j), v);
            j += 16;
        }
    }

    /// The lane-wise maximum of three vectors; NaN where any of them is.
    #[inline(always)]
    unsafe fn max3(x: __m512, y: __m512, z: __m512) -> __m512 {
        let m = _mm512_max_ps(_mm512_max_ps(x, y), z);
        let bad =
            _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, y) | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(z, z);
        _mm512_mask_blend_ps(bad, m, _mm512_set1_ps(f32::NAN))
    }

    #[target_feature(enable = "avx512f,fma")]
    unsafe fn by_stride<W: Window>(
        g: &Geom,
        base: *const f32,
        cols: usize,
        out: &mut [f32],
        win: &W,
    ) {
        match (g.strides[1], g.kernel) {
            (1, [3, 3]) if g.strides[0] == 1 && g.dilations == [1, 1] => {
                slide3(g, base, cols, out, win)
            }
            (1, [3, 3]) => walk::<W, 1, 3>(g, base, cols, out, win),
            (2, [3, 3]) => walk::<W, 2, 3>(g, base, cols, out, win),
            (1, [5, 5]) => walk::<W, 1, 5>(g, base, cols, out, win),
            (2, [5, 5]) => walk::<W, 2, 5>(g, base, cols, out, win),
            (1, _) => walk::<W, 1, 0>(g, base, cols, out, win),
            (2, _) => walk::<W, 2, 0>(g, base, cols, out, win),
            _ => walk::<W, 0, 0>(g, base, cols, out, win),
        }
    }

    /// # Safety
    /// AVX-512F is present; `data` (rows of `cols` floats) holds every tap of
    /// the outputs plus `SLACK` floats; `out` holds the output plane.
    #[target_feature(enable = "avx512f,fma")]
    pub unsafe fn plane(g: &Geom, data: &[f32], cols: usize, out: &mut [f32], reduce: Reduce) {
        let base = data.as_ptr();
        match reduce {
            Reduce::Dot { w, bias, relu } => by_stride(g, base, cols, out, &Dot { w, bias, relu }),
            Reduce::Max if g.kernel == [3, 3] && g.strides == [2, 2] && g.dilations == [1, 1] => {
                max3s2(g, base, cols, out)
            }
            Reduce::Max => by_stride(g, base, cols, out, &Max),
            Reduce::Mean { rows, cols: cs } => {
                by_stride(g, base, cols, out, &Mean { rows, cols: cs })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window by its definition: (dot + bias, max, mean with the given
    /// divisors), taps outside the input skipped (0 or -inf).
    fn naive(g: &Geom, x: &[f32], reduce: Reduce) -> Vec<f32> {
        let ([ih, iw], [oh, ow]) = (g.input, g.output);
        let mut y = vec![0f32; oh * ow];
        for r in 0..oh {
            for c in 0..ow {
                let (mut dot, mut max, mut sum) = (0f64, f32::NEG_INFINITY, 0f64);
                for a in 0..g.kernel[0] {
                    for b in 0..g.kernel[1] {
                        let i =
                            (r * g.strides[0] + a * g.dilations[0]) as isize - g.pads[0] as isize;
                        let j =
                            (c * g.strides[1] + b * g.dilations[1]) as isize - g.pads[1] as isize;
                        if i < 0 || j < 0 || i >= ih as isize || j >= iw as isize {
                            continue;
                        }
                        let v = x[i as usize * iw + j as usize];
                        if let Reduce::Dot { w, .. } = reduce {
                            dot += v as f64 * w[a * g.kernel[1] + b] as f64;
                        }
                        max = max.max(v);
                        sum += v as f64;
                    }
                }
                y[r * ow + c] = match reduce {
                    Reduce::Dot { bias, relu, .. } => {
                        let v = dot as f32 + bias;
                        if relu {
                            v.max(0.0)
                        } else {
                            v
                        }
                    }
                    Reduce::Max => max,
                    Reduce::Mean { rows, cols } => (sum as f32) * rows[r] * cols[c],
                };
            }
        }
        y
    }

    #[test]
    fn strided_maxima_read_in_place_with_any_pads() {
        if !available() {
            return;
        }
        // (input, side, begin pads, output): end pads as the output needs
        // (ceil mode), planes narrower than a vector, and ones whose rows
        // take interior vectors and both edges.
        let cases = [
            ([112, 112], 3, [0, 0], [56, 56]),
            ([112, 112], 3, [1, 1], [56, 56]),
            ([19, 33], 3, [1, 1], [10, 17]),
            ([7, 5], 3, [2, 2], [5, 4]),
            ([50, 155], 2, [0, 0], [25, 77]),
            ([13, 71], 2, [1, 1], [7, 36]),
            ([3, 3], 2, [0, 0], [2, 2]),
            ([1, 40], 3, [0, 1], [1, 20]),
        ];
        for (input, side, pads, output) in cases {
            let g = Geom {
                input,
                output,
                kernel: [side, side],
                strides: [2, 2],
                dilations: [1, 1],
                pads,
            };
            assert_eq!(clamped_max(&g), Some(side), "{g:?}");
            let mut x: Vec<f32> = (0..input[0] * input[1])
                .map(|i| ((i * 7) % 19) as f32 * 0.1 - 0.9)
                .collect();
            let nan_at = (input[1] + 1).min(x.len() - 1);
            x[nan_at] = f32::NAN;
            // The maximum by its definition over the taps inside the plane,
            // NaN winning.
            let mut want = vec![f32::NEG_INFINITY; output[0] * output[1]];
            for (o, w) in want.iter_mut().enumerate() {
                let (r, c) = (o / output[1], o % output[1]);
                for (a, b) in (0..side).flat_map(|a| (0..side).map(move |b| (a, b))) {
                    let i = (2 * r + a) as isize - pads[0] as isize;
                    let j = (2 * c + b) as isize - pads[1] as isize;
                    if (0..input[0] as isize).contains(&i) && (0..input[1] as isize).contains(&j) {
                        let v = x[i as usize * input[1] + j as usize];
                        *w = if v.is_nan() || w.is_nan() {
                            f32::NAN
                        } else {
                            w.max(v)
                        };
                    }
                }
            }
            // The plane alone, and followed by NaNs (the next planes): what
            // is over-read must not reach an output.
            let mut more = x.clone();
            more.extend([f32::NAN; 40]);
            for x in [&x, &more] {
                // As `plane` picks (a small plane's bordered copy), and read
                // clamped whatever the size.
                let mut y = vec![0.0; want.len()];
                plane(&g, x, &mut y, Reduce::Max);
                let mut z = vec![0.0; want.len()];
                // SAFETY: AVX-512F is present (`available`); `clamped_max`
                // accepts `g`; `x` starts with the plane, `z` is the output.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    avx512::max_s2_in_place(&g, x, &mut z, side)
                };
                for (i, (a, b)) in y.iter().chain(&z).zip(want.iter().cycle()).enumerate() {
                    assert!(
                        a == b || a.is_nan() && b.is_nan(),
                        "{g:?} at {i}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_specialization_matches_the_definition() {
        if !available() {
            return;
        }
        // (input, kernel, stride, dilation, pads): the unrolled 3×3 and 5×5
        // at strides 1 and 2, the sliding 3×3, a gathered stride, any window.
        let cases = [
            ([6, 6], [3, 3], [1, 1], [1, 1], [0, 0]),
            ([20, 37], [3, 3], [1, 1], [1, 1], [1, 1]),
            ([19, 33], [3, 3], [2, 2], [1, 1], [1, 1]),
            ([15, 40], [5, 5], [1, 1], [1, 1], [2, 2]),
            ([15, 40], [5, 5], [2, 2], [1, 1], [2, 2]),
            ([12, 50], [3, 3], [1, 3], [1, 1], [1, 1]),
            ([9, 21], [3, 3], [1, 1], [2, 2], [2, 2]),
            ([9, 21], [2, 4], [2, 1], [1, 1], [0, 1]),
            // Padded planes past 16 KiB: bordered line by line, at each
            // stride, kernel and dilation.
            ([112, 112], [3, 3], [2, 2], [1, 1], [1, 1]),
            ([61, 100], [3, 3], [1, 1], [1, 1], [1, 1]),
            ([57, 90], [5, 5], [2, 2], [1, 1], [2, 2]),
            ([70, 66], [3, 3], [1, 1], [2, 2], [2, 0]),
            // Unpadded: read in place when the input has room after it.
            ([19, 33], [3, 3], [2, 2], [1, 1], [0, 0]),
            ([15, 40], [5, 5], [1, 1], [1, 1], [0, 0]),
            ([12, 50], [3, 3], [1, 3], [1, 1], [0, 0]),
        ];
        for (input, kernel, strides, dilations, pads) in cases {
            let out = |d: usize| {
                (input[d] + 2 * pads[d] - (kernel[d] - 1) * dilations[d] - 1) / strides[d] + 1
            };
            let g = Geom {
                input,
                output: [out(0), out(1)],
                kernel,
                strides,
                dilations,
                pads,
            };
            let x: Vec<f32> = (0..input[0] * input[1])
                .map(|i| ((i * 7) % 19) as f32 * 0.1 - 0.9)
                .collect();
            let w: Vec<f32> = (0..kernel[0] * kernel[1])
                .map(|i| i as f32 * 0.05 - 0.2)
                .collect();
            let rows: Vec<f32> = (0..g.output[0]).map(|r| 1.0 / (r + 2) as f32).collect();
            let cols: Vec<f32> = (0..mean_cols(g.output[1]))
                .map(|c| 1.0 / (c + 3) as f32)
                .collect();
            let reduces = [
                Reduce::Dot {
                    w: &w,
                    bias: 0.25,
                    relu: false,
                },
                Reduce::Dot {
                    w: &w,
                    bias: -0.1,
                    relu: true,
                },
                Reduce::Max,
                Reduce::Mean {
                    rows: &rows,
                    cols: &cols,
                },
            ];
            for reduce in reduces {
                let want = naive(&g, &x, reduce);
                // The plane alone, and followed by NaNs (the next planes):
                // what is over-read must not reach an output.
                let mut more = x.clone();
                more.extend([f32::NAN; SLACK + 5]);
                for x in [&x, &more] {
                    let mut y = vec![f32::NAN; want.len()];
                    plane(&g, x, &mut y, reduce);
                    for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                        assert!((a - b).abs() <= 1e-5, "{g:?} {reduce:?} at {i}: {a} vs {b}");
                    }
                }
            }
        }
    }
}
