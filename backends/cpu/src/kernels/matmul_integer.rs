//! MatMulInteger on 8-bit operands: `(a - a_zero) @ (b - b_zero)` in i32,
//! and `fused_matmul_integer`, the same product finished in f32 (scale,
//! bias, activation) by the GEMM's epilogue.
//!
//! The product runs on bytes ([`int8_gemm`]): `a` as unsigned (an i8 `a` is
//! shifted by +128, and its zero point with it), `b` as signed (a u8 `b` by
//! -128). With `a' = a + sa`, `b' = b + sb` and the zero points shifted
//! alike, `Σ (a - za)(b - zb) = Σ a'b' - za'·colsum(b') - zb'·rowsum(a') +
//! k·za'·zb'`: exact in wrapping i32, as ONNX's i32 result is, and applied
//! to each tile as it is stored ([`int8_gemm::Epilogue`]). A constant `b`
//! (a weight) is packed once, when the kernel is built; rows of `a` are
//! packed into scratch per run and split across threads in blocks.
//!
//! Without AVX-512 VNNI the same packed operands go through f32 GEMMs over
//! slices of `k` short enough that every partial sum is an exact integer.

use rlx_ir::ops::Activation;
use rlx_ir::{DType, Op};

use super::gemm::gemm;
use super::int8_gemm::{self, k_groups, Epilogue, FloatOut, PackedB};
use super::layout::{broadcast_strides, offset_of};
use super::matmul::MatMulGeom;
use crate::kernel::{Kernel, KernelError, Spec};
use crate::par::Disjoint;
use crate::tensor::{TensorMut, TensorRef};

/// Rows of `a` one task packs and multiplies.
const BLOCK: usize = 64;
/// Products (m·n·k) below which a run stays on one thread.
const PAR_WORK: usize = 1 << 20;
/// The longest slice of `k` whose sums of u8·i8 products (at most
/// 255·128 each) stay exact in f32.
const F32_SLICE: usize = ((1 << 24) - 1) / (255 * 128);

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    let (ad, bd) = (spec.in_dims(0), spec.in_dims(1));
    let g = MatMulGeom::new(&ad, &bd)?;
    let byte = |d: DType| match d {
        DType::U8 => Ok(false),
        DType::I8 => Ok(true),
        d => Err(KernelError::DType(d)),
    };
    let a_signed = byte(spec.inputs[0].dtype)?;
    let b_signed = byte(spec.inputs[1].dtype)?;
    let packed = spec.keep(1).and_then(|(t, keep)| {
        let count = g.b_batch.iter().product();
        keep.get_or_make(
            "matmul_integer.b",
            &[g.k, g.n, count, b_signed as usize],
            || Some(pack_all(&g, t.bytes(), b_signed)),
        )
    });
    let fused = match spec.op() {
        Op::FusedMatMulInteger(f) => Some(f.activation),
        _ => None,
    };
    Ok(Box::new(MatMulIntegerKernel {
        label: format!(
            "{}.{}{} {}x[{}x{}x{}]",
            spec.op().name(),
            spec.inputs[0].dtype,
            spec.inputs[1].dtype,
            g.batches(),
            g.m,
            g.n,
            g.k
        ),
        a_signed,
        b_signed,
        packed,
        vnni: int8_gemm::vnni(),
        fused,
        g,
    }))
}

/// Every matrix of `b` (`b_batch` of them, k x n bytes each) packed.
fn pack_all(g: &MatMulGeom, b: &[u8], signed: bool) -> Vec<PackedB> {
    let (k, n) = (g.k, g.n);
    let count: usize = g.b_batch.iter().product();
    (0..count)
        .map(|t| {
            let m = &b[t * k * n..(t + 1) * k * n];
            PackedB::new(k, n, |kk, j| as_signed(m[kk * n + j], signed))
        })
        .collect()
}

/// A byte of `b` as the signed value the GEMM multiplies (a u8 less 128).
fn as_signed(v: u8, signed: bool) -> i8 {
    if signed {
        v as i8
    } else {
        (v ^ 0x80) as i8
    }
}

struct MatMulIntegerKernel {
    label: String,
    g: MatMulGeom,
    a_signed: bool,
    b_signed: bool,
    /// The constant `b`, packed.
    packed: Option<std::sync::Arc<Vec<PackedB>>>,
    vnni: bool,
    /// `fused_matmul_integer`'s activation: f32 out, scaled.
    fused: Option<Activation>,
}

/// The zero points of an operand as i32 (one, or one per row or column),
/// shifted by `shift` like the operand.
fn zero_points(z: &TensorRef, want: usize, shift: i32) -> Result<Vec<i32>, KernelError> {
    let n = z.numel();
    if n != 1 && n != want {
        return Err(KernelError::Value(format!(
            "a zero point of {n} values where 1 or {want} fit"
        )));
    }
    let signed = z.dtype == DType::I8;
    Ok(z
        .bytes
        .iter()
        .map(|&v| if signed { i32::from(v as i8) } else { i32::from(v) } + shift)
        .collect())
}

/// The per-column terms of one matrix of `b` (see [`Epilogue`]), `n` each.
struct Columns<'a> {
    b: &'a PackedB,
    col_terms: Vec<i32>,
    zb: &'a [i32],
    float: Option<FloatOut<'a>>,
}

/// One block of rows of one product.
struct Block<'a> {
    /// The rows of `a`, `rows x k` bytes as stored.
    a: &'a [u8],
    /// The index of the block's first row in its matrix.
    row0: usize,
    za: &'a [i32],
    cols: &'a Columns<'a>,
    /// Tasks the block's columns are split into (1: none).
    col_tasks: usize,
}

impl MatMulIntegerKernel {
    fn block(&self, blk: &Block, packed_a: &mut [u8], out: &mut [i32]) {
        let (k, n) = (self.g.k, self.g.n);
        let k4 = k_groups(k);
        let rows = out.len() / n;
        let mut sums = [0i32; BLOCK];
        let c = blk.cols;
        let za = if blk.za.len() == 1 {
            blk.za
        } else {
            &blk.za[blk.row0..blk.row0 + rows]
        };
        if n <= int8_gemm::NARROW {
            let (flip, sums) = (self.a_signed, &mut sums[..rows]);
            int8_gemm::narrow(blk.a, rows, flip, c.b, out, n, sums, self.vnni);
            let epi = Epilogue {
                za,
                row_sums: sums,
                col_terms: &c.col_terms,
                zb: c.zb,
                float: c.float.clone(),
            };
            epi.finish_rows(rows, out, n, 0, n);
            return;
        }
        for r in 0..rows {
            let src = &blk.a[r * k..(r + 1) * k];
            let dst = &mut packed_a[r * k4..(r + 1) * k4];
            if self.a_signed {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = s ^ 0x80;
                }
            } else {
                dst[..k].copy_from_slice(src);
            }
            dst[k..].fill(0);
            sums[r] = dst[..k].iter().map(|&v| i32::from(v)).sum();
        }
        let epi = Epilogue {
            za,
            row_sums: &sums[..rows],
            col_terms: &c.col_terms,
            zb: c.zb,
            float: c.float.clone(),
        };
        if self.vnni {
            columns(packed_a, rows, c.b, blk.col_tasks, out, &epi);
        } else if super::vmath::avx2() {
            // The packed panels in AVX2 lanes, exact (widened to 16 bits).
            let panels = n.div_ceil(int8_gemm::PANEL);
            int8_gemm::gemm_panels(packed_a, rows, c.b, 0..panels, out, n, false, Some(&epi));
        } else {
            float_gemm(packed_a, rows, c.b, out);
            epi.finish_rows(rows, out, n, 0, n);
        }
    }
}

/// `C = A·B` (VNNI), finished by `epi`, with the panels of `B` split over
/// `tasks` threads, each writing its columns of `c` in place.
fn columns(a: &[u8], rows: usize, b: &PackedB, tasks: usize, c: &mut [i32], epi: &Epilogue) {
    let n = b.n;
    let panels = n.div_ceil(int8_gemm::PANEL);
    if tasks <= 1 || !cfg!(target_arch = "x86_64") {
        int8_gemm::gemm_panels(a, rows, b, 0..panels, c, n, true, Some(epi));
        return;
    }
    assert!(c.len() >= rows * n, "matmul_integer output too small");
    let per = panels.div_ceil(tasks);
    let out = Disjoint::new(c);
    crate::par::for_each(panels.div_ceil(per), |t| {
        let (p0, p1) = (t * per, ((t + 1) * per).min(panels));
        // SAFETY: the columns of panels p0..p1 of `rows` rows of `n` lie in
        // `c` (asserted above); tasks take disjoint panels; this runs only
        // where `vnni()` holds (the caller's `self.vnni`).
        #[cfg(target_arch = "x86_64")]
        unsafe {
            int8_gemm::gemm_panels_into(
                a,
                rows,
                b,
                p0..p1,
                out.at(p0 * int8_gemm::PANEL),
                n,
                Some(epi),
            )
        };
    });
}

/// A scale or bias input as `n` values, one per column.
fn per_column(t: &TensorRef, n: usize) -> Result<Vec<f32>, KernelError> {
    let v: &[f32] = t.slice()?;
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        len if len == n => Ok(v.to_vec()),
        len => Err(KernelError::Value(format!(
            "a scale or bias of {len} values where 1 or {n} fit"
        ))),
    }
}

/// How many tasks to split each row block's columns into: enough that
/// `row_tasks` blocks at a time and their column shares fill the pool, each
/// share at least two panels.
fn col_tasks(row_tasks: usize, n: usize, par: bool) -> usize {
    if !par {
        return 1;
    }
    let threads = crate::par::threads();
    let most = (n.div_ceil(int8_gemm::PANEL) / 2).max(1);
    threads.div_ceil(row_tasks.max(1)).min(most)
}

/// The portable path: `C = A·B` through f32 GEMMs over slices of `k` of
/// at most [`F32_SLICE`], each exact, summed in i32.
fn float_gemm(a: &[u8], m: usize, b: &PackedB, c: &mut [i32]) {
    let (k, n) = (b.k, b.n);
    let k4 = k_groups(k);
    c[..m * n].fill(0);
    let mut part = vec![0.0f32; m * n];
    for k0 in (0..k).step_by(F32_SLICE) {
        let kc = F32_SLICE.min(k - k0);
        let af: Vec<f32> = (0..m)
            .flat_map(|i| {
                a[i * k4 + k0..i * k4 + k0 + kc]
                    .iter()
                    .map(|&v| f32::from(v))
            })
            .collect();
        let bf: Vec<f32> = (k0..k0 + kc)
            .flat_map(|kk| (0..n).map(move |j| f32::from(b.at(kk, j))))
            .collect();
        gemm(m, n, kc, &af, kc, &bf, n, &mut part, n, false);
        for (o, v) in c.iter_mut().zip(&part) {
            *o = o.wrapping_add(*v as i32);
        }
    }
}

impl Kernel for MatMulIntegerKernel {
    fn flops(&self) -> Option<u64> {
        Some(self.g.flops())
    }

    fn label(&self) -> String {
        self.label.clone()
    }

    fn scratch_bytes(&self) -> usize {
        self.g.batches() * self.g.m * k_groups(self.g.k)
    }

    /// A block of rows at a time.
    fn per_thread(&self) -> crate::scratch::PerThread {
        let rows = (self.g.batches() * self.g.m).min(BLOCK);
        crate::scratch::PerThread::each(int8_gemm::scratch(rows, self.g.k))
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let g = &self.g;
        let (m, n, k) = (g.m, g.n, g.k);
        let za = zero_points(&ins[2], m, if self.a_signed { 128 } else { 0 })?;
        let zb = zero_points(&ins[3], n, if self.b_signed { 0 } else { -128 })?;
        let owned;
        let packed: &[PackedB] = match &self.packed {
            Some(p) => p,
            None => {
                owned = pack_all(g, ins[1].bytes, self.b_signed);
                &owned
            }
        };
        let a = ins[0].bytes;
        // The fused op's f32 results are stored as their bits.
        let out: &mut [i32] = match self.fused {
            None => outs[0].slice::<i32>()?,
            Some(_) => bytemuck::try_cast_slice_mut(&mut *outs[0].bytes)
                .map_err(|e| KernelError::Internal(format!("f32 output: {e}")))?,
        };
        let batches = g.batches();
        if out.len() != batches * m * n || a.len() != g.a_batch.iter().product::<usize>() * m * k {
            return Err(KernelError::Internal("matmul_integer operand sizes".into()));
        }
        if m == 0 || n == 0 || batches == 0 {
            return Ok(());
        }
        let float = match self.fused {
            None => None,
            Some(act) => Some((
                per_column(&ins[4], n)?,
                ins.get(5).map(|b| per_column(b, n)).transpose()?,
                act,
            )),
        };
        let float_out = || {
            float.as_ref().map(|(scale, bias, act)| FloatOut {
                scale,
                bias: bias.as_deref(),
                act: *act,
            })
        };
        let zb = if zb.len() == 1 { vec![zb[0]; n] } else { zb };
        let columns: Vec<Columns> = packed
            .iter()
            .map(|b| Columns {
                b,
                col_terms: (b.col_sums.iter().zip(&zb))
                    .map(|(&s, &z)| s.wrapping_sub((k as i32).wrapping_mul(z)))
                    .collect(),
                zb: &zb,
                float: float_out(),
            })
            .collect();
        if k == 0 {
            // Every sum is 0; the fused op still scales, adds and activates.
            out.fill(0);
            let rows = batches * m;
            let (za, sums) = (vec![0; 1], vec![0; rows]);
            let c = &columns[0];
            let epi = Epilogue {
                za: &za,
                row_sums: &sums,
                col_terms: &c.col_terms,
                zb: c.zb,
                float: float_out(),
            };
            epi.finish_rows(rows, out, n, 0, n);
            return Ok(());
        }
        let k4 = k_groups(k);
        let a_strides = broadcast_strides(&g.a_batch, &g.batch);
        let b_strides = broadcast_strides(&g.b_batch, &g.batch);
        let scratch = &mut scratch[..batches * m * k4];
        let par = batches * m * n * k >= PAR_WORK && crate::par::parallel();
        // Row blocks over the threads when there are enough of them; else
        // the blocks one after another, each with its columns split.
        let blocks = batches * m.div_ceil(BLOCK);
        let by_rows = par && blocks >= crate::par::threads();
        let split = col_tasks(1, n, par && !by_rows);
        let job = |t: usize, r: usize, packed_a: &mut [u8], o: &mut [i32]| {
            let (at, bt) = (
                offset_of(t, &g.batch, &a_strides),
                offset_of(t, &g.batch, &b_strides),
            );
            let row0 = r * BLOCK;
            let rows = o.len() / n;
            let blk = Block {
                a: &a[(at * m + row0) * k..(at * m + row0 + rows) * k],
                row0,
                za: &za,
                cols: &columns[bt],
                col_tasks: split,
            };
            self.block(&blk, packed_a, o);
        };
        let mut parts = Vec::with_capacity(blocks);
        for (t, (o, s)) in out
            .chunks_mut(m * n)
            .zip(scratch.chunks_mut(m * k4))
            .enumerate()
        {
            for (r, part) in o
                .chunks_mut(BLOCK * n)
                .zip(s.chunks_mut(BLOCK * k4))
                .enumerate()
            {
                parts.push((t, r, part));
            }
        }
        if by_rows {
            crate::par::chunks_mut(&mut parts, 1, |_, p| {
                let (t, r, (o, s)) = &mut p[0];
                job(*t, *r, s, o)
            });
        } else {
            for (t, r, (o, s)) in parts {
                job(t, r, s, o);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(a - za) @ (b - zb)` in i64, batched with broadcasting.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        a: &[i32],
        b: &[i32],
        za: &[i32],
        zb: &[i32],
        batches: usize,
        b_batches: usize,
        m: usize,
        k: usize,
        n: usize,
    ) -> Vec<i32> {
        let mut c = vec![0i32; batches * m * n];
        for t in 0..batches {
            let bt = if b_batches == 1 { 0 } else { t };
            for i in 0..m {
                for j in 0..n {
                    let zai = za[if za.len() == 1 { 0 } else { i }] as i64;
                    let zbj = zb[if zb.len() == 1 { 0 } else { j }] as i64;
                    let s: i64 = (0..k)
                        .map(|kk| {
                            (a[(t * m + i) * k + kk] as i64 - zai)
                                * (b[(bt * k + kk) * n + j] as i64 - zbj)
                        })
                        .sum();
                    c[(t * m + i) * n + j] = s as i32;
                }
            }
        }
        c
    }

    fn tensor(dtype: DType, dims: &[usize], v: &[i32]) -> rlx_ir::Tensor {
        let bytes: Vec<u8> = v.iter().map(|&x| x as u8).collect();
        rlx_ir::Tensor::from_slice(dtype, dims, &bytes).unwrap()
    }

    /// Every sign combination, per-row and per-column zero points, ragged
    /// shapes, a constant and a run-time `b`, with and without VNNI.
    #[test]
    fn matches_the_reference() {
        let cases = [
            (1, 1, 1, 1, 1),
            (2, 3, 5, 7, 1),
            (3, 70, 37, 50, 3),
            (1, 130, 600, 33, 1),
            // `narrow`: a few columns, `k` past one and two 64-byte steps.
            (2, 9, 130, 3, 2),
            (1, 5, 64, 1, 1),
            // On four threads: two row blocks with their columns split, and
            // six blocks over the threads.
            (1, 70, 300, 200, 1),
            (2, 130, 600, 33, 1),
        ];
        let pool = crate::par::Pool::new(4).unwrap();
        for (batches, m, k, n, b_batches) in cases {
            for (at, bt) in [
                (DType::U8, DType::I8),
                (DType::I8, DType::U8),
                (DType::U8, DType::U8),
                (DType::I8, DType::I8),
            ] {
                let val = |d: DType, i: usize, mul: usize| -> i32 {
                    let u = (i * mul % 256) as i32;
                    if d == DType::I8 {
                        u - 128
                    } else {
                        u
                    }
                };
                let a: Vec<i32> = (0..batches * m * k).map(|i| val(at, i, 37)).collect();
                let b: Vec<i32> = (0..b_batches * k * n).map(|i| val(bt, i, 91)).collect();
                let za: Vec<i32> = (0..m).map(|i| val(at, i, 53)).collect();
                // One zero point for `b`, or one per column (even `m`).
                let zb: Vec<i32> = if m % 2 == 0 {
                    (0..n).map(|j| val(bt, j + 5, 29)).collect()
                } else {
                    vec![val(bt, 5, 29)]
                };
                let want = reference(&a, &b, &za, &zb, batches, b_batches, m, k, n);
                let a_t = tensor(at, &[batches, m, k], &a);
                let b_t = tensor(bt, &[b_batches, k, n], &b);
                let za_t = tensor(at, &[m], &za);
                let zb_t = if zb.len() == 1 {
                    tensor(bt, &[], &zb)
                } else {
                    tensor(bt, &[n], &zb)
                };
                let g = MatMulGeom::new(a_t.dims(), b_t.dims()).unwrap();
                for (constant, vnni) in [
                    (true, false),
                    (false, false),
                    (true, int8_gemm::vnni()),
                    (false, int8_gemm::vnni()),
                ] {
                    let kern = MatMulIntegerKernel {
                        label: String::new(),
                        a_signed: at == DType::I8,
                        b_signed: bt == DType::I8,
                        packed: constant.then(|| pack_all(&g, b_t.bytes(), bt == DType::I8).into()),
                        vnni,
                        fused: None,
                        g: g.clone(),
                    };
                    let out_dims = [batches, m, n];
                    let run = |pool: Option<&crate::par::Pool>| {
                        let mut out = vec![0i32; batches * m * n];
                        let mut scratch = vec![0u8; kern.scratch_bytes()];
                        let ins = [&a_t, &b_t, &za_t, &zb_t].map(TensorRef::of);
                        let mut outs = [TensorMut {
                            dtype: DType::I32,
                            dims: &out_dims,
                            bytes: bytemuck::cast_slice_mut(&mut out),
                        }];
                        let mut go = || kern.run(&ins, &mut outs, &mut scratch).unwrap();
                        match pool {
                            Some(p) => p.install(go),
                            None => go(),
                        }
                        out
                    };
                    for pool in [None, Some(&pool)] {
                        assert_eq!(
                            run(pool),
                            want,
                            "{batches}x{m}x{k}x{n} {at}x{bt} const={constant} vnni={vnni} pool={pool:?}"
                        );
                    }
                }
            }
        }
    }

    /// `fused_matmul_integer` stores what `cast`, `mul`, `add` and the
    /// activation give the i32 product, bit for bit: scales and biases of
    /// one value and one per column, every block and panel path.
    #[test]
    fn fused_epilogue_is_the_unfused_nodes() {
        use crate::kernels::vmath;
        for (m, k, n) in [(70, 37, 50), (9, 130, 3), (130, 600, 33), (3, 0, 20)] {
            let a: Vec<i32> = (0..m * k).map(|i| (i * 37 % 256) as i32).collect();
            let b: Vec<i32> = (0..k * n).map(|i| (i * 91 % 256) as i32 - 128).collect();
            let (za, zb) = (vec![7], vec![-3]);
            let ints = reference(&a, &b, &za, &zb, 1, 1, m, k, n);
            let a_t = tensor(DType::U8, &[m, k], &a);
            let b_t = tensor(DType::I8, &[k, n], &b);
            let za_t = tensor(DType::U8, &[], &za);
            let zb_t = tensor(DType::I8, &[], &zb);
            let scales: Vec<f32> = (0..n).map(|j| 0.013 * (j as f32 + 1.0)).collect();
            let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.7 - 11.0).collect();
            let g = MatMulGeom::new(a_t.dims(), b_t.dims()).unwrap();
            for (act, per_col, with_bias, vnni) in [
                (Activation::Relu, true, true, int8_gemm::vnni()),
                (Activation::Tanh, false, true, int8_gemm::vnni()),
                (Activation::None, true, false, int8_gemm::vnni()),
                (Activation::Relu, true, true, false),
                (Activation::Tanh, false, false, false),
            ] {
                let scale = if per_col { scales.clone() } else { vec![0.02] };
                let scale_t = rlx_ir::Tensor::from_f32(&[scale.len()], &scale).unwrap();
                let bias_t = rlx_ir::Tensor::from_f32(&[n], &bias).unwrap();
                let want: Vec<u32> = ints
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let j = i % n;
                        let mut x = v as f32 * scale[if per_col { j } else { 0 }];
                        if with_bias {
                            x += bias[j];
                        }
                        match act {
                            Activation::Relu => vmath::relu(x),
                            Activation::Tanh => vmath::tanh(x),
                            _ => x,
                        }
                        .to_bits()
                    })
                    .collect();
                let kern = MatMulIntegerKernel {
                    label: String::new(),
                    a_signed: false,
                    b_signed: true,
                    packed: Some(pack_all(&g, b_t.bytes(), true).into()),
                    vnni,
                    fused: Some(act),
                    g: g.clone(),
                };
                let mut out = vec![0f32; m * n];
                let out_dims = [m, n];
                let mut scratch = vec![0u8; kern.scratch_bytes()];
                let mut ins: Vec<TensorRef> = [&a_t, &b_t, &za_t, &zb_t, &scale_t]
                    .map(TensorRef::of)
                    .into();
                if with_bias {
                    ins.push(TensorRef::of(&bias_t));
                }
                let mut outs = [TensorMut {
                    dtype: DType::F32,
                    dims: &out_dims,
                    bytes: bytemuck::cast_slice_mut(&mut out),
                }];
                kern.run(&ins, &mut outs, &mut scratch).unwrap();
                let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "{m}x{k}x{n} {act:?} vnni={vnni}");
            }
        }
    }
}
