//! The 8-bit GEMM on AVX2 (CPUs without AVX-512 VNNI): the same packed
//! panels as [`super::int8_gemm`], sums exact as the VNNI path's. Each
//! group of 4 `k` of 8 columns (32 bytes of a panel) is widened to i16 and
//! multiplied by the row's 4 bytes with `vpmaddwd`, which adds pairs into
//! i32 lanes without saturating (`vpmaddubsw` on the bytes themselves
//! would saturate at 2^15, as ONNX Runtime's AVX2 path does); two rows at a
//! time share each widened panel. The pairs are added once, at the end.

use super::int8_gemm::{k_groups, PackedB, PANEL};

/// Raw sums `C[i][j] = Σ_k A[i][k]·B[k][j]` for `m` rows of `a` (each
/// `k_groups(b.k)` bytes, zero past `k`) and the columns of `panels`, into
/// `c` (its column 0 is the first panel's, rows `ldc` apart, at least the
/// panels' width of `n` wide).
///
/// # Safety
/// The CPU has AVX2; `a` holds `m` rows; `c` holds `m` rows of the panels'
/// width at stride `ldc` (the caller checks both).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub unsafe fn gemm(
    a: &[u8],
    m: usize,
    b: &PackedB,
    panels: std::ops::Range<usize>,
    c: &mut [i32],
    ldc: usize,
) {
    use std::arch::x86_64::*;
    let k4 = k_groups(b.k);
    let groups = k4 / 4;
    let col0 = panels.start * PANEL;
    let mut i = 0;
    while i < m {
        let two = i + 1 < m;
        let r0 = &a[i * k4..(i + 1) * k4];
        let r1 = if two {
            &a[(i + 1) * k4..(i + 2) * k4]
        } else {
            r0
        };
        for p in panels.clone() {
            let panel = b.panel(p);
            // [row][8-column half][low/high 4 columns]
            let mut acc = [[[_mm256_setzero_si256(); 2]; 2]; 2];
            for g in 0..groups {
                let (x0, x1) = (row4(r0, g), row4(r1, g));
                for (h, half) in panel[g * 64..g * 64 + 64].chunks_exact(32).enumerate() {
                    let bytes = _mm256_loadu_si256(half.as_ptr().cast());
                    let lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(bytes));
                    let hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(bytes));
                    acc[0][h][0] = _mm256_add_epi32(acc[0][h][0], _mm256_madd_epi16(x0, lo));
                    acc[0][h][1] = _mm256_add_epi32(acc[0][h][1], _mm256_madd_epi16(x0, hi));
                    acc[1][h][0] = _mm256_add_epi32(acc[1][h][0], _mm256_madd_epi16(x1, lo));
                    acc[1][h][1] = _mm256_add_epi32(acc[1][h][1], _mm256_madd_epi16(x1, hi));
                }
            }
            let j0 = p * PANEL - col0;
            let cols = PANEL.min(b.n - p * PANEL);
            for (r, rows) in acc.iter().enumerate().take(1 + usize::from(two)) {
                let mut out = [0i32; PANEL];
                for (h, pair) in rows.iter().enumerate() {
                    let v = finish(pair[0], pair[1]);
                    _mm256_storeu_si256(out[h * 8..].as_mut_ptr().cast(), v);
                }
                let at = (i + r) * ldc + j0;
                c[at..at + cols].copy_from_slice(&out[..cols]);
            }
        }
        i += 2;
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
        for (m, k, n) in [(1, 1, 1), (3, 37, 21), (4, 300, 40), (5, 8, 16)] {
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
            // SAFETY: AVX2 is present; the operands have the sizes above.
            unsafe { gemm(&a, m, &b, 0..n.div_ceil(PANEL), &mut c, n) };
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
