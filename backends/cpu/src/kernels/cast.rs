//! Cast and BitCast, between every pair of RLX dtypes.
//!
//! Float to integer truncates toward zero (NaN gives 0); integer to integer
//! wraps like C; to bool is `!= 0`. Standard dtype pairs run a typed loop;
//! minifloats and sub-byte integers go through [`Val`].

use half::{bf16, f16};
use rlx_ir::ops::RoundMode;
use rlx_ir::{DType, Op};

use super::layout::par_rows;
use super::minifloat::{e8m0_decode, e8m0_encode, Format};
use super::num::AnyNum;
use super::vmath;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Cast(_) => Ok(fn_kernel(spec, cast)),
        Op::BitCast(_) => Ok(fn_kernel(spec, bitcast)),
        op => Err(KernelError::Internal(format!(
            "{} is not a cast",
            op.name()
        ))),
    }
}

/// One element on its way between dtypes.
#[derive(Clone, Copy, Debug)]
pub enum Val {
    Int(i128),
    Float(f64),
}

/// Reads element `i` of a tensor of any dtype.
pub fn read(d: DType, b: &[u8], i: usize) -> Val {
    let w = d.size();
    let chunk = &b[i * w..(i + 1) * w];
    let le8 = |c: &[u8]| {
        let mut a = [0u8; 8];
        a[..c.len()].copy_from_slice(c);
        a
    };
    match d {
        DType::F32 => Val::Float(f32::from_le_bytes(chunk.try_into().unwrap_or_default()) as f64),
        DType::F64 => Val::Float(f64::from_le_bytes(le8(chunk))),
        DType::F16 => Val::Float(f16::from_le_bytes([chunk[0], chunk[1]]).to_f64()),
        DType::BF16 => Val::Float(bf16::from_le_bytes([chunk[0], chunk[1]]).to_f64()),
        DType::F8E8M0 => Val::Float(e8m0_decode(chunk[0])),
        d if d.is_minifloat() => Val::Float(Format::of(d).map_or(f64::NAN, |f| f.decode(chunk[0]))),
        DType::I8 | DType::I4 | DType::I2 => Val::Int(chunk[0] as i8 as i128),
        DType::I16 => Val::Int(i16::from_le_bytes([chunk[0], chunk[1]]) as i128),
        DType::I32 => Val::Int(i32::from_le_bytes(chunk.try_into().unwrap_or_default()) as i128),
        DType::I64 => Val::Int(i64::from_le_bytes(le8(chunk)) as i128),
        _ => Val::Int(u64::from_le_bytes(le8(chunk)) as i128),
    }
}

/// Writes `v` as element `i` of dtype `d`.
pub fn write(d: DType, b: &mut [u8], i: usize, v: Val, saturate: bool, round: RoundMode) {
    let w = d.size();
    let out = &mut b[i * w..(i + 1) * w];
    let as_int = |v: Val| -> i128 {
        match v {
            Val::Int(x) => x,
            Val::Float(f) if f.is_finite() => f.trunc() as i128,
            Val::Float(_) => 0,
        }
    };
    let as_f = |v: Val| -> f64 {
        match v {
            Val::Int(x) => x as f64,
            Val::Float(f) => f,
        }
    };
    match d {
        DType::Bool => {
            out[0] = u8::from(match v {
                Val::Int(x) => x != 0,
                Val::Float(f) => f != 0.0,
            })
        }
        DType::F32 => out.copy_from_slice(&(as_f(v) as f32).to_le_bytes()),
        DType::F64 => out.copy_from_slice(&as_f(v).to_le_bytes()),
        DType::F16 => out.copy_from_slice(&f16::from_f64(as_f(v)).to_le_bytes()),
        DType::BF16 => out.copy_from_slice(&bf16::from_f64(as_f(v)).to_le_bytes()),
        DType::F8E8M0 => out[0] = e8m0_encode(as_f(v) as f32, saturate, round),
        d if d.is_minifloat() => out[0] = Format::of(d).map_or(0, |f| f.encode(as_f(v), saturate)),
        DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
            let bits = d.packed_bits();
            let mask = (1i128 << bits) - 1;
            let mut x = as_int(v) & mask;
            if matches!(d, DType::I4 | DType::I2) && x >= (1 << (bits - 1)) {
                x -= 1 << bits;
            }
            out[0] = x as i8 as u8;
        }
        DType::I8
        | DType::U8
        | DType::I16
        | DType::U16
        | DType::I32
        | DType::U32
        | DType::I64
        | DType::U64 => {
            // Floats saturate as Rust's `as` does; integers wrap.
            let x: i128 = match v {
                Val::Float(f) => match d {
                    DType::I8 => f as i8 as i128,
                    DType::U8 => f as u8 as i128,
                    DType::I16 => f as i16 as i128,
                    DType::U16 => f as u16 as i128,
                    DType::I32 => f as i32 as i128,
                    DType::U32 => f as u32 as i128,
                    DType::I64 => f as i64 as i128,
                    _ => f as u64 as i128,
                },
                Val::Int(x) => x,
            };
            out.copy_from_slice(&x.to_le_bytes()[..w]);
        }
        _ => out.fill(0),
    }
}

/// A standard -> standard cast in a typed loop.
fn cast_typed<S: AnyNum, D: AnyNum>(src: &[S], dst: &mut [D], s_float: bool, d_float: bool) {
    if !s_float && !d_float {
        map(src, dst, |v| D::of_i128(v.as_i128()));
    } else {
        map(src, dst, |v| {
            let f = v.as_f64();
            if d_float {
                D::of_f64(f)
            } else {
                D::of_f64(f.trunc())
            }
        });
    }
}

/// `dst[i] = f(src[i])` in chunks over the pool, each loop compiled for the
/// CPU's vector width (a bool mask cast to f32 ran a lane at a time).
fn map<S: Copy + Sync, D: Send>(src: &[S], dst: &mut [D], f: impl Fn(S) -> D + Sync) {
    par_rows(dst, CHUNK, |c, row| {
        vmath::vectorized(|| {
            for (o, &v) in row.iter_mut().zip(&src[c * CHUNK..]) {
                *o = f(v);
            }
        })
    });
}

/// Elements per chunk of [`map`].
const CHUNK: usize = 16384;

fn cast(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Cast(c) = op else {
        return Err(KernelError::Internal("not a cast".into()));
    };
    let x = &ins[0];
    let out = &mut outs[0];
    let (s, d) = (x.dtype, out.dtype);
    if s == d {
        out.bytes.copy_from_slice(x.bytes);
        return Ok(());
    }
    let std_pair = s.is_standard() && d.is_standard() && s != DType::Bool && d != DType::Bool;
    if std_pair {
        return with_dtype!(s, S => with_dtype!(d, D => {
            cast_typed::<S, D>(x.slice::<S>()?, out.slice::<D>()?, s.is_float(), d.is_float());
            Ok(())
        }, num), num);
    }
    // Bool lanes at memory speed (a one-hot mask cast to float).
    if s == DType::Bool && d.is_standard() {
        let src = x.bytes;
        return with_dtype!(d, D => {
            let (zero, one) = (D::of_i128(0), D::of_i128(1));
            map(src, out.slice::<D>()?, |b| if b != 0 { one } else { zero });
            Ok(())
        }, num);
    }
    if d == DType::Bool && s.is_standard() {
        return with_dtype!(s, S => {
            let src = x.slice::<S>()?;
            if s.is_float() {
                map(src, &mut *out.bytes, |v| u8::from(v.as_f64() != 0.0));
            } else {
                map(src, &mut *out.bytes, |v| u8::from(v.as_i128() != 0));
            }
            Ok(())
        }, num);
    }
    let n = x.numel();
    for i in 0..n {
        let v = if s == DType::Bool {
            Val::Int(i128::from(x.bytes[i] != 0))
        } else {
            read(s, x.bytes, i)
        };
        write(d, out.bytes, i, v, c.saturate, c.round_mode);
    }
    Ok(())
}

fn bitcast(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    if ins[0].bytes.len() != outs[0].bytes.len() {
        return Err(KernelError::Internal(
            "bitcast between different sizes".into(),
        ));
    }
    outs[0].bytes.copy_from_slice(ins[0].bytes);
    Ok(())
}
