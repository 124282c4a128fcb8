//! MatMul and FusedMatMul on CUDA: numpy-broadcast batched f32 matrix
//! products as cuBLASLt GEMMs ([`Gemm`], exact fp32). The batching analysis
//! is rlx-gpu's [`matmul`] (vector promotion, broadcasting, merging of
//! contiguous batch dims); here a batch dim that repeats B while A and C
//! run on is folded into M (one larger GEMM), one batch dim remains as the
//! strided batch, and any further (outer) ones unroll into separate GEMMs.
//! FusedMatMul's bias and activation go to cuBLASLt's epilogue when it has
//! them (a bias along N; none, ReLU or tanh-approximated GELU), else to the
//! [`epilogue`](super::epilogue) kernel after the GEMMs. Products too small
//! for a library call to pay its way run in the [`tile_gemm`] kernel instead,
//! with the bias and any activation in the same launch, and products of a
//! few rows against a wide matrix (a decoder's step) in the [`row_gemv`]
//! kernel.

use rlx_gpu::geometry::{broadcast_strides, LResult};
use rlx_gpu::kernels::matmul::{matmul, BatchDim};
use rlx_gpu::{NodeIo, Operand, Range};
use rlx_ir::ops::Activation;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{epilogue, row_gemv, tile_gemm, Cx};
use crate::schedule::{Gemm, GemmAct, GemmLaunch, Launch};
use crate::SmallGemm;

/// The most GEMMs one MatMul unrolls into (outer batch dims).
pub const MAX_UNROLL: usize = 1024;

/// The dtypes cuBLASLt multiplies here (f16 and bf16 with f32 compute and
/// accumulation, f64 natively).
fn gemm_dtype(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
}

fn same_operand(what: &str, o: &Operand, d: DType) -> LResult<()> {
    if o.dtype == d {
        Ok(())
    } else {
        Err(format!(
            "matmul of {d} with {} {what} has no CUDA lowering",
            o.dtype
        ))
    }
}

/// Bytes an operand spans: `batch` matrices `batch_stride` apart, `rows`
/// rows of `cols` elements `ld` apart, elements of `size` bytes.
fn span(
    at: u64,
    batch: usize,
    batch_stride: usize,
    rows: usize,
    ld: usize,
    cols: usize,
    size: usize,
) -> Range {
    let elems = (batch - 1) * batch_stride + (rows - 1) * ld + cols;
    Range {
        offset: at,
        bytes: (elems * size) as u64,
    }
}

/// Whether cuBLASLt's epilogue takes the bias (of the output's dtype) and
/// activation of a GEMM on `d`: f32, f16 and bf16 (f64 GEMMs have none).
fn lt_epilogue(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16)
}

/// Operands of rank 1 or more, all f32, f16, bf16 or f64 alike (a fused
/// bias and activation run in cuBLASLt's epilogue for f32, f16 and bf16, in
/// the epilogue kernel for f64).
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = inputs.first().map_or(DType::F32, |t| t.dtype);
    for (i, t) in inputs.iter().enumerate() {
        if !gemm_dtype(d) || t.dtype != d {
            return Err(format!(
                "{} on {} (input {i}) has no cuda kernel (f32, f16, bf16 or f64 alike)",
                node.op.name(),
                t.dtype
            ));
        }
        if i < 2 && t.shape.rank() == 0 {
            return Err("matmul of a scalar".into());
        }
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let act = match &cx.node.op {
        Op::FusedMatMul(f) => f.activation,
        _ => Activation::None,
    };
    let bias = cx.io.ins.get(2).cloned();
    let c = cx.output(0)?.clone();
    // cuBLASLt's bias is one value per column of C, for every row and batch.
    let along_n = match &bias {
        None => true,
        Some(b) => {
            let st = broadcast_strides(&b.dims, &c.dims)?;
            let n = c.dims.last().copied().unwrap_or(1);
            st.iter().rev().skip(1).all(|&s| s == 0) && (n == 1 || st.last() == Some(&1))
        }
    };
    if let Some(min_rows) = cx.opts.few_rows.min_rows() {
        if row_gemvs(cx, min_rows, bias.as_ref(), along_n, act)? {
            return Ok(());
        }
    }
    if cx.opts.small_gemm == SmallGemm::Tile && tiles(cx, bias.as_ref(), along_n, act)? {
        return Ok(());
    }
    let lt_act = match act {
        Activation::None => Some(GemmAct::None),
        Activation::Relu => Some(GemmAct::Relu),
        Activation::GeluTanh => Some(GemmAct::GeluTanh),
        _ => None,
    };
    let fused = match lt_act {
        Some(a) if along_n && lt_epilogue(c.dtype) => Some((bias.as_ref().map(|b| b.range()), a)),
        _ => None,
    };
    let (lt_bias, lt) = fused.unwrap_or((None, GemmAct::None));
    for l in gemm_launches(&cx.io, lt_bias, lt)? {
        cx.push(l);
    }
    if fused.is_none() {
        let b = bias.as_ref().map(|b| (b.range(), b.dims.as_slice()));
        epilogue::emit(cx, c.dtype, c.range(), &c.dims, b, None, act)?;
    }
    Ok(())
}

/// Emits the MatMul as row GEMV launches if it is one product of a few rows
/// ([`row_gemv::plan`]); false, emitting nothing, if not. The bias and
/// activation go with it when the bias runs along N, else into the
/// epilogue kernel after it.
fn row_gemvs(
    cx: &mut Cx,
    min_rows: u64,
    bias: Option<&Operand>,
    along_n: bool,
    act: Activation,
) -> LResult<bool> {
    let gemms = gemm_launches(&cx.io, None, GemmAct::None)?;
    let [Launch::Gemm(g)] = gemms.as_slice() else {
        return Ok(false);
    };
    let g = &g.gemm;
    if g.m < min_rows {
        return Ok(false);
    }
    let (fused_bias, fused_act) = match bias {
        Some(b) if along_n => (Some(b.range()), act),
        Some(_) => (None, Activation::None),
        None => (None, act),
    };
    let Some(r) = row_gemv::plan(g, fused_bias.is_some(), fused_act) else {
        return Ok(false);
    };
    row_gemv::emit(cx, g, &r, fused_bias)?;
    if let Some(b) = bias.filter(|_| !along_n) {
        let c = cx.output(0)?.clone();
        let b = Some((b.range(), b.dims.as_slice()));
        epilogue::emit(cx, c.dtype, c.range(), &c.dims, b, None, act)?;
    }
    Ok(true)
}

/// Emits the MatMul as tile kernel launches if every GEMM of it is small
/// enough ([`tile_gemm::params`]); false, emitting nothing, if not. The bias
/// and activation go into the tile kernel when the bias runs along N, else
/// into the epilogue kernel after it.
fn tiles(cx: &mut Cx, bias: Option<&Operand>, along_n: bool, act: Activation) -> LResult<bool> {
    let gemms: Vec<Gemm> = gemm_launches(&cx.io, None, GemmAct::None)?
        .into_iter()
        .filter_map(|l| match l {
            Launch::Gemm(g) => Some(g.gemm),
            _ => None,
        })
        .collect();
    let (fused_bias, fused_act) = match bias {
        Some(b) if along_n => (Some(b.range()), act),
        Some(_) => (None, Activation::None),
        None => (None, act),
    };
    let params: Option<Vec<_>> = gemms
        .iter()
        .map(|g| tile_gemm::params(g, fused_bias.is_some(), fused_act))
        .collect();
    let Some(params) = params.filter(|p| !p.is_empty()) else {
        return Ok(false);
    };
    for (g, p) in gemms.iter().zip(&params) {
        tile_gemm::emit(cx, g, p, fused_bias)?;
    }
    if let Some(b) = bias.filter(|_| !along_n) {
        let c = cx.output(0)?.clone();
        let b = Some((b.range(), b.dims.as_slice()));
        epilogue::emit(cx, c.dtype, c.range(), &c.dims, b, None, act)?;
    }
    Ok(true)
}

/// The GEMM launches of a MatMul with these operands (inputs 0 and 1,
/// output 0), with a bias along N and an activation in the epilogue.
pub fn gemm_launches(io: &NodeIo, bias: Option<Range>, act: GemmAct) -> LResult<Vec<Launch>> {
    let (a, b, c) = match (io.ins.first(), io.ins.get(1), io.outs.first()) {
        (Some(a), Some(b), Some(c)) => (a, b, c),
        _ => return Err("matmul needs two inputs and an output".into()),
    };
    let dtype = a.dtype;
    if !gemm_dtype(dtype) {
        return Err(format!("matmul on {dtype} has no CUDA lowering"));
    }
    same_operand("B", b, dtype)?;
    same_operand("output", c, dtype)?;
    if !lt_epilogue(dtype) && (bias.is_some() || act != GemmAct::None) {
        return Err(format!("a fused matmul on {dtype} has no CUDA lowering"));
    }
    let size = dtype.size();
    let g = matmul(&a.dims, &b.dims).map_err(|e| format!("{e}: {:?} x {:?}", a.dims, b.dims))?;
    let (mut m, n, k) = (g.m, g.n, g.k);
    let mut dims = g.batch;
    let total: usize = dims.iter().map(|d| d.dim).product::<usize>() * m * n;
    if total != c.numel() {
        return Err(format!(
            "matmul of {:?} x {:?} does not fill an output of {:?}",
            a.dims, b.dims, c.dims
        ));
    }
    if m == 0 || n == 0 || dims.iter().any(|d| d.dim == 0) {
        return Ok(Vec::new());
    }
    if k == 0 {
        return Err("matmul with an inner dimension of 0 has no CUDA lowering".into());
    }
    // B repeats along the innermost batch dim while A and C run on: one GEMM
    // with that dim folded into M.
    if let Some(d) = dims.last().copied() {
        if d.b == 0 && d.a == m * k && d.c == m * n {
            m *= d.dim;
            dims.pop();
        }
    }
    let inner = dims.pop().unwrap_or(BatchDim {
        dim: 1,
        a: 0,
        b: 0,
        c: 0,
    });
    let outer: usize = dims.iter().map(|d| d.dim).product();
    if outer > MAX_UNROLL {
        return Err(format!(
            "matmul broadcasting over {outer} outer batches (more than {MAX_UNROLL} GEMMs)"
        ));
    }
    let mut launches = Vec::with_capacity(outer);
    for mut i in 0..outer {
        // Element offsets of this outer batch, innermost outer dim fastest.
        let (mut oa, mut ob, mut oc) = (0, 0, 0);
        for d in dims.iter().rev() {
            let j = i % d.dim;
            i /= d.dim;
            oa += j * d.a;
            ob += j * d.b;
            oc += j * d.c;
        }
        let at = |o: &Operand, e: usize| o.at + (e * size) as u64;
        let gemm = Gemm {
            m: m as u64,
            n: n as u64,
            k: k as u64,
            trans_a: false,
            trans_b: false,
            lda: k as u64,
            ldb: n as u64,
            ldc: n as u64,
            batch: inner.dim as u64,
            stride_a: inner.a as u64,
            stride_b: inner.b as u64,
            stride_c: inner.c as u64,
            a: span(at(a, oa), inner.dim, inner.a, m, k, k, size),
            b: span(at(b, ob), inner.dim, inner.b, k, n, n, size),
            c: span(at(c, oc), inner.dim, inner.c, m, n, n, size),
            bias,
            act,
            dtype,
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
            read: vec![true],
            values: vec![None, None],
            scratch_at: 0,
            consts_at: 0,
        };
        gemm_launches(&io, None, GemmAct::None)
            .unwrap()
            .into_iter()
            .map(|l| match l {
                Launch::Gemm(g) => g.gemm,
                _ => panic!("not a GEMM"),
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
            read: vec![true],
            values: vec![None, None],
            scratch_at: 0,
            consts_at: 0,
        };
        assert!(gemm_launches(&io, None, GemmAct::None)
            .unwrap_err()
            .contains("inner dims"));
    }
}
