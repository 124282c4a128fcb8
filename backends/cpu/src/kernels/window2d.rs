//! 2-D sliding windows over one f32 plane at a time, for depthwise
//! convolution and max/average pooling on AVX-512 CPUs.
//!
//! The plane is copied once into a bordered buffer (zeros, or -inf for max),
//! so no tap needs a bounds check; then every 16 outputs of a row are one
//! register that takes all the window's taps (two loads and a permute at
//! stride 2, a gather at larger strides) and is stored once.

use std::cell::RefCell;

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
    /// column; `cols` has 16 spare entries).
    Mean { rows: &'a [f32], cols: &'a [f32] },
}

/// True when this CPU runs the vector path.
pub fn available() -> bool {
    super::packed_gemm::available()
}

thread_local! {
    /// The bordered copy of one input plane.
    static PADDED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Floats read past the bordered plane by a row's last vector: 32 loads at
/// stride 2 beyond the last column.
const SLACK: usize = 64;

/// Computes one output plane `out` (output rows × cols) from input plane `x`.
/// Callers check [`available`] first.
pub fn plane(g: &Geom, x: &[f32], out: &mut [f32], reduce: Reduce) {
    let ([ih, iw], [oh, ow]) = (g.input, g.output);
    if oh == 0 || ow == 0 || x.len() < ih * iw || out.len() < oh * ow {
        return;
    }
    let taps = g.kernel[0] * g.kernel[1];
    match reduce {
        Reduce::Dot { w, .. } => assert!(w.len() >= taps, "window2d: too few weights"),
        Reduce::Mean { rows, cols } => assert!(
            rows.len() >= oh && cols.len() >= ow.div_ceil(16) * 16,
            "window2d: too few divisors"
        ),
        Reduce::Max => {}
    }
    let (rows, cols) = g.padded();
    let border = match reduce {
        Reduce::Max => f32::NEG_INFINITY,
        _ => 0.0,
    };
    PADDED.with_borrow_mut(|buf| {
        buf.clear();
        buf.resize(rows * cols + SLACK, border);
        if iw > 0 {
            for (h, src) in x[..ih * iw].chunks_exact(iw).enumerate() {
                let at = (h + g.pads[0]) * cols + g.pads[1];
                buf[at..at + iw].copy_from_slice(src);
            }
        }
        assert!(available(), "window2d::plane needs AVX-512");
        // SAFETY: AVX-512F is present; `buf` holds every tap of the outputs
        // (see `Geom::padded`) plus SLACK floats of over-read; `out` holds
        // oh*ow floats.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            avx512::plane(g, buf, cols, out, reduce)
        };
    });
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{Geom, Reduce};

    /// Walks every 16-wide chunk of every output row: `$init` makes the
    /// accumulator, `$step(acc, v, tap)` takes each tap's vector, `$finish(acc,
    /// r, j)` the result to store.
    macro_rules! windows {
        ($g:expr, $base:expr, $cols:expr, $out:expr, |$a:ident, $v:ident, $t:ident| $step:expr, $init:expr, |$f:ident, $r:ident, $j:ident| $finish:expr) => {{
            let g: &Geom = $g;
            let ([oh, ow], [kh, kw]) = (g.output, g.kernel);
            let ([sh, sw], [dh, dw]) = (g.strides, g.dilations);
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            let step = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(sw as i32));
            for $r in 0..oh {
                let orow = $out.as_mut_ptr().add($r * ow);
                let mut $j = 0;
                while $j < ow {
                    let keep: __mmask16 = if ow - $j >= 16 {
                        0xffff
                    } else {
                        ((1u32 << (ow - $j)) - 1) as u16
                    };
                    let mut $a = $init;
                    for ta in 0..kh {
                        let line = $base.add(($r * sh + ta * dh) * $cols + $j * sw);
                        for tb in 0..kw {
                            let at = line.add(tb * dw);
                            let $v = match sw {
                                1 => _mm512_loadu_ps(at),
                                2 => _mm512_permutex2var_ps(
                                    _mm512_loadu_ps(at),
                                    even,
                                    _mm512_loadu_ps(at.add(16)),
                                ),
                                _ => _mm512_mask_i32gather_ps::<4>(
                                    _mm512_setzero_ps(),
                                    keep,
                                    step,
                                    at,
                                ),
                            };
                            let $t = ta * kw + tb;
                            $a = $step;
                        }
                    }
                    let $f = $a;
                    _mm512_mask_storeu_ps(orow.add($j), keep, $finish);
                    $j += 16;
                }
            }
        }};
    }

    /// # Safety
    /// AVX-512F is present; `data` (rows of `cols` floats) holds every tap of
    /// the outputs plus 64 floats; `out` holds the output plane.
    #[target_feature(enable = "avx512f,fma")]
    pub unsafe fn plane(g: &Geom, data: &[f32], cols: usize, out: &mut [f32], reduce: Reduce) {
        let base = data.as_ptr();
        let zero = _mm512_setzero_ps();
        match reduce {
            Reduce::Dot { w, bias, relu } => windows!(
                g,
                base,
                cols,
                out,
                |acc, v, t| _mm512_fmadd_ps(_mm512_set1_ps(*w.get_unchecked(t)), v, acc),
                _mm512_set1_ps(bias),
                |acc, _r, _j| if relu { _mm512_max_ps(acc, zero) } else { acc }
            ),
            Reduce::Max => {
                // max(v, acc) keeps acc when either is NaN: a NaN tap is
                // remembered in a mask and restored at the end.
                let nan = _mm512_set1_ps(f32::NAN);
                let mut seen: __mmask16;
                windows!(
                    g,
                    base,
                    cols,
                    out,
                    |acc, v, _t| {
                        seen |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                        _mm512_max_ps(v, acc)
                    },
                    {
                        seen = 0;
                        _mm512_set1_ps(f32::NEG_INFINITY)
                    },
                    |acc, _r, _j| _mm512_mask_blend_ps(seen, acc, nan)
                )
            }
            Reduce::Mean { rows, cols: cs } => windows!(
                g,
                base,
                cols,
                out,
                |acc, v, _t| _mm512_add_ps(acc, v),
                zero,
                |acc, r, j| _mm512_mul_ps(
                    _mm512_mul_ps(acc, _mm512_set1_ps(*rows.get_unchecked(r))),
                    _mm512_loadu_ps(cs.as_ptr().add(j))
                )
            ),
        }
    }
}
