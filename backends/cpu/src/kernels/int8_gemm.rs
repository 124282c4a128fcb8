//! The 8-bit GEMM behind MatMulInteger: `C[i][j] = Σ_k A[i][k] · B[k][j]` in
//! i32, `A` unsigned and `B` signed bytes (the kernel maps other signs onto
//! these, [`super::matmul_integer`]). With AVX-512 VNNI, one `vpdpbusd`
//! multiplies 64 byte pairs and adds them in fours into 16 i32 lanes: `B` is
//! packed in panels of 16 columns with `k` in groups of 4 (64 bytes per
//! group and panel), each row of `A` is broadcast four bytes at a time, and
//! a tile of 8 rows x 32 columns stays in 16 registers over the whole `k`.
//! Without VNNI, a portable loop computes the same sums. Arithmetic wraps
//! (as i32 products of 8-bit values never do below 2^16 terms).

/// Columns per panel: one 512-bit register of i32.
pub const PANEL: usize = 16;
/// Rows per tile of the VNNI microkernel.
pub const TILE_ROWS: usize = 8;

/// `k` rounded up to the 4-byte groups `vpdpbusd` takes.
pub fn k_groups(k: usize) -> usize {
    k.div_ceil(4) * 4
}

/// `B` (k x n, signed bytes) packed for [`gemm`]: panels of [`PANEL`]
/// columns, each `[k_groups / 4][PANEL][4]` bytes, zero past `k` and `n`.
#[derive(Debug, Clone)]
pub struct PackedB {
    pub k: usize,
    pub n: usize,
    data: Vec<i8>,
    /// `Σ_k B[k][j]` per column.
    pub col_sums: Vec<i32>,
}

impl PackedB {
    /// Packs `b(kk, j)` for `kk < k`, `j < n`.
    pub fn new(k: usize, n: usize, b: impl Fn(usize, usize) -> i8) -> PackedB {
        let k4 = k_groups(k);
        let panels = n.div_ceil(PANEL);
        let mut data = vec![0i8; panels * k4 * PANEL];
        let mut col_sums = vec![0i32; n];
        for p in 0..panels {
            let panel = &mut data[p * k4 * PANEL..(p + 1) * k4 * PANEL];
            for kk in 0..k {
                for c in 0..PANEL.min(n - p * PANEL) {
                    let j = p * PANEL + c;
                    let v = b(kk, j);
                    panel[(kk / 4) * PANEL * 4 + c * 4 + kk % 4] = v;
                    col_sums[j] = col_sums[j].wrapping_add(i32::from(v));
                }
            }
        }
        PackedB {
            k,
            n,
            data,
            col_sums,
        }
    }

    fn panel(&self, p: usize) -> &[i8] {
        let len = k_groups(self.k) * PANEL;
        &self.data[p * len..(p + 1) * len]
    }

    /// `B[kk][j]`, read back from the panels.
    pub fn at(&self, kk: usize, j: usize) -> i8 {
        self.panel(j / PANEL)[(kk / 4) * PANEL * 4 + (j % PANEL) * 4 + kk % 4]
    }
}

/// Whether this CPU has AVX-512 VNNI (and the AVX-512 the kernels use).
pub fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::vmath::avx512() && std::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `C = A · B` for `m` rows of `a` (row `i` at `a[i * k_groups(b.k)..]`,
/// zero past `b.k`) into `c` (row stride `ldc`, at least `b.n` wide).
/// `use_vnni` must only be true where [`vnni`] is.
pub fn gemm(a: &[u8], m: usize, b: &PackedB, c: &mut [i32], ldc: usize, use_vnni: bool) {
    gemm_panels(a, m, b, 0..b.n.div_ceil(PANEL), c, ldc, use_vnni);
}

/// [`gemm`] for the columns of panels `panels` only: `c`'s column 0 is
/// the first panel's (a task's share of the columns, for splitting a
/// product over threads).
pub fn gemm_panels(
    a: &[u8],
    m: usize,
    b: &PackedB,
    panels: std::ops::Range<usize>,
    c: &mut [i32],
    ldc: usize,
    use_vnni: bool,
) {
    let k4 = k_groups(b.k);
    let width = (panels.end * PANEL)
        .min(b.n)
        .saturating_sub(panels.start * PANEL);
    assert!(
        panels.end <= b.n.div_ceil(PANEL)
            && a.len() >= m * k4
            && ldc >= width
            && (m == 0 || c.len() >= (m - 1) * ldc + width)
    );
    #[cfg(target_arch = "x86_64")]
    if use_vnni {
        // SAFETY: the caller checked `vnni()`; the slices hold `m` rows of
        // `k4` bytes and `m` rows of `ldc >= width` outputs (asserted above).
        unsafe { vnni_gemm(a, m, b, panels, c, ldc) };
        return;
    }
    let _ = use_vnni;
    portable(a, m, b, panels, c, ldc);
}

fn portable(
    a: &[u8],
    m: usize,
    b: &PackedB,
    panels: std::ops::Range<usize>,
    c: &mut [i32],
    ldc: usize,
) {
    let k4 = k_groups(b.k);
    let col0 = panels.start * PANEL;
    let width = (panels.end * PANEL).min(b.n) - col0;
    let mut row = vec![0i32; b.n];
    for i in 0..m {
        row.fill(0);
        let ai = &a[i * k4..i * k4 + b.k];
        for p in panels.clone() {
            let panel = b.panel(p);
            let cols = PANEL.min(b.n - p * PANEL);
            for (kk, &av) in ai.iter().enumerate() {
                let av = i32::from(av);
                let at = (kk / 4) * PANEL * 4 + kk % 4;
                for cc in 0..cols {
                    let j = p * PANEL + cc;
                    row[j] = row[j].wrapping_add(av.wrapping_mul(i32::from(panel[at + cc * 4])));
                }
            }
        }
        c[i * ldc..i * ldc + width].copy_from_slice(&row[col0..col0 + width]);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn vnni_gemm(
    a: &[u8],
    m: usize,
    b: &PackedB,
    range: std::ops::Range<usize>,
    c: &mut [i32],
    ldc: usize,
) {
    let panels = range.end;
    let mut i = 0;
    while i < m {
        let rows = TILE_ROWS.min(m - i);
        if rows < TILE_ROWS {
            // SAFETY: the rows lie inside `a` and `c`.
            unsafe { few_rows(a, i, rows, b, range, c, ldc) };
            break;
        }
        let mut p = range.start;
        while p < panels {
            let two = p + 1 < panels;
            // SAFETY: the tile's rows and panels lie inside `a`, `b` and `c`.
            unsafe {
                if two {
                    tile::<TILE_ROWS, 2>(a, i, b, p, range.start, c, ldc);
                } else {
                    tile::<TILE_ROWS, 1>(a, i, b, p, range.start, c, ldc);
                }
            }
            p += if two { 2 } else { 1 };
        }
        i += rows;
    }
}

/// Fewer than [`TILE_ROWS`] rows (a GEMV, as a recurrent step's): one row
/// at a time over eight panels at once, so that eight independent
/// `vpdpbusd` chains hide the instruction's latency.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn few_rows(
    a: &[u8],
    i: usize,
    rows: usize,
    b: &PackedB,
    range: std::ops::Range<usize>,
    c: &mut [i32],
    ldc: usize,
) {
    const WIDE: usize = 8;
    for r in i..i + rows {
        let mut p = range.start;
        // SAFETY: as for `tile`, one row.
        unsafe {
            while p + WIDE <= range.end {
                tile::<1, WIDE>(a, r, b, p, range.start, c, ldc);
                p += WIDE;
            }
            while p < range.end {
                tile::<1, 1>(a, r, b, p, range.start, c, ldc);
                p += 1;
            }
        }
    }
}

/// Rows `i..i + R` of `C`, columns of panels `p..p + P`; `c`'s column 0 is
/// panel `first`'s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tile<const R: usize, const P: usize>(
    a: &[u8],
    i: usize,
    b: &PackedB,
    p: usize,
    first: usize,
    c: &mut [i32],
    ldc: usize,
) {
    use std::arch::x86_64::*;
    let k4 = k_groups(b.k);
    let mut acc = [[_mm512_setzero_si512(); P]; R];
    let bp: [*const i8; P] = std::array::from_fn(|q| b.panel(p + q).as_ptr());
    let ap = a.as_ptr().add(i * k4);
    for g in 0..k4 / 4 {
        let bv: [__m512i; P] =
            std::array::from_fn(|q| _mm512_loadu_si512(bp[q].add(g * PANEL * 4) as *const _));
        for r in 0..R {
            let av = _mm512_set1_epi32((ap.add(r * k4 + g * 4) as *const i32).read_unaligned());
            for q in 0..P {
                acc[r][q] = _mm512_dpbusd_epi32(acc[r][q], av, bv[q]);
            }
        }
    }
    for q in 0..P {
        let j = (p + q) * PANEL;
        let cols = PANEL.min(b.n - j);
        let mask: __mmask16 = if cols == PANEL {
            !0
        } else {
            (1u16 << cols) - 1
        };
        for r in 0..R {
            let at = (i + r) * ldc + j - first * PANEL;
            _mm512_mask_storeu_epi32(c.as_mut_ptr().add(at), mask, acc[r][q]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(a: &[u8], m: usize, k: usize, b: &[i8], n: usize) -> Vec<i32> {
        let mut c = vec![0i32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|kk| a[i * k + kk] as i32 * b[kk * n + j] as i32)
                    .sum();
            }
        }
        c
    }

    #[test]
    fn both_paths_match_the_reference_on_ragged_shapes() {
        for (m, k, n) in [
            (1, 1, 1),
            (3, 5, 7),
            (8, 64, 32),
            (13, 37, 50),
            (17, 200, 16),
            (9, 4, 33),
        ] {
            let a: Vec<u8> = (0..m * k).map(|i| (i * 37 % 256) as u8).collect();
            let b: Vec<i8> = (0..k * n).map(|i| (i * 91 % 256) as u8 as i8).collect();
            let pb = PackedB::new(k, n, |kk, j| b[kk * n + j]);
            let k4 = k_groups(k);
            let mut ap = vec![0u8; m * k4];
            for i in 0..m {
                ap[i * k4..i * k4 + k].copy_from_slice(&a[i * k..(i + 1) * k]);
            }
            let want = reference(&a, m, k, &b, n);
            for use_vnni in [false, vnni()] {
                let mut c = vec![-1i32; m * n];
                gemm(&ap, m, &pb, &mut c, n, use_vnni);
                assert_eq!(c, want, "{m}x{k}x{n} vnni={use_vnni}");
                // Every panel range on its own: the columns of that range.
                let panels = n.div_ceil(PANEL);
                for (p0, p1) in [(0, 1), (1, panels), (panels / 2, panels)] {
                    if p0 >= p1 {
                        continue;
                    }
                    let (j0, j1) = (p0 * PANEL, (p1 * PANEL).min(n));
                    let mut part = vec![-1i32; m * (j1 - j0)];
                    gemm_panels(&ap, m, &pb, p0..p1, &mut part, j1 - j0, use_vnni);
                    for i in 0..m {
                        assert_eq!(
                            part[i * (j1 - j0)..(i + 1) * (j1 - j0)],
                            want[i * n + j0..i * n + j1],
                            "{m}x{k}x{n} panels {p0}..{p1} vnni={use_vnni}"
                        );
                    }
                }
            }
            for j in 0..n {
                let s: i32 = (0..k).map(|kk| b[kk * n + j] as i32).sum();
                assert_eq!(pb.col_sums[j], s);
                assert_eq!(pb.at(k - 1, j), b[(k - 1) * n + j]);
            }
        }
    }
}
