//! One row against weights packed in panels ([`super::weights::PackedW`]):
//! `c[j] (+)= Σ_t x[t] · w[t, j]`, as a decoder's step and a classifier at
//! batch 1 compute every product. Such a product reads each weight once and
//! is bound by memory: a panel (`nr` columns by the whole depth) is one
//! sequential stream, which the hardware prefetchers follow at full speed,
//! where the row-major matrix would be `k` short streams a stride apart
//! (`gemv::vec_mat`: 12-15 GB/s on a decoder's 768 x 50257 head).
//!
//! Each panel's `nr / 16` vectors of sums are kept twice, for even and odd
//! depth steps, so that a multiply-add does not wait on the one before.

use rlx_ir::ops::Activation;

/// Products below this many multiply-adds stay on one thread.
const PAR_WORK: usize = 1 << 18;

/// `c = act((c if accumulate) + x · W)` for `W` (k×n) packed in panels of
/// `nr` columns (panel `j` holds `w[t, j*nr + l]` at `(j * k + t) * nr + l`,
/// zero past column `n`); `act` is None or ReLU. Threads split the panels.
///
/// # Panics
/// If `data`, `x` or `c` are shorter than that, or `nr` is not 16, 32, 48
/// or 64.
#[allow(clippy::too_many_arguments)]
pub fn product(
    data: &[f32],
    k: usize,
    n: usize,
    nr: usize,
    x: &[f32],
    c: &mut [f32],
    accumulate: bool,
    act: Activation,
) {
    let panels = n.div_ceil(nr);
    assert!(
        data.len() >= panels * k * nr
            && x.len() >= k
            && c.len() >= n
            && matches!(nr, 16 | 32 | 48 | 64),
        "panel row product: operands too small"
    );
    let relu = matches!(act, Activation::Relu);
    let c = &mut c[..n];
    let threads = crate::par::threads();
    let per = if threads > 1 && k * n >= PAR_WORK {
        panels.div_ceil(threads) * nr
    } else {
        n.max(1)
    };
    let run = |s: usize, out: &mut [f32]| {
        let first = s * per / nr;
        for (p, cols) in out.chunks_mut(nr).enumerate() {
            let panel = &data[(first + p) * k * nr..(first + p + 1) * k * nr];
            panel_sums(panel, k, nr, &x[..k], cols, accumulate, relu);
        }
    };
    if per < n {
        crate::par::chunks_mut(c, per, run);
    } else {
        run(0, c);
    }
}

/// One panel's columns `out` (at most `nr`).
fn panel_sums(
    panel: &[f32],
    k: usize,
    nr: usize,
    x: &[f32],
    out: &mut [f32],
    accumulate: bool,
    relu: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if crate::kernels::vmath::avx512() {
        // SAFETY: the CPU has AVX-512F; `panel` holds `k` steps of `nr`
        // floats, `x` holds `k`, `out` at most `nr` (checked by `product`).
        unsafe {
            match nr {
                16 => avx512::<1>(panel, k, x, out, accumulate, relu),
                32 => avx512::<2>(panel, k, x, out, accumulate, relu),
                48 => avx512::<3>(panel, k, x, out, accumulate, relu),
                _ => avx512::<4>(panel, k, x, out, accumulate, relu),
            }
        }
        return;
    }
    // AVX2 (16-column panels) and the rest: the compiler's vectors.
    let mut sums = [0f32; 64];
    crate::kernels::vmath::vectorized(|| {
        for (t, &xt) in x.iter().enumerate() {
            for (s, &w) in sums[..nr].iter_mut().zip(&panel[t * nr..(t + 1) * nr]) {
                *s += xt * w;
            }
        }
    });
    for (o, &s) in out.iter_mut().zip(&sums) {
        let v = if accumulate { *o + s } else { s };
        *o = if relu { v.max(0.0) } else { v };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn avx512<const NV: usize>(
    panel: &[f32],
    k: usize,
    x: &[f32],
    out: &mut [f32],
    accumulate: bool,
    relu: bool,
) {
    use std::arch::x86_64::*;
    let nr = 16 * NV;
    let p = panel.as_ptr();
    let mut even = [_mm512_setzero_ps(); NV];
    let mut odd = [_mm512_setzero_ps(); NV];
    let mut t = 0;
    while t + 2 <= k {
        let (x0, x1) = (_mm512_set1_ps(x[t]), _mm512_set1_ps(x[t + 1]));
        let (r0, r1) = (p.add(t * nr), p.add((t + 1) * nr));
        #[allow(clippy::needless_range_loop)] // two arrays and a pointer, one index
        for v in 0..NV {
            even[v] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(r0.add(16 * v)), even[v]);
            odd[v] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(r1.add(16 * v)), odd[v]);
        }
        t += 2;
    }
    if t < k {
        let (x0, r0) = (_mm512_set1_ps(x[t]), p.add(t * nr));
        for (v, e) in even.iter_mut().enumerate() {
            *e = _mm512_fmadd_ps(x0, _mm512_loadu_ps(r0.add(16 * v)), *e);
        }
    }
    let o = out.as_mut_ptr();
    for v in 0..NV {
        let lanes = out.len().saturating_sub(16 * v).min(16);
        if lanes == 0 {
            break;
        }
        let mask: __mmask16 = ((1u32 << lanes) - 1) as u16;
        let mut s = _mm512_add_ps(even[v], odd[v]);
        if accumulate {
            s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(mask, o.add(16 * v)));
        }
        if relu {
            s = _mm512_max_ps(s, _mm512_setzero_ps());
        }
        _mm512_mask_storeu_ps(o.add(16 * v), mask, s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::gemm::weights::PackedW;

    /// Every depth parity and a last panel of every width, against plain
    /// f64 sums, with and without accumulating and ReLU.
    #[test]
    fn rows_match_plain_sums() {
        for (k, n) in [(1, 1), (7, 17), (128, 64), (129, 100), (300, 257)] {
            let w: Vec<f32> = (0..k * n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
                .collect();
            let x: Vec<f32> = (0..k)
                .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
                .collect();
            let Some(packed) = PackedW::new(&w, k, n, (n, 1), 1) else {
                return; // no microkernels on this CPU: nothing packs
            };
            for (accumulate, act) in [(false, Activation::None), (true, Activation::Relu)] {
                let mut c: Vec<f32> = (0..n).map(|j| j as f32 / 10.0).collect();
                let before = c.clone();
                packed.product(&x, 1, &mut c, accumulate, act);
                for j in 0..n {
                    let mut want: f64 = (0..k).map(|t| x[t] as f64 * w[t * n + j] as f64).sum();
                    if accumulate {
                        want += before[j] as f64;
                    }
                    if act == Activation::Relu {
                        want = want.max(0.0);
                    }
                    assert!(
                        (c[j] as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "k {k} n {n} column {j}: {} against {want}",
                        c[j]
                    );
                }
            }
        }
    }
}
