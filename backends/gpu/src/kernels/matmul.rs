//! The `matmul` kernel family: one batched, strided GEMM `C = act(A * B +
//! bias)` that MatMul and convolution lower onto. [`matmul`] turns MatMul
//! operand dims into a [`Gemm`] (vector promotion, batch broadcasting,
//! merging of batch dims that stay contiguous); [`Gemm::params`] fills the
//! kernel's [`MatmulParams`] for 32x32 output tiles.

use crate::geometry::{strides, u32_of, LResult};

crate::kernel_params! {
    /// A batched strided GEMM over 32x32 output tiles (element strides).
    pub struct MatmulParams {
        /// Rows of A and C.
        pub m: u32,
        /// Columns of B and C.
        pub n: u32,
        /// Columns of A, rows of B.
        pub k: u32,
        /// A's row stride.
        pub a_sm: u32,
        /// A's column stride.
        pub a_sk: u32,
        /// B's row stride.
        pub b_sk: u32,
        /// B's column stride.
        pub b_sn: u32,
        /// C's row stride.
        pub c_sm: u32,
        /// C's column stride.
        pub c_sn: u32,
        /// The bias's row stride.
        pub bias_sm: u32,
        /// The bias's column stride.
        pub bias_sn: u32,
        /// Bit 0: add the bias, bit 1: apply the kernel's epilogue activation,
        /// bit 2: accumulate into C.
        pub flags: u32,
        /// Tiles along M.
        pub tiles_m: u32,
        /// Tiles along N.
        pub tiles_n: u32,
        /// Product of the batch dims.
        pub batches: u32,
        /// Batch dims, right-aligned (leading ones are 1).
        pub batch: [u32; 4],
        /// A's stride per batch dim.
        pub a_sb: [u32; 4],
        /// B's stride per batch dim.
        pub b_sb: [u32; 4],
        /// C's stride per batch dim.
        pub c_sb: [u32; 4],
        /// The bias's stride per batch dim.
        pub bias_sb: [u32; 4],
    }
}

/// The operands of the GEMM, in launch order (`bias` repeats `c` when absent).
pub const MATMUL_OPERANDS: &[&str] = &["a", "b", "c", "bias"];

/// Output tile edge of the GEMM kernel.
pub const TILE: usize = 64;

/// One batch dim of a GEMM with the A, B and C element strides across it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchDim {
    pub dim: usize,
    pub a: usize,
    pub b: usize,
    pub c: usize,
}

/// The shape of one strided GEMM (element strides), optionally batched over
/// up to 4 dims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// A's (row, column) strides.
    pub a_s: [usize; 2],
    pub b_s: [usize; 2],
    pub c_s: [usize; 2],
    /// `Some((row, column))` strides: a bias is added.
    pub bias: Option<[usize; 2]>,
    /// Apply the epilogue activation the kernel was made with.
    pub activate: bool,
    pub batch: Vec<BatchDim>,
    /// Bias strides per batch dim (missing: 0).
    pub bias_batch: Vec<usize>,
}

/// The GEMM of a MatMul of `a` and `b` (numpy semantics: a 1-D A is a row,
/// a 1-D B a column, batch dims broadcast), C dense.
pub fn matmul(a: &[usize], b: &[usize]) -> LResult<Gemm> {
    if a.is_empty() || b.is_empty() {
        return Err("matmul of a scalar".into());
    }
    let ad = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let bd = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
    let n = bd[bd.len() - 1];
    if bd[bd.len() - 2] != k {
        return Err("matmul inner dims differ".into());
    }
    let (ab, bb) = (&ad[..ad.len() - 2], &bd[..bd.len() - 2]);
    let rank = ab.len().max(bb.len());
    let (sa, sb) = (strides(&ad), strides(&bd));
    let mut batch = Vec::new();
    for i in 0..rank {
        let ai = (i + ab.len()).checked_sub(rank);
        let bi = (i + bb.len()).checked_sub(rank);
        let da = ai.map_or(1, |x| ab[x]);
        let db = bi.map_or(1, |x| bb[x]);
        let d = da.max(db);
        if (da != d && da != 1) || (db != d && db != 1) {
            return Err("matmul batch dims do not broadcast".into());
        }
        batch.push(BatchDim {
            dim: d,
            a: if da == 1 { 0 } else { ai.map_or(0, |x| sa[x]) },
            b: if db == 1 { 0 } else { bi.map_or(0, |x| sb[x]) },
            c: 0,
        });
    }
    let mut cstride = m * n;
    for bd in batch.iter_mut().rev() {
        bd.c = cstride;
        cstride *= bd.dim;
    }
    batch.retain(|b| b.dim != 1);
    // Merge batch dims that stay contiguous for all three.
    let mut merged: Vec<BatchDim> = Vec::new();
    for b in batch {
        if let Some(l) = merged.last_mut() {
            if l.a == b.a * b.dim && l.b == b.b * b.dim && l.c == b.c * b.dim {
                *l = BatchDim {
                    dim: l.dim * b.dim,
                    ..b
                };
                continue;
            }
        }
        merged.push(b);
    }
    Ok(Gemm {
        m,
        n,
        k,
        a_s: [k, 1],
        b_s: [n, 1],
        c_s: [n, 1],
        bias: None,
        activate: false,
        batch: merged,
        bias_batch: Vec::new(),
    })
}

impl Gemm {
    /// Workgroups (blocks) of the launch: one per output tile and batch.
    pub fn groups(&self) -> u64 {
        let batches: usize = self.batch.iter().map(|b| b.dim).product();
        (self.m.div_ceil(TILE) * self.n.div_ceil(TILE) * batches) as u64
    }

    /// The kernel parameters; `accumulate`: add into C's current values.
    pub fn params(&self, accumulate: bool) -> LResult<MatmulParams> {
        if self.batch.len() > 4 {
            return Err("matmul with more than 4 batch dims after collapsing".into());
        }
        let w = |v: usize| u32_of(v, "a matmul size");
        let mut p = MatmulParams {
            batch: [1; 4],
            ..MatmulParams::default()
        };
        let off = 4 - self.batch.len();
        for (i, bd) in self.batch.iter().enumerate() {
            p.batch[off + i] = u32_of(bd.dim, "a batch dim")?;
            p.a_sb[off + i] = u32_of(bd.a, "a stride")?;
            p.b_sb[off + i] = u32_of(bd.b, "a stride")?;
            p.c_sb[off + i] = u32_of(bd.c, "a stride")?;
            p.bias_sb[off + i] = u32_of(self.bias_batch.get(i).copied().unwrap_or(0), "a stride")?;
        }
        let [bias_sm, bias_sn] = self.bias.unwrap_or([0, 0]);
        p.m = w(self.m)?;
        p.n = w(self.n)?;
        p.k = w(self.k)?;
        [p.a_sm, p.a_sk] = [w(self.a_s[0])?, w(self.a_s[1])?];
        [p.b_sk, p.b_sn] = [w(self.b_s[0])?, w(self.b_s[1])?];
        [p.c_sm, p.c_sn] = [w(self.c_s[0])?, w(self.c_s[1])?];
        [p.bias_sm, p.bias_sn] = [w(bias_sm)?, w(bias_sn)?];
        p.flags = u32::from(self.bias.is_some())
            | (u32::from(self.activate) << 1)
            | (u32::from(accumulate) << 2);
        p.tiles_m = u32_of(self.m.div_ceil(TILE), "tiles")?;
        p.tiles_n = u32_of(self.n.div_ceil(TILE), "tiles")?;
        let batches: usize = self.batch.iter().map(|b| b.dim).product();
        p.batches = u32_of(batches, "batches")?;
        Ok(p)
    }
}

crate::kernel_params! {
    /// The sum of a split-K GEMM's partial products: `C[m, n] = act(sum over
    /// s of part[s, m, n] + bias)`, one invocation per output element.
    pub struct SplitKSumParams {
        pub m: u32,
        pub n: u32,
        /// Partial products (K chunks).
        pub splits: u32,
        pub c_sm: u32,
        pub c_sn: u32,
        pub bias_sm: u32,
        pub bias_sn: u32,
        /// Bit 0: add bias, bit 1: apply the epilogue activation.
        pub flags: u32,
    }
}

/// The operand names of the split-K sum, in launch order.
pub const SPLIT_K_SUM_OPERANDS: &[&str] = &["part", "c", "bias"];

/// Output tiles below which a GEMM's K is split over this many workgroups
/// at most: ~4 workgroups of 64 invocations per SM of a large GPU (132 on
/// an H200), whose 64 accumulators a thread and next-step prefetch keep
/// many loads and FMAs in flight each.
pub const SPLIT_K_GROUPS: usize = 512;

/// A split of K for an unbatched GEMM whose output tiles are too few to
/// fill a device: `Some(splits)` (a power of two dividing K, chunks of 64
/// or more), or `None` when the GEMM is large enough as it is.
pub fn split_k(g: &Gemm) -> Option<usize> {
    let batches: usize = g.batch.iter().map(|b| b.dim).product();
    if batches != 1 {
        return None;
    }
    let tiles = g.m.div_ceil(TILE) * g.n.div_ceil(TILE);
    let mut s = 1;
    while s < 32 && tiles * s * 2 <= SPLIT_K_GROUPS && g.k % (s * 2) == 0 && g.k / (s * 2) >= 64 {
        s *= 2;
    }
    (s > 1).then_some(s)
}

impl Gemm {
    /// The same product as one GEMM of `batch * m` rows when B is shared by
    /// every batch entry (a linear layer over `[batch, m, k]`) and A's and
    /// C's entries follow each other row after row: one large GEMM instead
    /// of `batch` thin ones (a `[197, 1, 768]` input would otherwise fill
    /// one row of every 32-row tile).
    pub fn fold_batch_into_rows(self) -> Gemm {
        let [b] = self.batch.as_slice() else {
            return self;
        };
        let rows = self.m * self.a_s[0];
        // A bias that varies along rows or batch entries would need its
        // own row stride across the fold.
        let row_bias = self.bias.is_some_and(|[sm, _]| sm != 0);
        let batch_bias = self.bias_batch.iter().any(|&s| s != 0);
        if b.b != 0 || b.a != rows || b.c != self.m * self.c_s[0] || row_bias || batch_bias {
            return self;
        }
        Gemm {
            m: self.m * b.dim,
            batch: Vec::new(),
            bias_batch: Vec::new(),
            ..self
        }
    }

    /// The partial products of a K split in `splits` chunks, written dense
    /// as `[splits, m, n]` (one batch entry per chunk); bias and
    /// activation wait for the sum.
    pub fn split_parts(&self, splits: usize) -> Gemm {
        let kc = self.k / splits;
        Gemm {
            k: kc,
            c_s: [self.n, 1],
            bias: None,
            activate: false,
            batch: vec![BatchDim {
                dim: splits,
                a: kc * self.a_s[1],
                b: kc * self.b_s[0],
                c: self.m * self.n,
            }],
            bias_batch: Vec::new(),
            ..self.clone()
        }
    }

    /// The parameters of the sum of [`Gemm::split_parts`] into C.
    pub fn split_sum(&self, splits: usize) -> LResult<SplitKSumParams> {
        let w = |v: usize| u32_of(v, "a matmul size");
        let [bias_sm, bias_sn] = self.bias.unwrap_or([0, 0]);
        Ok(SplitKSumParams {
            m: w(self.m)?,
            n: w(self.n)?,
            splits: w(splits)?,
            c_sm: w(self.c_s[0])?,
            c_sn: w(self.c_s[1])?,
            bias_sm: w(bias_sm)?,
            bias_sn: w(bias_sn)?,
            flags: u32::from(self.bias.is_some()) | (u32::from(self.activate) << 1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_promote_and_batches_broadcast() {
        let g = matmul(&[4], &[4, 5]).unwrap();
        assert_eq!((g.m, g.n, g.k), (1, 5, 4));
        assert!(g.batch.is_empty());
        let g = matmul(&[2, 3, 4, 5], &[5, 6]).unwrap();
        // Both batch dims of A are contiguous: one merged dim of 6, B repeats.
        assert_eq!(
            g.batch,
            vec![BatchDim {
                dim: 6,
                a: 20,
                b: 0,
                c: 24
            }]
        );
        let g = matmul(&[2, 1, 4, 5], &[3, 5, 6]).unwrap();
        assert_eq!(g.batch.len(), 2);
        assert_eq!(
            g.batch[1],
            BatchDim {
                dim: 3,
                a: 0,
                b: 30,
                c: 24
            }
        );
        assert!(matmul(&[2, 4, 5], &[3, 5, 6]).is_err());
        assert!(matmul(&[4, 5], &[4, 6]).is_err());
    }

    #[test]
    fn params_right_align_batches() {
        let g = matmul(&[3, 40, 5], &[3, 5, 70]).unwrap();
        assert_eq!(g.groups(), 2 * 3);
        let p = g.params(true).unwrap();
        assert_eq!((p.tiles_m, p.tiles_n, p.batches), (1, 2, 3));
        assert_eq!(p.batch, [1, 1, 1, 3]);
        assert_eq!(p.c_sb, [0, 0, 0, 2800]);
        assert_eq!(p.flags, 4);
    }

    #[test]
    fn small_output_grids_split_k() {
        let g = matmul(&[128, 3072], &[3072, 768]).unwrap();
        assert_eq!(split_k(&g), Some(16));
        let parts = g.split_parts(16);
        assert_eq!(
            (parts.k, parts.c_s, parts.batch[0].a, parts.batch[0].b),
            (192, [768, 1], 192, 192 * 768)
        );
        assert_eq!(parts.batch[0].c, 128 * 768);
        // Enough tiles already, or a K with no even split of 64 or more.
        assert_eq!(
            split_k(&matmul(&[2048, 2048], &[2048, 2048]).unwrap()),
            None
        );
        assert_eq!(split_k(&matmul(&[32, 100], &[100, 32]).unwrap()), None);
        assert_eq!(split_k(&matmul(&[2, 32, 512], &[512, 32]).unwrap()), None);
    }

    #[test]
    fn a_shared_b_folds_the_batch_into_rows() {
        let g = matmul(&[197, 1, 768], &[768, 3072])
            .unwrap()
            .fold_batch_into_rows();
        assert_eq!((g.m, g.n, g.k, g.batch.len()), (197, 3072, 768, 0));
        let g = matmul(&[4, 8, 16], &[16, 5])
            .unwrap()
            .fold_batch_into_rows();
        assert_eq!((g.m, g.batch.len()), (32, 0));
        // B per batch entry, or A broadcast: stays batched.
        assert_eq!(
            matmul(&[4, 8, 16], &[4, 16, 5])
                .unwrap()
                .fold_batch_into_rows()
                .batch
                .len(),
            1
        );
        assert_eq!(
            matmul(&[8, 16], &[4, 16, 5])
                .unwrap()
                .fold_batch_into_rows()
                .batch
                .len(),
            1
        );
    }
}
