//! MatMul on CUDA: numpy-broadcast batched f32 matrix products as cuBLASLt
//! GEMMs ([`Gemm`]). Batch dims that stay contiguous are merged; a batch dim
//! that repeats B while A and C run on is folded into M (one larger GEMM);
//! one batch dim remains as the strided batch, and any further (outer) ones
//! unroll into separate GEMMs.

use rlx_gpu::geometry::{strides, LResult};
use rlx_gpu::{NodeIo, Operand, Range};
use rlx_ir::{DType, Node, TensorType};

use super::Cx;
use crate::schedule::{Gemm, GemmLaunch, Launch};

/// The most GEMMs one MatMul unrolls into (outer batch dims).
pub const MAX_UNROLL: usize = 1024;

/// A batch dim: size and the element strides of A, B and C along it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dim {
    size: usize,
    a: usize,
    b: usize,
    c: usize,
}

fn f32_operand(what: &str, o: &Operand) -> LResult<()> {
    if o.dtype == DType::F32 {
        Ok(())
    } else {
        Err(format!(
            "matmul on {} {what} has no CUDA lowering (f32 only)",
            o.dtype
        ))
    }
}

/// Batch dims of A (`ab`) and B (`bb`) broadcast against each other, with C
/// contiguous: `(size, stride_a, stride_b, stride_c)` outermost first, size-1
/// dims dropped and contiguous neighbours merged.
fn batch_dims(ad: &[usize], bd: &[usize], mn: usize) -> LResult<Vec<Dim>> {
    let (ab, bb) = (&ad[..ad.len() - 2], &bd[..bd.len() - 2]);
    let rank = ab.len().max(bb.len());
    let (sa, sb) = (strides(ad), strides(bd));
    let mut dims = Vec::with_capacity(rank);
    for i in 0..rank {
        let ai = (i + ab.len()).checked_sub(rank);
        let bi = (i + bb.len()).checked_sub(rank);
        let da = ai.map_or(1, |x| ab[x]);
        let db = bi.map_or(1, |x| bb[x]);
        let size = da.max(db);
        if (da != size && da != 1) || (db != size && db != 1) {
            return Err(format!(
                "matmul batch dims {ab:?} and {bb:?} do not broadcast"
            ));
        }
        dims.push(Dim {
            size,
            a: if da == 1 { 0 } else { ai.map_or(0, |x| sa[x]) },
            b: if db == 1 { 0 } else { bi.map_or(0, |x| sb[x]) },
            c: 0,
        });
    }
    let mut sc = mn;
    for d in dims.iter_mut().rev() {
        d.c = sc;
        sc *= d.size;
    }
    let mut merged: Vec<Dim> = Vec::new();
    for d in dims.into_iter().filter(|d| d.size != 1) {
        if let Some(l) = merged.last_mut() {
            if l.a == d.a * d.size && l.b == d.b * d.size && l.c == d.c * d.size {
                *l = Dim {
                    size: l.size * d.size,
                    ..d
                };
                continue;
            }
        }
        merged.push(d);
    }
    Ok(merged)
}

/// Bytes an operand spans: `batch` matrices `batch_stride` apart, `rows`
/// rows of `cols` elements `ld` apart.
fn span(at: u64, batch: usize, batch_stride: usize, rows: usize, ld: usize, cols: usize) -> Range {
    let elems = (batch - 1) * batch_stride + (rows - 1) * ld + cols;
    Range {
        offset: at,
        bytes: (elems * 4) as u64,
    }
}

/// The GEMMs of a MatMul with inputs `io.ins[0..2]` and output `io.outs[0]`.
/// f32 operands of rank 1 or more.
pub fn supports(_node: &Node, inputs: &[TensorType]) -> LResult<()> {
    for (i, t) in inputs.iter().take(2).enumerate() {
        if t.dtype != DType::F32 {
            return Err(format!(
                "matmul on {} (input {i}) has no cuda kernel (f32 only)",
                t.dtype
            ));
        }
        if t.shape.rank() == 0 {
            return Err("matmul of a scalar".into());
        }
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    for l in gemm_launches(&cx.io)? {
        cx.push(l);
    }
    Ok(())
}

/// The GEMM launches of a MatMul with these operands.
pub fn gemm_launches(io: &NodeIo) -> LResult<Vec<Launch>> {
    let (a, b, c) = match (io.ins.first(), io.ins.get(1), io.outs.first()) {
        (Some(a), Some(b), Some(c)) => (a, b, c),
        _ => return Err("matmul needs two inputs and an output".into()),
    };
    f32_operand("A", a)?;
    f32_operand("B", b)?;
    f32_operand("output", c)?;
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
    let (mut m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
    let n = bd[bd.len() - 1];
    if bd[bd.len() - 2] != k {
        return Err(format!(
            "matmul inner dims differ: {:?} x {:?}",
            a.dims, b.dims
        ));
    }
    let mut dims = batch_dims(&ad, &bd, m * n)?;
    let total: usize = dims.iter().map(|d| d.size).product::<usize>() * m * n;
    if total != c.numel() {
        return Err(format!(
            "matmul of {:?} x {:?} does not fill an output of {:?}",
            a.dims, b.dims, c.dims
        ));
    }
    if m == 0 || n == 0 || dims.iter().any(|d| d.size == 0) {
        return Ok(Vec::new());
    }
    if k == 0 {
        return Err("matmul with an inner dimension of 0 has no CUDA lowering".into());
    }
    // B repeats along the innermost batch dim while A and C run on: one GEMM
    // with that dim folded into M.
    if let Some(d) = dims.last().copied() {
        if d.b == 0 && d.a == m * k && d.c == m * n {
            m *= d.size;
            dims.pop();
        }
    }
    let inner = dims.pop().unwrap_or(Dim {
        size: 1,
        a: 0,
        b: 0,
        c: 0,
    });
    let outer: usize = dims.iter().map(|d| d.size).product();
    if outer > MAX_UNROLL {
        return Err(format!(
            "matmul broadcasting over {} outer batches (more than {MAX_UNROLL} GEMMs)",
            outer
        ));
    }
    let mut launches = Vec::with_capacity(outer);
    for mut i in 0..outer {
        // Element offsets of this outer batch, innermost outer dim fastest.
        let (mut oa, mut ob, mut oc) = (0, 0, 0);
        for d in dims.iter().rev() {
            let j = i % d.size;
            i /= d.size;
            oa += j * d.a;
            ob += j * d.b;
            oc += j * d.c;
        }
        let at = |o: &Operand, e: usize| o.at + (e * 4) as u64;
        let gemm = Gemm {
            m: m as u64,
            n: n as u64,
            k: k as u64,
            trans_a: false,
            trans_b: false,
            lda: k as u64,
            ldb: n as u64,
            ldc: n as u64,
            batch: inner.size as u64,
            stride_a: inner.a as u64,
            stride_b: inner.b as u64,
            stride_c: inner.c as u64,
            a: span(at(a, oa), inner.size, inner.a, m, k, k),
            b: span(at(b, ob), inner.size, inner.b, k, n, n),
            c: span(at(c, oc), inner.size, inner.c, m, n, n),
            bias: None,
            relu: false,
        };
        launches.push(Launch::Gemm(GemmLaunch {
            gemm,
            node: String::new(),
            origin: Vec::new(),
        }));
    }
    Ok(launches)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(at: u64, dims: &[usize]) -> Operand {
        Operand {
            at,
            bytes: (dims.iter().product::<usize>() * 4) as u64,
            dtype: DType::F32,
            dims: dims.to_vec(),
        }
    }

    fn gemms(a: &[usize], b: &[usize], c: &[usize]) -> Vec<Gemm> {
        let io = NodeIo {
            ins: vec![op(0, a), op(4096, b)],
            outs: vec![op(8192, c)],
            values: vec![None, None],
            scratch_at: 0,
            consts_at: 0,
        };
        gemm_launches(&io)
            .unwrap()
            .into_iter()
            .map(|l| match l {
                Launch::Gemm(g) => g.gemm,
                Launch::Kernel(_) => panic!("a kernel"),
            })
            .collect()
    }

    #[test]
    fn shared_weights_fold_into_m() {
        let g = gemms(&[2, 4, 8], &[8, 5], &[2, 4, 5]);
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].m, g[0].n, g[0].k, g[0].batch), (8, 5, 8, 1));
    }

    #[test]
    fn batches_stride_and_broadcast() {
        let g = gemms(&[3, 4, 8], &[3, 8, 5], &[3, 4, 5]);
        assert_eq!(g.len(), 1);
        assert_eq!(
            (g[0].batch, g[0].stride_a, g[0].stride_b, g[0].stride_c),
            (3, 32, 40, 20)
        );
        // A repeats: stride 0, B and C run on.
        let g = gemms(&[4, 8], &[3, 8, 5], &[3, 4, 5]);
        assert_eq!((g[0].batch, g[0].stride_a, g[0].stride_b), (3, 0, 40));
        // [2,1] x [1,3] batch dims: two outer GEMMs of batch 3.
        let g = gemms(&[2, 1, 4, 8], &[1, 3, 8, 5], &[2, 3, 4, 5]);
        assert_eq!(g.len(), 2);
        assert_eq!((g[1].batch, g[1].stride_a, g[1].stride_b), (3, 0, 40));
        assert_eq!(g[1].a.offset, 32 * 4);
        assert_eq!(g[1].c.offset, 8192 + 60 * 4);
    }

    #[test]
    fn vectors_and_mismatches() {
        let g = gemms(&[8], &[8, 5], &[5]);
        assert_eq!((g[0].m, g[0].n, g[0].k), (1, 5, 8));
        let g = gemms(&[4, 8], &[8], &[4]);
        assert_eq!((g[0].m, g[0].n, g[0].k, g[0].ldb), (4, 1, 8, 1));
        let io = NodeIo {
            ins: vec![op(0, &[4, 8]), op(4096, &[7, 5])],
            outs: vec![op(8192, &[4, 5])],
            values: vec![None, None],
            scratch_at: 0,
            consts_at: 0,
        };
        assert!(gemm_launches(&io).unwrap_err().contains("inner dims"));
    }
}
