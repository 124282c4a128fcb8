//! The 8-bit GEMM on AMX (Intel's tile registers, from Sapphire Rapids):
//! `tdpbusd` multiplies a 16x64 tile of unsigned bytes by a 64x16 tile of
//! signed ones into a 16x16 tile of i32, 16 384 multiply-adds an
//! instruction where `vpdpbusd` does 64. ONNX Runtime takes it where the
//! CPU has it: on such a Xeon, a dynamically quantized 128-token FFN ran in
//! 2.0x ONNX Runtime's time on the VNNI path.
//!
//! A block is 32 rows by two panels (32 columns): four accumulator tiles,
//! two of `A` and two of `B` per 64 bytes of `k`. `B`'s panels are the
//! VNNI layout as they are ([`PackedB`]: a row of 64 bytes per group of
//! four `k`, which is the tile layout `tdpbusd` reads), padded to 64 `k`;
//! `A`'s rows are copied into a buffer padded to 64 bytes and 32 rows. The
//! sums leave the tiles through a block of memory and are finished by the
//! VNNI path's epilogue ([`Finish`]).
//!
//! Linux gives a process the tile registers' state only when it asks
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`); [`available`]
//! asks once, and a CPU or kernel that refuses keeps the VNNI path.

use std::arch::asm;
use std::arch::x86_64::*;
use std::sync::OnceLock;

use super::int8_gemm::{Epilogue, Finish, PackedB, PANEL};

/// Rows of a block: two tiles of 16.
const ROWS: usize = 32;
/// Bytes of `k` a tile covers.
const KT: usize = 64;

/// Whether this CPU has AMX with 8-bit products and the OS lets this
/// process use it (asked once).
pub fn available() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let leaf7 = __cpuid_count(7, 0);
        let tile = leaf7.edx & (1 << 24) != 0;
        let int8 = leaf7.edx & (1 << 25) != 0;
        tile && int8 && super::int8_gemm::vnni() && permitted()
    })
}

/// Asks Linux for the tile data state (`ARCH_REQ_XCOMP_PERM`,
/// `XFEATURE_XTILEDATA`).
#[cfg(target_os = "linux")]
fn permitted() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: arch_prctl with this request only changes what the kernel
    // saves on context switches for this process.
    unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn permitted() -> bool {
    false
}

/// `ldtilecfg`'s 64 bytes: palette 1, each tile 16 rows of 64 bytes.
#[repr(C, align(64))]
struct Config {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

impl Config {
    fn full() -> Config {
        let mut c = Config {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        for t in 0..8 {
            c.colsb[t] = 64;
            c.rows[t] = 16;
        }
        c
    }
}

/// A panel's worth of zero bytes: the second `B` tile where a range has an
/// odd number of panels.
static ZERO_PANEL: [i8; 16 * KT] = [0; 16 * KT];

/// Scratch a thread takes in a [`gemm`] of at most `m` rows of depth `k`
/// ([`crate::scratch`]): `A` padded for the tiles; none where this CPU has
/// no AMX.
pub fn scratch(m: usize, k: usize) -> usize {
    match available() {
        true => crate::scratch::bytes_bytes(m.div_ceil(ROWS) * ROWS * k.div_ceil(KT) * KT),
        false => 0,
    }
}

/// `A·B` over panels `range` of `b` for `m` rows of `a` (`k4` bytes each,
/// zero past `b.k`), finished by `epi`, into `c` (its column 0 panel
/// `range.start`'s, rows `ldc` apart).
///
/// # Safety
/// [`available`] holds; `a` holds `m` rows of `k4`; `c` is valid for writes
/// of `m` rows of the range's columns at stride `ldc`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vnni,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm(
    a: &[u8],
    m: usize,
    k4: usize,
    b: &PackedB,
    range: std::ops::Range<usize>,
    c: *mut i32,
    ldc: usize,
    epi: Option<&Epilogue>,
) {
    let k64 = b.k.div_ceil(KT) * KT;
    debug_assert!(b.panel(range.start).len() >= k64 * PANEL);
    let blocks = m.div_ceil(ROWS);
    // `A` in rows of `k64` bytes, zero past `k` and past row `m`; the
    // caller's rows as they are where they are that already (their last
    // block still copied: its tiles read 32 rows).
    let in_place = k4 == k64;
    let first = if in_place { m / ROWS * ROWS } else { 0 };
    crate::scratch::bytes((blocks * ROWS - first) * k64, |pa| {
        for (r, dst) in pa.chunks_exact_mut(k64).enumerate() {
            match a.chunks_exact(k4).nth(first + r) {
                Some(src) if first + r < m => {
                    dst[..k4].copy_from_slice(src);
                    dst[k4..].fill(0);
                }
                _ => dst.fill(0),
            }
        }
        let block = |blk: usize| {
            if blk * ROWS < first {
                a[blk * ROWS * k4..].as_ptr()
            } else {
                pa[(blk * ROWS - first) * k64..].as_ptr()
            }
        };
        // SAFETY: as the caller promises; each block's 32 rows of `k64`
        // lie in `a` or `pa`.
        unsafe { products(&block, blocks, m, k64, b, range, c, ldc, epi) };
    });
}

/// The blocks' products: `block(i)` is row `32 i` of `A` in rows of `k64`.
///
/// # Safety
/// As [`gemm`]; every block holds 32 rows of `k64` bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vnni,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn products(
    block: &dyn Fn(usize) -> *const u8,
    blocks: usize,
    m: usize,
    k64: usize,
    b: &PackedB,
    range: std::ops::Range<usize>,
    c: *mut i32,
    ldc: usize,
    epi: Option<&Epilogue>,
) {
    let cfg = Config::full();
    let mut out = Out([[0; 2 * PANEL]; ROWS]);
    // SAFETY: the configuration is valid for palette 1.
    unsafe { asm!("ldtilecfg [{}]", in(reg) &cfg, options(nostack, readonly)) };
    let mut p = range.start;
    while p < range.end {
        let two = p + 1 < range.end;
        let b0 = b.panel(p).as_ptr();
        let b1 = if two {
            b.panel(p + 1).as_ptr()
        } else {
            ZERO_PANEL.as_ptr()
        };
        // The zero panel is one tile: its tiles all start at 0.
        let b1_step = if two { 16 * KT } else { 0 };
        for blk in 0..blocks {
            let a0 = block(blk);
            let a1 = a0.add(16 * k64);
            // SAFETY: every tile load reads 16 rows of 64 bytes inside a
            // block (rows of `k64`) or a padded panel (groups of 64 bytes, `k64 /
            // 4` of them); the stores write `out`'s 32 rows of 128 bytes.
            unsafe {
                asm!(
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tilezero tmm2",
                    "tilezero tmm3",
                    options(nostack, nomem)
                );
                let mut kk = 0;
                while kk < k64 {
                    asm!(
                        "tileloadd tmm4, [{a0} + {lda} * 1]",
                        "tileloadd tmm5, [{a1} + {lda} * 1]",
                        "tileloadd tmm6, [{b0} + {ldb} * 1]",
                        "tileloadd tmm7, [{b1} + {ldb} * 1]",
                        "tdpbusd tmm0, tmm4, tmm6",
                        "tdpbusd tmm1, tmm4, tmm7",
                        "tdpbusd tmm2, tmm5, tmm6",
                        "tdpbusd tmm3, tmm5, tmm7",
                        a0 = in(reg) a0.add(kk),
                        a1 = in(reg) a1.add(kk),
                        b0 = in(reg) b0.add(kk * PANEL),
                        b1 = in(reg) b1.add(kk / KT * b1_step),
                        lda = in(reg) k64,
                        ldb = in(reg) KT,
                        options(nostack, readonly)
                    );
                    kk += KT;
                }
                let o = out.0.as_mut_ptr() as *mut i32;
                asm!(
                    "tilestored [{o0} + {ldo} * 1], tmm0",
                    "tilestored [{o1} + {ldo} * 1], tmm1",
                    "tilestored [{o2} + {ldo} * 1], tmm2",
                    "tilestored [{o3} + {ldo} * 1], tmm3",
                    o0 = in(reg) o,
                    o1 = in(reg) o.add(PANEL),
                    o2 = in(reg) o.add(16 * 2 * PANEL),
                    o3 = in(reg) o.add(16 * 2 * PANEL + PANEL),
                    ldo = in(reg) 2 * PANEL * 4,
                    options(nostack)
                );
            }
            let row0 = blk * ROWS;
            for q in 0..if two { 2 } else { 1 } {
                let j = (p + q) * PANEL;
                let cols = PANEL.min(b.n - j);
                let mask: __mmask16 = if cols == PANEL {
                    !0
                } else {
                    (1u16 << cols) - 1
                };
                let finish = Finish::new(epi, j, mask);
                for r in 0..ROWS.min(m - row0) {
                    let sums = _mm512_loadu_si512(out.0[r][q * PANEL..].as_ptr() as *const _);
                    let at = c.add((row0 + r) * ldc + j - range.start * PANEL);
                    finish.store(sums, row0 + r, at);
                }
            }
        }
        p += if two { 2 } else { 1 };
    }
    // SAFETY: releases the tile state this call configured.
    unsafe { asm!("tilerelease", options(nostack, nomem)) };
}

/// A block's sums as they leave the tiles.
#[repr(C, align(64))]
struct Out([[i32; 2 * PANEL]; ROWS]);

#[cfg(test)]
mod tests {
    use rlx_ir::ops::Activation;

    use super::*;
    use crate::kernels::int8_gemm::{k_groups, FloatOut};

    /// AMX against the sums by definition, raw and finished (zero points,
    /// scale, bias, ReLU), on shapes with ragged rows, columns and depth.
    #[test]
    fn tiles_match_the_definition() {
        if !available() {
            eprintln!("no AMX here: skipped");
            return;
        }
        // Depths of a multiple of 64 read full blocks of rows in place.
        for (m, k, n) in [
            (16, 64, 16),
            (17, 5, 33),
            (40, 200, 50),
            (70, 1000, 16),
            (33, 130, 96),
            (64, 128, 48),
            (80, 192, 16),
        ] {
            let a: Vec<u8> = (0..m * k).map(|i| (i * 37 % 256) as u8).collect();
            let bv: Vec<i8> = (0..k * n).map(|i| (i * 91 % 256) as u8 as i8).collect();
            let b = PackedB::new(k, n, |kk, j| bv[kk * n + j]);
            let k4 = k_groups(k);
            let mut ap = vec![0u8; m * k4];
            for i in 0..m {
                ap[i * k4..i * k4 + k].copy_from_slice(&a[i * k..(i + 1) * k]);
            }
            let sum = |i: usize, j: usize| -> i32 {
                (0..k)
                    .map(|kk| i32::from(a[i * k + kk]) * i32::from(bv[kk * n + j]))
                    .sum()
            };
            let panels = n.div_ceil(PANEL);
            let mut c = vec![-1i32; m * n];
            // SAFETY: AMX is available; `ap` holds m rows of k4; `c` m rows of n.
            unsafe { gemm(&ap, m, k4, &b, 0..panels, c.as_mut_ptr(), n, None) };
            for i in 0..m {
                for j in 0..n {
                    assert_eq!(c[i * n + j], sum(i, j), "{m}x{k}x{n} at {i},{j}");
                }
            }
            // Finished: za per row, zb per column, f32 out with ReLU.
            let za: Vec<i32> = (0..m).map(|i| (i % 7) as i32).collect();
            let zb: Vec<i32> = (0..n).map(|j| (j % 5) as i32 - 2).collect();
            let row_sums: Vec<i32> = (0..m)
                .map(|i| a[i * k..(i + 1) * k].iter().map(|&v| i32::from(v)).sum())
                .collect();
            let col_terms: Vec<i32> = (0..n).map(|j| b.col_sums[j] - k as i32 * zb[j]).collect();
            let scale: Vec<f32> = (0..n).map(|j| 0.001 * (j + 1) as f32).collect();
            let bias: Vec<f32> = (0..n).map(|j| j as f32 - 20.0).collect();
            let epi = Epilogue {
                za: &za,
                row_sums: &row_sums,
                col_terms: &col_terms,
                zb: &zb,
                float: Some(FloatOut {
                    scale: &scale,
                    bias: Some(&bias),
                    act: Activation::Relu,
                }),
            };
            // Two halves of the panels, as tasks take them.
            let mut got = vec![0i32; m * n];
            let half = panels / 2;
            for range in [0..half, half..panels] {
                if range.is_empty() {
                    continue;
                }
                let at = got[range.start * PANEL..].as_mut_ptr();
                // SAFETY: as above, the range's columns of m rows of n.
                unsafe { gemm(&ap, m, k4, &b, range, at, n, Some(&epi)) };
            }
            let mut want: Vec<i32> = (0..m * n).map(|x| sum(x / n, x % n)).collect();
            epi.finish_rows(m, &mut want, n, 0, n);
            assert_eq!(got, want, "{m}x{k}x{n} finished");
        }
    }
}
