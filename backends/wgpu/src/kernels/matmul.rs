//! MatMul lowering onto the tiled, batched, strided GEMM in `wgsl/matmul.wgsl`,
//! which convolution reuses (see [`Gemm`]).

use rlx_ir::DType;

use super::{strides, u32_of, Cx, LResult};
use crate::schedule::Range;

const SRC: &str = include_str!("../../../../kernels/wgsl/matmul.wgsl");

/// One strided GEMM (element strides), optionally batched over up to 4 dims.
#[derive(Debug, Clone)]
pub struct Gemm {
    pub a: Range,
    pub b: Range,
    pub c: Range,
    pub bias: Option<(Range, usize, usize)>,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_s: [usize; 2],
    pub b_s: [usize; 2],
    pub c_s: [usize; 2],
    pub relu: bool,
    /// Batch dims with the a, b and c strides of each.
    pub batch: Vec<(usize, usize, usize, usize)>,
    /// Bias strides per batch dim (empty: 0).
    pub bias_batch: Vec<usize>,
}

impl Gemm {
    /// Emits the GEMM; when an unbatched operand exceeds half the binding
    /// limit, as one dispatch per K chunk, accumulating into C (bias and
    /// activation with the last chunk).
    pub fn emit(&self, cx: &mut Cx) -> LResult<()> {
        let span = |rows: usize, rs: usize, cols: usize, cs: usize| -> u64 {
            ((rows.saturating_sub(1) * rs + cols.saturating_sub(1) * cs + 1) * 4) as u64
        };
        let half = (cx.max_binding / 2).max(4);
        let big = span(self.m, self.a_s[0], self.k, self.a_s[1]).max(span(
            self.k,
            self.b_s[0],
            self.n,
            self.b_s[1],
        ));
        if !self.batch.is_empty() || big <= half || self.k < 2 {
            return self.emit_one(cx, 0);
        }
        let chunks = (big.div_ceil(half) as usize).clamp(2, self.k);
        let kc = self.k.div_ceil(chunks);
        let mut k0 = 0;
        while k0 < self.k {
            let k = kc.min(self.k - k0);
            let sub = |r: Range, at: usize, bytes: u64| Range {
                offset: r.offset + (at * 4) as u64,
                bytes,
            };
            let last = k0 + k == self.k;
            let part = Gemm {
                a: sub(
                    self.a,
                    k0 * self.a_s[1],
                    span(self.m, self.a_s[0], k, self.a_s[1]),
                ),
                b: sub(
                    self.b,
                    k0 * self.b_s[0],
                    span(k, self.b_s[0], self.n, self.b_s[1]),
                ),
                bias: if last { self.bias } else { None },
                relu: last && self.relu,
                k,
                ..self.clone()
            };
            part.emit_one(cx, u32::from(k0 > 0) << 2)?;
            k0 += k;
        }
        Ok(())
    }

    fn emit_one(&self, cx: &mut Cx, extra_flags: u32) -> LResult<()> {
        if self.batch.len() > 4 {
            return Err("matmul with more than 4 batch dims after collapsing".into());
        }
        let tiles_m = self.m.div_ceil(32);
        let tiles_n = self.n.div_ceil(32);
        let batches: usize = self.batch.iter().map(|b| b.0).product();
        let mut bd = [1u32; 4];
        let (mut sa, mut sb, mut sc, mut sbias) = ([0u32; 4], [0u32; 4], [0u32; 4], [0u32; 4]);
        let off = 4 - self.batch.len();
        for (i, &(d, a, b, c)) in self.batch.iter().enumerate() {
            bd[off + i] = u32_of(d, "a batch dim")?;
            sa[off + i] = u32_of(a, "a stride")?;
            sb[off + i] = u32_of(b, "a stride")?;
            sc[off + i] = u32_of(c, "a stride")?;
            sbias[off + i] = u32_of(self.bias_batch.get(i).copied().unwrap_or(0), "a stride")?;
        }
        let (bias, bsm, bsn) = match self.bias {
            Some((r, sm, sn)) => (r, sm, sn),
            None => (self.c, 0, 0),
        };
        let flags = u32::from(self.bias.is_some()) | (u32::from(self.relu) << 1) | extra_flags;
        let mut p = Vec::with_capacity(36);
        for v in [
            self.m,
            self.n,
            self.k,
            self.a_s[0],
            self.a_s[1],
            self.b_s[0],
            self.b_s[1],
            self.c_s[0],
            self.c_s[1],
            bsm,
            bsn,
        ] {
            p.push(u32_of(v, "a matmul size")?);
        }
        p.push(flags);
        p.push(u32_of(tiles_m, "tiles")?);
        p.push(u32_of(tiles_n, "tiles")?);
        p.push(u32_of(batches, "batches")?);
        p.extend(bd);
        p.extend(sa);
        p.extend(sb);
        p.extend(sc);
        p.extend(sbias);
        let pipe = cx.pipeline("matmul.tiled32x32", SRC);
        let groups = (tiles_m * tiles_n * batches) as u64;
        cx.dispatch(pipe, vec![self.a, self.b, self.c, bias], p, groups);
        Ok(())
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (a, b, c) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    if a.dtype != DType::F32 || b.dtype != DType::F32 {
        return Err(format!("matmul on {} has no wgpu kernel", a.dtype));
    }
    if a.dims.is_empty() || b.dims.is_empty() {
        return Err("matmul of a scalar".into());
    }
    let ad = if a.dims.len() == 1 {
        vec![1, a.dims[0]]
    } else {
        a.dims.clone()
    };
    let bd = if b.dims.len() == 1 {
        vec![b.dims[0], 1]
    } else {
        b.dims.clone()
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
    let mut cstride = m * n;
    let mut dims_c = Vec::new();
    for i in 0..rank {
        let ai = (i + ab.len()).checked_sub(rank);
        let bi = (i + bb.len()).checked_sub(rank);
        let da = ai.map_or(1, |x| ab[x]);
        let db = bi.map_or(1, |x| bb[x]);
        let d = da.max(db);
        if (da != d && da != 1) || (db != d && db != 1) {
            return Err("matmul batch dims do not broadcast".into());
        }
        let s_a = if da == 1 { 0 } else { ai.map_or(0, |x| sa[x]) };
        let s_b = if db == 1 { 0 } else { bi.map_or(0, |x| sb[x]) };
        dims_c.push(d);
        batch.push((d, s_a, s_b, 0));
    }
    for i in (0..rank).rev() {
        batch[i].3 = cstride;
        cstride *= dims_c[i];
    }
    batch.retain(|b| b.0 != 1);
    // Merge batch dims that stay contiguous for all three.
    let mut merged: Vec<(usize, usize, usize, usize)> = Vec::new();
    for b in batch {
        if let Some(l) = merged.last_mut() {
            if l.1 == b.1 * b.0 && l.2 == b.2 * b.0 && l.3 == b.3 * b.0 {
                *l = (l.0 * b.0, b.1, b.2, b.3);
                continue;
            }
        }
        merged.push(b);
    }
    Gemm {
        a: a.range(),
        b: b.range(),
        c: c.range(),
        bias: None,
        m,
        n,
        k,
        a_s: [k, 1],
        b_s: [n, 1],
        c_s: [n, 1],
        relu: false,
        batch: merged,
        bias_batch: Vec::new(),
    }
    .emit(cx)
}
