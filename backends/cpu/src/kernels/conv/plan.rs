//! How an f32 2-D convolution with constant weights runs on the
//! microkernels (AVX-512 or AVX2), chosen when its kernel is built.
//!
//! The product is `Y[M, P] = W[M, K] · X[K, P]` per image and group (`M`
//! output channels, `K` input channels times taps, `P` output positions),
//! with `X` never made: [`Direct`] stages the input so that its columns are
//! read in place. It is tiled one of three ways:
//! - [`Product::Packed`]: a pointwise convolution's `X` is its input (every
//!   s-th column of it at stride s), packed panel by panel ([`packed_gemm`]),
//!   tiles of `MR` channels by `NR` positions;
//! - [`Product::Rows`]: the same tiles with `X`'s rows read in place from the
//!   staging (wide positions, the padding columns dropped on store);
//! - [`Product::Columns`]: the transposed product, tiles of `MR` positions by
//!   `NR` channels: positions are broadcast from the staging, the weights are
//!   packed panels of `NR` channels, and each tile is transposed as it is
//!   stored. Positions tile each output row in near-equal tiles (a row of
//!   19 as 10 + 9, with kernels of fewer rows), or the wide positions where
//!   that costs less: no padding column or short tile is computed.
//!
//! The choice is the one with the least padded work, weighed by how fast
//! each way runs (measured on Zen 5: the transposed product runs near the
//! FMA peak, in-place rows about 15% below it).

use std::sync::Arc;

use super::direct::{Band, Direct};
use super::geometry::ConvGeom;
use crate::kernels::gemm::microkernel::{
    self, Ahead, AlignedBuf, Half, InPlace, Packed, Shape, Store, Tile,
};
use crate::kernels::gemm::packed::{self, Epilogue, Out, PackedA, B};
use crate::kernels::vmath::vectorized;
use crate::packs::Keep;
use crate::par::Disjoint;
use crate::scratch::PerThread;

/// Tiles of the transposed product whose staged lines are used across the
/// weight panels before the next tiles (one tile alone, so that its lines
/// stay in L1, measured slower even where every depth step reads another
/// plane; 8, 32 and 128 measured within 2% of each other on 3x3
/// convolutions of 13x13 to 56x56, 128 ahead by a hair).
const TILES_PER_BLOCK: usize = 128;
/// Bytes of a weight panel's depth block of the transposed product, at
/// most: a deeper product is split in blocks that stay in L2.
const PANEL_BLOCK_BYTES: usize = 512 << 10;
/// Bytes of staging past which the transposed product runs in bands of
/// output rows, each staged just before its tiles run, into a buffer of
/// about [`BAND_BYTES`] per thread: the staging then stays in L2 between
/// its writes and reads (a 64->64 3x3 convolution at stride 2 on 160x160
/// stages 6.6 MB at once).
const BANDED_BYTES: usize = 1 << 20;
const BAND_BYTES: usize = 384 << 10;

/// Depth of a pointwise product's blocks, at most: deeper than the GEMM's
/// default, since a block past the first reloads the output (a 512->1000
/// 1x1 convolution on 13x13 ran 8% faster in one block than in two).
const POINTWISE_KC: usize = 512;

/// The ways a product is tiled (see [`Product`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Packed,
    Rows,
    Columns(Tiling),
}

/// How one group's product is tiled, and its weights packed for it.
#[derive(Debug, Clone)]
enum Product {
    Packed(PackedA),
    Rows(PackedA),
    Columns(Panels),
}

/// The weights of one group as the transposed product's right operand:
/// panel `p` holds channels `p*nr ..` as `[k][nr]`, zero past the last channel.
#[derive(Debug, Clone)]
struct Panels {
    channels: usize,
    k: usize,
    nr: usize,
    data: AlignedBuf,
}

impl Panels {
    fn new(w: &[f32], channels: usize, k: usize, nr: usize) -> Panels {
        let count = channels.div_ceil(nr);
        let mut data = AlignedBuf::zeroed(count * k * nr);
        for (p, panel) in data.as_mut_slice().chunks_mut(k * nr).enumerate() {
            for l in 0..nr.min(channels - p * nr) {
                let row = &w[(p * nr + l) * k..(p * nr + l + 1) * k];
                for (t, v) in row.iter().enumerate() {
                    panel[t * nr + l] = *v;
                }
            }
        }
        Panels {
            channels,
            k,
            nr,
            data,
        }
    }

    fn count(&self) -> usize {
        self.channels.div_ceil(self.nr)
    }

    /// Depth steps `k0..` of panel `p`.
    fn panel(&self, p: usize, k0: usize) -> Packed {
        Packed {
            ptr: self.data.as_slice()[(p * self.k + k0) * self.nr..].as_ptr(),
            width: self.nr,
        }
    }
}

/// `mr` output positions of the transposed product: from wide position
/// `start`, those of `positions`' mask, stored from output `positions.col`.
#[derive(Debug, Clone, Copy)]
struct PosTile {
    start: usize,
    /// Rows of the tile's kernel: the shape's, or fewer where an output row
    /// is split into tiles of near-equal rows ([`microkernel::run_short`]).
    mr: usize,
    positions: Half,
}

/// How the transposed product's positions are tiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tiling {
    /// Along each output row: `ceil(Wo / MR)` tiles per row, of near-equal
    /// rows where kernels that short exist (none padded), else of `MR`
    /// rows with the last one's padding dropped.
    Rows,
    /// Along the wide positions, the padding columns computed and dropped.
    Wide,
}

/// A convolution's staging, tiling and packed weights.
#[derive(Debug, Clone)]
pub struct ConvPlan {
    direct: Direct,
    shape: Shape,
    /// One per group (shared with the plans of other input shapes that
    /// pack the same weights alike).
    products: Arc<Vec<Product>>,
    /// The transposed product's position tiles.
    tiles: Vec<PosTile>,
    /// The last tile's first position.
    max_start: usize,
    /// Depth of the transposed product's blocks.
    kc: usize,
    /// The bands the transposed product runs in, if it does.
    band: Option<Band>,
}

/// Time per padded multiply-add of each way, in hundredths of the FMA
/// peak's (the transposed product's is raised where its depth is split, and
/// for one tap, where every depth step broadcasts from another plane).
/// Measured on Zen 5 (`bench --profile`), as the per-tile costs below.
const PACKED_SPEED: usize = 112;
const ROWS_SPEED: usize = 122;
const COLUMNS_SPEED: usize = 110;
const COLUMNS_SPLIT_SPEED: usize = 116;
const COLUMNS_ONE_TAP_SPEED: usize = 120;
/// One tap over fewer than [`ONE_TAP_PANELS`] weight panels: each staged
/// tile, a line from every input channel's plane, is read for only one or
/// two panels, so the product waits on those lines (256->32 and 512->64 1x1
/// convolutions ran at 50% of the peak this way, 65% packed).
const COLUMNS_ONE_TAP_FEW_SPEED: usize = 200;
const ONE_TAP_PANELS: usize = 4;
/// The same at a stride, over up to [`STRIDED_ONE_TAP_PANELS`] panels:
/// 256->128, 512->256 and 128->256 1x1 convolutions at stride 2 (4 to 8
/// panels) ran 12-20% slower by columns than packed, 512->1024 (21 or
/// more) 10% faster.
const STRIDED_ONE_TAP_PANELS: usize = 8;

/// The cost of a product, in hundredths of a cycle: `fmas` padded
/// multiply-adds at `speed` (`peak` per cycle at the peak: 32 in AVX-512
/// registers, 16 in AVX2 ones), and `tiles` tiles of `per_tile` cycles of
/// prologue and epilogue each.
fn cost(fmas: usize, (speed, peak): (usize, usize), tiles: usize, per_tile: usize) -> usize {
    fmas.saturating_mul(speed) / peak + tiles.saturating_mul(per_tile * 100)
}

impl ConvPlan {
    /// The plan for `g` with weights `w` (`[M, C/group, kh, kw]`), packed
    /// or taken as packed from `keep`; `None` where this CPU has no
    /// microkernels or the geometry does not fit.
    pub fn new(g: &ConvGeom, w: &[f32], keep: Keep) -> Option<ConvPlan> {
        if !packed::available() {
            return None;
        }
        let direct = Direct::new(g)?;
        let (mg, k) = (g.m / g.group, g.col_rows());
        if w.len() < g.group * mg * k || mg == 0 || k == 0 {
            return None;
        }
        let pointwise = g.is_pointwise();
        // A 1x1 convolution at a stride, unpadded: packed, its columns
        // gathered from the input as they are packed.
        let subsampled = !pointwise && g.kernel_size() == 1 && g.unpadded();
        let n = if pointwise {
            g.spatial_out()
        } else {
            direct.columns()
        };
        let pad = |v: usize, t: usize| v.div_ceil(t) * t;
        let banded = 4 * direct.scratch_floats() > BANDED_BYTES;
        let mut best: Option<(usize, Shape, Way)> = None;
        let mut consider = |cost: usize, shape: Shape, way: Way| {
            if best.is_none_or(|(c, _, _)| cost < c) {
                best = Some((cost, shape, way));
            }
        };
        // The input is copied once by every way of a one-tap product: staged,
        // or packed.
        let copied = if pointwise || subsampled {
            k * g.spatial_out() * 25
        } else {
            0
        };
        for &shape in Shape::all() {
            let (mr, nr, nv) = (shape.mr, shape.nr(), shape.nv);
            // Two FMA units, each a register of lanes per cycle.
            let peak = if nv == 1 { 16 } else { 32 };
            // Packed: tiles of mr channels by nr positions, each stored with
            // plain vector stores (a cycle for each of its mr * nv vectors
            // and the epilogue's work on it, measured: 8x48 and 6x64 tiles
            // ran up to 10% ahead of 14x32 on equal padded work).
            if pointwise || subsampled {
                let n = g.spatial_out();
                let tiles = mg.div_ceil(mr) * n.div_ceil(nr);
                let fmas = pad(mg, mr) * pad(n, nr) * k;
                let packed = cost(fmas, (PACKED_SPEED, peak), tiles, 40 + 4 * mr * nv) + copied;
                consider(packed, shape, Way::Packed);
            }
            // By rows: the same tiles over the wide positions, read in place.
            if !pointwise {
                let tiles = mg.div_ceil(mr) * n.div_ceil(nr);
                let fmas = pad(mg, mr) * pad(n, nr) * k;
                let rows = cost(fmas, (ROWS_SPEED, peak), tiles, 40 + 30 * nv) + copied;
                consider(rows, shape, Way::Rows);
            }
            // By columns: tiles of mr positions by nr channels, each
            // transposed (16×16 blocks) as it is stored.
            let panels = mg.div_ceil(nr);
            let few = panels < ONE_TAP_PANELS || subsampled && panels <= STRIDED_ONE_TAP_PANELS;
            let speed = if g.kernel_size() == 1 && few {
                COLUMNS_ONE_TAP_FEW_SPEED
            } else if g.kernel_size() == 1 {
                COLUMNS_ONE_TAP_SPEED
            } else if k * nr * 4 > PANEL_BLOCK_BYTES {
                COLUMNS_SPLIT_SPEED
            } else {
                COLUMNS_SPEED
            };
            for tiling in [Tiling::Rows, Tiling::Wide] {
                // A staging run in bands is tiled by rows.
                if tiling == Tiling::Wide && banded {
                    continue;
                }
                let tiles = position_tiles(&direct, shape, tiling);
                // Shorter tiles run a little slower (measured: 6 rows at
                // 94% of 14 rows' speed).
                let rows: usize = tiles.iter().map(|t| t.mr * (200 + mr - t.mr)).sum();
                let fmas = rows / 200 * pad(mg, nr) * k;
                consider(
                    cost(fmas, (speed, peak), tiles.len() * panels, 50 + 120 * nv) + copied,
                    shape,
                    Way::Columns(tiling),
                );
            }
        }
        let (_, shape, way) = best?;
        let packing = match way {
            Way::Packed => 0,
            Way::Rows => 1,
            Way::Columns(_) => 2,
        };
        let params = [packing, shape.mr, shape.nv, g.group, mg, k];
        let products = keep.get_or_make("conv.products", &params, || {
            (0..g.group)
                .map(|grp| {
                    let wg = &w[grp * mg * k..(grp + 1) * mg * k];
                    Some(match way {
                        Way::Columns(_) => Product::Columns(Panels::new(wg, mg, k, shape.nr())),
                        Way::Packed => Product::Packed(PackedA::with_depth(
                            wg,
                            (mg, k, k),
                            shape,
                            POINTWISE_KC,
                        )?),
                        // Rows read in place: one depth block (splitting it
                        // reloads every tile of the output, which measured
                        // slower).
                        Way::Rows => {
                            Product::Rows(PackedA::with_depth(wg, (mg, k, k), shape, usize::MAX)?)
                        }
                    })
                })
                .collect::<Option<Vec<_>>>()
        })?;
        let tiles = match way {
            Way::Columns(tiling) => position_tiles(&direct, shape, tiling),
            _ => Vec::new(),
        };
        let kc = depth_block(k, shape);
        // Bands of whole output rows (a prefix of the row tiles each, by
        // columns); the products by rows are never split in depth.
        let band = if banded && (way == Way::Rows || way == Way::Columns(Tiling::Rows) && kc == k) {
            direct.band(BAND_BYTES)
        } else {
            None
        };
        Some(ConvPlan {
            max_start: tiles.iter().map(|t| t.start).max().unwrap_or(0),
            kc,
            direct,
            shape,
            products,
            tiles,
            band,
        })
    }

    /// How the product runs, for schedule listings.
    pub fn describe(&self) -> String {
        let how = match self.products.first() {
            Some(Product::Packed(_)) => "packed",
            Some(Product::Rows(_)) => "rows",
            Some(Product::Columns(_)) => "columns",
            None => "empty",
        };
        format!("{how} {}x{}", self.shape.mr, self.shape.nr())
    }

    /// Floats of scratch a run needs: the staging, then the transposed
    /// product's partial sums when its depth is split (none in bands: each
    /// thread stages its bands in a buffer of its own).
    pub fn scratch_floats(&self) -> usize {
        match self.products.first() {
            Some(Product::Packed(_)) | None => 0,
            Some(Product::Rows(_) | Product::Columns(_)) if self.band.is_some() => 0,
            Some(Product::Rows(_)) => self.direct.scratch_floats(),
            Some(Product::Columns(w)) => {
                let partial = if self.kc < w.k {
                    self.tiles.len() * w.count() * self.shape.mr * w.nr
                } else {
                    0
                };
                self.direct.scratch_floats() + partial
            }
        }
    }

    /// Scratch a run takes on each thread ([`crate::scratch`]): staging
    /// tasks border rows, packed products pack panels of the right operand
    /// (the product of rows reads its staging in place), and bands are
    /// staged by the calling thread (the product of rows) or by each task
    /// (the transposed product).
    pub fn per_thread(&self) -> PerThread {
        let staging = PerThread::each(self.direct.per_thread());
        let band = self
            .band
            .as_ref()
            .map_or(0, |b| crate::scratch::floats_bytes(b.floats));
        self.products.iter().fold(PerThread::NONE, |most, product| {
            let need = match product {
                Product::Packed(w) => PerThread::each(w.per_thread()),
                // Its product reads the staging in place: no panel packed.
                Product::Rows(_) => PerThread {
                    caller: band,
                    each: staging.each,
                },
                Product::Columns(_) => staging.plus(PerThread::each(band)),
            };
            most.max(need)
        })
    }

    /// `y = act(bias + w * x + residual)` for one image: `x` its input
    /// channels, `y` and `ep.residual` its output channels, `ep.bias` all of them.
    pub fn run(&self, g: &ConvGeom, x: &[f32], y: &mut [f32], ep: Epilogue, staging: &mut [f32]) {
        let (sin, sout) = (g.spatial_in(), g.spatial_out());
        let (cg, mg) = (g.c / g.group, g.m / g.group);
        for (grp, product) in self.products.iter().enumerate() {
            let xg = &x[grp * cg * sin..(grp + 1) * cg * sin];
            let yg = &mut y[grp * mg * sout..(grp + 1) * mg * sout];
            let ep = Epilogue {
                bias: ep.bias.map(|b| &b[grp * mg..(grp + 1) * mg]),
                residual: ep
                    .residual
                    .map(|r| &r[grp * mg * sout..(grp + 1) * mg * sout]),
                act: ep.act,
            };
            match product {
                Product::Packed(w) if g.is_pointwise() => {
                    let b = B::Rows { b: xg, ldb: sout };
                    packed::gemm(w, b, sout, Out::dense(yg, sout), ep);
                }
                Product::Packed(w) => {
                    let fill = |c: usize, j0: usize, row: &mut [f32]| {
                        subsampled(g, &xg[c * sin..(c + 1) * sin], j0, row)
                    };
                    packed::gemm(w, B::Fill(&fill), sout, Out::dense(yg, sout), ep);
                }
                Product::Rows(w) => match &self.band {
                    Some(band) => crate::scratch::floats(band.floats, |staging| {
                        self.direct.run_rows(w, xg, yg, ep, staging, Some(band))
                    }),
                    None => self.direct.run_rows(w, xg, yg, ep, staging, None),
                },
                Product::Columns(w) => match &self.band {
                    Some(band) => self.run_bands(w, band, xg, yg, ep),
                    None => {
                        let (staging, partial) = staging.split_at_mut(self.direct.scratch_floats());
                        let staged = self.direct.stage(xg, staging);
                        self.run_columns(w, staged, partial, yg, ep);
                    }
                },
            }
        }
    }

    /// The transposed product over staged input `staged`, in depth blocks
    /// whose partial sums wait in `partial`.
    fn run_columns(
        &self,
        w: &Panels,
        staged: &[f32],
        partial: &mut [f32],
        y: &mut [f32],
        ep: Epilogue,
    ) {
        let [oh, ow] = self.direct.output();
        let sout = oh * ow;
        let (shape, offsets) = (self.shape, self.direct.offsets());
        let panels = w.count();
        let units = self.tiles.len() * panels;
        let blocks = w.k.div_ceil(self.kc);
        let tile_floats = shape.mr * w.nr;
        assert!(
            y.len() >= w.channels * sout
                && ep.bias.is_none_or(|b| b.len() >= w.channels)
                && ep.residual.is_none_or(|r| r.len() >= w.channels * sout)
                && offsets.len() >= w.k
                && self.direct.max_offset() + self.max_start + shape.mr <= staged.len()
                && (blocks == 1 || partial.len() >= units * tile_floats),
            "transposed conv operand too small"
        );
        let flops = units * tile_floats * w.k / blocks;
        let tasks = if flops < 1 << 20 {
            1
        } else {
            crate::par::threads().min(flops >> 19).min(units).max(1)
        };
        let (out, sums) = (Disjoint::new(y), Disjoint::new(partial));
        // Units in the order (block of tiles, panel, tile in block): a
        // block's staged lines stay in cache across the panels.
        let unit = |u: usize| {
            let per_block = TILES_PER_BLOCK.min(self.tiles.len()) * panels;
            let (block, rest) = (u / per_block, u % per_block);
            let in_block = TILES_PER_BLOCK.min(self.tiles.len() - block * TILES_PER_BLOCK);
            let (p, t) = (rest / in_block, rest % in_block);
            (p, block * TILES_PER_BLOCK + t)
        };
        // The weights each tile brings into L2 for the units after it: a
        // share of the panel the next panel's tiles read (the next depth
        // block's first panel after the last), split among the tiles of
        // this panel in its block of tiles.
        let ahead = |p: usize, ti: usize, kb: usize| {
            let block = ti / TILES_PER_BLOCK;
            let in_block = TILES_PER_BLOCK.min(self.tiles.len() - block * TILES_PER_BLOCK);
            let (np, nkb) = if p + 1 < panels {
                (p + 1, kb)
            } else {
                (0, kb + 1)
            };
            let nk0 = nkb * self.kc;
            if nk0 >= w.k {
                return None;
            }
            let lines = (self.kc.min(w.k - nk0) * w.nr).div_ceil(16);
            let share = lines.div_ceil(in_block);
            let first = (ti - block * TILES_PER_BLOCK) * share;
            (first < lines).then(|| Ahead {
                from: w.panel(np, nk0).ptr.wrapping_add(16 * first),
                lines: share.min(lines - first),
            })
        };
        for kb in 0..blocks {
            let (k0, kc) = (kb * self.kc, self.kc.min(w.k - kb * self.kc));
            let (first, last) = (kb == 0, kb + 1 == blocks);
            let run = |task: usize| {
                let (u0, u1) = (units * task / tasks, units * (task + 1) / tasks);
                for u in u0..u1 {
                    let (p, ti) = unit(u);
                    let (ch0, tile) = (p * w.nr, &self.tiles[ti]);
                    let ahead = ahead(p, ti, kb);
                    let a = InPlace {
                        base: staged[tile.start..].as_ptr(),
                        offsets: offsets[k0..].as_ptr(),
                    };
                    let b = w.panel(p, k0);
                    let t = Tile {
                        c: out.at(ch0 * sout),
                        ldc: sout,
                        rows: tile.mr,
                        store: Store::Columns {
                            positions: tile.positions,
                            lanes: w.nr.min(w.channels - ch0),
                            partial: sums.at((ti * panels + p) * tile_floats),
                            spill: !last,
                        },
                        load_c: !first,
                        bias: ep.bias.filter(|_| first).map(|b| b[ch0..].as_ptr()),
                        residual: ep.residual.map(|r| r[ch0 * sout..].as_ptr()),
                        act: ep.act,
                        ahead,
                    };
                    // SAFETY: the operands, the tile's part of `y` and its
                    // partial sums are in bounds (asserted above); units
                    // write disjoint parts of both.
                    let shape = Shape {
                        mr: tile.mr,
                        ..shape
                    };
                    unsafe { microkernel::run_short(shape, kc, &a, &b, &t) };
                }
            };
            if tasks == 1 {
                run(0);
            } else {
                crate::par::for_each(tasks, run);
            }
        }
    }
}

impl ConvPlan {
    /// The transposed product in bands of output rows, over the pool's
    /// threads a band at a time: each stages the input rows its band reads
    /// into its thread's buffer and runs the band's tiles over every panel.
    fn run_bands(&self, w: &Panels, band: &Band, x: &[f32], y: &mut [f32], ep: Epilogue) {
        let [oh, ow] = self.direct.output();
        let sout = oh * ow;
        let per_row = self.tiles.len() / oh;
        let offsets = band.offsets();
        assert!(
            y.len() >= w.channels * sout
                && ep.bias.is_none_or(|b| b.len() >= w.channels)
                && ep.residual.is_none_or(|r| r.len() >= w.channels * sout)
                && offsets.len() >= w.k
                && w.k == self.kc
                && per_row * oh == self.tiles.len()
                && band.max_offset() + self.tiles[per_row * band.rows - 1].start + self.shape.mr
                    <= band.floats,
            "transposed conv operand too small"
        );
        // As many rounds of bands over the threads as the band size needs,
        // the rows shared out evenly.
        let threads = crate::par::threads();
        let rounds = oh.div_ceil(threads * band.rows);
        let rows = oh.div_ceil(threads * rounds);
        let out = Disjoint::new(y);
        crate::par::for_each(oh.div_ceil(rows), |b| {
            let (r0, n) = (b * rows, rows.min(oh - b * rows));
            crate::scratch::floats(band.floats, |staging| {
                let staged = self.direct.stage_band(band, x, r0, staging);
                let base = r0 * ow;
                for p in 0..w.count() {
                    let ch0 = p * w.nr;
                    let b = w.panel(p, 0);
                    for tile in &self.tiles[..n * per_row] {
                        let a = InPlace {
                            base: staged[tile.start..].as_ptr(),
                            offsets: offsets.as_ptr(),
                        };
                        let t = Tile {
                            c: out.at(ch0 * sout + base),
                            ldc: sout,
                            rows: tile.mr,
                            store: Store::Columns {
                                positions: tile.positions,
                                lanes: w.nr.min(w.channels - ch0),
                                partial: std::ptr::null_mut(),
                                spill: false,
                            },
                            load_c: false,
                            bias: ep.bias.map(|b| b[ch0..].as_ptr()),
                            residual: ep.residual.map(|r| r[ch0 * sout + base..].as_ptr()),
                            act: ep.act,
                            ahead: None,
                        };
                        let shape = Shape {
                            mr: tile.mr,
                            ..self.shape
                        };
                        // SAFETY: the staged band, the panel and the band's
                        // rows of `y` are in bounds (asserted above); bands
                        // write disjoint rows.
                        unsafe { microkernel::run_short(shape, w.k, &a, &b, &t) };
                    }
                }
            })
        });
    }
}

/// Output positions `j0..` of a strided 1x1 convolution (unpadded) from
/// input plane `x`: `row[i]` is the input under position `j0 + i`.
fn subsampled(g: &ConvGeom, x: &[f32], j0: usize, row: &mut [f32]) {
    let ([iw, ow], [sh, sw]) = ([g.input[1], g.output[1]], [g.strides[0], g.strides[1]]);
    let (mut r, mut c) = (j0 / ow, j0 % ow);
    let mut rest = row;
    while !rest.is_empty() {
        let n = (ow - c).min(rest.len());
        let (seg, tail) = rest.split_at_mut(n);
        let line = &x[r * sh * iw + c * sw..];
        if sw == 2 && line.len() >= 2 * n {
            // Every other column: a deinterleave, vectorized.
            vectorized(|| {
                for (o, pair) in seg.iter_mut().zip(line.chunks_exact(2)) {
                    *o = pair[0];
                }
            });
        } else {
            for (o, v) in seg.iter_mut().zip(line.iter().step_by(sw)) {
                *o = *v;
            }
        }
        (r, c, rest) = (r + 1, 0, tail);
    }
}

/// Depth of the transposed product's blocks: whole, unless a panel's
/// weights pass [`PANEL_BLOCK_BYTES`].
fn depth_block(k: usize, shape: Shape) -> usize {
    let most = (PANEL_BLOCK_BYTES / (4 * shape.nr())).max(1);
    let blocks = k.div_ceil(most);
    k.div_ceil(blocks.max(1))
}

/// The transposed product's position tiles for kernels of `shape`, tiled
/// as `tiling` says.
fn position_tiles(d: &Direct, shape: Shape, tiling: Tiling) -> Vec<PosTile> {
    let ([oh, ow], pitch) = (d.output(), d.pitch());
    let mr = shape.mr;
    let per_row = ow.div_ceil(mr);
    if tiling == Tiling::Rows {
        // Near-equal tiles (the first `ow % per_row` one longer), where
        // there are kernels for them.
        let short = shape.short_rows().is_some_and(|s| ow / per_row >= s);
        let bounds = move |t: usize| {
            if short {
                (t * ow / per_row, (t + 1) * ow / per_row)
            } else {
                (t * mr, ((t + 1) * mr).min(ow))
            }
        };
        return (0..oh)
            .flat_map(|r| (0..per_row).map(move |t| (r, bounds(t))))
            .map(|(r, (c0, c1))| PosTile {
                start: r * pitch + c0,
                mr: if short { c1 - c0 } else { mr },
                positions: Half::prefix(c1 - c0, r * ow + c0),
            })
            .collect();
    }
    let n = d.columns();
    (0..n)
        .step_by(mr)
        .map(|start| {
            let mut mask = 0u16;
            for i in 0..mr.min(n - start) {
                if (start + i) % pitch < ow {
                    mask |= 1 << i;
                }
            }
            let first = start + mask.trailing_zeros().min(15) as usize;
            PosTile {
                start,
                mr,
                positions: Half {
                    mask,
                    col: first / pitch * ow + (first % pitch).min(ow),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rlx_ir::ops::Activation;

    use super::*;

    /// The convolution by its definition, f64 sums, then the residual and
    /// `act` (a sigmoid or HardSwish).
    fn naive(
        g: &ConvGeom,
        x: &[f32],
        w: &[f32],
        bias: &[f32],
        residual: &[f32],
        act: Activation,
    ) -> Vec<f32> {
        let (cg, mg) = (g.c / g.group, g.m / g.group);
        let [ih, iw] = [g.input[0], g.input[1]];
        let [oh, ow] = [g.output[0], g.output[1]];
        let [kh, kw] = [g.kernel[0], g.kernel[1]];
        let mut y = vec![0f32; g.m * oh * ow];
        for m in 0..g.m {
            let grp = m / mg;
            for (i, j) in (0..oh).flat_map(|i| (0..ow).map(move |j| (i, j))) {
                let mut s = bias[m] as f64;
                for c in 0..cg {
                    for (a, b) in (0..kh).flat_map(|a| (0..kw).map(move |b| (a, b))) {
                        let r =
                            (i * g.strides[0] + a * g.dilations[0]) as isize - g.pads[0] as isize;
                        let q =
                            (j * g.strides[1] + b * g.dilations[1]) as isize - g.pads[1] as isize;
                        if r < 0 || q < 0 || r >= ih as isize || q >= iw as isize {
                            continue;
                        }
                        let xv = x[((grp * cg + c) * ih + r as usize) * iw + q as usize];
                        let wv = w[((m * cg + c) * kh + a) * kw + b];
                        s += xv as f64 * wv as f64;
                    }
                }
                let at = (m * oh + i) * ow + j;
                let v = s as f32 + residual[at];
                y[at] = match act {
                    Activation::HardSwish => v * (v / 6.0 + 0.5).clamp(0.0, 1.0),
                    Activation::Relu6 => v.clamp(0.0, 6.0),
                    _ => 1.0 / (1.0 + (-v).exp()),
                };
            }
        }
        y
    }

    #[allow(clippy::too_many_arguments)]
    fn geom(
        c: usize,
        m: usize,
        group: usize,
        input: [usize; 2],
        k: [usize; 2],
        s: [usize; 2],
        d: [usize; 2],
        p: [usize; 2],
    ) -> ConvGeom {
        let out = |i: usize| (input[i] + 2 * p[i] - (k[i] - 1) * d[i] - 1) / s[i] + 1;
        ConvGeom {
            n: 1,
            c,
            m,
            group,
            input: input.to_vec(),
            kernel: k.to_vec(),
            output: vec![out(0), out(1)],
            strides: s.to_vec(),
            dilations: d.to_vec(),
            pads: p.to_vec(),
        }
    }

    /// `g` with `pads` more positions at the end of each axis.
    fn end_padded(mut g: ConvGeom, pads: [usize; 2]) -> ConvGeom {
        for d in 0..2 {
            let extent = (g.kernel[d] - 1) * g.dilations[d] + 1;
            g.output[d] = (g.input[d] + g.pads[d] + pads[d] - extent) / g.strides[d] + 1;
        }
        g
    }

    /// A plan of each way and every shape, forced.
    pub(super) fn plans(g: &ConvGeom, w: &[f32], split: bool) -> Vec<ConvPlan> {
        let chosen = ConvPlan::new(g, w, Keep::nowhere()).unwrap();
        let (mg, k) = (g.m / g.group, g.col_rows());
        let mut all = vec![chosen.clone()];
        for shape in Shape::runnable() {
            // Packed, by rows, by columns tiled wide and by output rows, and
            // the last two in bands of two output rows.
            for way in 0..6 {
                let one_tap = g.kernel_size() == 1 && g.unpadded();
                if way == 0 && !one_tap {
                    continue;
                }
                let products = (0..g.group)
                    .map(|grp| {
                        let wg = &w[grp * mg * k..(grp + 1) * mg * k];
                        match way {
                            0 => Product::Packed(PackedA::new(wg, mg, k, k, shape).unwrap()),
                            1 | 5 => Product::Rows(PackedA::new(wg, mg, k, k, shape).unwrap()),
                            _ => Product::Columns(Panels::new(wg, mg, k, shape.nr())),
                        }
                    })
                    .collect::<Vec<_>>()
                    .into();
                let tiling = if way == 2 { Tiling::Wide } else { Tiling::Rows };
                let kc = if split && k > 100 {
                    37
                } else {
                    depth_block(k, shape)
                };
                let banded = way == 5 || way == 4 && kc == k && shape.short_rows().is_some();
                if way == 4 && !banded {
                    continue;
                }
                let tiles = position_tiles(&chosen.direct, shape, tiling);
                all.push(ConvPlan {
                    max_start: tiles.iter().map(|t| t.start).max().unwrap_or(0),
                    kc,
                    direct: chosen.direct.clone(),
                    shape,
                    products,
                    tiles,
                    band: chosen.direct.band(1).filter(|_| banded),
                });
            }
        }
        all
    }

    #[test]
    fn every_way_matches_the_definition() {
        if !packed::available() {
            return;
        }
        let cases = [
            geom(3, 16, 1, [9, 11], [3, 3], [1, 1], [1, 1], [1, 1]),
            geom(5, 30, 1, [7, 7], [3, 3], [2, 2], [1, 1], [1, 1]),
            geom(3, 8, 1, [20, 17], [7, 7], [2, 2], [1, 1], [3, 3]),
            geom(4, 6, 2, [8, 9], [3, 3], [1, 1], [2, 2], [2, 2]),
            geom(6, 15, 1, [10, 12], [1, 1], [2, 2], [1, 1], [0, 0]),
            geom(5, 20, 1, [9, 7], [1, 1], [3, 2], [1, 1], [0, 0]),
            geom(40, 33, 1, [13, 13], [1, 1], [2, 2], [1, 1], [0, 0]),
            geom(2, 3, 1, [1, 40], [1, 5], [1, 3], [1, 1], [0, 2]),
            geom(8, 29, 1, [5, 6], [2, 3], [3, 1], [1, 2], [0, 1]),
            geom(24, 70, 1, [7, 7], [1, 1], [1, 1], [1, 1], [0, 0]),
            geom(300, 33, 1, [14, 14], [3, 3], [1, 1], [1, 1], [1, 1]),
            // Rows split into tiles of 10 and 9, and of 13 and 12.
            geom(20, 40, 1, [6, 19], [3, 3], [1, 1], [1, 1], [1, 1]),
            geom(9, 70, 1, [3, 25], [3, 3], [1, 1], [1, 1], [1, 1]),
            // 1x1 kernels padded at the end only (pads keeps the begin
            // pads; the output shows the rest): not pointwise, whose GEMM
            // reads the input as the output's positions.
            end_padded(
                geom(6, 15, 1, [10, 12], [1, 1], [1, 1], [1, 1], [0, 0]),
                [0, 2],
            ),
            end_padded(
                geom(5, 20, 1, [9, 7], [1, 1], [2, 2], [1, 1], [0, 0]),
                [1, 2],
            ),
            end_padded(
                geom(2, 3, 1, [1, 40], [1, 1], [1, 1], [1, 1], [0, 0]),
                [0, 3],
            ),
        ];
        let pool = crate::par::Pool::new(3).unwrap();
        for g in cases {
            let ks = g.kernel_size();
            let x: Vec<f32> = (0..g.c * g.spatial_in())
                .map(|i| ((i * 7) % 17) as f32 * 0.1 - 0.8)
                .collect();
            let w: Vec<f32> = (0..g.m * g.c / g.group * ks)
                .map(|i| ((i * 5) % 13) as f32 * 0.02 - 0.12)
                .collect();
            let bias: Vec<f32> = (0..g.m).map(|i| i as f32 * 0.01).collect();
            let residual: Vec<f32> = (0..g.m * g.spatial_out())
                .map(|i| (i % 7) as f32 * 0.1)
                .collect();
            for act in [
                Activation::Sigmoid,
                Activation::HardSwish,
                Activation::Relu6,
            ] {
                let want = naive(&g, &x, &w, &bias, &residual, act);
                for plan in plans(&g, &w, true) {
                    let mut staging = vec![f32::NAN; plan.scratch_floats()];
                    let mut y = vec![f32::NAN; g.m * g.spatial_out()];
                    let ep = Epilogue {
                        bias: Some(&bias),
                        residual: Some(&residual),
                        act,
                    };
                    for threads in [1, 3] {
                        y.fill(f32::NAN);
                        if threads == 1 {
                            plan.run(&g, &x, &mut y, ep, &mut staging);
                        } else {
                            pool.install(|| plan.run(&g, &x, &mut y, ep, &mut staging));
                        }
                        for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                            assert!(
                                (a - b).abs() <= 1e-5,
                                "{g:?} {act} {} on {threads} threads at {i}: {a} vs {b}",
                                plan.describe()
                            );
                        }
                    }
                }
            }
        }
    }
}

/// A timing table of every way and shape on representative convolutions,
/// to tune the costs above: `cargo test --release -p rlx-cpu --lib
/// conv_plan::speed -- --ignored --nocapture` (the plan chosen is listed first).
#[cfg(test)]
mod speed {
    use rlx_ir::ops::Activation;

    use super::*;

    /// (input channels, output channels, rows and columns, kernel, stride, pad)
    const CASES: [(usize, usize, [usize; 2], usize, usize, usize); 26] = [
        (256, 128, [28, 28], 1, 2, 0),
        (512, 256, [14, 14], 1, 2, 0),
        (128, 256, [56, 56], 1, 2, 0),
        (512, 1024, [14, 14], 1, 2, 0),
        (32, 128, [56, 56], 1, 1, 0),
        (128, 32, [56, 56], 1, 1, 0),
        (1024, 256, [7, 7], 1, 1, 0),
        (3, 64, [224, 224], 7, 2, 3),
        (3, 24, [224, 224], 3, 2, 1),
        (64, 64, [56, 56], 3, 1, 1),
        (64, 256, [56, 56], 1, 1, 0),
        (256, 256, [14, 14], 3, 1, 1),
        (1024, 256, [14, 14], 1, 1, 0),
        (512, 512, [7, 7], 3, 1, 1),
        (512, 2048, [7, 7], 1, 1, 0),
        // SqueezeNet's squeeze and expand 1x1s, and its classifier on 13x13.
        (16, 64, [55, 55], 1, 1, 0),
        (64, 16, [55, 55], 1, 1, 0),
        (256, 32, [27, 27], 1, 1, 0),
        (512, 64, [13, 13], 1, 1, 0),
        (512, 1000, [13, 13], 1, 1, 0),
        // A captcha CNN's 3x3s on planes whose rows are not whole tiles.
        (32, 64, [25, 77], 3, 1, 1),
        (64, 128, [12, 38], 3, 1, 1),
        (128, 256, [6, 19], 3, 1, 1),
        // A YOLO's stride-2 3x3s on planes whose staging passes L2 (run in
        // bands).
        (3, 16, [640, 640], 3, 2, 1),
        (16, 32, [320, 320], 3, 2, 1),
        (64, 64, [160, 160], 3, 2, 1),
    ];

    #[test]
    #[ignore = "a timing table for tuning, not a test"]
    fn timings() {
        for (c, m, hw, k, s, p) in CASES {
            let out = hw.map(|d| (d + 2 * p - k) / s + 1);
            let g = ConvGeom {
                n: 1,
                c,
                m,
                group: 1,
                input: hw.to_vec(),
                kernel: vec![k, k],
                output: out.to_vec(),
                strides: vec![s, s],
                dilations: vec![1, 1],
                pads: vec![p, p],
            };
            let x: Vec<f32> = (0..g.c * g.spatial_in())
                .map(|i| (i % 7) as f32 * 0.1)
                .collect();
            let w: Vec<f32> = (0..g.m * g.col_rows())
                .map(|i| (i % 5) as f32 * 0.01)
                .collect();
            let bias = vec![0.1f32; g.m];
            let mut y = vec![0f32; g.m * g.spatial_out()];
            let flops = g.flops(g.spatial_out()) as f64;
            for plan in super::tests::plans(&g, &w, false) {
                let mut staging = vec![0f32; plan.scratch_floats()];
                let ep = Epilogue {
                    bias: Some(&bias),
                    residual: None,
                    act: Activation::Relu,
                };
                let t = std::time::Instant::now();
                let mut n = 0;
                while t.elapsed().as_secs_f64() < 0.3 {
                    crate::par::inline(|| plan.run(&g, &x, &mut y, ep, &mut staging));
                    n += 1;
                }
                let dt = t.elapsed().as_secs_f64() / n as f64;
                println!(
                    "{c:>5}->{m:<5} {:>3}x{:<3} k{k} s{s} {:>14} {:8.3} ms {:6.1} GFLOP/s",
                    hw[0],
                    hw[1],
                    plan.describe(),
                    dt * 1e3,
                    flops / dt / 1e9
                );
            }
        }
    }
}
