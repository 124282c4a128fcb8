//! ElementwiseRegion: runs a region's program as one loop over the output, in
//! chunks. Each chunk gathers its (broadcast) inputs once, then evaluates the
//! instructions over the chunk in the compute type (f32 for f32/f16/bf16, f64
//! for f64), with the same formulas as the elementwise kernels.

use num_traits::Float;
use rlx_ir::ops::{BinaryKind as B, Operand, Program, RegionFn, UnaryKind as U};
use rlx_ir::{DType, Op};

use super::layout::par_rows;
use super::num::{Comp, Real};
use crate::kernel::{Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

/// Output elements per chunk.
const CHUNK: usize = 2048;

struct RegionKernel {
    program: Program,
    dtype: DType,
    out_dims: Vec<usize>,
    /// Per input: its strides against the output dims (0 where it broadcasts).
    strides: Vec<Vec<usize>>,
}

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    let Op::ElementwiseRegion(r) = spec.op() else {
        return Err(KernelError::Internal(format!(
            "{} is not a region",
            spec.op().name()
        )));
    };
    r.program
        .check(spec.inputs.len())
        .map_err(KernelError::Value)?;
    let out_dims = spec.out_dims(0);
    let strides = (0..spec.inputs.len())
        .map(|i| strides_against(&spec.in_dims(i), &out_dims))
        .collect::<Result<_, _>>()?;
    Ok(Box::new(RegionKernel {
        program: r.program.clone(),
        dtype: spec.outputs[0].dtype,
        out_dims,
        strides,
    }))
}

/// Strides of an input of `dims` read at output coordinates (right-aligned).
fn strides_against(dims: &[usize], out: &[usize]) -> Result<Vec<usize>, KernelError> {
    if dims.len() > out.len() {
        return Err(KernelError::Value(format!(
            "input {dims:?} does not broadcast to {out:?}"
        )));
    }
    let pad = out.len() - dims.len();
    let mut s = vec![0; out.len()];
    let mut acc = 1;
    for i in (0..dims.len()).rev() {
        let (d, o) = (dims[i], out[pad + i]);
        if d != 1 && d != o {
            return Err(KernelError::Value(format!(
                "input {dims:?} does not broadcast to {out:?}"
            )));
        }
        s[pad + i] = if d == 1 { 0 } else { acc };
        acc *= d;
    }
    Ok(s)
}

impl Kernel for RegionKernel {
    fn label(&self) -> String {
        format!(
            "elementwise_region.{} {} ops",
            self.dtype,
            self.program.0.len()
        )
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        _: &mut [u8],
    ) -> Result<(), KernelError> {
        with_dtype!(self.dtype, T => self.run_typed::<T>(ins, &mut outs[0]), float)
    }
}

impl RegionKernel {
    fn run_typed<T: Real>(
        &self,
        ins: &[TensorRef],
        out: &mut TensorMut,
    ) -> Result<(), KernelError> {
        let srcs: Vec<&[T]> = ins
            .iter()
            .map(|t| t.slice::<T>())
            .collect::<Result<_, _>>()?;
        let o = out.slice::<T>()?;
        let n = o.len();
        for (s, st) in srcs.iter().zip(&self.strides) {
            let need = self
                .out_dims
                .iter()
                .zip(st)
                .map(|(d, s)| if *s == 0 || *d == 0 { 0 } else { (d - 1) * s })
                .sum::<usize>();
            if n > 0 && need >= s.len() {
                return Err(KernelError::Internal(
                    "a region input is smaller than its shape".into(),
                ));
            }
        }
        par_rows(o, CHUNK, |ci, chunk| {
            self.chunk::<T>(&srcs, ci * CHUNK, chunk)
        });
        Ok(())
    }

    fn chunk<T: Real>(&self, srcs: &[&[T]], start: usize, out: &mut [T]) {
        type C<T> = <T as Real>::C;
        let len = out.len();
        let gathered: Vec<Vec<C<T>>> = srcs
            .iter()
            .zip(&self.strides)
            .map(|(s, st)| gather(s, st, &self.out_dims, start, len))
            .collect();
        let mut regs: Vec<Vec<C<T>>> = Vec::with_capacity(self.program.0.len());
        for ins in &self.program.0 {
            let arg = |k: usize| -> Arg<'_, C<T>> {
                match ins.args[k] {
                    Operand::Input(i) => Arg::Vec(&gathered[usize::from(i)]),
                    Operand::Temp(t) => Arg::Vec(&regs[usize::from(t)]),
                    Operand::Const(c) => Arg::Scalar(C::<T>::from_f64c(c)),
                }
            };
            let r = match ins.f {
                RegionFn::Unary(k) => unary(k, arg(0), len),
                RegionFn::Binary(k) => binary(k, arg(0), arg(1), len),
            };
            regs.push(r);
        }
        if let Some(last) = regs.last() {
            for (o, v) in out.iter_mut().zip(last) {
                *o = T::down(*v);
            }
        }
    }
}

/// Input values of output elements `start..start+len`, in the compute type.
fn gather<T: Real>(
    src: &[T],
    strides: &[usize],
    dims: &[usize],
    start: usize,
    len: usize,
) -> Vec<T::C> {
    // As many elements as the output: the same layout (inputs broadcast to it).
    if src.len() == dims.iter().product::<usize>() && src.len() >= start + len {
        return src[start..start + len].iter().map(|v| v.up()).collect();
    }
    let r = dims.len();
    let mut coord = vec![0usize; r];
    let mut rem = start;
    for a in (0..r).rev() {
        if dims[a] > 0 {
            coord[a] = rem % dims[a];
            rem /= dims[a];
        }
    }
    let mut off: usize = coord.iter().zip(strides).map(|(c, s)| c * s).sum();
    let mut v = Vec::with_capacity(len);
    for _ in 0..len {
        v.push(src.get(off).map_or_else(T::C::nan, |x| x.up()));
        for a in (0..r).rev() {
            coord[a] += 1;
            off += strides[a];
            if coord[a] < dims[a] {
                break;
            }
            off -= strides[a] * coord[a];
            coord[a] = 0;
        }
    }
    v
}

enum Arg<'a, C> {
    Vec(&'a [C]),
    Scalar(C),
}

impl<C: Copy> Arg<'_, C> {
    #[inline(always)]
    fn at(&self, i: usize) -> C {
        match self {
            Arg::Vec(v) => v[i],
            Arg::Scalar(c) => *c,
        }
    }
}

fn map1<C: Copy>(a: Arg<C>, len: usize, f: impl Fn(C) -> C) -> Vec<C> {
    match a {
        Arg::Vec(v) => v.iter().map(|x| f(*x)).collect(),
        Arg::Scalar(c) => vec![f(c); len],
    }
}

fn map2<C: Copy>(a: Arg<C>, b: Arg<C>, len: usize, f: impl Fn(C, C) -> C) -> Vec<C> {
    match (&a, &b) {
        (Arg::Vec(x), Arg::Vec(y)) => x.iter().zip(y.iter()).map(|(p, q)| f(*p, *q)).collect(),
        (Arg::Vec(x), Arg::Scalar(q)) => x.iter().map(|p| f(*p, *q)).collect(),
        _ => (0..len).map(|i| f(a.at(i), b.at(i))).collect(),
    }
}

/// One unary function over a chunk (formulas as in `elementwise.rs`).
fn unary<C: Comp>(k: U, a: Arg<C>, len: usize) -> Vec<C> {
    let (zero, one) = (C::zero(), C::one());
    match k {
        U::Abs => map1(a, len, |v| v.abs()),
        U::Neg => map1(a, len, |v| -v),
        U::Sign => map1(a, len, |v| {
            if v.is_nan() {
                v
            } else if v > zero {
                one
            } else if v < zero {
                -one
            } else {
                zero
            }
        }),
        U::Ceil => map1(a, len, |v| v.ceil()),
        U::Floor => map1(a, len, |v| v.floor()),
        U::Round => map1(a, len, |v| v.round_even()),
        U::Sqrt => map1(a, len, |v| v.sqrt()),
        U::Reciprocal => map1(a, len, |v| v.recip()),
        U::Exp => map1(a, len, |v| v.exp()),
        U::Log => map1(a, len, |v| v.ln()),
        U::Sin => map1(a, len, |v| v.sin()),
        U::Cos => map1(a, len, |v| v.cos()),
        U::Tan => map1(a, len, |v| v.tan()),
        U::Asin => map1(a, len, |v| v.asin()),
        U::Acos => map1(a, len, |v| v.acos()),
        U::Atan => map1(a, len, |v| v.atan()),
        U::Sinh => map1(a, len, |v| v.sinh()),
        U::Cosh => map1(a, len, |v| v.cosh()),
        U::Asinh => map1(a, len, |v| v.asinh()),
        U::Acosh => map1(a, len, |v| v.acosh()),
        U::Atanh => map1(a, len, |v| v.atanh()),
        U::Tanh => map1(a, len, |v| v.tanh()),
        U::Sigmoid => map1(a, len, |v| {
            if v >= zero {
                one / (one + (-v).exp())
            } else {
                let e = v.exp();
                e / (one + e)
            }
        }),
        U::Relu => map1(a, len, |v| if v < zero { zero } else { v }),
        U::Erf => map1(a, len, |v| v.erf()),
        U::Softplus => map1(a, len, |v| {
            if v > zero {
                v + (-v).exp().ln_1p()
            } else {
                v.exp().ln_1p()
            }
        }),
        U::Softsign => map1(a, len, |v| v / (one + v.abs())),
        // Not allowed in a region (the program check rejects them at build).
        U::Not | U::BitwiseNot | U::IsNan | U::IsInf | U::IsPosInf | U::IsNegInf => {
            vec![C::nan(); len]
        }
    }
}

/// One binary function over a chunk.
fn binary<C: Comp>(k: B, a: Arg<C>, b: Arg<C>, len: usize) -> Vec<C> {
    match k {
        B::Add => map2(a, b, len, |p, q| p + q),
        B::Sub => map2(a, b, len, |p, q| p - q),
        B::Mul => map2(a, b, len, |p, q| p * q),
        B::Div => map2(a, b, len, |p, q| p / q),
        B::Pow => map2(a, b, len, |p, q| p.powf(q)),
        B::Max => map2(a, b, len, |p, q| {
            if p.is_nan() || q.is_nan() {
                C::nan()
            } else if p > q {
                p
            } else {
                q
            }
        }),
        B::Min => map2(a, b, len, |p, q| {
            if p.is_nan() || q.is_nan() {
                C::nan()
            } else if p < q {
                p
            } else {
                q
            }
        }),
        // Not allowed in a region (the program check rejects them at build).
        _ => vec![C::nan(); len],
    }
}

#[cfg(test)]
mod tests {
    use crate::dynamic::eval_node;
    use rlx_ir::text::parse_graph;
    use rlx_ir::{Tensor, Weights};

    fn region(program: &str, ins: &[Tensor], out: &[usize]) -> Vec<f32> {
        let n = ins.len();
        let args: Vec<String> = (0..n).map(|i| format!("%{i}")).collect();
        let mut body = String::new();
        for (i, t) in ins.iter().enumerate() {
            body.push_str(&format!("  %{i} = input \"x{i}\" : {}\n", t.ty()));
        }
        body.push_str(&format!(
            "  %{n} = elementwise_region({}) {{program={program}}} : f32{out:?}\n  output \"y\" = %{n}\n",
            args.join(", ")
        ));
        let g = parse_graph(&format!("rlx-ir 1\ngraph {{\n{body}}}\n")).unwrap();
        let id = g
            .node_ids()
            .into_iter()
            .find(|i| g.node(*i).op.name() == "elementwise_region")
            .unwrap();
        let out = eval_node(g.node(id), ins, &Weights::new()).unwrap();
        out[0].as_slice::<f32>().unwrap().to_vec()
    }

    #[test]
    fn broadcast_chain_matches_hand_computation() {
        let x = Tensor::from_f32(&[2, 3], &[1.0, -2.0, 3.0, -4.0, 5.0, -6.0]).unwrap();
        let b = Tensor::from_f32(&[3], &[10.0, 20.0, 30.0]).unwrap();
        // relu(x * b + 0.5) - 1
        let y = region(
            "[mul(x0, x1), add(t0, 0.5), relu(t1), sub(t2, 1.0)]",
            &[x, b],
            &[2, 3],
        );
        assert_eq!(y, vec![9.5, -1.0, 89.5, -1.0, 99.5, -1.0]);
    }

    #[test]
    fn column_broadcast_and_long_outputs() {
        // x: [3,1] broadcast against y: [1,5000] (crosses chunk boundaries).
        let x = Tensor::from_f32(&[3, 1], &[1.0, 2.0, 3.0]).unwrap();
        let v: Vec<f32> = (0..5000).map(|i| i as f32).collect();
        let y = Tensor::from_f32(&[1, 5000], &v).unwrap();
        let out = region("[mul(x0, x1), max(t0, 100.0)]", &[x, y], &[3, 5000]);
        assert_eq!(out.len(), 15000);
        assert_eq!(out[0], 100.0);
        assert_eq!(out[4999], 4999.0);
        assert_eq!(out[5000 + 2500], 5000.0);
        assert_eq!(out[2 * 5000 + 4000], 12000.0);
    }

    #[test]
    fn nan_propagates_through_max_like_the_binary_kernel() {
        let x = Tensor::from_f32(&[2], &[f32::NAN, 2.0]).unwrap();
        let y = region("[max(x0, 0.0), sigmoid(t0)]", &[x], &[2]);
        assert!(y[0].is_nan());
        assert!((y[1] - 1.0 / (1.0 + (-2.0f32).exp())).abs() < 1e-7);
    }
}
