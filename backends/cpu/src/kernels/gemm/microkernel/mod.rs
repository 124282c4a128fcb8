//! The f32 GEMM microkernels: `tile (+)= A · B` for one tile of `MR` rows
//! of `A` by `16 * NV` columns of `B` over a depth of steps, the
//! accumulators in registers. Two families implement one contract:
//! [`avx512`] (`NV` 2 to 4, a 16-lane register per part of a row) and
//! [`avx2`] (`NV` 1, each 16-lane part two 8-lane registers) for CPUs
//! without AVX-512; a [`Shape`] names its family by its width. Each operand is read from a packed
//! panel or in place (rows at offsets into an input: the implicit GEMM of a
//! convolution, [`crate::kernels::conv`]). The shapes are [`Shape`]s.
//!
//! A tile is stored one of two ways ([`Store`]):
//! - by rows ([`super::packed`]): tile row `i` is row `i` of `C`, its
//!   columns in 16-lane parts. Each part names the lanes it keeps and the
//!   column of `C` its first kept lane goes to; kept lanes go to consecutive
//!   columns (compressed on store, expanded on load). A dense product keeps
//!   a prefix of each part; a convolution over a padded plane drops the
//!   lanes that fall on the padding columns.
//! - by columns (a convolution whose tile rows are output positions and
//!   whose lanes are channels): the tile is transposed in registers, and lane
//!   `l` becomes row `l` of `C`, its kept positions compressed the same way.

use rlx_ir::ops::Activation;

/// Columns of `B` per microkernel call, at most.
pub const NR_MAX: usize = 64;

/// A microkernel's tile: `mr` rows of `A` by `16 * nv` columns of `B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    pub mr: usize,
    pub nv: usize,
}

impl Shape {
    /// The AVX-512 shapes: every one keeps at most 28 accumulators, so
    /// that they, a row of `B` and a broadcast of `A` fit the 32 registers
    /// (7×4 would spill in its inner loop).
    pub const AVX512: [Shape; 5] = [
        Shape { mr: 14, nv: 2 },
        Shape { mr: 8, nv: 3 },
        Shape { mr: 6, nv: 4 },
        Shape { mr: 7, nv: 3 },
        Shape { mr: 12, nv: 2 },
    ];

    /// The AVX2 shapes, one 16-lane part (two registers) per row: at most
    /// 12 accumulators, so that they, the two registers of `B` and a
    /// broadcast fit the 16 registers. Fewer than 8 accumulators would
    /// leave the FMA units waiting on their latency.
    pub const AVX2: [Shape; 3] = [
        Shape { mr: 6, nv: 1 },
        Shape { mr: 5, nv: 1 },
        Shape { mr: 4, nv: 1 },
    ];

    /// The shapes this CPU runs best: the AVX-512 ones where it has
    /// AVX-512, else the AVX2 ones; none without AVX2 and FMA.
    pub fn all() -> &'static [Shape] {
        if crate::kernels::vmath::avx512() {
            &Shape::AVX512
        } else if crate::kernels::vmath::avx2() {
            &Shape::AVX2
        } else {
            &[]
        }
    }

    /// Every shape whose kernel runs on this CPU (both families on an
    /// AVX-512 CPU): what the tests sweep.
    pub fn runnable() -> Vec<Shape> {
        Shape::AVX512
            .into_iter()
            .chain(Shape::AVX2)
            .filter(|s| s.runs_here())
            .collect()
    }

    /// Whether this CPU has the registers of this shape's family.
    pub fn runs_here(self) -> bool {
        if self.nv == 1 {
            crate::kernels::vmath::avx2()
        } else {
            crate::kernels::vmath::avx512()
        }
    }

    /// The fewest rows of the tiles [`run_short`] has kernels for at this
    /// shape's width, if it has any.
    pub fn short_rows(self) -> Option<usize> {
        match self.nv {
            1 => Some(1),
            2 => Some(6),
            _ => None,
        }
    }

    /// Columns per tile.
    pub fn nr(self) -> usize {
        16 * self.nv
    }
}

/// Zeroed floats whose first is 64-byte aligned: packed operands whose rows
/// are whole cache lines (a misaligned vector load touches two).
#[derive(Debug, Clone, Default)]
pub struct AlignedBuf {
    raw: Vec<f32>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> AlignedBuf {
        let raw = vec![0f32; len + 15];
        let start = raw.as_ptr().align_offset(64).min(15);
        AlignedBuf { raw, start, len }
    }

    pub fn as_slice(&self) -> &[f32] {
        &self.raw[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// The lanes a 16-lane part of a tile keeps, and the column of `C` where
/// the first one goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Half {
    pub mask: u16,
    pub col: usize,
}

impl Half {
    /// The first `n` lanes (at most 16), from column `col`.
    pub fn prefix(n: usize, col: usize) -> Half {
        let mask = if n >= 16 {
            u16::MAX
        } else {
            ((1u32 << n) - 1) as u16
        };
        Half { mask, col }
    }
}

/// How a tile goes to `C`.
#[derive(Debug, Clone, Copy)]
pub enum Store {
    /// Tile row `i` is row `i` of `C`; the first `nv` parts place its lanes.
    Rows([Half; 4]),
    /// Lane `l` is row `l` of `C` (the first `lanes`); tile row `i` is
    /// position `i`, placed by `positions` (its mask has a bit per tile row).
    /// A product split in depth blocks keeps the tile's partial sums in
    /// `partial` (`MR` rows of `16 * NV`): every block but the first adds
    /// them (`load_c`), every block but the last stores them there (`spill`)
    /// instead of storing to `C`.
    Columns {
        positions: Half,
        lanes: usize,
        partial: *mut f32,
        spill: bool,
    },
}

/// One tile of `C`.
pub struct Tile {
    /// Row 0 of the tile's rows of `C` (column 0).
    pub c: *mut f32,
    pub ldc: usize,
    /// Tile rows computed and stored by rows (at most `MR`); by columns, the
    /// positions' mask says which are stored.
    pub rows: usize,
    pub store: Store,
    /// Add the tile's current contents (a later depth block): by rows, from
    /// `C`; by columns, from its partial sums.
    pub load_c: bool,
    /// Bias of the tile's first row of `C` (the first depth block): per tile
    /// row by rows, per lane by columns.
    pub bias: Option<*const f32>,
    /// Added before the activation (the last depth block); laid out as `c`.
    pub residual: Option<*const f32>,
    /// Applied as the tile is stored (the last depth block).
    pub act: Activation,
    /// Memory to bring into L2 while the tile runs ([`Ahead`]).
    pub ahead: Option<Ahead>,
}

/// Lines the kernel prefetches into L2 as it runs, spread evenly over its
/// depth steps: the next weight panel, where a panel serves few tiles and
/// the first of them would otherwise wait on memory for every step (the
/// last stage of a ResNet, weights of megabytes a convolution over 7x7
/// positions: 1.27x ONNX Runtime's time over a chain of them on an Intel
/// Xeon, each panel read from DRAM at the speed of its first tile).
#[derive(Debug, Clone, Copy)]
pub struct Ahead {
    pub from: *const f32,
    /// 64-byte lines from `from`.
    pub lines: usize,
}

impl Ahead {
    /// Every how many depth steps of `kc` a line is fetched, so that the
    /// lines spread over the whole tile.
    #[inline(always)]
    pub fn every(self, kc: usize) -> usize {
        (kc / self.lines.max(1)).max(1)
    }
}

/// Where the rows of an operand's panel are.
pub trait Panel {
    /// Row `p` of the panel: the tile's columns (for `B`) or rows (for
    /// `A`) of depth step `p`.
    ///
    /// # Safety
    /// `p` is below the depth the panel was made for.
    unsafe fn row(&self, p: usize) -> *const f32;
}

/// A packed panel: row `p` at `p * width`.
pub struct Packed {
    pub ptr: *const f32,
    pub width: usize,
}

impl Panel for Packed {
    #[inline(always)]
    unsafe fn row(&self, p: usize) -> *const f32 {
        self.ptr.add(p * self.width)
    }
}

/// Rows in place: row `p` at `base + offsets[p]`.
pub struct InPlace {
    pub base: *const f32,
    pub offsets: *const u32,
}

impl Panel for InPlace {
    #[inline(always)]
    unsafe fn row(&self, p: usize) -> *const f32 {
        self.base.add(*self.offsets.add(p) as usize)
    }
}

/// `tile (+)= a_panel · b_panel` over depth `kc` with the kernel of `shape`:
/// `a` has `kc` rows of `shape.mr` floats, `b` of `shape.nr()`.
///
/// # Safety
/// The CPU runs `shape`'s family ([`Shape::runs_here`]); `shape` is one of
/// [`Shape::AVX512`] or [`Shape::AVX2`]; the panels have `kc` readable rows; the tile's
/// kept elements of `C` (and of the residual) are valid, and the bias for
/// the tile's rows (by rows) or lanes (by columns).
#[inline(always)]
pub unsafe fn run<A: Panel, B: Panel>(shape: Shape, kc: usize, a: &A, b: &B, tile: &Tile) {
    #[cfg(target_arch = "x86_64")]
    match (shape.mr, shape.nv) {
        (14, 2) => avx512::kernel::<A, B, 14, 2>(kc, a, b, tile),
        (8, 3) => avx512::kernel::<A, B, 8, 3>(kc, a, b, tile),
        (6, 4) => avx512::kernel::<A, B, 6, 4>(kc, a, b, tile),
        (7, 3) => avx512::kernel::<A, B, 7, 3>(kc, a, b, tile),
        (12, 2) => avx512::kernel::<A, B, 12, 2>(kc, a, b, tile),
        (6, 1) => avx2::kernel::<A, B, 6>(kc, a, b, tile),
        (5, 1) => avx2::kernel::<A, B, 5>(kc, a, b, tile),
        (4, 1) => avx2::kernel::<A, B, 4>(kc, a, b, tile),
        _ => unreachable!("no microkernel for {shape:?}"),
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("PackedA::new refuses CPUs without the microkernel");
}

/// As [`run`], for a tile of fewer rows than its shape has (from
/// [`Shape::short_rows`] up), or of a shape of its family: the transposed
/// product of a convolution splits an output row into tiles of near-equal
/// rows this way.
///
/// # Safety
/// As [`run`]; `shape` is one of a family's, or as wide as one with
/// rows from its [`Shape::short_rows`] to its widest's.
#[inline(always)]
pub unsafe fn run_short<A: Panel, B: Panel>(shape: Shape, kc: usize, a: &A, b: &B, tile: &Tile) {
    #[cfg(target_arch = "x86_64")]
    match (shape.mr, shape.nv) {
        (13, 2) => avx512::kernel::<A, B, 13, 2>(kc, a, b, tile),
        (11, 2) => avx512::kernel::<A, B, 11, 2>(kc, a, b, tile),
        (10, 2) => avx512::kernel::<A, B, 10, 2>(kc, a, b, tile),
        (9, 2) => avx512::kernel::<A, B, 9, 2>(kc, a, b, tile),
        (8, 2) => avx512::kernel::<A, B, 8, 2>(kc, a, b, tile),
        (7, 2) => avx512::kernel::<A, B, 7, 2>(kc, a, b, tile),
        (6, 2) => avx512::kernel::<A, B, 6, 2>(kc, a, b, tile),
        (3, 1) => avx2::kernel::<A, B, 3>(kc, a, b, tile),
        (2, 1) => avx2::kernel::<A, B, 2>(kc, a, b, tile),
        (1, 1) => avx2::kernel::<A, B, 1>(kc, a, b, tile),
        _ => run(shape, kc, a, b, tile),
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("PackedA::new refuses CPUs without the microkernel");
}

#[cfg(target_arch = "x86_64")]
pub(crate) use avx2::transpose8;
#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::{activate, transpose16};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

/// The microkernels alone, operands in L1: `cargo test --release -p rlx-cpu
/// --lib microkernel::speed -- --ignored --nocapture`.
#[cfg(test)]
mod speed {
    use super::*;

    #[test]
    #[ignore = "a timing table, not a test"]
    fn in_l1() {
        for shape in Shape::runnable() {
            let kc = 256;
            let a = AlignedBuf::zeroed(kc * shape.mr);
            let b = AlignedBuf::zeroed(kc * shape.nr());
            let mut c = vec![0f32; shape.mr * shape.nr()];
            let tile = Tile {
                c: c.as_mut_ptr(),
                ldc: shape.nr(),
                rows: shape.mr,
                store: Store::Rows([
                    Half::prefix(16, 0),
                    Half::prefix(16, 16),
                    Half::prefix(16, 32),
                    Half::prefix(16, 48),
                ]),
                load_c: false,
                bias: None,
                residual: None,
                act: Activation::None,
                ahead: None,
            };
            let (pa, pb) = (
                Packed {
                    ptr: a.as_slice().as_ptr(),
                    width: shape.mr,
                },
                Packed {
                    ptr: b.as_slice().as_ptr(),
                    width: shape.nr(),
                },
            );
            let t = std::time::Instant::now();
            let mut n = 0u64;
            while t.elapsed().as_secs_f64() < 0.5 {
                for _ in 0..1000 {
                    // SAFETY: the shape runs here; the panels hold kc rows.
                    unsafe { run(shape, kc, &pa, &pb, &tile) };
                }
                n += 1000;
            }
            let flops = 2.0 * (kc * shape.mr * shape.nr()) as f64 * n as f64;
            println!(
                "{}x{}: {:.1} GFLOP/s",
                shape.mr,
                shape.nr(),
                flops / t.elapsed().as_secs_f64() / 1e9
            );
        }
    }
}
