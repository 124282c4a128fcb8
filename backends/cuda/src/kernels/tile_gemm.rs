//! The tile GEMM (`kernels/cuda/tile_gemm.cu`): products too small for a
//! cuBLASLt call to pay its way, with the bias along N and any activation
//! in the same launch ([`PlanOptions::small_gemm`](crate::PlanOptions)). At
//! a few tokens a transformer's projections are 8x16x16 products; cuBLASLt's
//! kernels for them take about 10 us each on the H100, and a GELU other
//! than its tanh form costs a second launch.

use rlx_gpu::geometry::{u32_of, LResult};
use rlx_gpu::{Layout, Params, Range};
use rlx_ir::ops::Activation;

use super::{epilogue, Cx, Source};
use crate::schedule::Gemm;

pub const SOURCE: Source = Source {
    name: "tile_gemm",
    source: concat!(
        include_str!("../../../../kernels/cuda/activation.cuh"),
        include_str!("../../../../kernels/cuda/tile_gemm.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![TileGemmParams::LAYOUT]
}

/// The side of a tile of C (one block of `TILE * TILE` threads).
pub const TILE: u64 = 16;

/// The most multiply-adds (m n k times the batch) a product may take to run
/// in the tile kernel.
pub const MAX_MACS: u64 = 1 << 20;

/// The longest inner dim: one block walks all of it, 16 at a time (a
/// classifier's 1x1000x1024 product stays with cuBLASLt's GEMV kernels).
pub const MAX_K: u64 = 256;

rlx_gpu::kernel_params! {
    /// `c = act(a b + bias)` for `batch` row-major products, `stride_*`
    /// elements apart, in 16x16 tiles of c.
    pub struct TileGemmParams {
        pub m: u32,
        pub n: u32,
        pub k: u32,
        pub lda: u32,
        pub ldb: u32,
        pub ldc: u32,
        pub batch: u32,
        pub stride_a: u32,
        pub stride_b: u32,
        pub stride_c: u32,
        /// Tiles along m and along n.
        pub tiles_m: u32,
        pub tiles_n: u32,
        /// Bit 0: add `bias[col]`.
        pub flags: u32,
        /// As [`epilogue::EpilogueParams::act`].
        pub act: u32,
    }
}

impl TileGemmParams {
    /// Multiply-adds of the launch.
    pub fn macs(&self) -> u64 {
        [self.m, self.n, self.k, self.batch]
            .iter()
            .map(|&v| u64::from(v))
            .product()
    }

    /// Blocks of the launch: one per tile of each product.
    pub fn blocks(&self) -> u64 {
        u64::from(self.tiles_m) * u64::from(self.tiles_n) * u64::from(self.batch)
    }
}

/// The tile kernel's parameters for `g`, if it is small enough and plain
/// (no transposes; the sizes and strides fit in 32 bits).
pub fn params(g: &Gemm, bias: bool, act: Activation) -> Option<TileGemmParams> {
    let macs = [g.m, g.n, g.k, g.batch]
        .iter()
        .try_fold(1u64, |acc, &v| acc.checked_mul(v));
    if g.trans_a || g.trans_b || g.k > MAX_K || macs.is_none_or(|v| v > MAX_MACS) {
        return None;
    }
    let w = |v: u64| u32::try_from(v).ok();
    Some(TileGemmParams {
        m: w(g.m)?,
        n: w(g.n)?,
        k: w(g.k)?,
        lda: w(g.lda)?,
        ldb: w(g.ldb)?,
        ldc: w(g.ldc)?,
        batch: w(g.batch)?,
        stride_a: w(g.stride_a)?,
        stride_b: w(g.stride_b)?,
        stride_c: w(g.stride_c)?,
        tiles_m: w(g.m.div_ceil(TILE))?,
        tiles_n: w(g.n.div_ceil(TILE))?,
        flags: u32::from(bias),
        act: epilogue::act_code(act),
    })
}

/// Emits `g` as a tile kernel launch (its bias, if any, along n).
pub fn emit(cx: &mut Cx, g: &Gemm, p: &TileGemmParams, bias: Option<Range>) -> LResult<()> {
    let suffix = epilogue::suffix(g.dtype)?;
    let m = cx.modules.of(&SOURCE);
    let operands = vec![g.a, g.b, g.c, bias.unwrap_or(g.c)];
    let block = u32_of((TILE * TILE) as usize, "a block")?;
    cx.kernel_params(
        m,
        &format!("tile_gemm_{suffix}"),
        p.blocks(),
        block,
        operands,
        p,
    );
    Ok(())
}
