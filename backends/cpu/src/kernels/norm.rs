//! Normalizations: LayerNorm (with optional mean / inverse-std outputs),
//! RmsNorm, GroupNorm and InstanceNorm. Statistics accumulate in f64.

use rlx_ir::Op;

use super::layout::par_rows;
use super::norm_rows;
use super::num::Real;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::LayerNorm(_) | Op::RmsNorm(_) | Op::GroupNorm(_) | Op::InstanceNorm(_) => {
            Ok(fn_kernel(spec, norm))
        }
        op => Err(KernelError::Internal(format!(
            "{} is not a normalization",
            op.name()
        ))),
    }
}

fn axis(a: i64, r: usize) -> usize {
    super::layout::axis(a, r)
}

/// Normalizes each of `rows` rows of `len` elements; `scale`/`bias` are indexed
/// by `param(row, i)`.
#[allow(clippy::too_many_arguments)]
fn rows<T: Real>(
    x: &[T],
    y: &mut [T],
    len: usize,
    eps: f64,
    rms: bool,
    scale: &(dyn Fn(usize, usize) -> f64 + Sync),
    bias: &(dyn Fn(usize, usize) -> f64 + Sync),
    stats: Option<(&mut [f32], &mut [f32])>,
) {
    let compute = |r: usize| -> (f64, f64) {
        let xs = &x[r * len..(r + 1) * len];
        let mean = if rms {
            0.0
        } else {
            xs.iter().map(|v| v.to_f64()).sum::<f64>() / len as f64
        };
        let var = xs.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / len as f64;
        (mean, 1.0 / (var + eps).sqrt())
    };
    par_rows(y, len, |r, out| {
        let (mean, inv) = compute(r);
        let xs = &x[r * len..(r + 1) * len];
        for (i, o) in out.iter_mut().enumerate() {
            *o = T::from_f64((xs[i].to_f64() - mean) * inv * scale(r, i) + bias(r, i));
        }
    });
    if let Some((m, s)) = stats {
        for r in 0..m.len() {
            let (mean, inv) = compute(r);
            m[r] = mean as f32;
            s[r] = inv as f32;
        }
    }
}

/// `x` as f32, if `T` is f32.
pub(crate) fn as_f32<T: Real>(x: &[T]) -> Option<&[f32]> {
    (std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()).then(|| bytemuck::cast_slice(x))
}

/// The scale and bias in f32 when each holds one value per position of a
/// row of `len` (the fast path of [`norm_rows`]).
pub(crate) fn per_position(
    s: &[f64],
    b: Option<&[f64]>,
    len: usize,
) -> Option<(Vec<f32>, Option<Vec<f32>>)> {
    if s.len() != len || b.is_some_and(|b| b.len() != len) {
        return None;
    }
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    Some((f32s(s), b.map(f32s)))
}

fn norm_typed<T: Real>(
    op: &Op,
    ins: &[TensorRef],
    outs: &mut [TensorMut],
) -> Result<(), KernelError> {
    let x = ins[0].slice::<T>()?;
    let dims = ins[0].dims;
    let p = |i: usize| -> Result<Vec<f64>, KernelError> {
        ins.get(i).map_or(Ok(Vec::new()), |t| t.to_f64s())
    };
    match op {
        Op::LayerNorm(l) => {
            let a = axis(l.axis, dims.len());
            let len: usize = dims[a..].iter().product();
            let (s, b) = (p(1)?, p(2)?);
            let row = &dims[a..];
            let si = ParamIndex::new(ins[1].dims, row, "scale")?;
            let bi = match ins.get(2) {
                Some(t) => Some(ParamIndex::new(t.dims, row, "bias")?),
                None => None,
            };
            let want_stats = l.stats && outs.len() == 3;
            let params = if si.dense && bi.as_ref().is_none_or(|b| b.dense) {
                per_position(&s, bi.as_ref().map(|_| b.as_slice()), len)
            } else {
                None
            };
            if let (false, Some(xf), Some((sf, bf))) = (want_stats, as_f32(x), params) {
                let y = outs[0].slice::<f32>()?;
                norm_rows::f32_rows(xf, y, len, l.epsilon as f64, false, &sf, bf.as_deref());
                return Ok(());
            }
            let scale = move |_: usize, i: usize| s[si.at(i)];
            let bias = move |_: usize, i: usize| bi.as_ref().map_or(0.0, |d| b[d.at(i)]);
            let (first, rest) = outs.split_at_mut(1);
            let stats = if l.stats && rest.len() == 2 {
                let (m, s) = rest.split_at_mut(1);
                Some((m[0].slice::<f32>()?, s[0].slice::<f32>()?))
            } else {
                None
            };
            rows(
                x,
                first[0].slice::<T>()?,
                len,
                l.epsilon as f64,
                false,
                &scale,
                &bias,
                stats,
            );
        }
        Op::RmsNorm(r) => {
            let a = axis(r.axis, dims.len());
            let len: usize = dims[a..].iter().product();
            let s = p(1)?;
            let si = ParamIndex::new(ins[1].dims, &dims[a..], "scale")?;
            let dense = if si.dense {
                per_position(&s, None, len)
            } else {
                None
            };
            if let (Some(xf), Some((sf, _))) = (as_f32(x), dense) {
                let y = outs[0].slice::<f32>()?;
                norm_rows::f32_rows(xf, y, len, r.epsilon as f64, true, &sf, None);
                return Ok(());
            }
            let scale = move |_: usize, i: usize| s[si.at(i)];
            rows(
                x,
                outs[0].slice::<T>()?,
                len,
                r.epsilon as f64,
                true,
                &scale,
                &|_, _| 0.0,
                None,
            );
        }
        Op::GroupNorm(g) => {
            let c = dims[1];
            let sp: usize = dims[2..].iter().product();
            let groups = usize::try_from(g.num_groups).unwrap_or(0);
            let (s, b) = (p(1)?, p(2)?);
            if groups == 0 || c % groups != 0 || s.len() != c || b.len() != c {
                return Err(KernelError::Value(format!(
                    "{c} channels in {} groups with {} scales and {} biases",
                    g.num_groups,
                    s.len(),
                    b.len()
                )));
            }
            let len = c / groups * sp;
            let chan = move |r: usize, i: usize| (r % groups) * (c / groups) + i / sp;
            let scale = move |r: usize, i: usize| s[chan(r, i)];
            let bias = move |r: usize, i: usize| b[chan(r, i)];
            rows(
                x,
                outs[0].slice::<T>()?,
                len,
                g.epsilon as f64,
                false,
                &scale,
                &bias,
                None,
            );
        }
        Op::InstanceNorm(i) => {
            let c = dims[1];
            let sp: usize = dims[2..].iter().product();
            let (s, b) = (p(1)?, p(2)?);
            if s.len() != c || b.len() != c {
                return Err(KernelError::Value(format!(
                    "instance norm of {c} channels with {} scales and {} biases",
                    s.len(),
                    b.len()
                )));
            }
            let scale = move |r: usize, _: usize| s[r % c];
            let bias = move |r: usize, _: usize| b[r % c];
            rows(
                x,
                outs[0].slice::<T>()?,
                sp,
                i.epsilon as f64,
                false,
                &scale,
                &bias,
                None,
            );
        }
        op => {
            return Err(KernelError::Internal(format!(
                "{} is not a normalization",
                op.name()
            )))
        }
    }
    Ok(())
}

/// A scale or bias of `pdims` must broadcast over rows of `len`: one value,
/// or the row's trailing elements (an empty one, or one that does not divide
/// the row, comes only from a malformed model).
/// Where a scale or bias of `pdims` is read for each position of a
/// normalized row of `row` dims: numpy broadcasting, right-aligned (a scale
/// `[3, 1]` over rows `[3, 4]` holds one value per channel).
#[derive(Debug, Clone)]
pub(crate) struct ParamIndex {
    /// Row dims, and per row dim the parameter's stride (0 where it is 1).
    row: Vec<usize>,
    strides: Vec<usize>,
    /// The parameter covers the row element for element.
    pub(crate) dense: bool,
}

impl ParamIndex {
    /// The index of a parameter of `pdims` over rows of `row`, or why it
    /// does not broadcast (ONNX: the scale must broadcast to the normalized
    /// shape; ORT refuses a gamma shorter than the hidden size).
    pub(crate) fn new(
        pdims: &[usize],
        row: &[usize],
        what: &str,
    ) -> Result<ParamIndex, KernelError> {
        let bad = || {
            KernelError::Value(format!(
                "a {what} of {pdims:?} does not broadcast over normalized rows of {row:?}"
            ))
        };
        let extra = pdims.len().saturating_sub(row.len());
        if pdims[..extra].iter().any(|&d| d != 1) {
            return Err(bad());
        }
        let p = &pdims[extra..];
        let lead = row.len() - p.len();
        let mut strides = vec![0; row.len()];
        let mut stride = 1;
        for k in (0..p.len()).rev() {
            let (pd, rd) = (p[k], row[lead + k]);
            if pd == rd {
                strides[lead + k] = if pd == 1 { 0 } else { stride };
                stride *= pd;
            } else if pd != 1 {
                return Err(bad());
            }
        }
        let n: usize = pdims.iter().product();
        let len: usize = row.iter().product();
        Ok(ParamIndex {
            row: row.to_vec(),
            strides,
            dense: n == len,
        })
    }

    /// The parameter's index for position `i` of a row.
    pub(crate) fn at(&self, mut i: usize) -> usize {
        if self.dense {
            return i;
        }
        let mut at = 0;
        for (&d, &s) in self.row.iter().zip(&self.strides).rev() {
            if d > 0 {
                at += (i % d) * s;
                i /= d;
            }
        }
        at
    }
}

fn norm(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    with_dtype!(ins[0].dtype, T => norm_typed::<T>(op, ins, outs), float)
}
