//! f32 GEMM against a constant left operand packed once, when the kernel is
//! built: `C[m×n] = act(bias + A[m×k] · B[k×n])`, with `A` a layer's weights
//! (convolution filters), `B` the activations and `C` row-major.
//!
//! The loop nest is the BLIS one. Per block of `NC` columns and `KC` rows of `k`,
//! `B` is packed into panels of `NR` columns (a thread-local buffer, reused from
//! run to run); per block of `MC` rows, each `NR`-column panel stays in L1 while
//! the microkernel sweeps the `MR`-row panels of `A` past it. Bias and ReLU are
//! applied while the last `k` block is stored, so the output is written once.
//!
//! The microkernel is AVX-512 (`MR`×`NR` = 14×32, 28 accumulators). On a CPU
//! without AVX-512 [`PackedA::new`] returns `None` and callers use the `gemm`
//! crate.

use std::cell::RefCell;

use rayon::prelude::*;

/// Rows of `A` per microkernel call.
pub const MR: usize = 14;
/// Columns of `B` per microkernel call.
pub const NR: usize = 32;
/// Depth of one packed block: a 32×256 panel of `B` is 32 KiB, within L1.
const KC: usize = 256;
/// Rows of `A` per block: 224×256 floats (224 KiB) stay in L2.
const MC: usize = MR * 16;
/// Columns of `B` per packed block: 256×384 floats (384 KiB) stay in L2.
const NC: usize = NR * 12;

/// `A` (m×k) in `MR`-row panels, block by block of `KC`: within block `kb`,
/// panel `p` holds `a[p*MR + i, kb*KC + t]` at `t*MR + i`, zero past row `m`.
#[derive(Debug, Clone)]
pub struct PackedA {
    m: usize,
    k: usize,
    data: Vec<f32>,
}

impl PackedA {
    /// Packs row-major `a` (m×k, row stride `lda`); `None` when this CPU has no
    /// AVX-512 microkernel.
    pub fn new(a: &[f32], m: usize, k: usize, lda: usize) -> Option<PackedA> {
        if !available() || m == 0 || k == 0 || a.len() < (m - 1) * lda + k {
            return None;
        }
        let panels = m.div_ceil(MR);
        let mut data = vec![0f32; panels * MR * k];
        for kb in 0..k.div_ceil(KC) {
            let (k0, kc) = (kb * KC, KC.min(k - kb * KC));
            let block = &mut data[k0 * panels * MR..(k0 + kc) * panels * MR];
            for (p, panel) in block.chunks_mut(kc * MR).enumerate() {
                for i in 0..MR.min(m - p * MR) {
                    let row = &a[(p * MR + i) * lda + k0..(p * MR + i) * lda + k0 + kc];
                    for (t, v) in row.iter().enumerate() {
                        panel[t * MR + i] = *v;
                    }
                }
            }
        }
        Some(PackedA { m, k, data })
    }

    pub fn rows(&self) -> usize {
        self.m
    }

    pub fn depth(&self) -> usize {
        self.k
    }

    /// Panel `p` of block `kb` (its depth is `kc`).
    fn panel(&self, kb: usize, p: usize, kc: usize) -> &[f32] {
        let panels = self.m.div_ceil(MR);
        let start = kb * KC * panels * MR + p * kc * MR;
        &self.data[start..start + kc * MR]
    }
}

/// True when the AVX-512 microkernel runs on this CPU.
pub fn available() -> bool {
    super::vmath::avx512()
}

/// What is applied to `C` around the product.
#[derive(Debug, Clone, Copy, Default)]
pub struct Epilogue<'a> {
    /// Added to every element of row `i` (length at least `m`).
    pub bias: Option<&'a [f32]>,
    /// `max(0, ·)` on the result.
    pub relu: bool,
}

/// Where the microkernel's right operand (k×n) comes from.
#[derive(Clone, Copy)]
pub enum B<'a> {
    /// Row-major with row stride `ldb`.
    Rows { b: &'a [f32], ldb: usize },
    /// Computed row by row: `f(row, j0, dst)` fills columns `j0..j0 + dst.len()`
    /// of `row` (an im2col matrix that is never stored whole).
    Fill(&'a (dyn Fn(usize, usize, &mut [f32]) + Sync)),
}

/// `c[m×n] = relu?(bias + a · b)`, `c` row-major with row stride `ldc`.
/// Threads: [`crate::par::threads`].
pub fn gemm(a: &PackedA, b: B, n: usize, c: &mut [f32], ldc: usize, ep: Epilogue) {
    let (m, k) = (a.m, a.k);
    if n == 0 {
        return;
    }
    assert!(
        c.len() >= (m - 1) * ldc + n
            && ep.bias.is_none_or(|v| v.len() >= m)
            && match b {
                B::Rows { b, ldb } => b.len() >= (k - 1) * ldb + n,
                B::Fill(_) => true,
            },
        "packed gemm operand too small"
    );
    // Split the columns over threads in NR multiples; a thin product splits rows.
    let threads = crate::par::threads();
    let flops = m * n * k;
    let tasks = if flops < 1 << 20 {
        1
    } else {
        threads.min(flops >> 19).max(1)
    };
    let col_tasks = tasks.min(n.div_ceil(NR)).max(1);
    let row_tasks = (tasks / col_tasks).clamp(1, m.div_ceil(MR));
    let cols_per = n.div_ceil(NR).div_ceil(col_tasks) * NR;
    let rows_per = m.div_ceil(MR).div_ceil(row_tasks) * MR;
    let out = SharedOut(c.as_mut_ptr());
    let run = |t: usize| {
        let (rt, ct) = (t / col_tasks, t % col_tasks);
        let (r0, j0) = (rt * rows_per, ct * cols_per);
        if r0 >= m || j0 >= n {
            return;
        }
        let (r1, j1) = ((r0 + rows_per).min(m), (j0 + cols_per).min(n));
        // SAFETY: tasks write disjoint (row, column) rectangles of `c`, each
        // inside the bounds asserted above.
        unsafe { block(a, b, out.get(), ldc, (r0, r1), (j0, j1), ep) };
    };
    if row_tasks * col_tasks == 1 {
        run(0);
    } else {
        (0..row_tasks * col_tasks).into_par_iter().for_each(run);
    }
}

/// The output pointer shared by tasks writing disjoint tiles.
struct SharedOut(*mut f32);
// SAFETY: only used for disjoint writes (see `gemm`).
unsafe impl Sync for SharedOut {}
impl SharedOut {
    fn get(&self) -> *mut f32 {
        self.0
    }
}

thread_local! {
    /// Packed `B` of this thread: KC×NC floats and room to align them, then
    /// one row of NC for `B::Fill`.
    static PACKED_B: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Rows `r0..r1` (multiples of MR but the end) and columns `j0..j1` of `c`.
///
/// # Safety
/// `c` with `ldc` must be valid for writes over the rectangle; `b` must cover
/// `k` rows up to column `j1`.
unsafe fn block(
    a: &PackedA,
    b: B,
    c: *mut f32,
    ldc: usize,
    (r0, r1): (usize, usize),
    (j0, j1): (usize, usize),
    ep: Epilogue,
) {
    let k = a.k;
    let kblocks = k.div_ceil(KC);
    PACKED_B.with_borrow_mut(|buf| {
        if buf.len() < KC * NC + NC + 16 {
            buf.resize(KC * NC + NC + 16, 0.0);
        }
        let off = buf.as_ptr().align_offset(64).min(15);
        let (packed, row) = buf[off..].split_at_mut(KC * NC);
        let mut jc = j0;
        while jc < j1 {
            let nc = NC.min(j1 - jc);
            for kb in 0..kblocks {
                let (k0, kc) = (kb * KC, KC.min(k - kb * KC));
                pack_b(b, k0, kc, jc, nc, packed, &mut row[..nc]);
                let (first, last) = (kb == 0, kb + 1 == kblocks);
                let mut ic = r0;
                while ic < r1 {
                    let mc = MC.min(r1 - ic);
                    for jr in (0..nc).step_by(NR) {
                        let bp = &packed[jr * kc..(jr + NR) * kc];
                        for ir in (0..mc).step_by(MR) {
                            let row = ic + ir;
                            let rows = MR.min(r1 - row);
                            let ap = a.panel(kb, row / MR, kc);
                            let tile = Tile {
                                c: c.add(row * ldc + jc + jr),
                                ldc,
                                rows,
                                cols: NR.min(nc - jr),
                                load_c: !first,
                                bias: if first {
                                    ep.bias.map(|v| v[row..].as_ptr())
                                } else {
                                    None
                                },
                                relu: last && ep.relu,
                            };
                            microkernel(kc, ap, bp, &tile);
                        }
                    }
                    ic += mc;
                }
            }
            jc += nc;
        }
    });
}

/// Copies rows `k0..k0+kc` and columns `j0..j0+nc` of `b` into `NR`-column
/// panels, zero past column `nc`; `row` is room for one row of a `B::Fill`.
fn pack_b(b: B, k0: usize, kc: usize, j0: usize, nc: usize, packed: &mut [f32], row: &mut [f32]) {
    for t in 0..kc {
        let src: &[f32] = match b {
            B::Rows { b, ldb } => &b[(k0 + t) * ldb + j0..(k0 + t) * ldb + j0 + nc],
            B::Fill(f) => {
                f(k0 + t, j0, row);
                row
            }
        };
        for (jr, chunk) in src.chunks(NR).enumerate() {
            let dst = &mut packed[(jr * kc + t) * NR..(jr * kc + t + 1) * NR];
            dst[..chunk.len()].copy_from_slice(chunk);
            dst[chunk.len()..].fill(0.0);
        }
    }
}

/// One `MR`×`NR` tile of `C`.
struct Tile {
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    /// Add the tile's current contents (a later `k` block).
    load_c: bool,
    /// Bias of the tile's first row, broadcast along its row (the first `k` block).
    bias: Option<*const f32>,
    relu: bool,
}

/// `tile (+)= a_panel · b_panel` over depth `kc`.
///
/// # Safety
/// `tile.c` is valid for `rows` rows of `cols` elements at stride `ldc`;
/// `bias`, when set, for `rows` elements.
unsafe fn microkernel(kc: usize, a: &[f32], b: &[f32], tile: &Tile) {
    debug_assert!(a.len() >= kc * MR && b.len() >= kc * NR);
    #[cfg(target_arch = "x86_64")]
    avx512::kernel(kc, a.as_ptr(), b.as_ptr(), tile);
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("PackedA::new refuses CPUs without the microkernel");
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{Tile, MR, NR};

    /// # Safety
    /// AVX-512F is present (checked by `PackedA::new`); `a` holds `kc*MR` and
    /// `b` `kc*NR` floats; the tile is valid as `microkernel` requires.
    #[target_feature(enable = "avx512f,fma")]
    pub unsafe fn kernel(kc: usize, a: *const f32, b: *const f32, t: &Tile) {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        let lo = mask(t.cols);
        let hi = mask(t.cols.saturating_sub(16));
        for (i, row) in acc.iter_mut().enumerate() {
            if i < t.rows {
                if let Some(bias) = t.bias {
                    let v = _mm512_set1_ps(*bias.add(i));
                    *row = [v, v];
                }
                if t.load_c {
                    let c = t.c.add(i * t.ldc);
                    row[0] = _mm512_add_ps(row[0], _mm512_maskz_loadu_ps(lo, c));
                    row[1] = _mm512_add_ps(row[1], _mm512_maskz_loadu_ps(hi, c.add(16)));
                }
            }
        }
        for p in 0..kc {
            let b0 = _mm512_loadu_ps(b.add(p * NR));
            let b1 = _mm512_loadu_ps(b.add(p * NR + 16));
            let ap = a.add(p * MR);
            for (i, row) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(i));
                row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                row[1] = _mm512_fmadd_ps(av, b1, row[1]);
            }
        }
        let zero = _mm512_setzero_ps();
        for (i, row) in acc.iter().enumerate() {
            if i < t.rows {
                let (mut v0, mut v1) = (row[0], row[1]);
                if t.relu {
                    v0 = _mm512_max_ps(v0, zero);
                    v1 = _mm512_max_ps(v1, zero);
                }
                let c = t.c.add(i * t.ldc);
                _mm512_mask_storeu_ps(c, lo, v0);
                _mm512_mask_storeu_ps(c.add(16), hi, v1);
            }
        }
    }

    /// The first `n` of 16 lanes.
    fn mask(n: usize) -> __mmask16 {
        if n >= 16 {
            0xffff
        } else {
            ((1u32 << n) - 1) as __mmask16
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, n: usize, k: usize, bias: &[f32]) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let s: f64 = (0..k)
                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                    .sum();
                c[i * n + j] = s as f32 + bias[i];
            }
        }
        c
    }

    #[test]
    fn matches_naive_on_every_edge() {
        if !available() {
            return;
        }
        for (m, n, k) in [
            (1, 1, 1),
            (14, 32, 256),
            (15, 33, 257),
            (29, 100, 600),
            (3, 700, 5),
            (64, 49, 1152),
        ] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.5)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.5)
                .collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 - 3.0).collect();
            let want = naive(&a, &b, m, n, k, &bias);
            let pa = PackedA::new(&a, m, k, k).unwrap();
            // Wider ldc: the columns past n must stay untouched.
            let mut c = vec![7f32; m * (n + 3)];
            let ep = Epilogue {
                bias: Some(&bias),
                relu: false,
            };
            gemm(&pa, B::Rows { b: &b, ldb: n }, n, &mut c, n + 3, ep);
            for i in 0..m {
                for j in 0..n {
                    let (got, w) = (c[i * (n + 3) + j], want[i * n + j]);
                    assert!(
                        (got - w).abs() <= 1e-3 * w.abs().max(1.0),
                        "{m}x{n}x{k} at ({i},{j}): {got} vs {w}"
                    );
                }
                assert!(c[i * (n + 3) + n..(i + 1) * (n + 3)]
                    .iter()
                    .all(|v| *v == 7.0));
            }
            let mut r = vec![0f32; m * n];
            let fill = |row: usize, j0: usize, dst: &mut [f32]| {
                let len = dst.len();
                dst.copy_from_slice(&b[row * n + j0..row * n + j0 + len])
            };
            let ep = Epilogue {
                bias: Some(&bias),
                relu: true,
            };
            gemm(&pa, B::Fill(&fill), n, &mut r, n, ep);
            assert!(r
                .iter()
                .zip(&want)
                .all(|(g, w)| (g - w.max(0.0)).abs() <= 1e-3 * w.abs().max(1.0)));
        }
    }
}
