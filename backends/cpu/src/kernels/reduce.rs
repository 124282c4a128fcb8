//! Reductions over any set of axes (Reduce*), and ArgMax/ArgMin.
//!
//! The input is viewed as `[outer, reduced..., inner]` blocks: axes are
//! reduced by iterating the reduced index space for each output element.

use rlx_ir::ops::{ArgReduceKind, ReduceKind};
use rlx_ir::{DType, Op};

use super::layout::{axis, par_fill, par_fill_costly, strides};
use super::num::AnyNum;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Reduce(_) => Ok(fn_kernel(spec, reduce)),
        Op::ArgReduce(_) => Ok(fn_kernel(spec, arg_reduce)),
        op => Err(KernelError::Internal(format!(
            "{} is not a reduction",
            op.name()
        ))),
    }
}

/// Offsets of the kept and reduced index spaces of `dims` for `axes`.
struct Split {
    kept_offsets: Vec<usize>,
    reduced_offsets: Vec<usize>,
}

fn split(dims: &[usize], axes: &[usize]) -> Split {
    let st = strides(dims);
    let offsets = |sel: &dyn Fn(usize) -> bool| -> Vec<usize> {
        let ds: Vec<usize> = (0..dims.len()).filter(|&d| sel(d)).collect();
        let n: usize = ds.iter().map(|&d| dims[d]).product();
        let mut out = Vec::with_capacity(n);
        let mut idx = vec![0usize; ds.len()];
        for _ in 0..n {
            out.push(ds.iter().zip(&idx).map(|(&d, &i)| i * st[d]).sum());
            for k in (0..ds.len()).rev() {
                idx[k] += 1;
                if idx[k] < dims[ds[k]] {
                    break;
                }
                idx[k] = 0;
            }
        }
        out
    };
    Split {
        kept_offsets: offsets(&|d| !axes.contains(&d)),
        reduced_offsets: offsets(&|d| axes.contains(&d)),
    }
}

fn reduce_typed<T: AnyNum>(
    kind: ReduceKind,
    x: &TensorRef,
    axes: &[usize],
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let src = x.slice::<T>()?;
    let sp = split(x.dims, axes);
    let y = out.slice::<T>()?;
    let float = x.dtype.is_float();
    let r = &sp.reduced_offsets;
    let n = r.len().max(1) as f64;
    par_fill_costly(y, r.len(), |o| {
        let base = sp.kept_offsets[o];
        let vals = r.iter().map(|&k| src[base + k]);
        match kind {
            ReduceKind::Max | ReduceKind::Min => {
                let mut acc: Option<T> = None;
                for v in vals {
                    let better = match acc {
                        None => true,
                        Some(a) => {
                            v.as_f64().is_nan()
                                || if kind == ReduceKind::Max {
                                    v > a
                                } else {
                                    v < a
                                }
                        }
                    };
                    if better && !acc.is_some_and(|a| a.as_f64().is_nan()) {
                        acc = Some(v);
                    }
                }
                acc.unwrap_or_else(|| {
                    // Reducing an empty set gives the identity of the operation.
                    T::of_f64(if kind == ReduceKind::Max {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    })
                })
            }
            _ if !float => {
                let ints = vals.map(|v| v.as_i128());
                T::of_i128(match kind {
                    ReduceKind::Sum => ints.fold(0i128, |a, v| a.wrapping_add(v)),
                    ReduceKind::Mean => ints.sum::<i128>() / r.len().max(1) as i128,
                    ReduceKind::Prod => ints.fold(1i128, |a, v| a.wrapping_mul(v)),
                    ReduceKind::L1 => ints.map(|v| v.abs()).sum(),
                    ReduceKind::SumSquare => ints.map(|v| v * v).sum(),
                    ReduceKind::L2 => (ints.map(|v| (v * v) as f64).sum::<f64>()).sqrt() as i128,
                    ReduceKind::LogSum => (ints.sum::<i128>() as f64).ln() as i128,
                    ReduceKind::LogSumExp => {
                        ints.map(|v| (v as f64).exp()).sum::<f64>().ln() as i128
                    }
                    ReduceKind::Max | ReduceKind::Min => 0,
                })
            }
            _ => {
                let f = vals.map(|v| v.as_f64());
                T::of_f64(match kind {
                    ReduceKind::Sum => f.sum(),
                    ReduceKind::Mean => f.sum::<f64>() / n,
                    ReduceKind::Prod => f.product(),
                    ReduceKind::L1 => f.map(f64::abs).sum(),
                    ReduceKind::L2 => f.map(|v| v * v).sum::<f64>().sqrt(),
                    ReduceKind::SumSquare => f.map(|v| v * v).sum(),
                    ReduceKind::LogSum => f.sum::<f64>().ln(),
                    ReduceKind::LogSumExp => {
                        let v: Vec<f64> = f.collect();
                        let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        if m.is_infinite() {
                            v.iter().map(|x| x.exp()).sum::<f64>().ln()
                        } else {
                            m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
                        }
                    }
                    ReduceKind::Max | ReduceKind::Min => 0.0,
                })
            }
        }
    });
    Ok(())
}

fn reduce(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Reduce(r) = op else {
        return Err(KernelError::Internal("not a reduction".into()));
    };
    let x = &ins[0];
    let axes_in = ins.get(1).map(|t| t.to_i64s()).transpose()?;
    let axes = r
        .axes(axes_in.as_deref(), x.rank())
        .map_err(|e| KernelError::Value(e.to_string()))?;
    let out = &mut outs[0];
    if axes.is_empty() {
        // No-op reduction of the input (noop_with_empty_axes) still applies the
        // elementwise part of the kind.
        return reduce_noop(r.kind, x, out);
    }
    let d = if x.dtype == DType::Bool {
        DType::U8
    } else {
        x.dtype
    };
    with_dtype!(d, T => reduce_typed::<T>(r.kind, x, &axes, out), num)
}

fn reduce_noop(kind: ReduceKind, x: &TensorRef, out: &mut TensorMut) -> Result<(), KernelError> {
    let d = if x.dtype == DType::Bool {
        DType::U8
    } else {
        x.dtype
    };
    with_dtype!(d, T => {
        let src = x.slice::<T>()?;
        let y = out.slice::<T>()?;
        par_fill(y, |i| {
            let v = src[i].as_f64();
            match kind {
                ReduceKind::L1 | ReduceKind::L2 => T::of_f64(v.abs()),
                ReduceKind::SumSquare => T::of_f64(v * v),
                ReduceKind::LogSum => T::of_f64(v.ln()),
                ReduceKind::LogSumExp => T::of_f64(v),
                _ => src[i],
            }
        });
        Ok(())
    }, num)
}

fn arg_typed<T: AnyNum>(
    kind: ArgReduceKind,
    last: bool,
    x: &TensorRef,
    ax: usize,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let src = x.slice::<T>()?;
    let n = x.dims[ax];
    let inner: usize = x.dims[ax + 1..].iter().product();
    let y = out.slice::<i64>()?;
    if let (Some(src), 1) = (super::num::as_f32(src), inner) {
        par_fill_costly(y, n, |o| {
            arg_row_f32(kind, last, &src[o * n..(o + 1) * n]) as i64
        });
        return Ok(());
    }
    par_fill_costly(y, n, |o| {
        let (outer, inn) = (o / inner.max(1), o % inner.max(1));
        let base = outer * n * inner + inn;
        let mut best = 0usize;
        for k in 1..n {
            let (v, b) = (src[base + k * inner], src[base + best * inner]);
            let better = match kind {
                ArgReduceKind::Max => v > b || (last && v == b),
                ArgReduceKind::Min => v < b || (last && v == b),
            };
            if better {
                best = k;
            }
        }
        best as i64
    });
    Ok(())
}

/// The index [`arg_typed`]'s loop picks in one contiguous f32 row: the
/// extreme value first, sixteen lanes at a time, then its first (or last)
/// place. A row with a NaN or an infinity takes the loop itself, whose
/// comparisons decide those.
fn arg_row_f32(kind: ArgReduceKind, last: bool, row: &[f32]) -> usize {
    let found = super::vmath::vectorized(|| {
        let max = kind == ArgReduceKind::Max;
        let mut lanes = [if max {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        }; 16];
        let mut check = [0f32; 16];
        let chunks = row.chunks_exact(16);
        let tail = chunks.remainder();
        for c in chunks {
            for ((l, k), &v) in lanes.iter_mut().zip(&mut check).zip(c) {
                *l = if max { l.max(v) } else { l.min(v) };
                *k += v * 0.0;
            }
        }
        let pick = |a: f32, b: f32| if max { a.max(b) } else { a.min(b) };
        let best = lanes.iter().chain(tail).fold(lanes[0], |a, &v| pick(a, v));
        let finite = check.iter().chain(tail).all(|v| v.is_finite());
        finite.then_some(best)
    });
    let Some(best) = found else {
        let mut at = 0usize;
        for (k, &v) in row.iter().enumerate().skip(1) {
            let b = row[at];
            let better = match kind {
                ArgReduceKind::Max => v > b || (last && v == b),
                ArgReduceKind::Min => v < b || (last && v == b),
            };
            if better {
                at = k;
            }
        }
        return at;
    };
    let at = if last {
        row.iter().rposition(|&v| v == best)
    } else {
        row.iter().position(|&v| v == best)
    };
    at.unwrap_or(0)
}

fn arg_reduce(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::ArgReduce(a) = op else {
        return Err(KernelError::Internal("not an arg reduction".into()));
    };
    let x = &ins[0];
    let ax = axis(a.axis, x.rank());
    if x.dims.get(ax) == Some(&0) {
        return Err(KernelError::Value(format!(
            "{} over an empty axis {ax} has no index to give",
            a.kind.name()
        )));
    }
    let d = if x.dtype == DType::Bool {
        DType::U8
    } else {
        x.dtype
    };
    with_dtype!(d, T => arg_typed::<T>(a.kind, a.select_last_index, x, ax, &mut outs[0]), num)
}
