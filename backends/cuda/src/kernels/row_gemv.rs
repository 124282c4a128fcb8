//! The row GEMV (`kernels/cuda/row_gemv.cu`): products of at most
//! [`MAX_ROWS`] rows against a wide row-major matrix, as a decoder's step
//! multiplies each layer's weights by one row per sequence
//! ([`PlanOptions::few_rows`](crate::PlanOptions)). Such a product reads
//! the matrix once; cuBLASLt's kernels for one row reach a fraction of the
//! memory's speed there (about a quarter on GPT-2's decode step), this
//! kernel splits the work for as many loads in flight as the device holds.
//! The bias along N and any activation go in the same launch; where blocks
//! split k, the last of a column tile to finish adds their sums (one
//! launch a product, tickets from [`Cx::tickets`]).

use rlx_gpu::geometry::{u32_of, LResult};
use rlx_gpu::{Layout, Params, Range};
use rlx_ir::ops::Activation;
use rlx_ir::DType;

use super::{epilogue, Cx, Source};
use crate::schedule::Gemm;

pub const SOURCE: Source = Source {
    name: "row_gemv",
    source: concat!(
        include_str!("../../../../kernels/cuda/activation.cuh"),
        include_str!("../../../../kernels/cuda/row_gemv.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![RowGemvParams::LAYOUT]
}

/// The most rows a product may have (the kernel's widest row count).
pub const MAX_ROWS: u64 = 8;
/// Warps of a block (`RG_WARPS`).
const WARPS: u64 = 8;
/// The most steps of k a block takes (`RG_KCHUNK`: its slice of `a` in
/// shared memory).
const MAX_CHUNK: u64 = 1024;
/// The fewest loads a lane takes when k is split (each warp then has eight
/// in flight): a block's share of k is at least this many warp steps.
const MIN_LOADS: u64 = 8;
/// Lanes that share a row of k, the choices of the kernel's entries: 32 (a
/// warp step reads one row of 32 * V columns) or 8 (four rows of 8 * V).
const LANES: [u64; 2] = [32, 8];
/// Blocks to aim for: two per multiprocessor of an H100/H200 and more.
const TARGET_BLOCKS: u64 = 264;
/// The most blocks along k for the grid's sake: the tile's last block adds
/// this many partial sums a column (more only where k needs them).
const MAX_SPLITS: u64 = 8;
/// The shallowest product this kernel takes (shallower ones are the tile
/// kernel's or cuBLASLt's).
const MIN_K: u64 = 64;
/// The smallest matrix it takes, in bytes: below, a product is a launch's
/// latency whichever kernel runs it, and stays with the tile kernel.
const MIN_BYTES: u64 = 64 << 10;

rlx_gpu::kernel_params! {
    /// `c = act(a b + bias)` for a product of at most eight rows, in
    /// blocks of `32 * V` columns by `kchunk` steps of k.
    pub struct RowGemvParams {
        pub m: u32,
        pub n: u32,
        pub k: u32,
        pub lda: u32,
        pub ldb: u32,
        pub ldc: u32,
        /// Steps of k a block takes (the last split may take fewer).
        pub kchunk: u32,
        /// Blocks along k; 1: the blocks store c themselves.
        pub splits: u32,
        /// Column tiles (blocks along n).
        pub tiles: u32,
        /// Bit 0: add `bias[col]`.
        pub flags: u32,
        /// As [`epilogue::EpilogueParams::act`].
        pub act: u32,
    }
}

/// A planned row GEMV: its parameters and the entry it runs.
#[derive(Debug, Clone)]
pub struct RowGemv {
    pub params: RowGemvParams,
    /// Columns a lane loads at once (a 16-byte vector, or one).
    vector: u64,
    rows: u64,
    /// Lanes that share a row of k ([`LANES`]).
    lanes: u64,
}

impl RowGemv {
    /// Multiply-adds of the product.
    pub fn macs(&self) -> u64 {
        let p = &self.params;
        u64::from(p.m) * u64::from(p.n) * u64::from(p.k)
    }

    fn blocks(&self) -> u64 {
        u64::from(self.params.tiles) * u64::from(self.params.splits)
    }
}

/// The row GEMV of `g`, if it is one this kernel takes: one product (no
/// batch), no transposes, at most [`MAX_ROWS`] rows, k at least
/// [`MIN_K`], a matrix of [`MIN_BYTES`] at least, f32, f16 or bf16, and
/// sizes that fit in 32 bits.
pub fn plan(g: &Gemm, bias: bool, act: Activation) -> Option<RowGemv> {
    if g.trans_a || g.trans_b || g.batch != 1 || g.m == 0 || g.m > MAX_ROWS || g.k < MIN_K {
        return None;
    }
    let size = match g.dtype {
        DType::F32 => 4,
        DType::F16 | DType::BF16 => 2,
        _ => return None,
    };
    if g.k * g.n * size < MIN_BYTES {
        return None;
    }
    // A lane's 16 bytes in one load where every row of b starts aligned.
    let wide = 16 / size;
    let aligned =
        g.n.is_multiple_of(wide) && g.ldb.is_multiple_of(wide) && g.b.offset.is_multiple_of(16);
    let vector = if aligned { wide } else { 1 };
    // Split k until the grid holds enough blocks, each lane still taking
    // MIN_LOADS steps, and never more than a block's shared slice holds;
    // columns in narrow tiles where wide ones leave too few blocks (a
    // matrix of 768 columns is six tiles of 128 f32 columns).
    let shape = |lanes: u64| {
        let tiles = g.n.div_ceil(lanes * vector);
        let stride = WARPS * (32 / lanes);
        let splits = TARGET_BLOCKS
            .div_ceil(tiles)
            .min(g.k.div_ceil(stride * MIN_LOADS))
            .min(MAX_SPLITS)
            .max(g.k.div_ceil(MAX_CHUNK))
            .max(1);
        let kchunk = g.k.div_ceil(splits).next_multiple_of(stride).min(MAX_CHUNK);
        (lanes, tiles, g.k.div_ceil(kchunk), kchunk)
    };
    let blocks = |s: &(u64, u64, u64, u64)| s.1 * s.2;
    let mut best = shape(LANES[0]);
    for &lanes in &LANES[1..] {
        let next = shape(lanes);
        if blocks(&best) < TARGET_BLOCKS && blocks(&next) > blocks(&best) {
            best = next;
        }
    }
    let (lanes, tiles, splits, kchunk) = best;
    let w = |v: u64| u32::try_from(v).ok();
    // Indices the kernel forms in 32 bits.
    w(g.m * g.k)?;
    w(splits * g.m * g.n)?;
    Some(RowGemv {
        params: RowGemvParams {
            m: w(g.m)?,
            n: w(g.n)?,
            k: w(g.k)?,
            lda: w(g.lda)?,
            ldb: w(g.ldb)?,
            ldc: w(g.ldc)?,
            kchunk: w(kchunk)?,
            splits: w(splits)?,
            tiles: w(tiles)?,
            flags: u32::from(bias),
            act: epilogue::act_code(act),
        },
        vector,
        rows: if g.m == 1 { 1 } else { MAX_ROWS },
        lanes,
    })
}

/// Emits `g` as a row GEMV launch (its bias, if any, along n).
pub fn emit(cx: &mut Cx, g: &Gemm, r: &RowGemv, bias: Option<Range>) -> LResult<()> {
    let suffix = epilogue::suffix(g.dtype)?;
    let m = cx.modules.of(&SOURCE);
    let p = &r.params;
    // Unused by the kernel with one split (the blocks store c): any
    // operand in the buffer stands in.
    let (part, tickets) = if p.splits > 1 {
        let part = cx.scratch(u64::from(p.splits) * u64::from(p.m) * u64::from(p.n) * 4);
        (part, cx.tickets(u64::from(p.tiles)))
    } else {
        (g.c, g.c)
    };
    let bias = bias.unwrap_or(g.c);
    let block = u32_of((WARPS * 32) as usize, "a block")?;
    let entry = format!("row_gemv_{suffix}_v{}_r{}_l{}", r.vector, r.rows, r.lanes);
    cx.kernel_params(
        m,
        &entry,
        r.blocks(),
        block,
        vec![g.a, g.b, g.c, bias, part, tickets],
        p,
    );
    Ok(())
}
