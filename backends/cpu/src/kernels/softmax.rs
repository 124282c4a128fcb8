//! Softmax, LogSoftmax and Hardmax along an axis; CumSum/CumProd; TopK.

use std::any::TypeId;

use rlx_ir::ops::{CumulativeKind, SoftmaxKind};
use rlx_ir::{DType, Op};

use super::layout::{axis, par_row_blocks, par_rows};
use super::num::{AnyNum, Real};
use super::vmath;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Softmax(_) => Ok(fn_kernel(spec, softmax)),
        Op::Cumulative(_) => Ok(fn_kernel(spec, cumulative)),
        Op::TopK(_) => Ok(fn_kernel(spec, topk)),
        op => Err(KernelError::Internal(format!(
            "{} is not a softmax-family op",
            op.name()
        ))),
    }
}

/// `(outer, n, inner)` of `dims` around axis `a`.
fn around(dims: &[usize], a: usize) -> (usize, usize, usize) {
    (
        dims[..a].iter().product(),
        dims[a],
        dims[a + 1..].iter().product(),
    )
}

fn softmax_typed<T: Real>(
    kind: SoftmaxKind,
    x: &TensorRef,
    a: usize,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let src = x.slice::<T>()?;
    let (_, n, inner) = around(x.dims, a);
    let y = out.slice::<T>()?;
    if TypeId::of::<T>() == TypeId::of::<f32>() && inner == 1 && kind != SoftmaxKind::Hardmax {
        let log = kind == SoftmaxKind::LogSoftmax;
        if (1..=SHORT).contains(&n) {
            softmax_short_rows_f32(
                log,
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(y),
                n,
            );
            return Ok(());
        }
        softmax_rows_f32(
            log,
            bytemuck::cast_slice(src),
            bytemuck::cast_slice_mut(y),
            n,
        );
        return Ok(());
    }
    par_rows(y, n * inner, |o, block| {
        let xs = &src[o * n * inner..(o + 1) * n * inner];
        let mut buf = vec![0f64; n];
        for i in 0..inner {
            for k in 0..n {
                buf[k] = xs[k * inner + i].to_f64();
            }
            let m = buf.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            match kind {
                SoftmaxKind::Hardmax => {
                    let first = buf.iter().position(|&v| v == m).unwrap_or(0);
                    for k in 0..n {
                        block[k * inner + i] = T::from_f64(if k == first { 1.0 } else { 0.0 });
                    }
                }
                _ => {
                    let sum: f64 = buf.iter().map(|v| (v - m).exp()).sum();
                    for k in 0..n {
                        let v = if kind == SoftmaxKind::Softmax {
                            (buf[k] - m).exp() / sum
                        } else {
                            buf[k] - m - sum.ln()
                        };
                        block[k * inner + i] = T::from_f64(v);
                    }
                }
            }
        }
    });
    Ok(())
}

/// Softmax (or log-softmax) of contiguous f32 rows of `n`: exponentials in
/// f32 through `vmath::exp`, summed in 16 lanes and then in f64.
fn softmax_rows_f32(log: bool, src: &[f32], y: &mut [f32], n: usize) {
    par_rows(y, n, |o, row| {
        let xs = &src[o * n..(o + 1) * n];
        let m = vmath::vectorized(|| {
            // Sixteen running maxima: a vector loop, where one is not.
            let mut lanes = [f32::NEG_INFINITY; 16];
            let chunks = xs.chunks_exact(16);
            let tail = chunks.remainder();
            for c in chunks {
                for (l, &v) in lanes.iter_mut().zip(c) {
                    *l = l.max(v);
                }
            }
            lanes
                .iter()
                .chain(tail)
                .fold(f32::NEG_INFINITY, |a, &v| a.max(v))
        });
        let sum = vmath::exp_shifted(xs, m, row);
        if log {
            let lse = m + sum.ln() as f32;
            for (d, x) in row.iter_mut().zip(xs) {
                *d = x - lse;
            }
        } else {
            let inv = (1.0 / sum) as f32;
            vmath::vectorized(|| row.iter_mut().for_each(|d| *d *= inv));
        }
    });
}

/// Rows up to this long take a vector each ([`softmax_short_rows_f32`]).
const SHORT: usize = 16;

/// [`softmax_rows_f32`] for rows of at most [`SHORT`]: a row a 16-lane
/// vector (lanes past the row hold -inf, whose exponential is 0), every row
/// of a block in one target-feature call. Called a row at a time, a row of
/// 16 paid three dispatches and three loops of unknown length for one
/// vector's work (YOLOv8's DFL softmax over 86k rows of 16: 44 ns a row).
/// On AVX-512 the sum is a tree of f64 additions where the long-row path's
/// is a chain, and the exponential uses fused multiply-adds: within an ulp
/// of the long-row path's results.
fn softmax_short_rows_f32(log: bool, src: &[f32], y: &mut [f32], n: usize) {
    par_row_blocks(y, n, |r0, block| {
        let xs = &src[r0 * n..r0 * n + block.len()];
        #[cfg(target_arch = "x86_64")]
        {
            if vmath::avx512() {
                // SAFETY: the CPU has AVX-512F/DQ.
                return unsafe { short_rows_avx512(log, xs, block, n) };
            }
            if vmath::avx2() {
                // SAFETY: the CPU has AVX2 and FMA.
                return unsafe { short_rows_avx2(log, xs, block, n) };
            }
        }
        short_rows(log, xs, block, n)
    });
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
unsafe fn short_rows_avx512(log: bool, xs: &[f32], y: &mut [f32], n: usize) {
    short_avx512::rows(log, xs, y, n)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn short_rows_avx2(log: bool, xs: &[f32], y: &mut [f32], n: usize) {
    short_rows(log, xs, y, n)
}

#[inline(always)]
fn short_rows(log: bool, xs: &[f32], y: &mut [f32], n: usize) {
    for (x, row) in xs.chunks_exact(n).zip(y.chunks_exact_mut(n)) {
        let mut v = [f32::NEG_INFINITY; SHORT];
        v[..n].copy_from_slice(x);
        let m = v.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let mut e = [0f32; SHORT];
        for (i, (d, &a)) in e.iter_mut().zip(&v).enumerate() {
            *d = if i < n {
                vmath::exp_nonpositive(a - m)
            } else {
                0.0
            };
        }
        let sum: f64 = e.iter().map(|&a| a as f64).sum();
        if log {
            let lse = m + sum.ln() as f32;
            for (d, &a) in row.iter_mut().zip(x) {
                *d = a - lse;
            }
        } else {
            let inv = (1.0 / sum) as f32;
            for (d, &a) in row.iter_mut().zip(&e) {
                *d = a * inv;
            }
        }
    }
}

/// [`short_rows`] in AVX-512 registers: a masked load a row, the maximum
/// and the f64 sum by shuffles, `vmath::exp`'s formula with fused
/// multiply-adds. Written with intrinsics: compiled from the form above,
/// each row was a chain of 16 dependent maxima and 16 dependent additions.
#[cfg(target_arch = "x86_64")]
mod short_avx512 {
    use std::arch::x86_64::*;

    use super::super::vmath_avx512::exp_low as exp;

    #[inline(always)]
    unsafe fn set(v: f32) -> __m512 {
        _mm512_set1_ps(v)
    }

    /// # Safety
    /// AVX-512F/DQ and FMA are present; `1 <= n <= 16`; `xs` and `y` hold
    /// the same whole rows of `n`.
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    pub unsafe fn rows(log: bool, xs: &[f32], y: &mut [f32], n: usize) {
        let keep = ((1u32 << n) - 1) as __mmask16;
        let rows = xs.len().min(y.len()) / n;
        for r in 0..rows {
            let src = xs.as_ptr().add(r * n);
            let dst = y.as_mut_ptr().add(r * n);
            let v = _mm512_mask_loadu_ps(set(f32::NEG_INFINITY), keep, src);
            let m = _mm512_reduce_max_ps(v);
            let e = _mm512_maskz_mov_ps(keep, exp(_mm512_sub_ps(v, set(m))));
            let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(e));
            let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(
                _mm512_castps_pd(e),
            )));
            let sum = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
            let out = if log {
                _mm512_sub_ps(v, set(m + sum.ln() as f32))
            } else {
                _mm512_mul_ps(e, set((1.0 / sum) as f32))
            };
            _mm512_mask_storeu_ps(dst, keep, out);
        }
    }
}

fn softmax(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Softmax(s) = op else {
        return Err(KernelError::Internal("not softmax".into()));
    };
    let x = &ins[0];
    let a = axis(s.axis, x.rank());
    with_dtype!(x.dtype, T => softmax_typed::<T>(s.kind, x, a, &mut outs[0]), float)
}

fn cum_typed<T: AnyNum>(
    kind: CumulativeKind,
    exclusive: bool,
    reverse: bool,
    x: &TensorRef,
    a: usize,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let src = x.slice::<T>()?;
    let (_, n, inner) = around(x.dims, a);
    let y = out.slice::<T>()?;
    let float = x.dtype.is_float();
    par_rows(y, n * inner, |o, block| {
        let xs = &src[o * n * inner..(o + 1) * n * inner];
        for i in 0..inner {
            let (mut fa, mut ia) = (
                if kind == CumulativeKind::Sum {
                    0.0
                } else {
                    1.0
                },
                if kind == CumulativeKind::Sum {
                    0i128
                } else {
                    1
                },
            );
            for step in 0..n {
                let k = if reverse { n - 1 - step } else { step };
                let v = xs[k * inner + i];
                if exclusive {
                    block[k * inner + i] = if float { T::of_f64(fa) } else { T::of_i128(ia) };
                }
                match kind {
                    CumulativeKind::Sum => {
                        fa += v.as_f64();
                        ia = ia.wrapping_add(v.as_i128());
                    }
                    CumulativeKind::Prod => {
                        fa *= v.as_f64();
                        ia = ia.wrapping_mul(v.as_i128());
                    }
                }
                if !exclusive {
                    block[k * inner + i] = if float { T::of_f64(fa) } else { T::of_i128(ia) };
                }
            }
        }
    });
    Ok(())
}

fn cumulative(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Cumulative(c) = op else {
        return Err(KernelError::Internal("not cumulative".into()));
    };
    let x = &ins[0];
    let a = *ins[1]
        .to_i64s()?
        .first()
        .ok_or_else(|| KernelError::Value("empty axis".into()))?;
    // The axis is a run-time input: check it before it indexes the shape.
    let r = x.rank() as i64;
    if !(-r..r).contains(&a) {
        return Err(KernelError::Value(format!(
            "axis {a} is out of range for rank {r}"
        )));
    }
    let a = axis(a, x.rank());
    with_dtype!(x.dtype, T => cum_typed::<T>(c.kind, c.exclusive, c.reverse, x, a, &mut outs[0]), num)
}

fn topk_typed<T: AnyNum>(
    largest: bool,
    x: &TensorRef,
    a: usize,
    k: usize,
    outs: &mut [TensorMut],
) -> Result<(), KernelError> {
    let src = x.slice::<T>()?;
    let (outer, n, inner) = around(x.dims, a);
    let mut vals = vec![T::of_f64(0.0); outer * k * inner];
    let mut idx = vec![0i64; outer * k * inner];
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for o in 0..outer {
        for i in 0..inner {
            order.clear();
            order.extend(0..n);
            let at = |j: usize| src[(o * n + j) * inner + i];
            // A total order: NaN above every number; ties keep the lower
            // index first, as ONNX requires.
            let cmp = |&p: &usize, &q: &usize| {
                let (u, v) = (at(p), at(q));
                #[allow(clippy::eq_op)]
                let above = |x: T| x != x;
                let ascending = u.partial_cmp(&v).unwrap_or_else(|| above(u).cmp(&above(v)));
                let c = if largest {
                    ascending.reverse()
                } else {
                    ascending
                };
                c.then(p.cmp(&q))
            };
            // The k first in that order, then only those sorted.
            if k > 0 && k < n {
                order.select_nth_unstable_by(k - 1, cmp);
            }
            order[..k].sort_by(cmp);
            for (r, &j) in order.iter().take(k).enumerate() {
                vals[(o * k + r) * inner + i] = at(j);
                idx[(o * k + r) * inner + i] = j as i64;
            }
        }
    }
    outs[0].slice::<T>()?.copy_from_slice(&vals);
    outs[1].slice::<i64>()?.copy_from_slice(&idx);
    Ok(())
}

fn topk(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::TopK(t) = op else {
        return Err(KernelError::Internal("not topk".into()));
    };
    let x = &ins[0];
    let a = axis(t.axis, x.rank());
    let k = *ins[1]
        .to_i64s()?
        .first()
        .ok_or_else(|| KernelError::Value("empty k".into()))? as usize;
    if k > x.dims[a] {
        return Err(KernelError::Value(format!(
            "k = {k} exceeds the axis size {}",
            x.dims[a]
        )));
    }
    let d = if x.dtype == DType::Bool {
        DType::U8
    } else {
        x.dtype
    };
    with_dtype!(d, T => topk_typed::<T>(t.largest, x, a, k, outs), num)
}

#[cfg(test)]
mod tests {
    use rlx_ir::ops::{Cumulative, CumulativeKind};
    use rlx_ir::{DType, Node, Op, Tensor, Weights};

    use crate::dynamic::eval_node;

    /// Short rows, a vector each, give the long-row path's results within a
    /// few ulps (the AVX-512 form's exponential fuses its multiply-adds, its
    /// f64 sum is a tree), masked entries (-inf, exactly 0 out) and
    /// all-masked rows (NaN, as the row path gives) included.
    #[test]
    fn short_rows_match_the_row_path() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in 1..=super::SHORT {
            for log in [false, true] {
                let rows = 37;
                let x: Vec<f32> = (0..rows * n)
                    .map(|i| match next() % 11 {
                        0 => f32::NEG_INFINITY,
                        1 => 80.0,
                        _ if i / n == 5 => f32::NEG_INFINITY,
                        r => (next() % 2000) as f32 / 100.0 - 10.0 + r as f32,
                    })
                    .collect();
                let (mut a, mut b) = (vec![0f32; x.len()], vec![0f32; x.len()]);
                super::softmax_short_rows_f32(log, &x, &mut a, n);
                super::softmax_rows_f32(log, &x, &mut b, n);
                for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                    // A few ulps: the AVX-512 exponential rounds its FMAs once.
                    let close =
                        (p - q).abs() <= 4.0 * f32::EPSILON * q.abs().max(f32::MIN_POSITIVE);
                    assert!(
                        p == q || close || p.is_nan() && q.is_nan(),
                        "n {n} log {log} at {i}: {p} {q}"
                    );
                }
            }
        }
    }

    /// CumSum's axis comes at run time: out of range, it is an error naming
    /// the axis, not a panic.
    #[test]
    fn cumsum_axis_out_of_range_is_an_error() {
        let op = Op::Cumulative(Cumulative {
            kind: CumulativeKind::Sum,
            exclusive: false,
            reverse: false,
        });
        let node = Node::new(op, "cs", Vec::new(), Vec::new());
        let x = Tensor::from_f32(&[2, 3], &[1.0; 6]).unwrap();
        for bad in [2i64, -3, i64::MAX, i64::MIN] {
            let axis = Tensor::from_slice(DType::I64, &[], &[bad]).unwrap();
            let e = eval_node(&node, &[x.clone(), axis], &Weights::new());
            assert!(e.is_err(), "axis {bad}: {e:?}");
        }
        let axis = Tensor::from_slice(DType::I64, &[], &[-1i64]).unwrap();
        let y = eval_node(&node, &[x, axis], &Weights::new()).unwrap();
        assert_eq!(
            y[0].as_slice::<f32>().unwrap(),
            [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
        );
    }
}
