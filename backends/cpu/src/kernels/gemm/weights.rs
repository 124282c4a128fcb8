//! f32 GEMM against a constant right operand packed once, when the kernel is
//! built: `C[m×n] (+)= X[m×k] · W[k×n]`, with `X` the activations (the rows
//! of a MatMul's left operand, a recurrent layer's time steps) and `W` the
//! weights.
//!
//! The mirror of [`super::packed`], whose constant operand is the left
//! one: here the weights are the microkernel's `B` panels ([`Shape::nr`]
//! columns by the product's depth, zero past the last column) and `X` is
//! packed per run into `MR`-row panels. Tiles go to `C` by rows with plain
//! vector stores (the last panel's columns under a mask), so nothing is
//! transposed. The weights stream from memory once per depth block: groups
//! of panels that fit L2 sweep every row panel of `X`, which is packed
//! first and stays in cache.

use rlx_ir::ops::Activation;

use super::microkernel::{self, Ahead, AlignedBuf, Packed, Shape, Store, Tile};
use super::packed::{self, Cols};
use crate::par::Disjoint;

/// Depth of one block, at most: a 14×512 panel of `X` is 28 KiB (L1), a
/// 512×32 panel of `W` 64 KiB (L2).
const KC: usize = 512;
/// Bytes of the weight panels swept over all of `X` at a time (within L2).
const GROUP_BYTES: usize = 256 << 10;

/// `W` (k×n) in panels of `nr` columns: panel `j` holds `w[t, j*nr + l]`
/// at `(j * k + t) * nr + l`, zero past column `n`.
#[derive(Debug, Clone)]
pub struct PackedW {
    k: usize,
    n: usize,
    shape: Shape,
    data: AlignedBuf,
}

impl PackedW {
    /// Packs `W` (k×n), element `(t, j)` at `w[t * strides.0 + j * strides.1]`
    /// (a MatMul's `[k, n]` is `(n, 1)`, a recurrent layer's `[n, k]` is
    /// `(1, k)`), for products of about `m` rows; `None` when this CPU has
    /// no microkernel or `w` is too short.
    pub fn new(
        w: &[f32],
        k: usize,
        n: usize,
        strides: (usize, usize),
        m: usize,
    ) -> Option<PackedW> {
        if !packed::available() || k == 0 || n == 0 {
            return None;
        }
        let last = (k - 1) * strides.0 + (n - 1) * strides.1;
        if last >= w.len() {
            return None;
        }
        let shape = Shape::for_product(m.max(1), n);
        let nr = shape.nr();
        let panels = n.div_ceil(nr);
        let mut data = AlignedBuf::zeroed(panels * k * nr);
        for (p, panel) in data.as_mut_slice().chunks_mut(k * nr).enumerate() {
            for (t, row) in panel.chunks_mut(nr).enumerate() {
                for (l, v) in row.iter_mut().enumerate().take(n.saturating_sub(p * nr)) {
                    *v = w[t * strides.0 + (p * nr + l) * strides.1];
                }
            }
        }
        Some(PackedW { k, n, shape, data })
    }

    pub fn depth(&self) -> usize {
        self.k
    }

    pub fn columns(&self) -> usize {
        self.n
    }

    fn panels(&self) -> usize {
        self.n.div_ceil(self.shape.nr())
    }

    /// Depth steps `k0..` of panel `j`.
    fn panel(&self, j: usize, k0: usize) -> Packed {
        let nr = self.shape.nr();
        Packed {
            ptr: self.data.as_slice()[(j * self.k + k0) * nr..].as_ptr(),
            width: nr,
        }
    }

    /// Scratch the calling thread of a [`PackedW::product`] of `m` rows
    /// takes ([`crate::scratch`]): `X` packed in panels of `MR` rows.
    pub fn scratch(&self, m: usize) -> usize {
        match m {
            0 | 1 => 0,
            m => crate::scratch::floats_bytes(m.div_ceil(self.shape.mr) * self.k * self.shape.mr),
        }
    }

    /// `C = act(C + X · W)` when `accumulate`, else `act(X · W)`: `x` holds
    /// `m` rows of `k` (row stride `k`), `c` holds `m` rows of `n`. ReLU is
    /// applied as tiles are stored; any other activation is the caller's.
    /// Threads: [`crate::par::threads`], over groups of weight panels.
    pub fn product(&self, x: &[f32], m: usize, c: &mut [f32], accumulate: bool, act: Activation) {
        let (k, n) = (self.k, self.n);
        assert!(
            x.len() >= m * k && c.len() >= m * n,
            "weights gemm operand too small"
        );
        assert!(
            matches!(act, Activation::None | Activation::Relu),
            "weights gemm stores ReLU only"
        );
        if m == 0 {
            return;
        }
        if m == 1 {
            let nr = self.shape.nr();
            return super::panel_row::product(
                self.data.as_slice(),
                k,
                n,
                nr,
                x,
                c,
                accumulate,
                act,
            );
        }
        let (mr, nr) = (self.shape.mr, self.shape.nr());
        let rows = m.div_ceil(mr);
        crate::scratch::floats(rows * k * mr, |packed| {
            pack_x(x, m, k, mr, packed);
            let packed = &packed[..];
            let panels = self.panels();
            let group = (GROUP_BYTES / (4 * k.min(KC) * nr)).clamp(1, panels);
            let groups = panels.div_ceil(group);
            let kblocks = k.div_ceil(KC);
            let kc = k.div_ceil(kblocks);
            let out = Disjoint::new(c);
            // Tasks: the panel groups, each split by row tiles where there
            // are fewer groups than threads (a 512-row product of 64
            // columns, two panels, ran on two of sixteen threads).
            let threads = crate::par::threads();
            let flops = m * n * k.min(KC);
            let parts = if threads == 1 || flops < 1 << 20 {
                1
            } else {
                threads.div_ceil(groups).min(rows)
            };
            let tasks = groups * parts;
            let serial = tasks == 1 || threads == 1 || flops < 1 << 20;
            for kb in 0..kblocks {
                let (k0, depth) = (kb * kc, kc.min(k - kb * kc));
                let last = kb + 1 == kblocks;
                let run = |task: usize| {
                    let (gi, part) = (task % groups, task / groups);
                    let (r0, r1) = (rows * part / parts, rows * (part + 1) / parts);
                    let js = gi * group..((gi + 1) * group).min(panels);
                    // Where groups run in order on this thread, the next
                    // one's panels come into L2 while this one's tiles run
                    // (the first rows over a group otherwise wait on memory).
                    let next = if gi + 1 < groups {
                        Some((gi + 1, kb))
                    } else {
                        (kb + 1 < kblocks).then_some((0, kb + 1))
                    };
                    let next = next.filter(|_| serial).map(|(ng, nkb)| {
                        let nk0 = nkb * kc;
                        let njs = ng * group..((ng + 1) * group).min(panels);
                        (njs, nk0, (kc.min(k - nk0) * nr).div_ceil(16))
                    });
                    let tiles = (r1 - r0) * js.len();
                    let ahead = |q: usize| {
                        let (njs, nk0, per_panel) = next.clone()?;
                        let share = (njs.len() * per_panel).div_ceil(tiles);
                        let at = q * share;
                        let (panel, line) = (njs.start + at / per_panel, at % per_panel);
                        (panel < njs.end).then(|| Ahead {
                            from: self.panel(panel, nk0).ptr.wrapping_add(16 * line),
                            lines: share.min(per_panel - line),
                        })
                    };
                    // A tile per panel, its parts made once and the tile
                    // moved from row to row: a tile made afresh copied its
                    // parts right after they were written piecewise, and the
                    // copy missed store forwarding (see `packed::block`).
                    let mut ts: Vec<Tile> = js
                        .clone()
                        .map(|j| Tile {
                            c: out.at(0),
                            ldc: n,
                            rows: 0,
                            store: Store::Rows(Cols::Dense.parts(j * nr, n)),
                            load_c: accumulate || kb > 0,
                            bias: None,
                            residual: None,
                            act: if last { act } else { Activation::None },
                            ahead: None,
                        })
                        .collect();
                    for r in r0..r1 {
                        let a = Packed {
                            ptr: packed[(r * k + k0) * mr..].as_ptr(),
                            width: mr,
                        };
                        for (j, t) in js.clone().zip(ts.iter_mut()) {
                            t.c = out.at(r * mr * n);
                            t.rows = mr.min(m - r * mr);
                            t.ahead = ahead((r - r0) * js.len() + j - js.start);
                            // SAFETY: the CPU runs the shape (checked when
                            // packed); both panels hold `depth` rows from
                            // `k0`; the tile's kept elements lie in `c`
                            // (asserted above); groups write disjoint columns.
                            unsafe {
                                microkernel::run(self.shape, depth, &a, &self.panel(j, k0), t)
                            };
                        }
                    }
                };
                if serial {
                    (0..tasks).for_each(run);
                } else {
                    crate::par::for_each(tasks, run);
                }
            }
        });
    }
}

/// `x` (m×k) into panels of `mr` rows: panel `r` holds `x[r*mr + i, t]` at
/// `(r * k + t) * mr + i`, zero past row `m`. Sixteen steps of a panel at a
/// time are one 16×16 transpose in registers.
fn pack_x(x: &[f32], m: usize, k: usize, mr: usize, packed: &mut [f32]) {
    assert!(mr <= 16 && x.len() >= m * k, "weights gemm: bad packing");
    // Over the pool in runs of panels where there is a megabyte or more to
    // move (a 512 x 1024 one-hot was packed on one of sixteen threads).
    let threads = crate::par::threads();
    if threads > 1 && m * k >= 1 << 18 {
        let panels = m.div_ceil(mr);
        let per = panels.div_ceil(threads);
        crate::par::chunks_mut(packed, per * k * mr, |c, part| {
            let r0 = c * per * mr;
            let rows = (m - r0).min(per * mr);
            pack_rows(&x[r0 * k..(r0 + rows) * k], rows, k, mr, part);
        });
        return;
    }
    pack_rows(x, m, k, mr, packed);
}

/// [`pack_x`] on this thread.
fn pack_rows(x: &[f32], m: usize, k: usize, mr: usize, packed: &mut [f32]) {
    for (r, panel) in packed.chunks_mut(k * mr).enumerate() {
        let rows = mr.min(m - r * mr);
        let x = &x[r * mr * k..(r * mr + rows) * k];
        #[cfg(target_arch = "x86_64")]
        if crate::kernels::vmath::avx512() {
            // SAFETY: the CPU has AVX-512F; `x` holds `rows` rows of `k`,
            // `panel` `k` of `mr`.
            unsafe { pack_panel(x, rows, k, mr, panel) };
            continue;
        }
        // Row by row (AVX2 shapes have at most 6 rows).
        for (i, row) in x.chunks_exact(k).enumerate() {
            for (t, v) in row.iter().enumerate() {
                panel[t * mr + i] = *v;
            }
        }
        for t in 0..k {
            panel[t * mr + rows..(t + 1) * mr].fill(0.0);
        }
    }
}

/// One panel of [`pack_x`]: `rows` rows of `x` (row stride `k`).
///
/// # Safety
/// AVX-512F is present; `x` holds `rows * k` floats, `panel` `k * mr`, `rows <= mr <= 16`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_panel(x: &[f32], rows: usize, k: usize, mr: usize, panel: &mut [f32]) {
    use std::arch::x86_64::*;
    let keep = ((1u32 << mr) - 1) as __mmask16;
    let mut t = 0;
    while t < k {
        let lanes = (k - t).min(16);
        let part = ((1u32 << lanes) - 1) as __mmask16;
        let mut block = [_mm512_setzero_ps(); 16];
        for (i, v) in block.iter_mut().enumerate().take(rows) {
            *v = _mm512_maskz_loadu_ps(part, x.as_ptr().add(i * k + t));
        }
        let cols = microkernel::transpose16(block);
        for (j, v) in cols.iter().enumerate().take(lanes) {
            _mm512_mask_storeu_ps(panel.as_mut_ptr().add((t + j) * mr), keep, *v);
        }
        t += 16;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], w: &[f32], m: usize, k: usize, n: usize, c0: &[f32]) -> Vec<f32> {
        (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                let s: f64 = (0..k)
                    .map(|t| x[i * k + t] as f64 * w[t * n + j] as f64)
                    .sum();
                c0[e] + s as f32
            })
            .collect()
    }

    #[test]
    fn matches_the_definition_on_every_edge() {
        if !packed::available() {
            return;
        }
        let pool = crate::par::Pool::new(3).unwrap();
        // Rows and columns off every tile width, depths across blocks.
        for (m, k, n) in [
            (1, 1, 1),
            (5, 7, 3),
            (14, 33, 32),
            (29, 600, 50),
            (64, 512, 200),
            (3, 1100, 17),
            // Many rows, one group of panels: split by rows over the pool
            // (the second packed over the pool too).
            (300, 128, 64),
            (600, 512, 40),
        ] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7) % 19) as f32 * 0.1 - 0.9)
                .collect();
            let w: Vec<f32> = (0..k * n)
                .map(|i| ((i * 5) % 11) as f32 * 0.05 - 0.25)
                .collect();
            let c0: Vec<f32> = (0..m * n).map(|i| (i % 3) as f32).collect();
            let w_t: Vec<f32> = (0..n * k).map(|e| w[(e % k) * n + e / k]).collect();
            for (packed, name) in [
                (PackedW::new(&w, k, n, (n, 1), m).unwrap(), "[k, n]"),
                (PackedW::new(&w_t, k, n, (1, k), m).unwrap(), "[n, k]"),
            ] {
                for accumulate in [false, true] {
                    let start = if accumulate {
                        c0.clone()
                    } else {
                        vec![0.0; m * n]
                    };
                    let want = naive(&x, &w, m, k, n, &start);
                    for threads in [1, 3] {
                        let mut c = if accumulate {
                            c0.clone()
                        } else {
                            vec![f32::NAN; m * n]
                        };
                        let run = || packed.product(&x, m, &mut c, accumulate, Activation::None);
                        if threads == 1 {
                            crate::par::inline(run);
                        } else {
                            pool.install(run);
                        }
                        for (e, (a, b)) in c.iter().zip(&want).enumerate() {
                            assert!(
                                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                                "{name} {m}x{k}x{n} accumulate={accumulate} threads={threads} at {e}: {a} vs {b}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn relu_is_applied_as_tiles_are_stored() {
        if !packed::available() {
            return;
        }
        let (m, k, n) = (9, 20, 40);
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
        let w: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 9) as f32 - 4.0).collect();
        let packed = PackedW::new(&w, k, n, (n, 1), m).unwrap();
        let mut c = vec![f32::NAN; m * n];
        crate::par::inline(|| packed.product(&x, m, &mut c, false, Activation::Relu));
        let want = naive(&x, &w, m, k, n, &vec![0.0; m * n]);
        for (a, b) in c.iter().zip(&want) {
            assert_eq!(*a, b.max(0.0));
        }
    }
}

/// Timings against the `gemm` crate on the products this path takes:
/// `cargo test --release -p rlx-cpu --lib gemm::weights::speed -- --ignored --nocapture`.
#[cfg(test)]
mod speed {
    use super::*;

    #[test]
    #[ignore = "a timing table, not a test"]
    fn against_the_gemm_crate() {
        // A bidirectional LSTM's input projection, an ALBERT FFN, a BERT FFN.
        for (m, k, n) in [
            (64, 512, 1024),
            (256, 116, 468),
            (256, 468, 116),
            (128, 768, 3072),
        ] {
            let x: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
            let w: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.01).collect();
            let mut c = vec![0f32; m * n];
            let packed = PackedW::new(&w, k, n, (n, 1), m).unwrap();
            let time = |f: &mut dyn FnMut()| {
                let t = std::time::Instant::now();
                let mut runs = 0;
                while t.elapsed().as_secs_f64() < 0.3 {
                    f();
                    runs += 1;
                }
                t.elapsed().as_secs_f64() / runs as f64
            };
            let flops = 2.0 * (m * n * k) as f64;
            let ours = crate::par::inline(|| {
                time(&mut || packed.product(&x, m, &mut c, false, Activation::None))
            });
            let theirs = crate::par::inline(|| {
                time(&mut || super::super::gemm(m, n, k, &x, k, &w, n, &mut c, n, false))
            });
            println!(
                "{m}x{k}x{n}: packed weights {:.1} GFLOP/s, gemm crate {:.1} GFLOP/s",
                flops / ours / 1e9,
                flops / theirs / 1e9
            );
        }
    }
}
