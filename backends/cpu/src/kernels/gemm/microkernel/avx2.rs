//! The AVX2 kernels of [`super::run`], for CPUs without AVX-512: tiles one
//! 16-lane part wide (`NV` 1), each row of the tile two 8-lane registers.
//!
//! AVX2 has no lane masks to compress or expand with: a part whose kept
//! lanes are a prefix moves by masked loads and stores (`vmaskmovps`), any
//! other (a convolution's padding columns dropped) through a row in memory,
//! lane by lane. By columns, the tile's 8×8 blocks are transposed in
//! registers.

use std::arch::x86_64::*;

use super::{Half, Panel, Store, Tile};
use crate::kernels::vmath_avx2::activate;

/// Columns of a tile: one part.
const NR: usize = 16;
/// Rows of a tile, at most.
const MR_MAX: usize = 8;

/// A tile's rows, aligned for whole-register moves.
#[repr(align(32))]
struct Buf(#[allow(dead_code)] [f32; MR_MAX * NR]);

/// # Safety
/// As [`super::run`], with `MR` at most 6.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn kernel<A: Panel, B: Panel, const MR: usize>(kc: usize, a: &A, b: &B, t: &Tile) {
    // `acc` is only ever indexed by constants (every loop over it is
    // unrolled), so it stays in registers: what loops over the tile's rows
    // at run time goes through `buf`, written before it is read.
    let mut buf = std::mem::MaybeUninit::<Buf>::uninit();
    let buf = buf.as_mut_ptr() as *mut f32;
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    match t.store {
        Store::Columns { partial, .. } if t.load_c => {
            for (i, row) in acc.iter_mut().enumerate() {
                for (h, x) in row.iter_mut().enumerate() {
                    *x = _mm256_loadu_ps(partial.add(i * NR + 8 * h));
                }
            }
        }
        Store::Columns { lanes, .. } => {
            if let Some(bias) = t.bias {
                for (h, x) in acc[0].iter_mut().enumerate() {
                    *x = load_prefix(bias.add(8 * h), lanes.saturating_sub(8 * h));
                }
                for i in 1..MR {
                    acc[i] = acc[0];
                }
            }
        }
        Store::Rows(_) if !t.load_c && t.rows == MR => {
            if let Some(bias) = t.bias {
                for (i, row) in acc.iter_mut().enumerate() {
                    *row = [_mm256_set1_ps(*bias.add(i)); 2];
                }
            }
        }
        Store::Rows(parts) => {
            for i in 0..MR {
                let row = buf.add(i * NR);
                let start = match t.bias {
                    Some(bias) if i < t.rows => *bias.add(i),
                    _ => 0.0,
                };
                std::slice::from_raw_parts_mut(row, NR).fill(start);
                if t.load_c && i < t.rows {
                    add_part(row, t.c.add(i * t.ldc), parts[0]);
                }
            }
            for (i, row) in acc.iter_mut().enumerate() {
                for (h, x) in row.iter_mut().enumerate() {
                    *x = _mm256_load_ps(buf.add(i * NR + 8 * h));
                }
            }
        }
    }
    // Four steps an iteration: the loop's own instructions are a fifth of
    // one step's, and measured 5-8% of the speed in L1.
    let step = |acc: &mut [[__m256; 2]; MR], p: usize| {
        let bp = b.row(p);
        let bv = [_mm256_loadu_ps(bp), _mm256_loadu_ps(bp.add(8))];
        let ap = a.row(p);
        for (i, row) in acc.iter_mut().enumerate() {
            let av = _mm256_broadcast_ss(&*ap.add(i));
            row[0] = _mm256_fmadd_ps(av, bv[0], row[0]);
            row[1] = _mm256_fmadd_ps(av, bv[1], row[1]);
        }
    };
    // Chunks of depth steps, one line of `ahead` fetched before each.
    let every = t.ahead.map_or(kc, |ahead| ahead.every(kc));
    let (mut p, mut line) = (0, 0);
    while p < kc {
        if let Some(ahead) = t.ahead.filter(|a| line < a.lines) {
            _mm_prefetch::<_MM_HINT_T1>(ahead.from.wrapping_add(16 * line).cast());
            line += 1;
        }
        let end = kc.min(p + every);
        while p + 4 <= end {
            for q in 0..4 {
                step(&mut acc, p + q);
            }
            p += 4;
        }
        while p < end {
            step(&mut acc, p);
            p += 1;
        }
    }
    let part = match t.store {
        Store::Rows(parts) => parts[0],
        Store::Columns {
            positions,
            lanes,
            partial,
            spill,
        } => {
            let to = if spill { partial } else { buf };
            for (i, row) in acc.iter().enumerate() {
                for (h, x) in row.iter().enumerate() {
                    _mm256_storeu_ps(to.add(i * NR + 8 * h), *x);
                }
            }
            if !spill {
                store_columns(t, buf, MR, positions, lanes);
            }
            return;
        }
    };
    if t.rows == MR && part.mask == u16::MAX {
        for (i, row) in acc.iter().enumerate() {
            let c = t.c.add(i * t.ldc + part.col);
            for (h, &x) in row.iter().enumerate() {
                let mut x = x;
                if let Some(r) = t.residual {
                    x = _mm256_add_ps(x, _mm256_loadu_ps(r.add(i * t.ldc + part.col + 8 * h)));
                }
                _mm256_storeu_ps(c.add(8 * h), activate(t.act, x));
            }
        }
        return;
    }
    for (i, row) in acc.iter().enumerate() {
        for (h, x) in row.iter().enumerate() {
            _mm256_store_ps(buf.add(i * NR + 8 * h), *x);
        }
    }
    for i in 0..t.rows {
        let row = buf.add(i * NR);
        if let Some(r) = t.residual {
            add_part(row, r.add(i * t.ldc), part);
        }
        for h in 0..2 {
            let x = _mm256_load_ps(row.add(8 * h));
            _mm256_store_ps(row.add(8 * h), activate(t.act, x));
        }
        store_part(t.c.add(i * t.ldc), part, row);
    }
}

/// Stores a tile held in `buf` (`mr` rows of 16) by columns: each 8×8
/// block is transposed, and lane `l` goes to row `l` of `C`, its positions
/// placed by `positions`.
#[inline(always)]
unsafe fn store_columns(t: &Tile, buf: *const f32, mr: usize, positions: Half, lanes: usize) {
    for l0 in (0..lanes.min(NR)).step_by(8) {
        let mut rows = [_mm256_setzero_ps(); 8];
        for (i, r) in rows.iter_mut().enumerate().take(mr) {
            *r = _mm256_loadu_ps(buf.add(i * NR + l0));
        }
        let cols = transpose8(rows);
        for (l, &x) in cols.iter().enumerate().take(lanes - l0) {
            let c = t.c.add((l0 + l) * t.ldc);
            let mut x = x;
            if let Some(r) = t.residual {
                x = _mm256_add_ps(x, load8(r.add((l0 + l) * t.ldc), positions));
            }
            store8(c, positions, activate(t.act, x));
        }
    }
}

/// The transpose of an 8×8 block: `out[j]` lane `i` is `rows[i]` lane `j`.
#[inline(always)]
pub(crate) unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // Pairs of rows interleaved by element, then by pairs of elements: each
    // 128-bit half then holds a 4×4 block transposed; then the halves swap.
    let mut t = [_mm256_setzero_ps(); 8];
    for i in 0..4 {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    let mut u = [_mm256_setzero_ps(); 8];
    for q in 0..2 {
        let b = 4 * q;
        u[b] = _mm256_shuffle_ps::<0x44>(t[b], t[b + 2]);
        u[b + 1] = _mm256_shuffle_ps::<0xee>(t[b], t[b + 2]);
        u[b + 2] = _mm256_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
        u[b + 3] = _mm256_shuffle_ps::<0xee>(t[b + 1], t[b + 3]);
    }
    let mut out = [_mm256_setzero_ps(); 8];
    for j in 0..4 {
        out[j] = _mm256_permute2f128_ps::<0x20>(u[j], u[4 + j]);
        out[4 + j] = _mm256_permute2f128_ps::<0x31>(u[j], u[4 + j]);
    }
    out
}

/// The mask of the first `n` of 8 lanes (all of them from 8 up).
#[inline(always)]
unsafe fn prefix_mask(n: usize) -> __m256i {
    let index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_cmpgt_epi32(_mm256_set1_epi32(n.min(8) as i32), index)
}

/// The first `n` floats from `src` (zero in the other lanes).
#[inline(always)]
unsafe fn load_prefix(src: *const f32, n: usize) -> __m256 {
    if n >= 8 {
        return _mm256_loadu_ps(src);
    }
    _mm256_maskload_ps(src, prefix_mask(n))
}

/// Whether `mask` keeps the first lanes only: then its kept lanes are
/// already consecutive.
#[inline(always)]
fn is_prefix(mask: u16) -> bool {
    mask & mask.wrapping_add(1) == 0
}

/// 8 lanes placed by `part` (its low 8 bits): `popcount` floats from
/// `src + col`, spread to the kept lanes.
#[inline(always)]
unsafe fn load8(src: *const f32, part: Half) -> __m256 {
    let mask = part.mask & 0xff;
    if is_prefix(mask) {
        return load_prefix(src.add(part.col), mask.count_ones() as usize);
    }
    let mut lanes = [0f32; 8];
    let mut at = src.add(part.col);
    for (l, v) in lanes.iter_mut().enumerate() {
        if mask & (1 << l) != 0 {
            *v = *at;
            at = at.add(1);
        }
    }
    _mm256_loadu_ps(lanes.as_ptr())
}

/// Stores the kept lanes of `v` (the low 8 bits of `part`) to consecutive
/// floats from `dst + col`.
#[inline(always)]
unsafe fn store8(dst: *mut f32, part: Half, v: __m256) {
    let mask = part.mask & 0xff;
    if mask == 0xff {
        return _mm256_storeu_ps(dst.add(part.col), v);
    }
    if is_prefix(mask) {
        let n = mask.count_ones() as usize;
        return _mm256_maskstore_ps(dst.add(part.col), prefix_mask(n), v);
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), v);
    let mut at = dst.add(part.col);
    for (l, v) in lanes.iter().enumerate() {
        if mask & (1 << l) != 0 {
            *at = *v;
            at = at.add(1);
        }
    }
}

/// `row[l] += src[..]` for the 16 lanes `part` keeps (its kept floats are
/// consecutive from `src + col`).
#[inline(always)]
unsafe fn add_part(row: *mut f32, src: *const f32, part: Half) {
    if is_prefix(part.mask) {
        let n = part.mask.count_ones() as usize;
        for h in 0..2 {
            let x = load_prefix(src.add(part.col + 8 * h), n.saturating_sub(8 * h));
            let sum = _mm256_add_ps(_mm256_load_ps(row.add(8 * h)), x);
            _mm256_store_ps(row.add(8 * h), sum);
        }
        return;
    }
    let mut at = src.add(part.col);
    for l in 0..NR {
        if part.mask & (1 << l) != 0 {
            *row.add(l) += *at;
            at = at.add(1);
        }
    }
}

/// Stores the 16 lanes of `row` that `part` keeps to consecutive floats
/// from `dst + col`.
#[inline(always)]
unsafe fn store_part(dst: *mut f32, part: Half, row: *const f32) {
    if is_prefix(part.mask) {
        let n = part.mask.count_ones() as usize;
        for h in 0..2 {
            let x = _mm256_load_ps(row.add(8 * h));
            let keep = n.saturating_sub(8 * h);
            if keep >= 8 {
                _mm256_storeu_ps(dst.add(part.col + 8 * h), x);
            } else if keep > 0 {
                _mm256_maskstore_ps(dst.add(part.col + 8 * h), prefix_mask(keep), x);
            }
        }
        return;
    }
    let mut at = dst.add(part.col);
    for l in 0..NR {
        if part.mask & (1 << l) != 0 {
            *at = *row.add(l);
            at = at.add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_eight_by_eight() {
        if !crate::kernels::vmath::avx2() {
            return;
        }
        #[target_feature(enable = "avx2")]
        unsafe fn check() {
            let m: Vec<f32> = (0..64).map(|i| i as f32).collect();
            let rows: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(m[8 * i..].as_ptr()));
            for (j, c) in transpose8(rows).iter().enumerate() {
                let mut out = [0f32; 8];
                _mm256_storeu_ps(out.as_mut_ptr(), *c);
                for (i, v) in out.iter().enumerate() {
                    assert_eq!(*v, m[8 * i + j], "column {j} row {i}");
                }
            }
        }
        // SAFETY: the CPU has AVX2 (checked above).
        unsafe { check() }
    }
}
