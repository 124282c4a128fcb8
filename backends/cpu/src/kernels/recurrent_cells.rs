//! The gates of an LSTM or GRU cell in one pass of AVX-512 registers, for
//! the default activations (sigmoid for the gates, tanh for the cell) with
//! no clip or coupled gates (peepholes taken): each 16 lanes of the hidden state
//! read the step's input projection and recurrent product once, and write
//! the new state once. A small layer's step (hidden 25 to 128) otherwise
//! runs five to seven passes of a few vectors each, and calls as many
//! functions, around a product that takes less time than they do.
//!
//! The arithmetic is `recurrent_f32`'s gate loops' (whose scalar forms are
//! the reference): [`vmath_avx512::sigmoid`] and [`vmath_avx512::tanh_exp`]
//! agree with `vmath::sigmoid` and `vmath::tanh_exp` to an ulp or two.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use super::vmath_avx512::{sigmoid, tanh_exp};

/// Whether the fused cells run here (AVX-512).
pub(super) fn available() -> bool {
    super::vmath::avx512()
}

/// One LSTM step for one batch row: gates `x + hr` in ONNX's order (`i, o,
/// f, c`, `hs` each), `c = f c + i tanh(g)`, `h = o tanh(c)`; with
/// peepholes `p` (`i, o, f`), `i` and `f` add `p c` of the old cell, `o`
/// of the new one.
///
/// # Panics
/// If the CPU lacks AVX-512 ([`available`]) or a slice is shorter than the
/// gates (`4 hs`), the peepholes (`3 hs`) or the state (`hs`).
pub(super) fn lstm(x: &[f32], hr: &[f32], peep: Option<&[f32]>, c: &mut [f32], h: &mut [f32]) {
    let hs = h.len();
    assert!(
        available()
            && x.len() >= 4 * hs
            && hr.len() >= 4 * hs
            && c.len() >= hs
            && peep.is_none_or(|p| p.len() >= 3 * hs)
    );
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512 is present and the bounds hold (asserted above).
    unsafe {
        lstm_avx512(x, hr, peep, c, h)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn lstm_avx512(x: &[f32], hr: &[f32], peep: Option<&[f32]>, c: &mut [f32], h: &mut [f32]) {
    let hs = h.len();
    let (x, hr) = (x.as_ptr(), hr.as_ptr());
    let gate = |g: usize, j: usize, m: __mmask16| {
        let at = g * hs + j;
        _mm512_add_ps(
            _mm512_maskz_loadu_ps(m, x.add(at)),
            _mm512_maskz_loadu_ps(m, hr.add(at)),
        )
    };
    let mut j = 0;
    while j < hs {
        let m = lanes(hs - j);
        let cj = c.as_mut_ptr().add(j);
        let old = _mm512_maskz_loadu_ps(m, cj);
        // `gate + p c` for peephole `k` (i 0, o 1, f 2), else `gate`.
        let peeped = |gate: __m512, k: usize, cell: __m512| match peep {
            Some(p) => {
                let pk = _mm512_maskz_loadu_ps(m, p.as_ptr().add(k * hs + j));
                _mm512_fmadd_ps(pk, cell, gate)
            }
            None => gate,
        };
        let i = sigmoid(peeped(gate(0, j, m), 0, old));
        let f = sigmoid(peeped(gate(2, j, m), 2, old));
        let g = tanh_exp(gate(3, j, m));
        let cn = _mm512_fmadd_ps(f, old, _mm512_mul_ps(i, g));
        let o = sigmoid(peeped(gate(1, j, m), 1, cn));
        _mm512_mask_storeu_ps(cj, m, cn);
        _mm512_mask_storeu_ps(h.as_mut_ptr().add(j), m, _mm512_mul_ps(o, tanh_exp(cn)));
        j += 16;
    }
}

/// A GRU step's reset, where it multiplies the state before its product
/// (`linear_before_reset = 0`): `rh = sigmoid(xr + hr) h`.
///
/// # Panics
/// As [`lstm`], for `hs = h.len()` elements of each slice.
pub(super) fn gru_reset(xr: &[f32], hr: &[f32], h: &[f32], rh: &mut [f32]) {
    let hs = h.len();
    assert!(available() && xr.len() >= hs && hr.len() >= hs && rh.len() >= hs);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512 is present and the bounds hold (asserted above).
    unsafe {
        gru_reset_avx512(xr, hr, h, rh)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn gru_reset_avx512(xr: &[f32], hr: &[f32], h: &[f32], rh: &mut [f32]) {
    let hs = h.len();
    let mut j = 0;
    while j < hs {
        let m = lanes(hs - j);
        let load = |s: &[f32]| _mm512_maskz_loadu_ps(m, s.as_ptr().add(j));
        let r = sigmoid(_mm512_add_ps(load(xr), load(hr)));
        _mm512_mask_storeu_ps(rh.as_mut_ptr().add(j), m, _mm512_mul_ps(r, load(h)));
        j += 16;
    }
}

/// What a GRU's new gate adds to its input projection `xn`.
pub(super) enum NewGate<'a> {
    /// `linear_before_reset = 0`: `R_h (r h)` already taken, plus `Rb_h`.
    Product { rhr: &'a [f32], rb: &'a [f32] },
    /// `linear_before_reset = 1`: `sigmoid(xr + hr_r) (R_h h + Rb_h)`.
    Reset {
        xr: &'a [f32],
        hr_r: &'a [f32],
        hn: &'a [f32],
        rb: &'a [f32],
    },
}

/// The rest of a GRU step for one batch row: `z = sigmoid(xz + hz)`, `n =
/// tanh(xn + new)`, `h = (1 - z) n + z h`.
///
/// # Panics
/// As [`lstm`], for `hs = h.len()` elements of each slice.
pub(super) fn gru_update(xz: &[f32], hz: &[f32], xn: &[f32], new: NewGate, h: &mut [f32]) {
    let hs = h.len();
    let fits = |s: &[f32]| s.len() >= hs;
    let parts = match &new {
        NewGate::Product { rhr, rb } => fits(rhr) && fits(rb),
        NewGate::Reset { xr, hr_r, hn, rb } => fits(xr) && fits(hr_r) && fits(hn) && fits(rb),
    };
    assert!(available() && fits(xz) && fits(hz) && fits(xn) && parts);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512 is present and the bounds hold (asserted above).
    unsafe {
        gru_update_avx512(xz, hz, xn, &new, h)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn gru_update_avx512(xz: &[f32], hz: &[f32], xn: &[f32], new: &NewGate, h: &mut [f32]) {
    let hs = h.len();
    let mut j = 0;
    while j < hs {
        let m = lanes(hs - j);
        let load = |s: &[f32]| _mm512_maskz_loadu_ps(m, s.as_ptr().add(j));
        let z = sigmoid(_mm512_add_ps(load(xz), load(hz)));
        let added = match new {
            NewGate::Product { rhr, rb } => _mm512_add_ps(load(rhr), load(rb)),
            NewGate::Reset { xr, hr_r, hn, rb } => {
                let r = sigmoid(_mm512_add_ps(load(xr), load(hr_r)));
                _mm512_mul_ps(r, _mm512_add_ps(load(hn), load(rb)))
            }
        };
        let n = tanh_exp(_mm512_add_ps(load(xn), added));
        let hj = h.as_mut_ptr().add(j);
        // (1 - z) n + z h, as the scalar loop computes it.
        let keep = _mm512_mul_ps(z, _mm512_maskz_loadu_ps(m, hj));
        let out = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_set1_ps(1.0), z), n, keep);
        _mm512_mask_storeu_ps(hj, m, out);
        j += 16;
    }
}

/// The first `left` of 16 lanes (all from 16 up).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lanes(left: usize) -> __mmask16 {
    if left >= 16 {
        u16::MAX
    } else {
        ((1u32 << left) - 1) as u16
    }
}
