//! ElementwiseRegion: runs a region's program as one loop over the output.
//! The output and input strides are collapsed first (a per-channel operand of
//! an NCHW output becomes a scalar per row), then each row is cut into pieces
//! that stay in cache: per piece, inputs are loaded once (contiguous, scalar
//! or strided) and the instructions run over it in the compute type (f32 for
//! f32/f16/bf16, f64 for f64), with the formulas of the elementwise kernels.

use num_traits::Float;
use rlx_ir::ops::{BinaryKind as B, Operand, Program, RegionFn, UnaryKind as U};
use rlx_ir::{DType, Op};

use super::layout::{collapse, offset_of, PAR_MIN};
use super::num::{Comp, Real};
use crate::kernel::{Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

/// Output elements per piece: every instruction's register is a piece long,
/// and a program's registers and inputs stay in L1 at this length (2048
/// spilled a 7-instruction program's 48 KiB of registers and 40 KiB of
/// inputs to L2: oww_embedding's regions 0.29 -> 0.18 ms, one thread).
const CHUNK: usize = 512;
/// Rows shorter than this are not worth a piece each: pieces then span rows.
const MIN_ROW: usize = 64;

struct RegionKernel {
    program: Program,
    dtype: DType,
    /// The output dims, collapsed.
    dims: Vec<usize>,
    /// Per input: its strides against `dims` (0 where it broadcasts).
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
    let strides: Vec<Vec<usize>> = (0..spec.inputs.len())
        .map(|i| strides_against(&spec.in_dims(i), &out_dims))
        .collect::<Result<_, _>>()?;
    let (dims, strides) = collapse(&out_dims, &strides);
    Ok(Box::new(RegionKernel {
        program: r.program.clone(),
        dtype: spec.outputs[0].dtype,
        dims,
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

/// Per-thread buffers: loaded inputs, one register per instruction, and
/// per input the value it broadcasts over a whole piece (if it does).
struct Scratch<C> {
    inputs: Vec<Vec<C>>,
    regs: Vec<Vec<C>>,
    scalars: Vec<Option<C>>,
}

impl<C> Scratch<C> {
    fn new(inputs: usize, regs: usize) -> Scratch<C> {
        Scratch {
            inputs: (0..inputs).map(|_| Vec::with_capacity(CHUNK)).collect(),
            regs: (0..regs).map(|_| Vec::with_capacity(CHUNK)).collect(),
            scalars: Vec::with_capacity(inputs),
        }
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
        if n == 0 {
            return Ok(());
        }
        for (s, st) in srcs.iter().zip(&self.strides) {
            let need = self
                .dims
                .iter()
                .zip(st)
                .map(|(d, s)| if *s == 0 || *d == 0 { 0 } else { (d - 1) * s })
                .sum::<usize>();
            if need >= s.len() {
                return Err(KernelError::Internal(
                    "a region input is smaller than its shape".into(),
                ));
            }
        }
        let inner = self.dims.last().copied().unwrap_or(1).max(1);
        // Pieces within one row read each operand with one stride; shorter
        // rows are walked with full coordinates instead.
        let (unit, by_row) = if inner >= MIN_ROW {
            (inner, true)
        } else {
            (CHUNK, false)
        };
        let new = || Scratch::new(srcs.len(), self.program.0.len());
        let (avx512, avx2) = (super::vmath::avx512(), super::vmath::avx2());
        let work = |scratch: &mut Scratch<T::C>, u: usize, block: &mut [T]| {
            #[cfg(target_arch = "x86_64")]
            {
                if avx512 {
                    // SAFETY: the CPU has AVX-512F (checked above).
                    return unsafe { self.block_avx512(&srcs, u * unit, by_row, block, scratch) };
                }
                if avx2 {
                    // SAFETY: the CPU has AVX2 and FMA (checked above).
                    return unsafe { self.block_avx2(&srcs, u * unit, by_row, block, scratch) };
                }
            }
            self.block(&srcs, u * unit, by_row, block, scratch)
        };
        if n >= PAR_MIN && crate::par::parallel() {
            // Several units per task, each task with its own scratch.
            let units = (super::layout::per_task(n) / unit).max(1);
            crate::par::chunks_mut(o, units * unit, |c, part| {
                let mut s = new();
                for (k, block) in part.chunks_mut(unit).enumerate() {
                    work(&mut s, c * units + k, block);
                }
            });
        } else {
            let mut s = new();
            for (u, block) in o.chunks_mut(unit).enumerate() {
                work(&mut s, u, block);
            }
        }
        Ok(())
    }

    /// Output elements `start..start + out.len()`, piece by piece.
    #[inline(always)]
    fn block<T: Real>(
        &self,
        srcs: &[&[T]],
        start: usize,
        in_row: bool,
        out: &mut [T],
        scratch: &mut Scratch<T::C>,
    ) {
        for (p, piece) in out.chunks_mut(CHUNK).enumerate() {
            self.piece(srcs, start + p * CHUNK, in_row, piece, scratch);
        }
    }

    /// [`Self::block`] compiled for AVX-512: every instruction's loop (all
    /// inlined here) runs 16 lanes wide.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    unsafe fn block_avx512<T: Real>(
        &self,
        srcs: &[&[T]],
        start: usize,
        in_row: bool,
        out: &mut [T],
        scratch: &mut Scratch<T::C>,
    ) {
        self.block(srcs, start, in_row, out, scratch)
    }

    /// [`Self::block`] compiled for AVX2 and FMA: 8 lanes wide.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_avx2<T: Real>(
        &self,
        srcs: &[&[T]],
        start: usize,
        in_row: bool,
        out: &mut [T],
        scratch: &mut Scratch<T::C>,
    ) {
        self.block(srcs, start, in_row, out, scratch)
    }

    /// Output elements `start..start + out.len()`.
    #[inline(always)]
    fn piece<T: Real>(
        &self,
        srcs: &[&[T]],
        start: usize,
        in_row: bool,
        out: &mut [T],
        scratch: &mut Scratch<T::C>,
    ) {
        type C<T> = <T as Real>::C;
        let len = out.len();
        let Scratch {
            inputs,
            regs,
            scalars,
        } = scratch;
        scalars.clear();
        for ((src, st), buf) in srcs.iter().zip(&self.strides).zip(inputs.iter_mut()) {
            let inner = st.last().copied().unwrap_or(0);
            if in_row {
                let off = offset_of(start, &self.dims, st);
                match inner {
                    0 => {
                        scalars.push(Some(src[off].up()));
                        continue;
                    }
                    1 => {
                        let row = &src[off..off + len];
                        sized(buf, len, row[0].up());
                        for (b, v) in buf.iter_mut().zip(row) {
                            *b = v.up();
                        }
                    }
                    s => {
                        for (j, b) in sized(buf, len, src[off].up()).iter_mut().enumerate() {
                            *b = src[off + j * s].up();
                        }
                    }
                }
            } else {
                buf.clear();
                gather(src, st, &self.dims, start, buf, len);
            }
            scalars.push(None);
        }
        for (k, ins) in self.program.0.iter().enumerate() {
            let (done, rest) = regs.split_at_mut(k);
            let dst = &mut rest[0];
            let arg = |a: usize| -> Arg<'_, C<T>> {
                match ins.args[a] {
                    Operand::Input(i) => {
                        let i = usize::from(i);
                        match scalars[i] {
                            Some(c) => Arg::Scalar(c),
                            None => Arg::Vec(&inputs[i]),
                        }
                    }
                    Operand::Temp(t) => Arg::Vec(&done[usize::from(t)]),
                    Operand::Const(c) => Arg::Scalar(C::<T>::from_f64c(c)),
                }
            };
            match ins.f {
                RegionFn::Unary(f) => unary(dst, f, arg(0), len),
                RegionFn::Binary(f) => binary(dst, f, arg(0), arg(1), len),
            }
        }
        if let Some(last) = regs.get(self.program.0.len().wrapping_sub(1)) {
            for (o, v) in out.iter_mut().zip(last) {
                *o = T::down(*v);
            }
        }
    }
}

/// Loads input values of output elements `start..start+len` into `buf`,
/// walking output coordinates a row (the last dim) at a time: a contiguous
/// row segment is copied, a broadcast one filled, only other strides go
/// element by element.
fn gather<T: Real>(
    src: &[T],
    strides: &[usize],
    dims: &[usize],
    start: usize,
    buf: &mut Vec<T::C>,
    len: usize,
) {
    let r = dims.len();
    if r == 0 {
        let v = src.first().map_or_else(T::C::nan, |x| x.up());
        buf.extend(std::iter::repeat_n(v, len));
        return;
    }
    let mut coord = vec![0usize; r];
    let mut rem = start;
    for a in (0..r).rev() {
        if dims[a] > 0 {
            coord[a] = rem % dims[a];
            rem /= dims[a];
        }
    }
    let mut off: usize = coord.iter().zip(strides).map(|(c, s)| c * s).sum();
    let (inner, is) = (dims[r - 1], strides[r - 1]);
    let mut left = len;
    while left > 0 {
        let n = (inner - coord[r - 1]).min(left);
        match is {
            0 => {
                let v = src.get(off).map_or_else(T::C::nan, |x| x.up());
                buf.extend(std::iter::repeat_n(v, n));
            }
            1 => match src.get(off..off + n) {
                Some(row) => {
                    for x in row {
                        buf.push(x.up());
                    }
                }
                None => buf.extend(std::iter::repeat_n(T::C::nan(), n)),
            },
            s => {
                for j in 0..n {
                    buf.push(src.get(off + j * s).map_or_else(T::C::nan, |x| x.up()));
                }
            }
        }
        left -= n;
        coord[r - 1] += n;
        off += n * is;
        if coord[r - 1] < inner {
            continue;
        }
        // The row is done: carry into the outer dims.
        off -= is * inner;
        coord[r - 1] = 0;
        for a in (0..r - 1).rev() {
            coord[a] += 1;
            off += strides[a];
            if coord[a] < dims[a] {
                break;
            }
            off -= strides[a] * coord[a];
            coord[a] = 0;
        }
    }
}

enum Arg<'a, C> {
    Vec(&'a [C]),
    Scalar(C),
}

// The loops below are plain `for` loops over slices, not `extend(map(..))`:
// those go through `Iterator::fold`, a function of its own that LLVM may
// leave out of line, and out of line it is compiled without the AVX-512 of
// `block_avx512` (4 SSE lanes instead of 16).

/// `dst` at length `len`, its old values left for the caller to overwrite
/// (the registers keep one length from piece to piece, so this writes
/// nothing in the steady state).
#[inline(always)]
fn sized<C: Copy>(dst: &mut Vec<C>, len: usize, fill: C) -> &mut [C] {
    dst.resize(len, fill);
    dst
}

#[inline(always)]
fn map1<C: Copy>(dst: &mut Vec<C>, a: Arg<C>, len: usize, f: impl Fn(C) -> C) {
    match a {
        Arg::Vec(v) => {
            let Some(&first) = v.first() else {
                dst.clear();
                return;
            };
            for (d, x) in sized(dst, v.len(), first).iter_mut().zip(v) {
                *d = f(*x);
            }
        }
        Arg::Scalar(c) => {
            let v = f(c);
            sized(dst, len, v).fill(v);
        }
    }
}

#[inline(always)]
fn map2<C: Copy>(dst: &mut Vec<C>, a: Arg<C>, b: Arg<C>, len: usize, f: impl Fn(C, C) -> C) {
    match (&a, &b) {
        (Arg::Vec(x), Arg::Vec(y)) => {
            let n = x.len().min(y.len());
            let Some(&first) = x.first() else {
                dst.clear();
                return;
            };
            let (x, y) = (&x[..n], &y[..n]);
            let out = sized(dst, n, first);
            for i in 0..n {
                out[i] = f(x[i], y[i]);
            }
        }
        (Arg::Vec(x), Arg::Scalar(q)) => {
            let Some(&first) = x.first() else {
                dst.clear();
                return;
            };
            for (d, p) in sized(dst, x.len(), first).iter_mut().zip(x.iter()) {
                *d = f(*p, *q);
            }
        }
        (Arg::Scalar(p), Arg::Vec(y)) => {
            let Some(&first) = y.first() else {
                dst.clear();
                return;
            };
            for (d, q) in sized(dst, y.len(), first).iter_mut().zip(y.iter()) {
                *d = f(*p, *q);
            }
        }
        (Arg::Scalar(p), Arg::Scalar(q)) => {
            let v = f(*p, *q);
            sized(dst, len, v).fill(v);
        }
    }
}

/// One unary function over a chunk (formulas as in `elementwise.rs`).
#[inline(always)]
fn unary<C: Comp>(dst: &mut Vec<C>, k: U, a: Arg<C>, len: usize) {
    let (zero, one) = (C::zero(), C::one());
    match k {
        U::Abs => map1(dst, a, len, |v| v.abs()),
        U::Neg => map1(dst, a, len, |v| -v),
        U::Sign => map1(dst, a, len, |v| {
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
        U::Ceil => map1(dst, a, len, |v| v.ceil()),
        U::Floor => map1(dst, a, len, |v| v.floor()),
        U::Round => map1(dst, a, len, |v| v.round_even()),
        U::Sqrt => map1(dst, a, len, |v| v.sqrt()),
        U::Reciprocal => map1(dst, a, len, |v| v.recip()),
        U::Exp => map1(dst, a, len, |v| v.vexp()),
        U::Log => map1(dst, a, len, |v| v.ln()),
        U::Sin => map1(dst, a, len, |v| v.sin()),
        U::Cos => map1(dst, a, len, |v| v.cos()),
        U::Tan => map1(dst, a, len, |v| v.tan()),
        U::Asin => map1(dst, a, len, |v| v.asin()),
        U::Acos => map1(dst, a, len, |v| v.acos()),
        U::Atan => map1(dst, a, len, |v| v.atan()),
        U::Sinh => map1(dst, a, len, |v| v.sinh()),
        U::Cosh => map1(dst, a, len, |v| v.cosh()),
        U::Asinh => map1(dst, a, len, |v| v.asinh()),
        U::Acosh => map1(dst, a, len, |v| v.acosh()),
        U::Atanh => map1(dst, a, len, |v| v.atanh()),
        U::Tanh => map1(dst, a, len, |v| v.vtanh()),
        U::Sigmoid => map1(dst, a, len, |v| {
            if v >= zero {
                one / (one + (-v).vexp())
            } else {
                let e = v.vexp();
                e / (one + e)
            }
        }),
        U::Relu => map1(dst, a, len, |v| if v < zero { zero } else { v }),
        U::Erf => map1(dst, a, len, |v| v.verf()),
        U::Softplus => map1(dst, a, len, |v| {
            if v > zero {
                v + (-v).exp().ln_1p()
            } else {
                v.exp().ln_1p()
            }
        }),
        U::Softsign => map1(dst, a, len, |v| v / (one + v.abs())),
        // Not allowed in a region (the program check rejects them at build).
        U::Not | U::BitwiseNot | U::IsNan | U::IsInf | U::IsPosInf | U::IsNegInf => {
            dst.clear();
            dst.resize(len, C::nan());
        }
    }
}

/// One binary function over a chunk.
#[inline(always)]
fn binary<C: Comp>(dst: &mut Vec<C>, k: B, a: Arg<C>, b: Arg<C>, len: usize) {
    match k {
        B::Add => map2(dst, a, b, len, |p, q| p + q),
        B::Sub => map2(dst, a, b, len, |p, q| p - q),
        B::Mul => map2(dst, a, b, len, |p, q| p * q),
        B::Div => map2(dst, a, b, len, |p, q| p / q),
        B::Pow => map2(dst, a, b, len, |p, q| p.powf(q)),
        B::Max => map2(dst, a, b, len, |p, q| {
            if p.is_nan() || q.is_nan() {
                C::nan()
            } else if p > q {
                p
            } else {
                q
            }
        }),
        B::Min => map2(dst, a, b, len, |p, q| {
            if p.is_nan() || q.is_nan() {
                C::nan()
            } else if p < q {
                p
            } else {
                q
            }
        }),
        // Not allowed in a region (the program check rejects them at build).
        _ => {
            dst.clear();
            dst.resize(len, C::nan());
        }
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
        let g = parse_graph(&format!("rlx-ir 2\ngraph {{\n{body}}}\n")).unwrap();
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

    /// Rows shorter than a piece (a per-channel scale on 7x7 planes, and a
    /// row broadcast down the channels), across many pieces.
    #[test]
    fn short_rows_with_per_channel_and_row_broadcasts() {
        let (c, hw) = (100, 49);
        let x: Vec<f32> = (0..c * hw)
            .map(|i| ((i * 37) % 101) as f32 - 50.0)
            .collect();
        let scale: Vec<f32> = (0..c).map(|i| i as f32 * 0.01 - 0.3).collect();
        let row: Vec<f32> = (0..hw).map(|j| j as f32 * 0.5).collect();
        let out = region(
            "[mul(x0, x1), add(t0, x2), relu(t1)]",
            &[
                Tensor::from_f32(&[1, c, 7, 7], &x).unwrap(),
                Tensor::from_f32(&[c, 1, 1], &scale).unwrap(),
                Tensor::from_f32(&[1, 1, 7, 7], &row).unwrap(),
            ],
            &[1, c, 7, 7],
        );
        for (i, y) in out.iter().enumerate() {
            let want = (x[i] * scale[i / hw] + row[i % hw]).max(0.0);
            assert_eq!(*y, want, "at {i}");
        }
    }

    #[test]
    fn nan_propagates_through_max_like_the_binary_kernel() {
        let x = Tensor::from_f32(&[2], &[f32::NAN, 2.0]).unwrap();
        let y = region("[max(x0, 0.0), sigmoid(t0)]", &[x], &[2]);
        assert!(y[0].is_nan());
        assert!((y[1] - 1.0 / (1.0 + (-2.0f32).exp())).abs() < 1e-7);
    }

    /// An instruction on per-row scalars only (`add(x1, 1.0)`) is refilled
    /// for every row, not left at the first row's value in the register.
    #[test]
    fn scalar_only_instructions_follow_their_rows() {
        let x = Tensor::from_f32(&[3, 64], &vec![6.0; 192]).unwrap();
        let d = Tensor::from_f32(&[3, 1], &[0.0, 1.0, 2.0]).unwrap();
        let y = region("[add(x1, 1.0), div(x0, t0)]", &[x, d], &[3, 64]);
        for (i, got) in y.iter().enumerate() {
            assert_eq!(*got, 6.0 / [1.0, 2.0, 3.0][i / 64], "element {i}");
        }
    }

    #[test]
    fn per_channel_affine_over_nchw() {
        // x: [2,3,4,20] with per-channel scale/shift [3,1,1]: rows of 80.
        let dims = [2usize, 3, 4, 20];
        let n: usize = dims.iter().product();
        let xv: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
        let x = Tensor::from_f32(&dims, &xv).unwrap();
        let a = Tensor::from_f32(&[3, 1, 1], &[1.0, 2.0, -1.0]).unwrap();
        let b = Tensor::from_f32(&[3, 1, 1], &[0.5, 0.0, 4.0]).unwrap();
        let y = region("[mul(x0, x1), add(t0, x2), relu(t1)]", &[x, a, b], &dims);
        for (i, (got, v)) in y.iter().zip(&xv).enumerate() {
            let c = (i / 80) % 3;
            let want = (v * [1.0, 2.0, -1.0][c] + [0.5, 0.0, 4.0][c]).max(0.0);
            assert_eq!(*got, want, "element {i}");
        }
    }

    #[test]
    fn short_rows_walk_coordinates() {
        // [4,3] + [4,1]: rows of 3 (< MIN_ROW) take the coordinate walk.
        let x = Tensor::from_f32(&[4, 3], &(0..12).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
        let c = Tensor::from_f32(&[4, 1], &[100.0, 200.0, 300.0, 400.0]).unwrap();
        let y = region("[add(x0, x1)]", &[x, c], &[4, 3]);
        let want: Vec<f32> = (0..12)
            .map(|i| i as f32 + 100.0 * (1 + i / 3) as f32)
            .collect();
        assert_eq!(y, want);
    }
}
