//! Elementwise kernels: unary math, binary arithmetic, comparisons, logic,
//! `where`, `clip` and GELU, with numpy broadcasting. f16/bf16 compute in f32.

use std::any::TypeId;

use num_traits::{Float, One, Zero};
use rlx_ir::ops::{BinaryKind as B, CompareKind, GeluApprox, LogicalKind, UnaryKind as U};
use rlx_ir::{DType, Op};

use super::layout::{par_fill, zip2, zip3};
use super::num::{AnyNum, Comp, Int, Real};
use super::vmath;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::{with_dtype, with_width};

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    let f: fn(&Op, &[TensorRef], &mut [TensorMut]) -> Result<(), KernelError> = match spec.op() {
        Op::Unary(_) => unary,
        Op::Binary(_) => binary,
        Op::Compare(_) => compare,
        Op::Logical(_) => logical,
        Op::Where(_) => where_,
        Op::Clip(_) => clip,
        Op::Gelu(_) => gelu,
        op => {
            return Err(KernelError::Internal(format!(
                "{} is not elementwise",
                op.name()
            )))
        }
    };
    Ok(fn_kernel(spec, f))
}

// ----- unary -----

/// Applies `f` elementwise through the compute type, monomorphized per
/// function so that simple ones vectorize.
fn map_float<T: Real>(x: &[T], out: &mut [T], f: impl Fn(T::C) -> T::C + Sync) {
    par_fill(out, |i| T::down(f(x[i].up())));
}

// Closures, not function items: see `vmath::map`.
#[allow(clippy::redundant_closure)]
fn unary_float_map<T: Real>(k: U, x: &[T], out: &mut [T]) -> Result<(), KernelError> {
    if TypeId::of::<T>() == TypeId::of::<f32>() {
        let (x, o) = (
            bytemuck::cast_slice::<T, f32>(x),
            bytemuck::cast_slice_mut::<T, f32>(out),
        );
        match k {
            U::Exp => return Ok(vmath::map(x, o, |v| vmath::exp(v))),
            U::Tanh => return Ok(vmath::map_slices(x, o, vmath::tanh_slice)),
            U::Sigmoid => return Ok(vmath::map_slices(x, o, vmath::sigmoid_slice)),
            U::Erf => return Ok(vmath::map(x, o, |v| vmath::erf(v))),
            _ => {}
        }
    }
    type C<T> = <T as Real>::C;
    let zero = C::<T>::zero();
    let one = C::<T>::one();
    match k {
        U::Abs => map_float(x, out, |v: C<T>| v.abs()),
        U::Neg => map_float(x, out, |v: C<T>| -v),
        U::Sign => map_float(x, out, |v: C<T>| {
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
        U::Ceil => map_float(x, out, |v: C<T>| v.ceil()),
        U::Floor => map_float(x, out, |v: C<T>| v.floor()),
        U::Round => map_float(x, out, |v: C<T>| v.round_even()),
        U::Sqrt => map_float(x, out, |v: C<T>| v.sqrt()),
        U::Reciprocal => map_float(x, out, |v: C<T>| v.recip()),
        U::Exp => map_float(x, out, |v: C<T>| v.vexp()),
        U::Log => map_float(x, out, |v: C<T>| v.ln()),
        U::Sin => map_float(x, out, |v: C<T>| v.sin()),
        U::Cos => map_float(x, out, |v: C<T>| v.cos()),
        U::Tan => map_float(x, out, |v: C<T>| v.tan()),
        U::Asin => map_float(x, out, |v: C<T>| v.asin()),
        U::Acos => map_float(x, out, |v: C<T>| v.acos()),
        U::Atan => map_float(x, out, |v: C<T>| v.atan()),
        U::Sinh => map_float(x, out, |v: C<T>| v.sinh()),
        U::Cosh => map_float(x, out, |v: C<T>| v.cosh()),
        U::Asinh => map_float(x, out, |v: C<T>| v.asinh()),
        U::Acosh => map_float(x, out, |v: C<T>| v.acosh()),
        U::Atanh => map_float(x, out, |v: C<T>| v.atanh()),
        U::Tanh => map_float(x, out, |v: C<T>| v.vtanh()),
        U::Sigmoid => map_float(x, out, |v: C<T>| {
            if v >= zero {
                one / (one + (-v).vexp())
            } else {
                let e = v.vexp();
                e / (one + e)
            }
        }),
        // NaN passes through (`v < 0` is false for NaN).
        U::Relu => map_float(x, out, |v: C<T>| if v < zero { zero } else { v }),
        U::Erf => map_float(x, out, |v: C<T>| v.verf()),
        U::Softplus => map_float(x, out, |v: C<T>| {
            if v > zero {
                v + (-v).exp().ln_1p()
            } else {
                v.exp().ln_1p()
            }
        }),
        U::Softsign => map_float(x, out, |v: C<T>| v / (one + v.abs())),
        k => return Err(KernelError::Unsupported(format!("{} on floats", k.name()))),
    }
    Ok(())
}

fn unary_float<T: Real>(k: U, x: &[T], out: &mut [u8]) -> Result<(), KernelError> {
    match k {
        U::IsNan | U::IsInf | U::IsPosInf | U::IsNegInf => {
            // One loop per test (a function pointer kept them scalar).
            match k {
                U::IsNan => par_fill(out, |i| u8::from(x[i].to_f64().is_nan())),
                U::IsInf => par_fill(out, |i| u8::from(x[i].to_f64().is_infinite())),
                U::IsPosInf => par_fill(out, |i| u8::from(x[i].to_f64() == f64::INFINITY)),
                _ => par_fill(out, |i| u8::from(x[i].to_f64() == f64::NEG_INFINITY)),
            }
            Ok(())
        }
        _ => {
            let out: &mut [T] = bytemuck::try_cast_slice_mut(out)
                .map_err(|e| KernelError::Internal(e.to_string()))?;
            unary_float_map(k, x, out)
        }
    }
}

fn unary_int<T: Int>(k: U, x: &[T], out: &mut [T]) -> Result<(), KernelError> {
    let zero = T::zero();
    match k {
        U::Abs => par_fill(out, |i| {
            if T::SIGNED && x[i] < zero {
                x[i].wrapping_neg()
            } else {
                x[i]
            }
        }),
        U::Neg => par_fill(out, |i| x[i].wrapping_neg()),
        U::Sign => par_fill(out, |i| match x[i].cmp(&zero) {
            std::cmp::Ordering::Greater => T::one(),
            std::cmp::Ordering::Less => T::one().wrapping_neg(),
            std::cmp::Ordering::Equal => zero,
        }),
        U::Relu => par_fill(out, |i| x[i].max(zero)),
        U::BitwiseNot => par_fill(out, |i| !x[i]),
        k => {
            return Err(KernelError::Unsupported(format!(
                "{} on integers",
                k.name()
            )))
        }
    }
    Ok(())
}

fn unary(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Unary(u) = op else {
        return Err(KernelError::Internal("not unary".into()));
    };
    let x = &ins[0];
    if u.kind == U::Not {
        let (a, o) = (x.bytes, &mut *outs[0].bytes);
        par_fill(o, |i| u8::from(a[i] == 0));
        return Ok(());
    }
    if x.dtype.is_float() {
        let out = &mut *outs[0].bytes;
        with_dtype!(x.dtype, T => unary_float::<T>(u.kind, x.slice::<T>()?, out), float)
    } else {
        let out = &mut outs[0];
        with_dtype!(x.dtype, T => unary_int::<T>(u.kind, x.slice::<T>()?, out.slice::<T>()?), int)
    }
}

// ----- binary -----

fn binary_float<T: Real>(
    k: B,
    a: &TensorRef,
    b: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let (x, y) = (a.slice::<T>()?, b.slice::<T>()?);
    let dims = out.dims;
    let o = out.slice::<T>()?;
    macro_rules! go {
        ($f:expr) => {{
            let f = $f;
            zip2(x, a.dims, y, b.dims, o, dims, |p: T, q: T| {
                T::down(f(p.up(), q.up()))
            })
        }};
    }
    type C<T> = <T as Real>::C;
    match k {
        B::Add => go!(|p: C<T>, q: C<T>| p + q),
        B::Sub => go!(|p: C<T>, q: C<T>| p - q),
        B::Mul => go!(|p: C<T>, q: C<T>| p * q),
        B::Div => go!(|p: C<T>, q: C<T>| p / q),
        B::Pow => go!(|p: C<T>, q: C<T>| p.powf(q)),
        B::Fmod => go!(|p: C<T>, q: C<T>| p % q),
        // Floor modulo (numpy's `mod`): the result takes the divisor's sign,
        // a zero result too; inf or a zero divisor give NaN through `%`.
        B::Mod => go!(|p: C<T>, q: C<T>| {
            let r = p % q;
            if r == C::<T>::zero() {
                C::<T>::zero().copysign(q)
            } else if (r < C::<T>::zero()) != (q < C::<T>::zero()) {
                r + q
            } else {
                r
            }
        }),
        B::Max => go!(|p: C<T>, q: C<T>| if p.is_nan() || q.is_nan() {
            C::<T>::nan()
        } else if p > q {
            p
        } else {
            q
        }),
        B::Min => go!(|p: C<T>, q: C<T>| if p.is_nan() || q.is_nan() {
            C::<T>::nan()
        } else if p < q {
            p
        } else {
            q
        }),
        k => return Err(KernelError::Unsupported(format!("{} on floats", k.name()))),
    }
    Ok(())
}

fn binary_int<T: Int>(
    k: B,
    a: &TensorRef,
    b: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let (x, y) = (a.slice::<T>()?, b.slice::<T>()?);
    if matches!(k, B::Div | B::Mod | B::Fmod) && y.iter().any(|v| *v == T::zero()) {
        return Err(KernelError::Value(format!("integer {} by zero", k.name())));
    }
    let dims = out.dims;
    let o = out.slice::<T>()?;
    let bits = (std::mem::size_of::<T>() * 8) as i128;
    macro_rules! go {
        ($f:expr) => {
            zip2(x, a.dims, y, b.dims, o, dims, $f)
        };
    }
    match k {
        B::Add => go!(|p: T, q: T| p.wrapping_add(&q)),
        B::Sub => go!(|p: T, q: T| p.wrapping_sub(&q)),
        B::Mul => go!(|p: T, q: T| p.wrapping_mul(&q)),
        // Truncating division; i128 avoids the MIN / -1 overflow.
        B::Div => go!(|p: T, q: T| T::from_i128(p.to_i128() / q.to_i128())),
        B::Mod => go!(|p: T, q: T| {
            let (p, q) = (p.to_i128(), q.to_i128());
            let r = p % q;
            T::from_i128(if r != 0 && ((r < 0) != (q < 0)) {
                r + q
            } else {
                r
            })
        }),
        B::Fmod => go!(|p: T, q: T| T::from_i128(p.to_i128() % q.to_i128())),
        B::Max => go!(|p: T, q: T| p.max(q)),
        B::Min => go!(|p: T, q: T| p.min(q)),
        B::BitwiseAnd => go!(|p: T, q: T| p & q),
        B::BitwiseOr => go!(|p: T, q: T| p | q),
        B::BitwiseXor => go!(|p: T, q: T| p ^ q),
        B::ShiftLeft => go!(|p: T, q: T| {
            let s = q.to_i128();
            if s >= bits || s < 0 {
                T::zero()
            } else {
                p << s as usize
            }
        }),
        // A shift at or past the width (or negative) leaves only the sign fill.
        B::ShiftRight => go!(|p: T, q: T| {
            let s = q.to_i128();
            if s >= bits || s < 0 {
                T::from_i128(if p.to_i128() < 0 { -1 } else { 0 })
            } else {
                p >> s as usize
            }
        }),
        B::Pow => go!(|p: T, q: T| {
            let e = q.to_i128();
            if e < 0 {
                // Only 1 and -1 have integer reciprocals; numpy gives 0 for the rest.
                match p.to_i128() {
                    1 => T::one(),
                    -1 => T::from_i128(if e % 2 == 0 { 1 } else { -1 }),
                    _ => T::zero(),
                }
            } else {
                // Squaring, wrapping as integer products do: exact for
                // every exponent (a cap on the steps gave (-1)^129 = 1).
                let (mut acc, mut base, mut e) = (T::one(), p, e);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(&base);
                    }
                    base = base.wrapping_mul(&base);
                    e >>= 1;
                }
                acc
            }
        }),
    }
    Ok(())
}

/// Pow with an exponent of another dtype: computed in f64, cast back.
fn pow_mixed<T: AnyNum, E: AnyNum>(
    a: &TensorRef,
    b: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let (x, y) = (a.slice::<T>()?, b.slice::<E>()?);
    let dims = out.dims;
    let o = out.slice::<T>()?;
    zip2(x, a.dims, y, b.dims, o, dims, |p: T, q: E| {
        T::of_f64(p.as_f64().powf(q.as_f64()))
    });
    Ok(())
}

fn binary(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Binary(bop) = op else {
        return Err(KernelError::Internal("not binary".into()));
    };
    let (a, b) = (&ins[0], &ins[1]);
    let out = &mut outs[0];
    if bop.kind == B::Pow && a.dtype != b.dtype {
        return with_dtype!(a.dtype, T => with_dtype!(b.dtype, E => pow_mixed::<T, E>(a, b, out), num), num);
    }
    if a.dtype.is_float() {
        with_dtype!(a.dtype, T => binary_float::<T>(bop.kind, a, b, out), float)
    } else {
        with_dtype!(a.dtype, T => binary_int::<T>(bop.kind, a, b, out), int)
    }
}

// ----- comparisons and logic -----

fn compare_typed<T: AnyNum>(
    k: CompareKind,
    a: &TensorRef,
    b: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let (x, y) = (a.slice::<T>()?, b.slice::<T>()?);
    let dims = out.dims;
    let o = &mut *out.bytes;
    // One loop per kind: through a function pointer no loop vectorized
    // (a one-hot Equal over half a million elements took milliseconds).
    macro_rules! go {
        ($op:tt) => {
            zip2(x, a.dims, y, b.dims, o, dims, |p: T, q: T| u8::from(p $op q))
        };
    }
    match k {
        CompareKind::Equal => go!(==),
        CompareKind::Less => go!(<),
        CompareKind::LessOrEqual => go!(<=),
        CompareKind::Greater => go!(>),
        CompareKind::GreaterOrEqual => go!(>=),
    }
    Ok(())
}

fn compare(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Compare(c) = op else {
        return Err(KernelError::Internal("not a comparison".into()));
    };
    let (a, b) = (&ins[0], &ins[1]);
    let d = if a.dtype == DType::Bool {
        DType::U8
    } else {
        a.dtype
    };
    with_dtype!(d, T => compare_typed::<T>(c.kind, a, b, &mut outs[0]), num)
}

fn logical(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Logical(l) = op else {
        return Err(KernelError::Internal("not logical".into()));
    };
    let (a, b) = (&ins[0], &ins[1]);
    let dims = outs[0].dims;
    let o = &mut *outs[0].bytes;
    let f: fn(bool, bool) -> bool = match l.kind {
        LogicalKind::And => |p, q| p & q,
        LogicalKind::Or => |p, q| p | q,
        LogicalKind::Xor => |p, q| p ^ q,
    };
    zip2(a.bytes, a.dims, b.bytes, b.dims, o, dims, |p, q| {
        u8::from(f(p != 0, q != 0))
    });
    Ok(())
}

fn where_(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let (c, x, y) = (&ins[0], &ins[1], &ins[2]);
    let out = &mut outs[0];
    with_width!(x.dtype, T => {
        let dims = out.dims;
        let o: &mut [T] = bytemuck::try_cast_slice_mut(&mut *out.bytes).map_err(|e| KernelError::Internal(e.to_string()))?;
        zip3(c.bytes, c.dims, x.slice::<T>()?, x.dims, y.slice::<T>()?, y.dims, o, dims, |k, p, q| if k != 0 { p } else { q });
        Ok(())
    })
}

fn clip_typed<T: AnyNum>(ins: &[TensorRef], out: &mut TensorMut) -> Result<(), KernelError> {
    let x = ins[0].slice::<T>()?;
    let lo = ins[1]
        .slice::<T>()?
        .first()
        .copied()
        .ok_or_else(|| KernelError::Value("empty min".into()))?;
    let hi = ins[2]
        .slice::<T>()?
        .first()
        .copied()
        .ok_or_else(|| KernelError::Value("empty max".into()))?;
    let o = out.slice::<T>()?;
    par_fill(o, |i| {
        // min(max(x, lo), hi): with lo > hi every element becomes hi.
        let v = if x[i] < lo { lo } else { x[i] };
        if v > hi {
            hi
        } else {
            v
        }
    });
    Ok(())
}

fn clip(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    with_dtype!(ins[0].dtype, T => clip_typed::<T>(ins, &mut outs[0]), num)
}

// Closures, not function items: see `vmath::map`.
#[allow(clippy::redundant_closure)]
fn gelu_typed<T: Real>(approx: GeluApprox, x: &[T], o: &mut [T]) -> Result<(), KernelError> {
    if TypeId::of::<T>() == TypeId::of::<f32>() {
        let (x, o) = (
            bytemuck::cast_slice::<T, f32>(x),
            bytemuck::cast_slice_mut::<T, f32>(o),
        );
        match approx {
            GeluApprox::None => super::gelu_lanes::gelu_erf_into(x, o),
            GeluApprox::Tanh => vmath::map(x, o, |v| vmath::gelu_tanh(v)),
        }
        return Ok(());
    }
    let c = |v: f64| <T::C as Comp>::from_f64c(v);
    match approx {
        GeluApprox::None => par_fill(o, |i| {
            let v = x[i].up();
            T::down(c(0.5) * v * (c(1.0) + (v * c(std::f64::consts::FRAC_1_SQRT_2)).verf()))
        }),
        GeluApprox::Tanh => par_fill(o, |i| {
            let v = x[i].up();
            let inner = c((2.0 / std::f64::consts::PI).sqrt()) * (v + c(0.044715) * v * v * v);
            T::down(c(0.5) * v * (c(1.0) + inner.vtanh()))
        }),
    }
    Ok(())
}

fn gelu(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Gelu(g) = op else {
        return Err(KernelError::Internal("not gelu".into()));
    };
    let out = &mut outs[0];
    with_dtype!(ins[0].dtype, T => gelu_typed::<T>(g.approximate, ins[0].slice::<T>()?, out.slice::<T>()?), float)
}
