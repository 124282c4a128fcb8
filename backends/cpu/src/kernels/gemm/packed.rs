//! f32 GEMM against a constant left operand packed once, when the kernel is
//! built: `C[m×n] = act(bias + A[m×k] · B[k×n] + residual)`, with `A` a
//! layer's weights (convolution filters), `B` the activations and `C`
//! row-major.
//!
//! The loop nest is the BLIS one. Per block of `NC` columns and `KC` rows of `k`,
//! `B` is packed into panels of `NR` columns (a thread-local buffer, reused from
//! run to run), unless its rows are read in place ([`B::InPlace`]); per block
//! of rows, each `NR`-column panel stays in L1 while the microkernel
//! ([`super::microkernel`], AVX-512 or AVX2, `MR`×`NR` tiles of a [`Shape`]
//! chosen when `A` is packed) sweeps the `MR`-row panels of `A` past it. The bias starts the first `k` block; the residual
//! and the activation are applied as the last one is stored, so the output
//! is written once per `k` block.
//!
//! On a CPU without AVX2 and FMA [`PackedA::new`] returns `None` and
//! callers use the `gemm` crate.

use rlx_ir::ops::Activation;

pub use super::microkernel::Shape;
use super::microkernel::{self, AlignedBuf, Half, InPlace, Packed, Store, Tile};
use crate::par::Disjoint;

/// Depth of one packed block, at most: a 32×256 panel of `B` is 32 KiB,
/// within L1. A product's depth is split into blocks of equal depth.
pub const KC: usize = 256;
/// Row panels of `A` per block: 16 panels of 14×256 floats (224 KiB) stay in L2.
const MC_PANELS: usize = 16;
/// Columns of `B` per packed block: 256×384 floats (384 KiB) stay in L2.
const NC: usize = 384;

/// `A` (m×k) in `MR`-row panels, block by block of depth `kc`: within block
/// `kb`, panel `p` holds `a[p*MR + i, kb*kc + t]` at `t*MR + i`, zero past
/// row `m`.
#[derive(Debug, Clone)]
pub struct PackedA {
    m: usize,
    k: usize,
    /// Depth of every block but the last (which may be shallower).
    kc: usize,
    shape: Shape,
    data: AlignedBuf,
}

impl PackedA {
    /// Packs row-major `a` (m×k, row stride `lda`) for the microkernel of
    /// `shape`; `None` when this CPU does not run `shape`'s kernels.
    pub fn new(a: &[f32], m: usize, k: usize, lda: usize, shape: Shape) -> Option<PackedA> {
        PackedA::with_depth(a, (m, k, lda), shape, KC)
    }

    /// [`PackedA::new`] with depth blocks of at most `kc_max`.
    pub fn with_depth(
        a: &[f32],
        (m, k, lda): (usize, usize, usize),
        shape: Shape,
        kc_max: usize,
    ) -> Option<PackedA> {
        if !shape.runs_here()
            || !Shape::AVX512.contains(&shape) && !Shape::AVX2.contains(&shape)
            || m == 0
            || k == 0
            || a.len() < (m - 1) * lda + k
        {
            return None;
        }
        let mr = shape.mr;
        let panels = m.div_ceil(mr);
        let mut data = AlignedBuf::zeroed(panels * mr * k);
        let kc_max = kc_max.max(1);
        let blocks = k.div_ceil(kc_max);
        let depth = k.div_ceil(blocks);
        let me = PackedA {
            m,
            k,
            kc: depth,
            shape,
            data: AlignedBuf::default(),
        };
        for kb in 0..blocks {
            let (k0, kc) = me.block(kb);
            let block = &mut data.as_mut_slice()[k0 * panels * mr..(k0 + kc) * panels * mr];
            for (p, panel) in block.chunks_mut(kc * mr).enumerate() {
                for i in 0..mr.min(m - p * mr) {
                    let row = &a[(p * mr + i) * lda + k0..(p * mr + i) * lda + k0 + kc];
                    for (t, v) in row.iter().enumerate() {
                        panel[t * mr + i] = *v;
                    }
                }
            }
        }
        Some(PackedA { data, ..me })
    }

    /// Depth blocks.
    fn blocks(&self) -> usize {
        self.k.div_ceil(self.kc)
    }

    /// First step and depth of block `kb`.
    fn block(&self, kb: usize) -> (usize, usize) {
        let k0 = kb * self.kc;
        (k0, self.kc.min(self.k - k0))
    }

    pub fn rows(&self) -> usize {
        self.m
    }

    /// Scratch a thread takes in a product over these weights
    /// ([`crate::scratch`]): `B` packed, kc×NC floats, then one row of NC
    /// for `B::Fill`.
    pub fn per_thread(&self) -> usize {
        crate::scratch::floats_bytes(self.kc * NC + NC)
    }

    pub fn depth(&self) -> usize {
        self.k
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Panel `p` of block `kb` (its depth is `kc`).
    fn panel(&self, kb: usize, p: usize, kc: usize) -> Packed {
        let mr = self.shape.mr;
        let panels = self.m.div_ceil(mr);
        let start = kb * self.kc * panels * mr + p * kc * mr;
        Packed {
            ptr: self.data.as_slice()[start..start + kc * mr].as_ptr(),
            width: mr,
        }
    }
}

impl Shape {
    /// The shape of this CPU's family ([`Shape::all`]) that wastes the
    /// least on an `m`×`n` product: padding rows to a multiple of `mr` and
    /// columns to one of `nr`, weighed by how fast each kernel runs (the
    /// 14×32 one fastest of AVX-512's, 6×16 of AVX2's).
    pub fn for_product(m: usize, n: usize) -> Shape {
        let cost = |s: Shape| {
            let speed = match (s.mr, s.nv) {
                (14, 2) | (6, 1) => 100,
                (8, 3) | (5, 1) => 103,
                _ => 106,
            };
            m.div_ceil(s.mr) * s.mr * n.div_ceil(s.nr()) * s.nr() * speed
        };
        Shape::all()
            .iter()
            .copied()
            .min_by_key(|&s| cost(s))
            .unwrap_or(Shape::AVX512[0])
    }
}

/// True when microkernels run on this CPU (AVX-512, or AVX2 and FMA).
pub fn available() -> bool {
    !Shape::all().is_empty()
}

/// What is applied to `C` around the product.
#[derive(Debug, Clone, Copy)]
pub struct Epilogue<'a> {
    /// Added to every element of row `i` (length at least `m`).
    pub bias: Option<&'a [f32]>,
    /// Added to the product and bias, laid out as `C` (its kept columns).
    pub residual: Option<&'a [f32]>,
    /// Applied last.
    pub act: Activation,
}

/// Where the microkernel's right operand (k×n) comes from.
#[derive(Clone, Copy)]
pub enum B<'a> {
    /// Row-major with row stride `ldb`.
    Rows { b: &'a [f32], ldb: usize },
    /// Computed row by row: `f(row, j0, dst)` fills columns `j0..j0 + dst.len()`
    /// of `row` (an im2col matrix that is never stored whole).
    Fill(&'a (dyn Fn(usize, usize, &mut [f32]) + Sync)),
    /// Row `t` is `base[offsets[t]..]`, read in place (never packed): every
    /// row must have `n` rounded up to the tile width (`16 * nv`) readable floats.
    InPlace { base: &'a [f32], offsets: &'a [u32] },
}

impl Default for Epilogue<'_> {
    fn default() -> Self {
        Epilogue {
            bias: None,
            residual: None,
            act: Activation::None,
        }
    }
}

/// Which column of `C` each column of the product goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cols {
    /// Column `j` to column `j`.
    Dense,
    /// Column `j` is position `(j / pitch, j % pitch)` of a plane stored
    /// `valid` columns wide: kept at `(j / pitch) * valid + j % pitch` when
    /// `j % pitch < valid`, dropped otherwise (the padding columns of a
    /// convolution computed over a padded input).
    Wide { pitch: usize, valid: usize },
}

impl Cols {
    /// Columns of `C` that `n` product columns fill.
    pub fn stored(self, n: usize) -> usize {
        match self {
            Cols::Dense => n,
            Cols::Wide { pitch, valid } => n / pitch * valid + (n % pitch).min(valid),
        }
    }

    /// The 16-lane parts of the tile whose first product column is `j`, of `n`.
    pub(crate) fn parts(self, j: usize, n: usize) -> [Half; 4] {
        let half = |h: usize| {
            let j = j + 16 * h;
            match self {
                Cols::Dense => Half::prefix(n.saturating_sub(j), j),
                Cols::Wide { pitch, valid } => {
                    let mut mask = 0u16;
                    let mut at = j % pitch;
                    for l in 0..16usize.min(n.saturating_sub(j)) {
                        if at < valid {
                            mask |= 1 << l;
                        }
                        at = if at + 1 == pitch { 0 } else { at + 1 };
                    }
                    let first = j + mask.trailing_zeros().min(15) as usize;
                    Half {
                        mask,
                        col: first / pitch * valid + (first % pitch).min(valid),
                    }
                }
            }
        };
        [half(0), half(1), half(2), half(3)]
    }
}

/// The output of a product: `C` with row stride `ldc`, and where its columns go.
pub struct Out<'a> {
    pub c: &'a mut [f32],
    pub ldc: usize,
    pub cols: Cols,
}

impl<'a> Out<'a> {
    pub fn dense(c: &'a mut [f32], ldc: usize) -> Out<'a> {
        Out {
            c,
            ldc,
            cols: Cols::Dense,
        }
    }
}

/// `C = act(bias + a · b + residual)` over `n` product columns.
/// Threads: [`crate::par::threads`].
pub fn gemm(a: &PackedA, b: B, n: usize, out: Out, ep: Epilogue) {
    let (m, k) = (a.m, a.k);
    if n == 0 {
        return;
    }
    let (mr, nr) = (a.shape.mr, a.shape.nr());
    let (ldc, cols) = (out.ldc, out.cols);
    let c_len = (m - 1) * ldc + cols.stored(n);
    assert!(
        out.c.len() >= c_len
            && ep.bias.is_none_or(|v| v.len() >= m)
            && ep.residual.is_none_or(|r| r.len() >= c_len)
            && match b {
                B::Rows { b, ldb } => b.len() >= (k - 1) * ldb + n,
                B::Fill(_) => true,
                B::InPlace { base, offsets } => {
                    offsets.len() >= k
                        && offsets
                            .iter()
                            .all(|&o| o as usize + n.div_ceil(nr) * nr <= base.len())
                }
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
    let col_tasks = tasks.min(n.div_ceil(nr)).max(1);
    let row_tasks = (tasks / col_tasks).clamp(1, m.div_ceil(mr));
    let cols_per = n.div_ceil(nr).div_ceil(col_tasks) * nr;
    let rows_per = m.div_ceil(mr).div_ceil(row_tasks) * mr;
    let c = Disjoint::new(out.c);
    let run = |t: usize| {
        let (rt, ct) = (t / col_tasks, t % col_tasks);
        let (r0, j0) = (rt * rows_per, ct * cols_per);
        if r0 >= m || j0 >= n {
            return;
        }
        let (r1, j1) = ((r0 + rows_per).min(m), (j0 + cols_per).min(n));
        let dst = Dst {
            c: c.at(0),
            ldc,
            cols,
            n,
        };
        // SAFETY: tasks write disjoint row ranges, and disjoint column
        // ranges (which `cols` maps to disjoint columns of `C`), inside the
        // bounds asserted above.
        unsafe { block(a, b, &dst, (r0, r1), (j0, j1), ep) };
    };
    if row_tasks * col_tasks == 1 {
        run(0);
    } else {
        crate::par::for_each(row_tasks * col_tasks, run);
    }
}

/// Where a task's tiles go.
struct Dst {
    c: *mut f32,
    ldc: usize,
    cols: Cols,
    /// Product columns in all.
    n: usize,
}

/// Rows `r0..r1` (multiples of MR but the end) and columns `j0..j1` of the product.
///
/// # Safety
/// `dst` must be valid for writes over the rectangle's kept columns; `b`
/// must cover `k` rows up to column `j1` (rounded up to `NR` in place).
unsafe fn block(
    a: &PackedA,
    b: B,
    dst: &Dst,
    (r0, r1): (usize, usize),
    (j0, j1): (usize, usize),
    ep: Epilogue,
) {
    let shape = a.shape;
    let (mr, nr) = (shape.mr, shape.nr());
    let mc_rows = mr * MC_PANELS;
    let kblocks = a.blocks();
    // A tile's parts depend on its columns only: made once per panel.
    let tile = |row: usize, parts: [Half; 4], kb: usize| {
        let (first, last) = (kb == 0, kb + 1 == kblocks);
        Tile {
            c: dst.c.add(row * dst.ldc),
            ldc: dst.ldc,
            rows: mr.min(r1 - row),
            store: Store::Rows(parts),
            load_c: !first,
            bias: if first {
                ep.bias.map(|v| v[row..].as_ptr())
            } else {
                None
            },
            residual: if last {
                ep.residual.map(|r| r[row * dst.ldc..].as_ptr())
            } else {
                None
            },
            act: if last { ep.act } else { Activation::None },
            ahead: None,
        }
    };
    // The same tile moved to `row`: its scalars only. A tile made afresh
    // copied its parts from where they had just been written piecewise,
    // and the copy's wide loads missed store forwarding (measured: a third
    // of a 3->64 stem convolution's time in `block`, waiting there).
    let move_to = |t: &mut Tile, row: usize, kb: usize| {
        let (first, last) = (kb == 0, kb + 1 == kblocks);
        t.c = dst.c.add(row * dst.ldc);
        t.rows = mr.min(r1 - row);
        t.bias = if first {
            ep.bias.map(|v| v[row..].as_ptr())
        } else {
            None
        };
        t.residual = if last {
            ep.residual.map(|r| r[row * dst.ldc..].as_ptr())
        } else {
            None
        };
    };
    let nc_cols = NC / nr * nr;
    if let B::InPlace { base, offsets } = b {
        let mut jc = j0;
        while jc < j1 {
            let nc = nc_cols.min(j1 - jc);
            for kb in 0..kblocks {
                let (k0, kc) = a.block(kb);
                let mut ic = r0;
                while ic < r1 {
                    let mc = mc_rows.min(r1 - ic);
                    for j in (jc..jc + nc).step_by(nr) {
                        let panel = InPlace {
                            base: base.as_ptr().add(j),
                            offsets: offsets[k0..].as_ptr(),
                        };
                        let mut t = tile(ic, dst.cols.parts(j, dst.n), kb);
                        for row in (ic..ic + mc).step_by(mr) {
                            let ap = a.panel(kb, row / mr, kc);
                            move_to(&mut t, row, kb);
                            microkernel::run(shape, kc, &ap, &panel, &t);
                        }
                    }
                    ic += mc;
                }
            }
            jc += nc;
        }
        return;
    }
    crate::scratch::floats(a.kc * NC + NC, |buf| {
        let (packed, row) = buf.split_at_mut(a.kc * NC);
        let mut tiles: Vec<Tile> = Vec::with_capacity(nc_cols.div_ceil(nr));
        let mut jc = j0;
        while jc < j1 {
            let nc = nc_cols.min(j1 - jc);
            for kb in 0..kblocks {
                let (k0, kc) = a.block(kb);
                pack_b(b, nr, (k0, kc), (jc, nc), packed, &mut row[..nc]);
                // A tile per panel, moved from row to row (see `move_to`).
                tiles.clear();
                tiles.extend(
                    (0..nc)
                        .step_by(nr)
                        .map(|jr| tile(r0, dst.cols.parts(jc + jr, dst.n), kb)),
                );
                let mut ic = r0;
                while ic < r1 {
                    let mc = mc_rows.min(r1 - ic);
                    // Row tiles outside, the block's panels inside: each row
                    // of C (and of the residual) is then walked along, a few
                    // streams the prefetchers follow, where panels outside
                    // touched two lines of every row of the block in turn (a
                    // 32->128 1x1 convolution on 56x56 in ResNet-50 ran 10-30%
                    // faster this way, its output and residual from L3).
                    for row in (ic..ic + mc).step_by(mr) {
                        let ap = a.panel(kb, row / mr, kc);
                        for (jr, t) in (0..nc).step_by(nr).zip(tiles.iter_mut()) {
                            let panel = Packed {
                                ptr: packed[jr * kc..(jr + nr) * kc].as_ptr(),
                                width: nr,
                            };
                            move_to(t, row, kb);
                            microkernel::run(shape, kc, &ap, &panel, t);
                        }
                    }
                    ic += mc;
                }
            }
            jc += nc;
        }
    });
}

/// Copies rows `k0..k0+kc` and columns `j0..j0+nc` of `b` into `nr`-column
/// panels, zero past column `nc`; `row` is room for one row of a `B::Fill`.
fn pack_b(
    b: B,
    nr: usize,
    (k0, kc): (usize, usize),
    (j0, nc): (usize, usize),
    packed: &mut [f32],
    row: &mut [f32],
) {
    for t in 0..kc {
        let src: &[f32] = match b {
            B::Rows { b, ldb } => &b[(k0 + t) * ldb + j0..(k0 + t) * ldb + j0 + nc],
            B::Fill(f) => {
                f(k0 + t, j0, row);
                row
            }
            B::InPlace { base, offsets } => {
                let at = offsets[k0 + t] as usize + j0;
                &base[at..at + nc]
            }
        };
        for (jr, chunk) in src.chunks(nr).enumerate() {
            let dst = &mut packed[(jr * kc + t) * nr..(jr * kc + t + 1) * nr];
            dst[..chunk.len()].copy_from_slice(chunk);
            dst[chunk.len()..].fill(0.0);
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
        for (m, n, k, shape) in [
            (1, 1, 1),
            (14, 32, 256),
            (15, 33, 257),
            (29, 100, 600),
            (3, 700, 5),
            (64, 49, 1152),
        ]
        .into_iter()
        .flat_map(|(m, n, k)| Shape::runnable().into_iter().map(move |s| (m, n, k, s)))
        {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.5)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.5)
                .collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 - 3.0).collect();
            let want = naive(&a, &b, m, n, k, &bias);
            let pa = PackedA::new(&a, m, k, k, shape).unwrap();
            // Wider ldc: the columns past n must stay untouched.
            let mut c = vec![7f32; m * (n + 3)];
            let ep = Epilogue {
                bias: Some(&bias),
                ..Epilogue::default()
            };
            gemm(
                &pa,
                B::Rows { b: &b, ldb: n },
                n,
                Out::dense(&mut c, n + 3),
                ep,
            );
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
                act: Activation::Relu,
                ..Epilogue::default()
            };
            gemm(&pa, B::Fill(&fill), n, Out::dense(&mut r, n), ep);
            assert!(r
                .iter()
                .zip(&want)
                .all(|(g, w)| (g - w.max(0.0)).abs() <= 1e-3 * w.abs().max(1.0)));
        }
    }

    /// Rows read in place at offsets, wide columns dropped where they fall on
    /// padding, a residual and a sigmoid: against the naive product.
    #[test]
    fn in_place_rows_into_wide_columns() {
        if !available() {
            return;
        }
        let cases = [(5, 3, 9, 7, 7), (29, 300, 16, 14, 14), (14, 9, 58, 56, 3)];
        for ((m, k, pitch, valid, rows), shape) in cases
            .into_iter()
            .flat_map(|c| Shape::runnable().into_iter().map(move |s| (c, s)))
        {
            let n: usize = (rows - 1) * pitch + valid;
            // Row t of B is base[t * 7 + j]: rows overlap, as a convolution's taps do.
            let offsets: Vec<u32> = (0..k as u32).map(|t| t * 7).collect();
            let base: Vec<f32> = (0..(k - 1) * 7 + n + 64)
                .map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.5)
                .collect();
            let b: Vec<f32> = (0..k * n).map(|i| base[(i / n) * 7 + i % n]).collect();
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7) % 13) as f32 * 0.05 - 0.3)
                .collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.1 - 0.5).collect();
            let want = naive(&a, &b, m, n, k, &bias);
            let stored = rows * valid;
            let residual: Vec<f32> = (0..m * stored).map(|i| (i % 5) as f32 * 0.25).collect();
            let mut c = vec![0f32; m * stored];
            let pa = PackedA::new(&a, m, k, k, shape).unwrap();
            let out = Out {
                c: &mut c,
                ldc: stored,
                cols: Cols::Wide { pitch, valid },
            };
            let ep = Epilogue {
                bias: Some(&bias),
                residual: Some(&residual),
                act: Activation::Sigmoid,
            };
            gemm(
                &pa,
                B::InPlace {
                    base: &base,
                    offsets: &offsets,
                },
                n,
                out,
                ep,
            );
            for i in 0..m {
                for r in 0..rows {
                    for col in 0..valid {
                        let at = i * stored + r * valid + col;
                        let w = want[i * n + r * pitch + col] + residual[at];
                        let w = 1.0 / (1.0 + (-w).exp());
                        assert!(
                            (c[at] - w).abs() <= 1e-5,
                            "{m}x{k} row {i} ({r}, {col}): {} vs {w}",
                            c[at]
                        );
                    }
                }
            }
        }
    }
}
