//! The AVX-512 kernels of [`super::run`]: `MR` rows by `NV` 16-lane
//! registers of columns, the tile stored by rows or transposed by columns.

use std::arch::x86_64::*;

use rlx_ir::ops::Activation;

use super::{Half, Panel, Store, Tile, NR_MAX};
use crate::kernels::{vmath, vmath_avx512};

/// # Safety
/// As [`super::run`].
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx2,fma")]
pub unsafe fn kernel<A: Panel, B: Panel, const MR: usize, const NV: usize>(
    kc: usize,
    a: &A,
    b: &B,
    t: &Tile,
) {
    // `acc` is only ever indexed by constants (every loop over it is
    // unrolled), so it stays in registers: what loops over the tile's
    // rows goes through `buf` instead, written before it is read.
    let nr = 16 * NV;
    let mut buf = std::mem::MaybeUninit::<Buf>::uninit();
    let buf = buf.as_mut_ptr() as *mut f32;
    let mut acc = [[_mm512_setzero_ps(); NV]; MR];
    match t.store {
        Store::Columns { partial, .. } if t.load_c => {
            for (i, row) in acc.iter_mut().enumerate() {
                for (v, x) in row.iter_mut().enumerate() {
                    *x = _mm512_loadu_ps(partial.add(i * nr + 16 * v));
                }
            }
        }
        Store::Columns { lanes, .. } => {
            if let Some(bias) = t.bias {
                for (v, x) in acc[0].iter_mut().enumerate() {
                    let n = lanes.saturating_sub(16 * v).min(16) as u32;
                    *x = _mm512_maskz_loadu_ps(prefix(n), bias.add(16 * v));
                }
                for i in 1..MR {
                    acc[i] = acc[0];
                }
            }
        }
        Store::Rows(_) if !t.load_c && t.rows == MR => {
            if let Some(bias) = t.bias {
                for (i, row) in acc.iter_mut().enumerate() {
                    *row = [_mm512_set1_ps(*bias.add(i)); NV];
                }
            }
        }
        Store::Rows(parts) => {
            std::ptr::write_bytes(buf, 0, MR * nr);
            for i in 0..t.rows {
                let row = buf.add(i * nr);
                let c = t.c.add(i * t.ldc);
                for (v, part) in parts[..NV].iter().enumerate() {
                    let mut x = match t.bias {
                        Some(bias) => _mm512_set1_ps(*bias.add(i)),
                        None => _mm512_setzero_ps(),
                    };
                    if t.load_c {
                        x = _mm512_add_ps(x, load(c, *part));
                    }
                    _mm512_storeu_ps(row.add(16 * v), x);
                }
            }
            for (i, row) in acc.iter_mut().enumerate() {
                for (v, x) in row.iter_mut().enumerate() {
                    *x = _mm512_loadu_ps(buf.add(i * nr + 16 * v));
                }
            }
        }
    }
    // One depth step (a macro, not a closure: called from two loops, a
    // closure was not inlined and the accumulators left the registers).
    macro_rules! step {
        ($p:expr) => {{
            let p = $p;
            let bp = b.row(p);
            let mut bv = [_mm512_setzero_ps(); NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = _mm512_loadu_ps(bp.add(16 * v));
            }
            let ap = a.row(p);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(i));
                for (x, b) in row.iter_mut().zip(&bv) {
                    *x = _mm512_fmadd_ps(av, *b, *x);
                }
            }
        }};
    }
    // Chunks of depth steps, one line of `ahead` fetched before each.
    let every = t.ahead.map_or(kc, |ahead| ahead.every(kc));
    let (mut p, mut line) = (0, 0);
    while p < kc {
        if let Some(ahead) = t.ahead.filter(|a| line < a.lines) {
            _mm_prefetch::<_MM_HINT_T1>(ahead.from.wrapping_add(16 * line).cast());
            line += 1;
        }
        let end = kc.min(p + every);
        while p < end {
            step!(p);
            p += 1;
        }
    }
    let parts = match t.store {
        Store::Rows(parts) => parts,
        Store::Columns {
            positions,
            lanes,
            partial,
            spill,
        } => {
            let to = if spill { partial } else { buf };
            for (i, row) in acc.iter().enumerate() {
                for (v, x) in row.iter().enumerate() {
                    _mm512_storeu_ps(to.add(i * nr + 16 * v), *x);
                }
            }
            if !spill {
                store_columns(t, buf, (MR, nr), positions, lanes);
            }
            return;
        }
    };
    let plain = t.rows == MR
        && matches!(t.act, Activation::None | Activation::Relu)
        && parts[..NV].iter().all(|p| p.mask == u16::MAX);
    if plain {
        let relu = t.act == Activation::Relu;
        for (i, row) in acc.iter().enumerate() {
            let c = t.c.add(i * t.ldc);
            for (v, &x) in row.iter().enumerate() {
                let mut x = x;
                if let Some(r) = t.residual {
                    x = _mm512_add_ps(x, _mm512_loadu_ps(r.add(i * t.ldc + parts[v].col)));
                }
                let x = if relu { relu_keep_nan(x) } else { x };
                _mm512_storeu_ps(c.add(parts[v].col), x);
            }
        }
        return;
    }
    for (i, row) in acc.iter().enumerate() {
        for (v, x) in row.iter().enumerate() {
            _mm512_storeu_ps(buf.add(i * nr + 16 * v), *x);
        }
    }
    for i in 0..t.rows {
        let c = t.c.add(i * t.ldc);
        for (v, part) in parts[..NV].iter().enumerate() {
            let mut x = _mm512_loadu_ps(buf.add(i * nr + 16 * v));
            if let Some(r) = t.residual {
                x = _mm512_add_ps(x, load(r.add(i * t.ldc), *part));
            }
            store(c, *part, activate(t.act, x));
        }
    }
}

/// Stores a tile held in `buf` (`mr` rows of `nr`) by columns: each
/// 16-lane block is transposed, and lane `l` goes to row `l` of `C`.
#[inline(always)]
unsafe fn store_columns(
    t: &Tile,
    buf: *const f32,
    (mr, nr): (usize, usize),
    positions: Half,
    lanes: usize,
) {
    let zero = _mm512_setzero_ps();
    for l0 in (0..lanes.min(nr)).step_by(16) {
        let mut rows = [zero; 16];
        for (i, r) in rows.iter_mut().enumerate().take(mr) {
            *r = _mm512_loadu_ps(buf.add(i * nr + l0));
        }
        let cols = transpose16(rows);
        for (l, &x) in cols.iter().enumerate().take(lanes - l0) {
            let c = t.c.add((l0 + l) * t.ldc);
            let mut x = x;
            if let Some(r) = t.residual {
                x = _mm512_add_ps(x, load(r.add((l0 + l) * t.ldc), positions));
            }
            store(c, positions, activate(t.act, x));
        }
    }
}

/// The transpose of a 16×16 block: `out[j]` lane `i` is `rows[i]` lane `j`.
#[inline(always)]
pub(crate) unsafe fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    let pd = _mm512_castps_pd;
    let ps = _mm512_castpd_ps;
    // Pairs of rows interleaved by element, then by pairs of elements:
    // each 128-bit lane then holds a 4×4 block transposed.
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    let mut u = [_mm512_setzero_ps(); 16];
    for q in 0..4 {
        let b = 4 * q;
        u[b] = ps(_mm512_unpacklo_pd(pd(t[b]), pd(t[b + 2])));
        u[b + 1] = ps(_mm512_unpackhi_pd(pd(t[b]), pd(t[b + 2])));
        u[b + 2] = ps(_mm512_unpacklo_pd(pd(t[b + 1]), pd(t[b + 3])));
        u[b + 3] = ps(_mm512_unpackhi_pd(pd(t[b + 1]), pd(t[b + 3])));
    }
    // Then the 128-bit lanes of four rows are gathered twice over.
    let mut v = [_mm512_setzero_ps(); 16];
    for h in 0..2 {
        let b = 8 * h;
        for j in 0..4 {
            v[b + j] = _mm512_shuffle_f32x4::<0x88>(u[b + j], u[b + 4 + j]);
            v[b + 4 + j] = _mm512_shuffle_f32x4::<0xdd>(u[b + j], u[b + 4 + j]);
        }
    }
    let mut out = [_mm512_setzero_ps(); 16];
    for j in 0..8 {
        out[j] = _mm512_shuffle_f32x4::<0x88>(v[j], v[8 + j]);
        out[8 + j] = _mm512_shuffle_f32x4::<0xdd>(v[j], v[8 + j]);
    }
    out
}

/// A tile's rows, aligned for whole-register moves.
#[repr(align(64))]
struct Buf(#[allow(dead_code)] [f32; 16 * NR_MAX]);

/// `max(x, 0)` with NaN kept, as `vmath::relu`.
#[inline(always)]
unsafe fn relu_keep_nan(x: __m512) -> __m512 {
    let keep = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(x, _mm512_setzero_ps());
    _mm512_maskz_mov_ps(keep, x)
}

/// The kept lanes of a part: `popcount(mask)` floats from `src + col`,
/// spread to the lanes of `mask`.
#[inline(always)]
unsafe fn load(src: *const f32, part: Half) -> __m512 {
    if part.mask == u16::MAX {
        return _mm512_loadu_ps(src.add(part.col));
    }
    if is_prefix(part.mask) {
        return _mm512_maskz_loadu_ps(part.mask, src.add(part.col));
    }
    let packed = _mm512_maskz_loadu_ps(prefix(part.mask.count_ones()), src.add(part.col));
    _mm512_maskz_expand_ps(part.mask, packed)
}

/// Stores the lanes of the part's mask to consecutive floats from
/// `dst + col`.
#[inline(always)]
unsafe fn store(dst: *mut f32, part: Half, v: __m512) {
    if part.mask == u16::MAX {
        return _mm512_storeu_ps(dst.add(part.col), v);
    }
    if is_prefix(part.mask) {
        // Nothing to compress (also no lane at all).
        return _mm512_mask_storeu_ps(dst.add(part.col), part.mask, v);
    }
    let packed = _mm512_maskz_compress_ps(part.mask, v);
    _mm512_mask_storeu_ps(dst.add(part.col), prefix(part.mask.count_ones()), packed);
}

/// Whether `mask` keeps the first lanes only: then its kept lanes are
/// already consecutive.
#[inline(always)]
fn is_prefix(mask: u16) -> bool {
    mask & mask.wrapping_add(1) == 0
}

#[inline(always)]
fn prefix(n: u32) -> __mmask16 {
    if n >= 16 {
        0xffff
    } else {
        ((1u32 << n) - 1) as __mmask16
    }
}

/// `act` on 16 lanes: ReLU in the register, the rest through the
/// `vmath` functions, vectorized over a copy of the lanes.
#[inline(always)]
pub(crate) unsafe fn activate(act: Activation, v: __m512) -> __m512 {
    match act {
        Activation::None => v,
        Activation::Relu => relu_keep_nan(v),
        Activation::Sigmoid => vmath_avx512::sigmoid(v),
        Activation::Tanh => lanes(v, |x| vmath::tanh(x)),
        // Compiled from the scalar form, a 16-lane division (~16 cycles on
        // one port) was half of a pointwise convolution's SiLU epilogue.
        Activation::Silu => vmath_avx512::silu(v),
        // Lane by lane through a copy, erf's two branches kept it scalar.
        Activation::GeluErf => crate::kernels::gelu_lanes::avx512::gelu(v),
        Activation::GeluTanh => vmath_avx512::gelu_tanh(v),
        // min_ps returns its second operand where either is NaN: a NaN lane stays.
        Activation::Relu6 => _mm512_min_ps(_mm512_set1_ps(6.0), relu_keep_nan(v)),
        Activation::HardSwish => {
            // As vmath::hard_swish: a NaN lane stays NaN through the last product.
            let t = _mm512_add_ps(
                _mm512_mul_ps(v, _mm512_set1_ps(1.0 / 6.0)),
                _mm512_set1_ps(0.5),
            );
            let t = _mm512_min_ps(_mm512_max_ps(t, _mm512_setzero_ps()), _mm512_set1_ps(1.0));
            _mm512_mul_ps(v, t)
        }
    }
}

#[inline(always)]
unsafe fn lanes(v: __m512, f: impl Fn(f32) -> f32) -> __m512 {
    let mut l = [0f32; 16];
    _mm512_storeu_ps(l.as_mut_ptr(), v);
    for x in l.iter_mut() {
        *x = f(*x);
    }
    _mm512_loadu_ps(l.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_sixteen_by_sixteen() {
        if !crate::kernels::vmath::avx512() {
            return;
        }
        #[target_feature(enable = "avx512f")]
        unsafe fn check() {
            let m: Vec<f32> = (0..256).map(|i| i as f32).collect();
            let rows: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(m[16 * i..].as_ptr()));
            let cols = transpose16(rows);
            for (j, c) in cols.iter().enumerate() {
                let mut out = [0f32; 16];
                _mm512_storeu_ps(out.as_mut_ptr(), *c);
                for (i, v) in out.iter().enumerate() {
                    assert_eq!(*v, m[16 * i + j], "column {j} row {i}");
                }
            }
        }
        // SAFETY: the CPU has AVX-512F (checked above).
        unsafe { check() }
    }
}
