//! The 8-bit GEMM on AVX2 (CPUs without AVX-512 VNNI), sums exact as the
//! VNNI path's. `vpmaddwd` multiplies 16-bit lanes in pairs and adds each
//! pair into an i32 lane without saturating (`vpmaddubsw` on the bytes
//! themselves would saturate at 2^15, as ONNX Runtime's AVX2 path does), so
//! both operands are widened: `B` once, when it is packed
//! ([`PackedB`]'s wide panels, a pair of `k` per column), `A` per product.
//! A tile is [`ROWS`] rows by one 16-column panel in 12 registers; each
//! step broadcasts a row's pair of `k` from memory and multiplies it by the
//! panel's two registers of 8 columns. Panels are the outer loop, so a
//! panel's widened columns stay in cache across the row tiles.

use super::int8_gemm::{k_groups, PackedB, PANEL};

/// Rows of a tile: 2 x `ROWS` accumulators and the panel's two registers.
pub const ROWS: usize = 6;

/// A product over some panels of a `B` packed for this path.
#[cfg(target_arch = "x86_64")]
pub struct Wide<'b> {
    b: &'b PackedB,
    panels: std::ops::Range<usize>,
}

#[cfg(target_arch = "x86_64")]
impl<'b> Wide<'b> {
    /// The product over `panels` of `b`, where `b` has wide panels (packed
    /// on a CPU that takes this path, [`super::int8_gemm::wide`]).
    pub fn new(b: &'b PackedB, panels: &std::ops::Range<usize>) -> Option<Wide<'b>> {
        let last = panels.end.checked_sub(1)?;
        b.wide_panel(last)?;
        Some(Wide {
            b,
            panels: panels.clone(),
        })
    }

    /// Raw sums `C[i][j] = Σ_k A[i][k]·B[k][j]` for `m` rows of `a` (each
    /// `k_groups(b.k)` bytes, zero past `k`) and the columns of the panels
    /// into `c` (its column 0 the first panel's, rows `ldc` apart).
    pub fn gemm(&self, a: &[u8], m: usize, c: &mut [i32], ldc: usize) {
        let (b, k4) = (self.b, k_groups(self.b.k));
        let col0 = self.panels.start * PANEL;
        let width = (self.panels.end * PANEL).min(b.n).saturating_sub(col0);
        assert!(
            a.len() >= m * k4 && (m == 0 || ldc >= width && c.len() >= (m - 1) * ldc + width),
            "int8 gemm operands too small"
        );
        let wide: Vec<i16> = a[..m * k4].iter().map(|&v| i16::from(v)).collect();
        for p in self.panels.clone() {
            let Some(panel) = b.wide_panel(p) else {
                continue;
            };
            let (j0, cols) = (p * PANEL - col0, PANEL.min(b.n - p * PANEL));
            let mut i = 0;
            while i < m {
                let rows = ROWS.min(m - i);
                let mut out = [[0i32; PANEL]; ROWS];
                let x = &wide[i * k4..(i + rows) * k4];
                // SAFETY: the CPU has AVX2 (the panels were widened for it);
                // `x` holds `rows` rows of `k4`, `panel` `k4 / 2` pairs of
                // `PANEL` columns.
                unsafe {
                    match rows {
                        1 => tile::<1>(x, k4, panel, &mut out),
                        2 => tile::<2>(x, k4, panel, &mut out),
                        3 => tile::<3>(x, k4, panel, &mut out),
                        4 => tile::<4>(x, k4, panel, &mut out),
                        5 => tile::<5>(x, k4, panel, &mut out),
                        _ => tile::<ROWS>(x, k4, panel, &mut out),
                    }
                }
                for (r, row) in out.iter().enumerate().take(rows) {
                    let at = (i + r) * ldc + j0;
                    c[at..at + cols].copy_from_slice(&row[..cols]);
                }
                i += rows;
            }
        }
    }
}

/// `R` rows of `x` (`k4` i16 each) times one wide panel into `out`.
///
/// # Safety
/// The CPU has AVX2; `x` holds `R` rows of `k4` (even), `panel` `k4 * PANEL`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn tile<const R: usize>(
    x: &[i16],
    k4: usize,
    panel: &[i16],
    out: &mut [[i32; PANEL]; ROWS],
) {
    use std::arch::x86_64::*;
    debug_assert!(R <= ROWS && x.len() >= R * k4 && panel.len() >= k4 * PANEL);
    let mut acc = [[_mm256_setzero_si256(); 2]; R];
    let (xp, bp) = (x.as_ptr(), panel.as_ptr());
    for kp in 0..k4 / 2 {
        let b0 = _mm256_loadu_si256(bp.add(kp * 2 * PANEL).cast());
        let b1 = _mm256_loadu_si256(bp.add(kp * 2 * PANEL + PANEL).cast());
        for (r, acc) in acc.iter_mut().enumerate() {
            let pair = xp.add(r * k4 + 2 * kp).cast::<i32>().read_unaligned();
            let v = _mm256_set1_epi32(pair);
            acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(v, b0));
            acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(v, b1));
        }
    }
    for (row, acc) in out.iter_mut().zip(&acc) {
        _mm256_storeu_si256(row.as_mut_ptr().cast(), acc[0]);
        _mm256_storeu_si256(row[8..].as_mut_ptr().cast(), acc[1]);
    }
}

/// One row `a` (`groups` of 4 bytes) times a recurrent layer's streamed
/// weights (`super::recurrent_int8::Streamed`: per block of `block`
/// columns, per group, the block's columns x 4 bytes), raw sums into `c`
/// (`blocks * block` of them), 32 columns at a time.
///
/// # Safety
/// The CPU has AVX2; `block` is a multiple of 32; `data` holds
/// `blocks * groups * block * 4` bytes, `a` `groups * 4`, `c` `blocks * block`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub unsafe fn streamed_row(
    data: &[i8],
    groups: usize,
    blocks: usize,
    block: usize,
    a: &[u8],
    c: &mut [i32],
) {
    use std::arch::x86_64::*;
    for b in 0..blocks {
        for s in 0..block / 32 {
            // [8-column chunk][low/high 4 columns]
            let mut acc = [[_mm256_setzero_si256(); 2]; 4];
            for g in 0..groups {
                let x = row4(a, g);
                let at = (b * groups + g) * block * 4 + s * 128;
                for (q, chunk) in data[at..at + 128].chunks_exact(32).enumerate() {
                    let bytes = _mm256_loadu_si256(chunk.as_ptr().cast());
                    let lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(bytes));
                    let hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(bytes));
                    acc[q][0] = _mm256_add_epi32(acc[q][0], _mm256_madd_epi16(x, lo));
                    acc[q][1] = _mm256_add_epi32(acc[q][1], _mm256_madd_epi16(x, hi));
                }
            }
            for (q, pair) in acc.iter().enumerate() {
                let at = b * block + s * 32 + q * 8;
                _mm256_storeu_si256(c[at..at + 8].as_mut_ptr().cast(), finish(pair[0], pair[1]));
            }
        }
    }
}

/// A row's 4 bytes of group `g` as i16, repeated for the 4 columns of a
/// half panel.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn row4(row: &[u8], g: usize) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let v = i32::from_le_bytes([row[4 * g], row[4 * g + 1], row[4 * g + 2], row[4 * g + 3]]);
    _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(v)))
}

/// Pair sums `[c0 c0 c1 c1 c2 c2 c3 c3]` and `[c4 .. c7 c7]` to `[c0 .. c7]`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn finish(
    lo: std::arch::x86_64::__m256i,
    hi: std::arch::x86_64::__m256i,
) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let s = _mm256_hadd_epi32(lo, hi);
    _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7))
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Exact sums against the definition, with bytes at their extremes
    /// (255 x -128 pairs that saturate 16 bits), odd `k`, rows and columns.
    #[test]
    fn sums_are_exact() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        for (m, k, n) in [
            (1, 1, 1),
            (3, 37, 21),
            (4, 300, 40),
            (5, 8, 16),
            (13, 64, 48),
            (7, 2, 33),
        ] {
            let av = |i: usize, kk: usize| {
                if (i + kk) % 3 == 0 {
                    255u8
                } else {
                    ((i * 7 + kk * 13) % 256) as u8
                }
            };
            let bv = |kk: usize, j: usize| {
                if (kk + j) % 4 == 0 {
                    -128i8
                } else {
                    ((kk * 5 + j * 11) % 256) as u8 as i8
                }
            };
            let b = PackedB::new(k, n, bv);
            let k4 = k_groups(k);
            let mut a = vec![0u8; m * k4];
            for i in 0..m {
                for kk in 0..k {
                    a[i * k4 + kk] = av(i, kk);
                }
            }
            let mut c = vec![0i32; m * n];
            let Some(wide) = Wide::new(&b, &(0..n.div_ceil(PANEL))) else {
                return; // a VNNI CPU packs no wide panels
            };
            wide.gemm(&a, m, &mut c, n);
            for i in 0..m {
                for j in 0..n {
                    let want: i32 = (0..k)
                        .map(|kk| i32::from(av(i, kk)) * i32::from(bv(kk, j)))
                        .sum();
                    assert_eq!(c[i * n + j], want, "{m}x{k}x{n} at ({i}, {j})");
                }
            }
        }
    }
}
