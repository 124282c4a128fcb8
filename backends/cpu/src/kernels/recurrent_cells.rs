//! The gates of an LSTM or GRU cell in one pass of registers (16 lanes of
//! AVX-512, or 8 of AVX2; one body generic over the register), for the
//! default activations (sigmoid for the gates, tanh for the cell) with no
//! clip or coupled gates (peepholes taken): each register's lanes of the
//! hidden state read the step's input projection and recurrent product
//! once, and write the new state once. A small layer's step (hidden 25 to
//! 128) otherwise runs five to seven passes of a few vectors each, and
//! calls as many functions, around a product that takes less time than
//! they do.
//!
//! The arithmetic is `recurrent_f32`'s gate loops' (whose scalar forms are
//! the reference): the registers' `sigmoid` and `tanh_exp` agree with
//! `vmath::sigmoid` and `vmath::tanh_exp` to an ulp or two.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Whether the fused cells run here (AVX2 and FMA, or AVX-512).
pub(super) fn available() -> bool {
    super::vmath::avx2()
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

/// One LSTM step for one batch row: gates `x + hr` in ONNX's order (`i, o,
/// f, c`, `hs` each), `c = f c + i tanh(g)`, `h = o tanh(c)`; with
/// peepholes `p` (`i, o, f`), `i` and `f` add `p c` of the old cell, `o`
/// of the new one.
///
/// # Panics
/// If the CPU lacks AVX2 ([`available`]) or a slice is shorter than the
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
    // SAFETY: the CPU has the features of the width taken, and the bounds
    // hold (asserted above).
    unsafe {
        if super::vmath::avx512() {
            lstm_avx512(x, hr, peep, c, h)
        } else {
            lstm_avx2(x, hr, peep, c, h)
        }
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
    // SAFETY: as in `lstm`.
    unsafe {
        if super::vmath::avx512() {
            gru_reset_avx512(xr, hr, h, rh)
        } else {
            gru_reset_avx2(xr, hr, h, rh)
        }
    }
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
    // SAFETY: as in `lstm`.
    unsafe {
        if super::vmath::avx512() {
            gru_update_avx512(xz, hz, xn, &new, h)
        } else {
            gru_update_avx2(xz, hz, xn, &new, h)
        }
    }
}

/// A register of lanes and what the cells do with one.
#[cfg(target_arch = "x86_64")]
trait Lanes: Copy {
    const N: usize;
    /// The lanes of the first `left` floats at `p` (zero past them).
    unsafe fn load(p: *const f32, left: usize) -> Self;
    /// The first `left` lanes to `p`.
    unsafe fn store(self, p: *mut f32, left: usize);
    unsafe fn splat(v: f32) -> Self;
    unsafe fn add(self, o: Self) -> Self;
    unsafe fn sub(self, o: Self) -> Self;
    unsafe fn mul(self, o: Self) -> Self;
    /// `self · b + c`.
    unsafe fn fmadd(self, b: Self, c: Self) -> Self;
    unsafe fn sigmoid(self) -> Self;
    unsafe fn tanh(self) -> Self;
}

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct L16(__m512);

#[cfg(target_arch = "x86_64")]
impl Lanes for L16 {
    const N: usize = 16;
    #[inline(always)]
    unsafe fn load(p: *const f32, left: usize) -> Self {
        L16(_mm512_maskz_loadu_ps(mask16(left), p))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, left: usize) {
        _mm512_mask_storeu_ps(p, mask16(left), self.0)
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        L16(_mm512_set1_ps(v))
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        L16(_mm512_add_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        L16(_mm512_sub_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        L16(_mm512_mul_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        L16(_mm512_fmadd_ps(self.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn sigmoid(self) -> Self {
        L16(super::vmath_avx512::sigmoid(self.0))
    }
    #[inline(always)]
    unsafe fn tanh(self) -> Self {
        L16(super::vmath_avx512::tanh_exp(self.0))
    }
}

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct L8(__m256);

#[cfg(target_arch = "x86_64")]
impl Lanes for L8 {
    const N: usize = 8;
    #[inline(always)]
    unsafe fn load(p: *const f32, left: usize) -> Self {
        if left >= 8 {
            return L8(_mm256_loadu_ps(p));
        }
        L8(_mm256_maskload_ps(p, mask8(left)))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, left: usize) {
        if left >= 8 {
            return _mm256_storeu_ps(p, self.0);
        }
        _mm256_maskstore_ps(p, mask8(left), self.0)
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        L8(_mm256_set1_ps(v))
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        L8(_mm256_add_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        L8(_mm256_sub_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        L8(_mm256_mul_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        L8(_mm256_fmadd_ps(self.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn sigmoid(self) -> Self {
        L8(super::vmath_avx2::sigmoid(self.0))
    }
    #[inline(always)]
    unsafe fn tanh(self) -> Self {
        L8(super::vmath_avx2::tanh_exp(self.0))
    }
}

/// The first `left` of 16 lanes (all from 16 up).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn mask16(left: usize) -> __mmask16 {
    if left >= 16 {
        u16::MAX
    } else {
        ((1u32 << left) - 1) as u16
    }
}

/// The first `left` (below 8) of 8 lanes, as `vmaskmovps` takes them.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn mask8(left: usize) -> __m256i {
    let index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_cmpgt_epi32(_mm256_set1_epi32(left as i32), index)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn lstm_avx512(x: &[f32], hr: &[f32], peep: Option<&[f32]>, c: &mut [f32], h: &mut [f32]) {
    lstm_in::<L16>(x, hr, peep, c, h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn lstm_avx2(x: &[f32], hr: &[f32], peep: Option<&[f32]>, c: &mut [f32], h: &mut [f32]) {
    lstm_in::<L8>(x, hr, peep, c, h)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn lstm_in<V: Lanes>(
    x: &[f32],
    hr: &[f32],
    peep: Option<&[f32]>,
    c: &mut [f32],
    h: &mut [f32],
) {
    let hs = h.len();
    let mut j = 0;
    while j < hs {
        let left = hs - j;
        let at = |s: &[f32], k: usize| V::load(s.as_ptr().add(k * hs + j), left);
        let gate = |k: usize| at(x, k).add(at(hr, k));
        let cj = c.as_mut_ptr().add(j);
        let old = V::load(cj, left);
        // `gate + p c` for peephole `k` (i 0, o 1, f 2), else `gate`.
        let peeped = |gate: V, k: usize, cell: V| match peep {
            Some(p) => at(p, k).fmadd(cell, gate),
            None => gate,
        };
        let i = peeped(gate(0), 0, old).sigmoid();
        let f = peeped(gate(2), 2, old).sigmoid();
        let g = gate(3).tanh();
        let cn = f.fmadd(old, i.mul(g));
        let o = peeped(gate(1), 1, cn).sigmoid();
        cn.store(cj, left);
        o.mul(cn.tanh()).store(h.as_mut_ptr().add(j), left);
        j += V::N;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn gru_reset_avx512(xr: &[f32], hr: &[f32], h: &[f32], rh: &mut [f32]) {
    gru_reset_in::<L16>(xr, hr, h, rh)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gru_reset_avx2(xr: &[f32], hr: &[f32], h: &[f32], rh: &mut [f32]) {
    gru_reset_in::<L8>(xr, hr, h, rh)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn gru_reset_in<V: Lanes>(xr: &[f32], hr: &[f32], h: &[f32], rh: &mut [f32]) {
    let hs = h.len();
    let mut j = 0;
    while j < hs {
        let left = hs - j;
        let load = |s: &[f32]| V::load(s.as_ptr().add(j), left);
        let r = load(xr).add(load(hr)).sigmoid();
        r.mul(load(h)).store(rh.as_mut_ptr().add(j), left);
        j += V::N;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
unsafe fn gru_update_avx512(xz: &[f32], hz: &[f32], xn: &[f32], new: &NewGate, h: &mut [f32]) {
    gru_update_in::<L16>(xz, hz, xn, new, h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gru_update_avx2(xz: &[f32], hz: &[f32], xn: &[f32], new: &NewGate, h: &mut [f32]) {
    gru_update_in::<L8>(xz, hz, xn, new, h)
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn gru_update_in<V: Lanes>(
    xz: &[f32],
    hz: &[f32],
    xn: &[f32],
    new: &NewGate,
    h: &mut [f32],
) {
    let hs = h.len();
    let mut j = 0;
    while j < hs {
        let left = hs - j;
        let load = |s: &[f32]| V::load(s.as_ptr().add(j), left);
        let z = load(xz).add(load(hz)).sigmoid();
        let added = match new {
            NewGate::Product { rhr, rb } => load(rhr).add(load(rb)),
            NewGate::Reset { xr, hr_r, hn, rb } => {
                let r = load(xr).add(load(hr_r)).sigmoid();
                r.mul(load(hn).add(load(rb)))
            }
        };
        let n = load(xn).add(added).tanh();
        let hj = h.as_mut_ptr().add(j);
        // (1 - z) n + z h, as the scalar loop computes it.
        let keep = z.mul(V::load(hj, left));
        V::splat(1.0).sub(z).fmadd(n, keep).store(hj, left);
        j += V::N;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both widths (AVX-512's where the CPU has it) against the scalar
    /// gate arithmetic, at sizes that end inside a register.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn both_widths_match_the_scalar_cells() {
        use crate::kernels::vmath::{sigmoid, tanh_exp};
        if !available() {
            return;
        }
        let vals = |n: usize, k: usize| -> Vec<f32> {
            (0..n)
                .map(|i| (((i * 7 + k * 13) % 29) as f32 - 14.0) * 0.2)
                .collect()
        };
        for hs in [1, 7, 8, 9, 16, 25, 33] {
            let (x, hr, p) = (vals(4 * hs, 1), vals(4 * hs, 2), vals(3 * hs, 3));
            let (c0, h0) = (vals(hs, 4), vals(hs, 5));
            // The scalar LSTM with peepholes.
            let mut want_c = c0.clone();
            let mut want_h = h0.clone();
            for j in 0..hs {
                let g = |k: usize| x[k * hs + j] + hr[k * hs + j];
                let i = sigmoid(g(0) + p[j] * c0[j]);
                let f = sigmoid(g(2) + p[2 * hs + j] * c0[j]);
                want_c[j] = f * c0[j] + i * tanh_exp(g(3));
                let o = sigmoid(g(1) + p[hs + j] * want_c[j]);
                want_h[j] = o * tanh_exp(want_c[j]);
            }
            let mut widths = vec![false];
            if crate::kernels::vmath::avx512() {
                widths.push(true);
            }
            for wide in widths {
                let (mut c, mut h) = (c0.clone(), h0.clone());
                // SAFETY: the CPU has the width's features (checked above).
                unsafe {
                    if wide {
                        lstm_avx512(&x, &hr, Some(&p), &mut c, &mut h)
                    } else {
                        lstm_avx2(&x, &hr, Some(&p), &mut c, &mut h)
                    }
                }
                for j in 0..hs {
                    assert!((c[j] - want_c[j]).abs() <= 1e-6 * (1.0 + want_c[j].abs()));
                    assert!((h[j] - want_h[j]).abs() <= 1e-6, "hs {hs} wide {wide} {j}");
                }
                // GRU, linear_before_reset = 1, from the same values.
                let mut h = h0.clone();
                let new = NewGate::Reset {
                    xr: &x[hs..],
                    hr_r: &hr[hs..],
                    hn: &hr[2 * hs..],
                    rb: &p[..hs],
                };
                // SAFETY: as above.
                unsafe {
                    if wide {
                        gru_update_avx512(&x, &hr, &x[2 * hs..], &new, &mut h)
                    } else {
                        gru_update_avx2(&x, &hr, &x[2 * hs..], &new, &mut h)
                    }
                }
                for j in 0..hs {
                    let z = sigmoid(x[j] + hr[j]);
                    let r = sigmoid(x[hs + j] + hr[hs + j]);
                    let n = tanh_exp(x[2 * hs + j] + r * (hr[2 * hs + j] + p[j]));
                    let want = (1.0 - z) * n + z * h0[j];
                    assert!((h[j] - want).abs() <= 1e-6, "gru hs {hs} wide {wide} {j}");
                }
            }
        }
    }
}
