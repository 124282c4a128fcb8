//! The AVX-512 f32 GEMM microkernels: `tile (+)= A · B` for one tile of
//! `MR` rows of `A` by `16 * NV` columns of `B` over a depth of steps, the
//! `MR * NV` accumulators in registers. Each operand is read from a packed
//! panel or in place (rows at offsets into an input: the implicit GEMM of a
//! convolution, [`super::conv_direct`]). The shapes are [`Shape`]s.
//!
//! A tile is stored one of two ways ([`Store`]):
//! - by rows ([`super::packed_gemm`]): tile row `i` is row `i` of `C`, its
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
    /// The shapes there are kernels for: every one keeps at most 28
    /// accumulators, so that they, a row of `B` and a broadcast of `A` fit
    /// the 32 registers (7×4 would spill in its inner loop).
    pub const ALL: [Shape; 5] = [
        Shape { mr: 14, nv: 2 },
        Shape { mr: 8, nv: 3 },
        Shape { mr: 6, nv: 4 },
        Shape { mr: 7, nv: 3 },
        Shape { mr: 12, nv: 2 },
    ];

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
/// The CPU has AVX-512F (see [`super::packed_gemm::available`]); `shape` is
/// one of [`Shape::ALL`]; the panels have `kc` readable rows; the tile's
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
        _ => unreachable!("no microkernel for {shape:?}"),
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("PackedA::new refuses CPUs without the microkernel");
}

/// As [`run`], for a tile of fewer rows than a shape of two vectors of
/// columns has (`shape.mr` from [`SHORT_ROWS`] up, `shape.nv` 2), or of a
/// shape of [`Shape::ALL`]: the transposed product of a convolution splits
/// an output row into tiles of near-equal rows this way.
///
/// # Safety
/// As [`run`]; `shape` is one of [`Shape::ALL`] or two vectors wide with
/// `SHORT_ROWS..=14` rows.
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
        _ => run(shape, kc, a, b, tile),
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("PackedA::new refuses CPUs without the microkernel");
}

/// The fewest rows of a two-vector tile [`run_short`] has a kernel for.
pub const SHORT_ROWS: usize = 6;

#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::{activate, transpose16};

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use rlx_ir::ops::Activation;

    use super::super::vmath;
    use super::{Half, Panel, Store, Tile, NR_MAX};

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
        for p in 0..kc {
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
            Activation::Sigmoid => lanes(v, |x| vmath::sigmoid(x)),
            Activation::Tanh => lanes(v, |x| vmath::tanh(x)),
            Activation::Silu => lanes(v, |x| vmath::silu(x)),
            // Lane by lane through a copy, erf's two branches kept it scalar.
            Activation::GeluErf => super::super::gelu_lanes::avx512::gelu(v),
            Activation::GeluTanh => lanes(v, |x| vmath::gelu_tanh(x)),
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
                let rows: [__m512; 16] =
                    std::array::from_fn(|i| _mm512_loadu_ps(m[16 * i..].as_ptr()));
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
}
