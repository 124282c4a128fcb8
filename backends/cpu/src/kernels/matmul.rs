//! MatMul and FusedMatMul (bias + activation epilogue). Floats go through the
//! `gemm` crate (f16/bf16 via f32 in scratch), or for f32 against constant
//! weights through [`PackedW`]; integers use a wrapping loop.
//! A batched left operand against a 2-D right one is one flat product.

use half::{bf16, f16};
use rlx_ir::ops::Activation;
use rlx_ir::{DType, Op};

use super::gemm::microkernel::Shape;
use super::gemm::weights::PackedW;
use super::gemm::{gemm, gemm_strided, GemmElem};
use super::layout::{broadcast_into, broadcast_strides, offset_of, par_rows};
use super::num::{Comp, Int};
use crate::kernel::{Kernel, KernelError, Spec};
use crate::scratch::PerThread;
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

/// Geometry of a (batched, broadcast) matrix product.
#[derive(Debug, Clone)]
pub struct MatMulGeom {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: Vec<usize>,
    pub a_batch: Vec<usize>,
    pub b_batch: Vec<usize>,
}

impl MatMulGeom {
    /// Two per multiply-add over every batch.
    pub fn flops(&self) -> u64 {
        [self.batches(), self.m, self.n, self.k, 2]
            .iter()
            .fold(1u64, |a, &v| a.saturating_mul(v as u64))
    }

    pub fn new(a: &[usize], b: &[usize]) -> Result<MatMulGeom, KernelError> {
        let a2: Vec<usize> = if a.len() == 1 {
            vec![1, a[0]]
        } else {
            a.to_vec()
        };
        let b2: Vec<usize> = if b.len() == 1 {
            vec![b[0], 1]
        } else {
            b.to_vec()
        };
        if a2.len() < 2 || b2.len() < 2 {
            return Err(KernelError::Value("matmul of a scalar".into()));
        }
        let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
        let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
        if k != k2 {
            return Err(KernelError::Value(format!(
                "inner dims {k} and {k2} differ"
            )));
        }
        let a_batch = a2[..a2.len() - 2].to_vec();
        let b_batch = b2[..b2.len() - 2].to_vec();
        let r = a_batch.len().max(b_batch.len());
        let pad = |v: &[usize]| -> Vec<usize> {
            std::iter::repeat_n(1, r - v.len())
                .chain(v.iter().copied())
                .collect()
        };
        let (pa, pb) = (pad(&a_batch), pad(&b_batch));
        let batch = pa
            .iter()
            .zip(&pb)
            .map(|(x, y)| if *x == 1 { *y } else { *x })
            .collect();
        Ok(MatMulGeom {
            m,
            n,
            k,
            batch,
            a_batch: pa,
            b_batch: pb,
        })
    }

    pub fn batches(&self) -> usize {
        self.batch.iter().product()
    }

    /// True if every batch of `a` pairs with the single matrix `b`, so the
    /// batches fold into the rows of one product.
    pub fn folds_into_rows(&self) -> bool {
        self.b_batch.iter().all(|&d| d == 1) && self.a_batch == self.batch
    }
}

struct MatMulKernel {
    dtype: DType,
    g: MatMulGeom,
    act: Activation,
    bias_dims: Option<Vec<usize>>,
    out_dims: Vec<usize>,
    /// A constant i32 `b` in f32 with its largest magnitude, for the exact
    /// float paths of integer products (see [`MatMulKernel::run_i32`]).
    b_f32: Option<(Vec<f32>, f64)>,
    /// A constant f32 `b` packed for the microkernels, where that pays.
    packed_b: Option<std::sync::Arc<PackedW>>,
}

/// Whether a product of `rows` rows against constant `b` (k×n) goes through
/// [`PackedW`]: one row always, when not tiny; more rows when deep enough that packing `X` is small beside the product,
/// and `n` close to a multiple of the tile width (measured against the
/// `gemm` crate, `gemm::weights::speed`: 1.1x faster on an LSTM's and a BERT
/// FFN's products, slower where a narrow last panel wastes a tenth).
fn packs_b(rows: usize, k: usize, n: usize) -> bool {
    let nr = Shape::for_product(rows.max(1), n).nr();
    if rows == 1 {
        // One row streams the weights once: panels make that one
        // sequential read (`gemm::panel_row`; a narrow last panel costs
        // only its zeros' reads).
        return k >= 16 && k * n >= 4096;
    }
    rows >= 2 && k >= 128 && n.div_ceil(nr) * nr * 20 <= n * 21
}

/// Sums of products below this magnitude are exact in f64.
const F64_EXACT: f64 = (1u64 << 53) as f64;
/// Integers below this magnitude, and sums of them, are exact in f32.
const F32_EXACT: f64 = (1u64 << 24) as f64;

/// `v` as floats of type `T`, with its largest magnitude.
fn ints_as<T: Copy>(v: &[i32], to: impl Fn(i32) -> T) -> (Vec<T>, f64) {
    let max = v.iter().fold(0.0f64, |m, &x| m.max((x as f64).abs()));
    (v.iter().map(|&x| to(x)).collect(), max)
}

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    let (act, bias) = match spec.op() {
        Op::MatMul(_) => (Activation::None, false),
        Op::FusedMatMul(f) => (f.activation, spec.inputs.len() > 2),
        op => {
            return Err(KernelError::Internal(format!(
                "{} is not a matmul",
                op.name()
            )))
        }
    };
    let g = MatMulGeom::new(&spec.in_dims(0), &spec.in_dims(1))?;
    let dtype = spec.inputs[0].dtype;
    if !matches!(
        dtype,
        DType::F32
            | DType::F64
            | DType::F16
            | DType::BF16
            | DType::I32
            | DType::I64
            | DType::U32
            | DType::U64
    ) {
        return Err(KernelError::DType(dtype));
    }
    let b_f32 = match spec.consts.get(1) {
        Some(Some(t)) if dtype == DType::I32 && !bias => t
            .as_slice::<i32>()
            .ok()
            .map(|b| ints_as(b, |x| x as f32))
            .filter(|(_, max)| *max < F32_EXACT),
        _ => None,
    };
    let rows = g.batches() * g.m;
    let packed_b = match spec.keep(1) {
        Some((t, keep))
            if dtype == DType::F32
                && g.folds_into_rows()
                && spec.in_dims(1).len() == 2
                && packs_b(rows, g.k, g.n) =>
        {
            // Packed for the tile shape these rows choose: one packing
            // serves every row count that chooses it.
            let shape = Shape::for_product(rows.max(1), g.n);
            keep.get_or_make("matmul.b", &[g.k, g.n, shape.mr, shape.nv], || {
                t.as_slice::<f32>()
                    .ok()
                    .and_then(|b| PackedW::new(b, g.k, g.n, (g.n, 1), rows))
            })
        }
        _ => None,
    };
    Ok(Box::new(MatMulKernel {
        dtype,
        g,
        act,
        bias_dims: bias.then(|| spec.in_dims(2)),
        out_dims: spec.out_dims(0),
        b_f32,
        packed_b,
    }))
}

impl Kernel for MatMulKernel {
    fn flops(&self) -> Option<u64> {
        Some(self.g.flops())
    }

    fn label(&self) -> String {
        let g = &self.g;
        let fused = if self.bias_dims.is_some() || self.act != Activation::None {
            format!(" +bias={} act={}", self.bias_dims.is_some(), self.act)
        } else {
            String::new()
        };
        let packed = if self.packed_b.is_some() {
            " weights packed"
        } else {
            ""
        };
        format!(
            "matmul.{} {}x[{}x{}x{}]{fused}{packed}",
            self.dtype,
            g.batches(),
            g.m,
            g.n,
            g.k
        )
    }

    fn scratch_bytes(&self) -> usize {
        match self.dtype {
            // Half floats widen all three operands to f32.
            DType::F16 | DType::BF16 => {
                let g = &self.g;
                let a: usize = g.a_batch.iter().product::<usize>() * g.m * g.k;
                let b: usize = g.b_batch.iter().product::<usize>() * g.k * g.n;
                4 * (a + b + g.batches() * g.m * g.n) + 192
            }
            _ => 0,
        }
    }

    fn per_thread(&self) -> PerThread {
        match (&self.packed_b, self.dtype) {
            (Some(packed), DType::F32) => PerThread {
                caller: packed.scratch(self.g.batches() * self.g.m),
                each: 0,
            },
            _ => PerThread::NONE,
        }
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let out = &mut outs[0];
        match self.dtype {
            DType::F32 => {
                self.run_float::<f32>(ins[0].slice()?, ins[1].slice()?, ins.get(2), out.slice()?)
            }
            DType::F64 => {
                self.run_float::<f64>(ins[0].slice()?, ins[1].slice()?, ins.get(2), out.slice()?)
            }
            DType::F16 | DType::BF16 => self.run_half(ins, out, scratch),
            DType::I32 if self.bias_dims.is_none() => {
                self.run_i32(ins[0].slice()?, ins[1].slice()?, out.slice()?)
            }
            d => {
                with_dtype!(d, T => self.run_int::<T>(ins[0].slice()?, ins[1].slice()?, ins.get(2), out.slice()?), int)
            }
        }
    }
}

impl MatMulKernel {
    fn run_float<T: GemmElem + Comp + bytemuck::Pod>(
        &self,
        a: &[T],
        b: &[T],
        bias: Option<&TensorRef>,
        out: &mut [T],
    ) -> Result<(), KernelError> {
        let g = &self.g;
        let accumulate = match (bias, &self.bias_dims) {
            (Some(bt), Some(bd)) => {
                broadcast_into(bt.slice::<T>()?, bd, out, &self.out_dims);
                true
            }
            _ => false,
        };
        if let (Some(packed), true) = (&self.packed_b, self.dtype == DType::F32) {
            // Constant weights packed when the kernel was built; ReLU goes
            // with the stores, any other activation after.
            let (x, y) = (
                bytemuck::cast_slice::<T, f32>(a),
                bytemuck::cast_slice_mut::<T, f32>(out),
            );
            let relu = matches!(self.act, Activation::Relu);
            let act = if relu {
                Activation::Relu
            } else {
                Activation::None
            };
            packed.product(x, g.batches() * g.m, y, accumulate, act);
            if !relu {
                activate(self.act, out);
            }
            return Ok(());
        }
        if g.folds_into_rows() && g.batches() * g.m == 1 && self.dtype == DType::F32 {
            // One row: a vector-matrix product, split over columns.
            let (x, w) = (
                bytemuck::cast_slice::<T, f32>(a),
                bytemuck::cast_slice::<T, f32>(b),
            );
            let y = bytemuck::cast_slice_mut::<T, f32>(out);
            super::gemm::gemv::vec_mat(&x[..g.k], &w[..g.k * g.n], g.n, y, accumulate);
        } else if g.folds_into_rows() {
            gemm(
                g.batches() * g.m,
                g.n,
                g.k,
                a,
                g.k,
                b,
                g.n,
                out,
                g.n,
                accumulate,
            );
        } else {
            let sa = broadcast_strides(&g.a_batch, &g.batch);
            let sb = broadcast_strides(&g.b_batch, &g.batch);
            let (mk, kn, mn) = (g.m * g.k, g.k * g.n, g.m * g.n);
            par_rows(out, mn, |bi, c| {
                let oa = offset_of(bi, &g.batch, &sa) * mk;
                let ob = offset_of(bi, &g.batch, &sb) * kn;
                gemm(
                    g.m,
                    g.n,
                    g.k,
                    &a[oa..oa + mk],
                    g.k,
                    &b[ob..ob + kn],
                    g.n,
                    c,
                    g.n,
                    accumulate,
                );
            });
        }
        activate(self.act, out);
        Ok(())
    }

    fn run_half(
        &self,
        ins: &[TensorRef],
        out: &mut TensorMut,
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let (na, nb, no) = (ins[0].numel(), ins[1].numel(), out.numel());
        let f: &mut [f32] = bytemuck::try_cast_slice_mut(&mut scratch[..4 * (na + nb + no)])
            .map_err(|e| KernelError::Internal(e.to_string()))?;
        let (fa, rest) = f.split_at_mut(na);
        let (fb, fo) = rest.split_at_mut(nb);
        widen(&ins[0], fa)?;
        widen(&ins[1], fb)?;
        let bias32: Option<Vec<f32>> = match ins.get(2) {
            Some(t) => {
                let mut v = vec![0f32; t.numel()];
                widen(t, &mut v)?;
                Some(v)
            }
            None => None,
        };
        let bias_ref = bias32.as_ref().map(|v| TensorRef {
            dtype: DType::F32,
            dims: self.bias_dims.as_deref().unwrap_or(&[]),
            bytes: bytemuck::cast_slice(v),
        });
        self.run_float::<f32>(fa, fb, bias_ref.as_ref(), fo)?;
        match out.dtype {
            DType::F16 => out
                .slice::<f16>()?
                .iter_mut()
                .zip(fo.iter())
                .for_each(|(o, v)| *o = f16::from_f32(*v)),
            _ => out
                .slice::<bf16>()?
                .iter_mut()
                .zip(fo.iter())
                .for_each(|(o, v)| *o = bf16::from_f32(*v)),
        }
        Ok(())
    }

    /// An i32 product (MatMulInteger's, of 8-bit operands less their zero
    /// points) as float GEMMs whose every partial sum is an exact integer:
    /// the same result as i32 arithmetic, at GEMM speed. In f32 when the
    /// products allow, one GEMM per slice of `k` short enough that its sums
    /// stay below 2^24 (MatMulInteger's 8-bit operands give slices of 258 or
    /// more); else in f64; operands too large for either take the wrapping
    /// integer loop.
    fn run_i32(&self, a: &[i32], b: &[i32], out: &mut [i32]) -> Result<(), KernelError> {
        let (a32, max_a) = ints_as(a, |x| x as f32);
        let owned;
        let (b32, max_b) = match &self.b_f32 {
            Some((w, m)) if w.len() == b.len() => (w.as_slice(), *m),
            _ => {
                owned = ints_as(b, |x| x as f32);
                (owned.0.as_slice(), owned.1)
            }
        };
        let g = &self.g;
        let per = max_a * max_b;
        if per == 0.0 {
            out.fill(0);
            return Ok(());
        }
        // The longest slice of k whose sums are exact in f32.
        let slice = ((F32_EXACT - 1.0) / per).floor() as usize;
        if max_a < F32_EXACT && max_b < F32_EXACT && slice >= g.k {
            let mut acc = vec![0.0f32; out.len()];
            self.run_float::<f32>(&a32, b32, None, &mut acc)?;
            for (o, v) in out.iter_mut().zip(acc) {
                *o = v as i32;
            }
            return Ok(());
        }
        if max_a < F32_EXACT && max_b < F32_EXACT && slice >= 64 && g.folds_into_rows() {
            let rows = g.batches() * g.m;
            let mut part = vec![0.0f32; out.len()];
            out.fill(0);
            for k0 in (0..g.k).step_by(slice) {
                let kc = slice.min(g.k - k0);
                gemm_strided(
                    rows,
                    g.n,
                    kc,
                    &a32[k0..],
                    (g.k, 1),
                    &b32[k0 * g.n..],
                    (g.n, 1),
                    &mut part,
                    g.n,
                    false,
                );
                for (o, v) in out.iter_mut().zip(&part) {
                    *o = o.wrapping_add(*v as i32);
                }
            }
            return Ok(());
        }
        if per * g.k as f64 >= F64_EXACT {
            return self.run_int::<i32>(a, b, None, out);
        }
        let a64: Vec<f64> = a.iter().map(|&x| x as f64).collect();
        let b64: Vec<f64> = b.iter().map(|&x| x as f64).collect();
        let mut acc = vec![0.0f64; out.len()];
        self.run_float::<f64>(&a64, &b64, None, &mut acc)?;
        for (o, v) in out.iter_mut().zip(acc) {
            *o = v as i32;
        }
        Ok(())
    }

    fn run_int<T: Int>(
        &self,
        a: &[T],
        b: &[T],
        bias: Option<&TensorRef>,
        out: &mut [T],
    ) -> Result<(), KernelError> {
        let g = &self.g;
        let sa = broadcast_strides(&g.a_batch, &g.batch);
        let sb = broadcast_strides(&g.b_batch, &g.batch);
        let (mk, kn, mn) = (g.m * g.k, g.k * g.n, g.m * g.n);
        par_rows(out, mn, |bi, c| {
            let oa = offset_of(bi, &g.batch, &sa) * mk;
            let ob = offset_of(bi, &g.batch, &sb) * kn;
            for i in 0..g.m {
                let row = &mut c[i * g.n..(i + 1) * g.n];
                row.fill(T::zero());
                for p in 0..g.k {
                    let x = a[oa + i * g.k + p];
                    let br = &b[ob + p * g.n..ob + (p + 1) * g.n];
                    for (o, y) in row.iter_mut().zip(br) {
                        *o = o.wrapping_add(&x.wrapping_mul(y));
                    }
                }
            }
        });
        if let (Some(bt), Some(bd)) = (bias, &self.bias_dims) {
            let mut full = vec![T::zero(); out.len()];
            broadcast_into(bt.slice::<T>()?, bd, &mut full, &self.out_dims);
            out.iter_mut()
                .zip(full)
                .for_each(|(o, v)| *o = o.wrapping_add(&v));
        }
        Ok(())
    }
}

/// Widens an f16/bf16 tensor into f32.
pub fn widen(t: &TensorRef, out: &mut [f32]) -> Result<(), KernelError> {
    match t.dtype {
        DType::F16 => out
            .iter_mut()
            .zip(t.slice::<f16>()?)
            .for_each(|(o, v)| *o = v.to_f32()),
        DType::BF16 => out
            .iter_mut()
            .zip(t.slice::<bf16>()?)
            .for_each(|(o, v)| *o = v.to_f32()),
        DType::F32 => out.copy_from_slice(t.slice::<f32>()?),
        d => return Err(KernelError::DType(d)),
    }
    Ok(())
}

/// `f` over chunks of `xs`, the chunks over the pool.
fn in_chunks(xs: &mut [f32], f: fn(&mut [f32])) {
    super::layout::par_rows(xs, 1 << 14, |_, chunk| f(chunk));
}

/// Applies a fused activation in place.
// Closures, not function items: see `vmath::map`.
#[allow(clippy::redundant_closure)]
pub fn activate<T: Comp>(act: Activation, out: &mut [T]) {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
        use super::vmath::{self, map_in_place};
        // SAFETY: T is f32 (checked just above).
        let o = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, out.len()) };
        match act {
            Activation::None => {}
            Activation::Relu => map_in_place(o, |v| vmath::relu(v)),
            Activation::Sigmoid => in_chunks(o, vmath::sigmoid_slice),
            Activation::Tanh => map_in_place(o, |v| vmath::tanh(v)),
            Activation::Silu => in_chunks(o, vmath::silu_slice),
            Activation::GeluErf => super::gelu_lanes::gelu_erf_slice(o),
            Activation::GeluTanh => in_chunks(o, vmath::gelu_tanh_slice),
            Activation::HardSwish => map_in_place(o, |v| vmath::hard_swish(v)),
            Activation::Relu6 => map_in_place(o, |v| vmath::relu6(v)),
        }
        return;
    }
    let f = |v: f64| T::from_f64c(v);
    let apply = |g: &(dyn Fn(T) -> T + Sync), out: &mut [T]| {
        super::layout::par_rows(out, 4096, |_, row| row.iter_mut().for_each(|x| *x = g(*x)))
    };
    match act {
        Activation::None => {}
        Activation::Relu => apply(&|x: T| if x < T::zero() { T::zero() } else { x }, out),
        Activation::Sigmoid => apply(&|x: T| T::one() / (T::one() + (-x).vexp()), out),
        Activation::Tanh => apply(&|x: T| x.vtanh(), out),
        Activation::Silu => apply(&|x: T| x / (T::one() + (-x).vexp()), out),
        Activation::GeluErf => apply(
            &|x: T| f(0.5) * x * (T::one() + (x * f(std::f64::consts::FRAC_1_SQRT_2)).verf()),
            out,
        ),
        Activation::GeluTanh => apply(
            &|x: T| {
                f(0.5)
                    * x
                    * (T::one()
                        + (f((2.0 / std::f64::consts::PI).sqrt()) * (x + f(0.044715) * x * x * x))
                            .vtanh())
            },
            out,
        ),
        Activation::HardSwish => apply(
            &|x: T| {
                let t = x * f(1.0 / 6.0) + f(0.5);
                let t = if t < T::zero() { T::zero() } else { t };
                x * if t > T::one() { T::one() } else { t }
            },
            out,
        ),
        Activation::Relu6 => apply(
            &|x: T| {
                let v = if x < T::zero() { T::zero() } else { x };
                if v > f(6.0) {
                    f(6.0)
                } else {
                    v
                }
            },
            out,
        ),
    }
}

#[cfg(test)]
mod tests {
    use rlx_ir::ops::MatMul;
    use rlx_ir::{Node, Op, Tensor, Weights};

    use crate::dynamic::eval_node;

    fn i32s(dims: &[usize], v: &[i32]) -> Tensor {
        Tensor::from_slice(rlx_ir::DType::I32, dims, v).unwrap()
    }

    fn matmul(a: &Tensor, b: &Tensor) -> Vec<i32> {
        let node = Node::new(Op::MatMul(MatMul {}), "mm", Vec::new(), Vec::new());
        let out = eval_node(&node, &[a.clone(), b.clone()], &Weights::new()).unwrap();
        out[0].as_slice::<i32>().unwrap().to_vec()
    }

    /// 8-bit-sized operands: `[m, k] x [k, n]` against i32 arithmetic.
    fn exact_product(m: usize, k: usize, n: usize, b_batch: usize) {
        let a: Vec<i32> = (0..m * k).map(|i| (i as i32 * 37 % 511) - 255).collect();
        let b: Vec<i32> = (0..b_batch * k * n)
            .map(|i| (i as i32 * 91 % 509) - 254)
            .collect();
        let want: Vec<i32> = (0..b_batch * m * n)
            .map(|o| {
                let (bi, o) = (o / (m * n), o % (m * n));
                (0..k)
                    .map(|p| a[o / n * k + p] * b[bi * k * n + p * n + o % n])
                    .sum()
            })
            .collect();
        let bd: Vec<usize> = if b_batch > 1 {
            vec![b_batch, k, n]
        } else {
            vec![k, n]
        };
        assert_eq!(
            matmul(&i32s(&[m, k], &a), &i32s(&bd, &b)),
            want,
            "{m}x{k}x{n}"
        );
    }

    /// i32 products take an exact f32 GEMM (in slices of k past 2^24), an
    /// exact f64 GEMM when their sums fit 2^53 and the wrapping loop
    /// otherwise; all give i32 arithmetic's results.
    #[test]
    fn i32_products_are_exact_and_wrap() {
        // One f32 GEMM (k * 255 * 255 < 2^24).
        exact_product(3, 70, 5, 1);
        // f32 GEMMs over slices of k (258 each), summed as integers.
        exact_product(4, 700, 6, 1);
        // A batched b: one f64 GEMM per batch.
        exact_product(2, 700, 3, 2);
        // Past 2^53 the f64 path would round: the wrapping loop runs instead.
        let got = matmul(
            &i32s(&[1, 2], &[i32::MAX, i32::MAX]),
            &i32s(&[2, 2], &[i32::MAX, 1, i32::MAX, 2]),
        );
        let w = |x: i32, y: i32| x.wrapping_mul(y);
        assert_eq!(
            got,
            [
                w(i32::MAX, i32::MAX).wrapping_add(w(i32::MAX, i32::MAX)),
                i32::MAX.wrapping_add(w(i32::MAX, 2))
            ]
        );
    }
}
