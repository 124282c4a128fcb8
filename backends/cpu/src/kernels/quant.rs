//! QuantizeLinear, DequantizeLinear (per tensor, per axis and blocked) and
//! DynamicQuantizeLinear, for every quantized dtype: 8/16-bit integers, the
//! sub-byte integers (stored one element per byte) and the float8/float4 formats.
//!
//! Arithmetic follows the ONNX reference: the quotient `x / scale` is computed
//! in the input's precision, integer quantization rounds half to even, adds the
//! zero point and clamps to the dtype's range; float8 quantization converts the
//! quotient with round-to-nearest-even, saturating when asked to; float4
//! quantization adds the zero point and converts (it always saturates).
//! Dequantization computes `(x - zero_point) * scale` in f32 and rounds to the
//! output dtype.

use half::{bf16, f16};
use rlx_ir::ops::RoundMode;
use rlx_ir::{DType, Op};

use super::cast::{read, write, Val};
use super::layout::{axis, par_fill, par_rows, strides};
use super::vmath;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::QuantizeLinear(_) => Ok(fn_kernel(spec, quantize)),
        Op::DequantizeLinear(_) => Ok(fn_kernel(spec, dequantize)),
        Op::DynamicQuantizeLinear(_) => Ok(fn_kernel(spec, dynamic_quantize)),
        op => Err(KernelError::Internal(format!(
            "{} is not a quantization op",
            op.name()
        ))),
    }
}

/// Elements per parallel chunk.
const CHUNK: usize = 4096;

/// Which scale (and zero point) element applies to each element of `x`.
enum ParamMap {
    Tensor,
    Axis {
        stride: usize,
        n: usize,
    },
    Block {
        dims: Vec<usize>,
        p_strides: Vec<usize>,
        axis: usize,
        block: usize,
    },
}

impl ParamMap {
    fn new(x: &[usize], p: &[usize], ax: i64, block: i64) -> Result<ParamMap, KernelError> {
        let numel: usize = p.iter().product();
        let bad = |why: String| Err(KernelError::Value(why));
        if block < 0 {
            return bad(format!("block_size {block} is negative"));
        }
        if numel == 1 && p.len() <= 1 {
            return Ok(ParamMap::Tensor);
        }
        if !(-(x.len() as i64)..x.len() as i64).contains(&ax) {
            return bad(format!("axis {ax} is out of range for rank {}", x.len()));
        }
        let a = axis(ax, x.len());
        if block == 0 {
            if p.len() != 1 || p[0] != x[a] {
                return bad(format!(
                    "per-axis scale of shape {p:?} for axis {a} of {x:?}"
                ));
            }
            return Ok(ParamMap::Axis {
                stride: strides(x)[a],
                n: x[a],
            });
        }
        let bs = block as usize;
        let fits = p.len() == x.len()
            && (0..x.len()).all(|d| {
                if d == a {
                    p[d] == x[d].div_ceil(bs)
                } else {
                    p[d] == x[d]
                }
            });
        if !fits {
            return bad(format!(
                "blocked scale of shape {p:?} for {x:?} with block size {bs} on axis {a}"
            ));
        }
        Ok(ParamMap::Block {
            dims: x.to_vec(),
            p_strides: strides(p),
            axis: a,
            block: bs,
        })
    }

    fn at(&self, i: usize) -> usize {
        match self {
            ParamMap::Tensor => 0,
            ParamMap::Axis { stride, n } => (i / stride) % n,
            ParamMap::Block {
                dims,
                p_strides,
                axis,
                block,
            } => {
                let mut rem = i;
                let mut off = 0;
                for d in (0..dims.len()).rev() {
                    let c = rem % dims[d];
                    rem /= dims[d];
                    off += if d == *axis { c / block } else { c } * p_strides[d];
                }
                off
            }
        }
    }
}

fn as_f64(v: Val) -> f64 {
    match v {
        Val::Int(i) => i as f64,
        Val::Float(f) => f,
    }
}

/// Checks that there is one zero point, or one per scale.
fn check_zero_points(zp: &TensorRef, scale_numel: usize) -> Result<(), KernelError> {
    let n = zp.numel();
    if n == 1 || n == scale_numel {
        Ok(())
    } else {
        Err(KernelError::Value(format!(
            "{n} zero points for {scale_numel} scales"
        )))
    }
}

/// Float zero points must be zero (the float8 formats have no offset).
fn check_float_zero(zp: &TensorRef) -> Result<(), KernelError> {
    for i in 0..zp.numel() {
        if as_f64(read(zp.dtype, zp.bytes, i)) != 0.0 {
            return Err(KernelError::Value(format!(
                "a {} zero point must be zero",
                zp.dtype
            )));
        }
    }
    Ok(())
}

/// The clamp range of an integer dtype, by its (packed) bit width.
fn int_range(d: DType) -> (i128, i128) {
    let bits = d.packed_bits() as u32;
    if d.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// Calls `run(x, out, k)` on every stretch of elements that share parameter
/// `k`: the whole tensor, or the planes of a per-axis parameter; `rows(x,
/// out)` on rows of a per-axis parameter of the innermost axis (element `j`
/// of a row takes parameter `j`); `each(i)` per element for blocked ones.
fn by_runs<X: Sync, Y: Send>(
    map: &ParamMap,
    out: &mut [Y],
    run: impl Fn(&[X], &mut [Y], usize) + Sync,
    rows: impl Fn(&[X], &mut [Y]) + Sync,
    x: &[X],
    each: impl Fn(usize) -> Y + Sync,
) {
    match *map {
        ParamMap::Tensor => par_rows(out, CHUNK, |c, row| {
            run(&x[c * CHUNK..c * CHUNK + row.len()], row, 0)
        }),
        ParamMap::Axis { stride: 1, n } => {
            par_rows(out, n, |r, row| rows(&x[r * n..r * n + row.len()], row))
        }
        ParamMap::Axis { stride, n } => par_rows(out, stride, |r, row| {
            run(&x[r * stride..r * stride + row.len()], row, r % n)
        }),
        ParamMap::Block { .. } => par_fill(out, each),
    }
}

/// Below this magnitude, adding and taking away 1.5·2^23 rounds an f32 half
/// to even; above it the quotient saturates anyway.
const ROUNDS_EXACTLY: f32 = 4_194_304.0;
const ROUND: f32 = 12_582_912.0;

/// `saturate(round_half_even(x / s) + z)` into an 8-bit integer's byte; NaN
/// gives the zero point (as `NaN as i64` gives 0 before it is added).
#[inline(always)]
fn quantize8_one(x: f32, s: f32, z: f32, signed: bool) -> u8 {
    let q = x / s;
    let r = if q.abs() < ROUNDS_EXACTLY {
        (q + ROUND) - ROUND
    } else {
        q
    };
    let (lo, hi) = if signed {
        (-128.0, 127.0)
    } else {
        (0.0, 255.0)
    };
    let v = (r + z).clamp(lo, hi);
    let v = if v.is_nan() { z } else { v };
    // SAFETY: `v` is finite and within [-128, 255] (clamped, NaN replaced by
    // the zero point, which is in range); unlike `as`, this cast vectorizes.
    unsafe { v.to_int_unchecked::<i32>() as u8 }
}

/// [`quantize8_one`] over a stretch with one scale and zero point.
fn quantize8(xs: &[f32], s: f32, z: f32, signed: bool, out: &mut [u8]) {
    vmath::vectorized(|| {
        for (o, &x) in out.iter_mut().zip(xs) {
            *o = quantize8_one(x, s, z, signed);
        }
    })
}

/// `x / scale` in the precision the ONNX reference uses for `x`'s dtype.
fn quotient(d: DType, x: f64, s: f64) -> f64 {
    match d {
        DType::F32 => (x as f32 / s as f32) as f64,
        DType::F16 => f16::from_f32(x as f32 / s as f32).to_f64(),
        DType::BF16 => bf16::from_f32(x as f32 / s as f32).to_f64(),
        _ => x / s,
    }
}

fn quantize(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::QuantizeLinear(q) = op else {
        return Err(KernelError::Internal("not quantize_linear".into()));
    };
    let (x, scale, zp) = (&ins[0], &ins[1], &ins[2]);
    let map = ParamMap::new(x.dims, scale.dims, q.axis, q.block_size)?;
    let out = &mut outs[0];
    let od = out.dtype;
    check_zero_points(zp, scale.numel())?;
    enum Mode {
        Int(i128, i128),
        Float8,
        Float4,
    }
    let mode = match od {
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => {
            check_float_zero(zp)?;
            Mode::Float8
        }
        DType::F4E2M1 => Mode::Float4,
        d if d.is_int() => Mode::Int(int_range(d).0, int_range(d).1),
        d => return Err(KernelError::Unsupported(format!("quantize_linear to {d}"))),
    };
    let (xd, w) = (x.dtype, od.size());
    let bytes8 = matches!(od, DType::U8 | DType::I8) && zp.dtype == od;
    if xd == DType::F32 && scale.dtype == DType::F32 && bytes8 {
        let (xs, ss) = (x.slice::<f32>()?, scale.slice::<f32>()?);
        let signed = od == DType::I8;
        let zs: Vec<f32> = zp
            .bytes
            .iter()
            .map(|&b| if signed { b as i8 as f32 } else { b as f32 })
            .collect();
        let at = |v: &[f32], k: usize| v[if v.len() == 1 { 0 } else { k }];
        let q8 =
            |xs: &[f32], row: &mut [u8], k: usize| quantize8(xs, ss[k], at(&zs, k), signed, row);
        by_runs(
            &map,
            &mut *out.bytes,
            q8,
            |xs, row| {
                for (j, (o, &v)) in row.iter_mut().zip(xs).enumerate() {
                    *o = quantize8_one(v, ss[j], at(&zs, j), signed);
                }
            },
            xs,
            |i| {
                let k = map.at(i);
                quantize8_one(xs[i], ss[k], at(&zs, k), signed)
            },
        );
        return Ok(());
    }
    let saturate = q.saturate;
    par_rows(&mut *out.bytes, CHUNK * w, |c, row| {
        for j in 0..row.len() / w {
            let i = c * CHUNK + j;
            let k = map.at(i);
            let v = quotient(
                xd,
                as_f64(read(xd, x.bytes, i)),
                as_f64(read(scale.dtype, scale.bytes, k)),
            );
            let z = read(zp.dtype, zp.bytes, if zp.numel() == 1 { 0 } else { k });
            let val = match mode {
                Mode::Int(lo, hi) => {
                    let zi = match z {
                        Val::Int(z) => z,
                        Val::Float(f) => f as i128,
                    };
                    Val::Int(
                        (v.round_ties_even() as i128)
                            .saturating_add(zi)
                            .clamp(lo, hi),
                    )
                }
                Mode::Float8 => Val::Float(v),
                Mode::Float4 => Val::Float(v + as_f64(z)),
            };
            write(od, row, j, val, saturate, RoundMode::Nearest);
        }
    });
    Ok(())
}

fn dequantize(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::DequantizeLinear(q) = op else {
        return Err(KernelError::Internal("not dequantize_linear".into()));
    };
    let (x, scale, zp) = (&ins[0], &ins[1], &ins[2]);
    let map = ParamMap::new(x.dims, scale.dims, q.axis, q.block_size)?;
    check_zero_points(zp, scale.numel())?;
    if x.dtype.is_minifloat() || x.dtype.is_float() {
        check_float_zero(zp)?;
    }
    let out = &mut outs[0];
    let (xd, od, w) = (x.dtype, out.dtype, out.dtype.size());
    let bytes8 = matches!(xd, DType::U8 | DType::I8) && zp.dtype == xd;
    if bytes8 && scale.dtype == DType::F32 && od == DType::F32 {
        let (xs, ss) = (x.bytes, scale.slice::<f32>()?);
        let signed = xd == DType::I8;
        let v = move |b: u8| if signed { b as i8 as f32 } else { b as f32 };
        let zs: Vec<f32> = zp.bytes.iter().map(|&b| v(b)).collect();
        let at = |vs: &[f32], k: usize| vs[if vs.len() == 1 { 0 } else { k }];
        let out = out.slice::<f32>()?;
        let d8 = |xs: &[u8], row: &mut [f32], k: usize| {
            let (s, z) = (ss[k], at(&zs, k));
            vmath::vectorized(|| {
                for (o, &b) in row.iter_mut().zip(xs) {
                    *o = (v(b) - z) * s;
                }
            })
        };
        by_runs(
            &map,
            out,
            d8,
            |xs, row| {
                for (j, (o, &b)) in row.iter_mut().zip(xs).enumerate() {
                    *o = (v(b) - at(&zs, j)) * ss[j];
                }
            },
            xs,
            |i| {
                let k = map.at(i);
                (v(xs[i]) - at(&zs, k)) * ss[k]
            },
        );
        return Ok(());
    }
    // Like the reference, 32-bit integers are widened to f64 (numpy's promotion).
    let wide = matches!(xd, DType::I32 | DType::U32);
    par_rows(&mut *out.bytes, CHUNK * w, |c, row| {
        for j in 0..row.len() / w {
            let i = c * CHUNK + j;
            let k = map.at(i);
            let xv = as_f64(read(xd, x.bytes, i));
            let s = as_f64(read(scale.dtype, scale.bytes, k));
            let z = as_f64(read(
                zp.dtype,
                zp.bytes,
                if zp.numel() == 1 { 0 } else { k },
            ));
            let y = if wide {
                (xv - z) * s
            } else {
                ((xv as f32 - z as f32) * s as f32) as f64
            };
            write(od, row, j, Val::Float(y), false, RoundMode::Nearest);
        }
    });
    Ok(())
}

/// `(min, max)` of `x` and 0 (NaNs skipped, as `f32::min`/`max` skip them):
/// the range dynamic quantization takes; chunks over the pool when long.
pub(super) fn range_with_zero(x: &[f32]) -> (f32, f32) {
    let part = |x: &[f32]| {
        #[cfg(target_arch = "x86_64")]
        if vmath::avx512() {
            // SAFETY: the CPU has AVX-512F (checked just above).
            return unsafe { range_avx512(x) };
        }
        range_portable(x)
    };
    if x.len() >= super::layout::PAR_MIN && crate::par::parallel() {
        crate::par::map(x.len().div_ceil(CHUNK), |c| {
            part(&x[c * CHUNK..((c + 1) * CHUNK).min(x.len())])
        })
        .into_iter()
        .fold((0.0, 0.0), |a, b| (a.0.min(b.0), a.1.max(b.1)))
    } else {
        part(x)
    }
}

fn range_portable(x: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = ([0f32; 8], [0f32; 8]);
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for l in 0..8 {
            lo[l] = lo[l].min(c[l]);
            hi[l] = hi[l].max(c[l]);
        }
    }
    let lo = tail.iter().chain(&lo).copied().fold(0f32, f32::min);
    let hi = tail.iter().chain(&hi).copied().fold(0f32, f32::max);
    (lo, hi)
}

/// [`range_portable`] in four independent 16-lane `vminps`/`vmaxps`
/// chains (a NaN operand leaves the bound, as `f32::min` does: the
/// instruction returns its second operand when either is NaN).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn range_avx512(x: &[f32]) -> (f32, f32) {
    use std::arch::x86_64::*;
    let mut lo = [_mm512_setzero_ps(); 4];
    let mut hi = [_mm512_setzero_ps(); 4];
    let chunks = x.chunks_exact(64);
    let tail = chunks.remainder();
    for c in chunks {
        for q in 0..4 {
            let v = _mm512_loadu_ps(c.as_ptr().add(q * 16));
            lo[q] = _mm512_min_ps(v, lo[q]);
            hi[q] = _mm512_max_ps(v, hi[q]);
        }
    }
    let l = _mm512_min_ps(_mm512_min_ps(lo[0], lo[1]), _mm512_min_ps(lo[2], lo[3]));
    let h = _mm512_max_ps(_mm512_max_ps(hi[0], hi[1]), _mm512_max_ps(hi[2], hi[3]));
    let (tl, th) = range_portable(tail);
    (
        _mm512_reduce_min_ps(l).min(tl),
        _mm512_reduce_max_ps(h).max(th),
    )
}

fn dynamic_quantize(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let x = ins[0].slice::<f32>()?;
    let (min, max) = range_with_zero(x);
    // ONNX Runtime's scale of a range of zero is 1 (not 1/255).
    let scale = if max == min { 1.0 } else { (max - min) / 255.0 };
    let zp = (0.0 - min / scale).clamp(0.0, 255.0).round_ties_even();
    let y = outs[0].slice::<u8>()?;
    // |x / scale| <= 255 here, where adding and taking away 1.5 * 2^23
    // rounds half to even (the current rounding mode) without a libm call.
    par_rows(y, CHUNK, |c, row| {
        let x = &x[c * CHUNK..c * CHUNK + row.len()];
        vmath::vectorized(|| {
            for (o, v) in row.iter_mut().zip(x) {
                let q = ((v / scale + ROUND - ROUND) + zp).clamp(0.0, 255.0);
                let q = if q.is_nan() { 0.0 } else { q };
                // SAFETY: `q` is finite and within [0, 255].
                *o = unsafe { q.to_int_unchecked::<i32>() } as u8;
            }
        })
    });
    outs[1].slice::<f32>()?[0] = scale;
    outs[2].slice::<u8>()?[0] = zp as u8;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::ops::{DequantizeLinear, QuantizeLinear};

    fn t<'a>(dtype: DType, dims: &'a [usize], bytes: &'a [u8]) -> TensorRef<'a> {
        TensorRef { dtype, dims, bytes }
    }

    #[test]
    fn quantize_rounds_half_even_and_clamps() {
        // scale 2, zero point 10: x/2 = [0.5, 1.5, 2.5, -300] -> [0, 2, 2, -300] + 10.
        let x = [1f32, 3., 5., -600.];
        let s = [2f32];
        let z = [10u8];
        let op = Op::QuantizeLinear(QuantizeLinear {
            axis: 1,
            block_size: 0,
            saturate: true,
        });
        let ins = [
            t(DType::F32, &[4], bytemuck::cast_slice(&x)),
            t(DType::F32, &[], bytemuck::cast_slice(&s)),
            t(DType::U8, &[], &z),
        ];
        let mut out = [0u8; 4];
        let mut outs = [TensorMut {
            dtype: DType::U8,
            dims: &[4],
            bytes: &mut out,
        }];
        quantize(&op, &ins, &mut outs).unwrap();
        assert_eq!(out, [10, 12, 12, 0]);
    }

    #[test]
    fn quantize_int4_per_axis() {
        // Two channels with scales 1 and 0.5; int4 clamps to [-8, 7].
        let x = [3f32, -20., 1., 2.];
        let s = [1f32, 0.5];
        let z = [0u8, 0];
        let op = Op::QuantizeLinear(QuantizeLinear {
            axis: 0,
            block_size: 0,
            saturate: true,
        });
        let ins = [
            t(DType::F32, &[2, 2], bytemuck::cast_slice(&x)),
            t(DType::F32, &[2], bytemuck::cast_slice(&s)),
            t(DType::I4, &[2], &z),
        ];
        let mut out = [0u8; 4];
        let mut outs = [TensorMut {
            dtype: DType::I4,
            dims: &[2, 2],
            bytes: &mut out,
        }];
        quantize(&op, &ins, &mut outs).unwrap();
        assert_eq!(out.map(|b| b as i8), [3, -8, 2, 4]);
    }

    #[test]
    fn dequantize_blocked() {
        // x [1,4] with blocks of 2 along axis 1: scales [2, 3], zero points [1, 0].
        let x = [1i8, 3, 2, -1];
        let s = [2f32, 3.];
        let z = [1i8, 0];
        let op = Op::DequantizeLinear(DequantizeLinear {
            axis: 1,
            block_size: 2,
        });
        let ins = [
            t(DType::I8, &[1, 4], bytemuck::cast_slice(&x)),
            t(DType::F32, &[1, 2], bytemuck::cast_slice(&s)),
            t(DType::I8, &[1, 2], bytemuck::cast_slice(&z)),
        ];
        let mut out = [0f32; 4];
        let mut outs = [TensorMut {
            dtype: DType::F32,
            dims: &[1, 4],
            bytes: bytemuck::cast_slice_mut(&mut out),
        }];
        dequantize(&op, &ins, &mut outs).unwrap();
        assert_eq!(out, [0., 4., 6., -3.]);
    }

    #[test]
    fn dynamic_quantize_range() {
        // min 0 (clamped), max 2.55: scale 0.01, zero point 0.
        let x = [0.5f32, 2.55, 1.0];
        let ins = [t(DType::F32, &[3], bytemuck::cast_slice(&x))];
        let (mut y, mut s, mut z) = ([0u8; 3], [0f32], [0u8]);
        let mut outs = [
            TensorMut {
                dtype: DType::U8,
                dims: &[3],
                bytes: &mut y,
            },
            TensorMut {
                dtype: DType::F32,
                dims: &[],
                bytes: bytemuck::cast_slice_mut(&mut s),
            },
            TensorMut {
                dtype: DType::U8,
                dims: &[],
                bytes: &mut z,
            },
        ];
        dynamic_quantize(
            &Op::DynamicQuantizeLinear(rlx_ir::ops::DynamicQuantizeLinear {}),
            &ins,
            &mut outs,
        )
        .unwrap();
        assert!((s[0] - 0.01).abs() < 1e-7);
        assert_eq!((y, z), ([50, 255, 100], [0]));
    }
}
#[cfg(test)]
mod range_tests {
    #[test]
    fn vector_range_matches_the_portable_one() {
        for n in [0usize, 1, 15, 64, 65, 1000, 70_001] {
            let mut x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 1001) as f32 - 400.0) * 0.01)
                .collect();
            if n > 3 {
                x[n / 2] = f32::NAN;
                x[1] = f32::NAN;
            }
            assert_eq!(
                super::range_with_zero(&x),
                super::range_portable(&x),
                "{n} values"
            );
        }
    }
}
