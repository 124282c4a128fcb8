//! MatMul and FusedMatMul (bias + activation epilogue). Floats go through the
//! `gemm` crate (f16/bf16 via f32 in scratch); integers use a wrapping loop.
//! A batched left operand against a 2-D right one is one flat product.

use half::{bf16, f16};
use rlx_ir::ops::Activation;
use rlx_ir::{DType, Op};

use super::gemm::{gemm, GemmElem};
use super::layout::{broadcast_into, broadcast_strides, offset_of, par_rows};
use super::num::{Comp, Int};
use crate::kernel::{Kernel, KernelError, Spec};
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
    Ok(Box::new(MatMulKernel {
        dtype,
        g,
        act,
        bias_dims: bias.then(|| spec.in_dims(2)),
        out_dims: spec.out_dims(0),
    }))
}

impl Kernel for MatMulKernel {
    fn label(&self) -> String {
        let g = &self.g;
        let fused = if self.bias_dims.is_some() || self.act != Activation::None {
            format!(" +bias={} act={}", self.bias_dims.is_some(), self.act)
        } else {
            String::new()
        };
        format!(
            "matmul.{} {}x[{}x{}x{}]{fused}",
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
        if g.folds_into_rows() {
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

/// Applies a fused activation in place.
pub fn activate<T: Comp>(act: Activation, out: &mut [T]) {
    let f = |v: f64| T::from_f64c(v);
    let apply = |g: &(dyn Fn(T) -> T + Sync), out: &mut [T]| {
        super::layout::par_rows(out, 4096, |_, row| row.iter_mut().for_each(|x| *x = g(*x)))
    };
    match act {
        Activation::None => {}
        Activation::Relu => apply(&|x: T| if x < T::zero() { T::zero() } else { x }, out),
        Activation::Sigmoid => apply(&|x: T| T::one() / (T::one() + (-x).exp()), out),
        Activation::Tanh => apply(&|x: T| x.tanh(), out),
        Activation::Silu => apply(&|x: T| x / (T::one() + (-x).exp()), out),
        Activation::GeluErf => apply(
            &|x: T| f(0.5) * x * (T::one() + (x * f(std::f64::consts::FRAC_1_SQRT_2)).erf()),
            out,
        ),
        Activation::GeluTanh => apply(
            &|x: T| {
                f(0.5)
                    * x
                    * (T::one()
                        + (f((2.0 / std::f64::consts::PI).sqrt()) * (x + f(0.044715) * x * x * x))
                            .tanh())
            },
            out,
        ),
    }
}
