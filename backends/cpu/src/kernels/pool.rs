//! Pooling: max (with optional argmax indices), average and Lp pooling over
//! windows of any spatial rank; global pooling; local response normalization;
//! MaxUnpool.

use std::any::TypeId;

use rlx_ir::ops::{resolve_pads, GlobalPoolKind, Pool, PoolKind};
use rlx_ir::{DType, Op};

use super::conv::window;
#[cfg(target_arch = "x86_64")]
use super::conv::window_lanes;
use super::layout::par_rows;
use super::num::{AnyNum, Real};
use crate::kernel::{fn_kernel, fn_kernel_with, Kernel, KernelError, Spec};
use crate::scratch::PerThread;
use crate::tensor::{TensorMut, TensorRef};
use crate::{with_dtype, with_width};

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Pool(p) => Ok(fn_kernel_with(spec, pool, per_thread(p, spec))),
        Op::GlobalPool(_) => Ok(fn_kernel(spec, global_pool)),
        Op::Lrn(_) => Ok(fn_kernel(spec, lrn)),
        Op::MaxUnpool(_) => Ok(fn_kernel(spec, max_unpool)),
        op => Err(KernelError::Internal(format!(
            "{} is not a pool",
            op.name()
        ))),
    }
}

/// What a 2-D pool of f32 takes on each thread: the vector paths' bordered
/// plane or staged band.
fn per_thread(p: &Pool, spec: &Spec) -> PerThread {
    let (x, y) = (spec.in_dims(0), spec.out_dims(0));
    let f32s = spec.inputs.first().is_some_and(|t| t.dtype == DType::F32);
    if !f32s || x.len() != 4 || y.len() != 4 || p.kernel_shape.len() != 2 {
        return PerThread::NONE;
    }
    let Some(geom) = vector_geom::<f32>(&Win::new(p, &x, &y)) else {
        return PerThread::NONE;
    };
    #[cfg(target_arch = "x86_64")]
    if across_planes(&geom) {
        return PerThread::each(window_lanes::scratch(&geom));
    }
    if window::available() {
        return PerThread::each(window::scratch(&geom));
    }
    PerThread::NONE
}

struct Win {
    input: Vec<usize>,
    output: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pad_begin: Vec<i64>,
    pad_end: Vec<i64>,
}

impl Win {
    fn new(p: &Pool, x: &[usize], y: &[usize]) -> Win {
        let nsp = x.len() - 2;
        let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
        let pads = resolve_pads(
            p.auto_pad,
            &p.pads,
            &i64s(&x[2..]),
            &p.kernel_shape,
            &p.strides,
            &p.dilations,
        );
        Win {
            input: x[2..].to_vec(),
            output: y[2..].to_vec(),
            kernel: p.kernel_shape.iter().map(|&k| k as usize).collect(),
            strides: p.strides.iter().map(|&s| s as usize).collect(),
            dilations: p.dilations.iter().map(|&s| s as usize).collect(),
            pad_begin: pads[..nsp].to_vec(),
            pad_end: pads[nsp..].to_vec(),
        }
    }

    /// Visits the window of output position `o` (flat): `f(input offset or None
    /// for padding, in padded extent)`.
    fn visit(&self, o: usize, f: &mut impl FnMut(Option<usize>, bool)) {
        let nsp = self.input.len();
        let mut oi = [0usize; 8];
        let mut r = o;
        for d in (0..nsp).rev() {
            oi[d] = r % self.output[d];
            r /= self.output[d];
        }
        let ks: usize = self.kernel.iter().product();
        let mut ki = [0usize; 8];
        for kf in 0..ks {
            let mut r = kf;
            for d in (0..nsp).rev() {
                ki[d] = r % self.kernel[d];
                r /= self.kernel[d];
            }
            let mut off = 0usize;
            let mut inside = true;
            let mut in_padded = true;
            for d in 0..nsp {
                let p = (oi[d] * self.strides[d] + ki[d] * self.dilations[d]) as i64
                    - self.pad_begin[d];
                if p < 0 || p >= self.input[d] as i64 {
                    inside = false;
                }
                if p < -self.pad_begin[d] || p >= self.input[d] as i64 + self.pad_end[d] {
                    in_padded = false;
                }
                off = off * self.input[d] + p.clamp(0, (self.input[d] as i64 - 1).max(0)) as usize;
            }
            f(inside.then_some(off), in_padded);
        }
    }
}

/// Taps of a window starting at `s` (dilation `d`, `k` taps) that fall in
/// `[lo, hi)`: the first and one-past-the-last tap.
fn taps(s: i64, d: i64, k: i64, lo: i64, hi: i64) -> (i64, i64) {
    let first = if s >= lo { 0 } else { (lo - s + d - 1) / d };
    let last = if s + (k - 1) * d < hi {
        k
    } else {
        ((hi - 1 - s) / d + 1).max(0)
    };
    (first.min(k), last.max(first.min(k)))
}

/// The larger of `m` and `v`, NaN winning (as ONNX Runtime's MaxPool).
#[inline(always)]
fn max_nan<T: PartialOrd + Copy>(m: T, v: T) -> T {
    #[allow(clippy::eq_op)]
    let v_nan = v != v;
    if v > m || v_nan {
        v
    } else {
        m
    }
}

/// The vector paths' geometry, for f32 on a CPU that has one (`conv::window`
/// on AVX-512, `window_lanes` on AVX2 and for short rows on AVX-512), when
/// pads are non-negative (the bordered plane cannot crop).
fn vector_geom<T: 'static>(w: &Win) -> Option<window::Geom> {
    if TypeId::of::<T>() != TypeId::of::<f32>() || !window::available() && !lanes() {
        return None;
    }
    if w.pad_begin.iter().any(|&p| p < 0) || w.kernel.contains(&0) || w.strides.contains(&0) {
        return None;
    }
    let two = |v: &[usize]| [v[0], v[1]];
    Some(window::Geom {
        input: two(&w.input),
        output: two(&w.output),
        kernel: two(&w.kernel),
        strides: two(&w.strides),
        dilations: two(&w.dilations),
        pads: [w.pad_begin[0] as usize, w.pad_begin[1] as usize],
    })
}

/// Whether `window_lanes` runs on this CPU (AVX2; AVX-512 CPUs take it
/// for some windows, [`across_planes`]).
fn lanes() -> bool {
    #[cfg(target_arch = "x86_64")]
    if window_lanes::available() {
        return true;
    }
    false
}

/// Whether a window over planes of `g` runs with the planes across a
/// register's lanes (`window_lanes`): on AVX2 always, on AVX-512 where
/// that beats sliding along rows ([`window_lanes::prefer_lanes`]).
#[cfg(target_arch = "x86_64")]
fn across_planes(g: &window::Geom) -> bool {
    window_lanes::available() && (!window::available() || window_lanes::prefer_lanes(g))
}

/// 2-D max pooling without indices, separably: per output row, the max over
/// the window's input rows (contiguous, vectorizable), then over each output's
/// columns (clamped tap ranges computed once).
fn max_pool2d<T: AnyNum>(w: &Win, src: &[T], y: &mut [T]) {
    if let Some(geom) = vector_geom::<T>(w) {
        let (x, y) = (
            bytemuck::cast_slice::<T, f32>(src),
            bytemuck::cast_slice_mut::<T, f32>(y),
        );
        #[cfg(target_arch = "x86_64")]
        if across_planes(&geom) {
            let planes = y.len() / (w.output[0] * w.output[1]).max(1);
            return window_lanes::run(&geom, planes, x, y, window_lanes::Reduce::Max);
        }
        let sin = w.input[0] * w.input[1];
        par_rows(y, w.output[0] * w.output[1], |plane, out| {
            window::plane(&geom, &x[plane * sin..], out, window::Reduce::Max)
        });
        return;
    }
    let (ih, iw) = (w.input[0] as i64, w.input[1] as i64);
    let (oh, ow) = (w.output[0], w.output[1]);
    let (kh, kw) = (w.kernel[0] as i64, w.kernel[1] as i64);
    let (sh, sw) = (w.strides[0] as i64, w.strides[1] as i64);
    let (dh, dw) = (w.dilations[0] as i64, w.dilations[1] as i64);
    let (ph, pw) = (w.pad_begin[0], w.pad_begin[1]);
    let sin = (ih * iw) as usize;
    let cols: Vec<(i64, i64, i64)> = (0..ow as i64)
        .map(|c| {
            let w0 = c * sw - pw;
            let (a, b) = taps(w0, dw, kw, 0, iw);
            (w0, a, b)
        })
        .collect();
    let lowest = T::of_f64(f64::NEG_INFINITY);
    par_rows(y, oh * ow, |plane, out| {
        let xs = &src[plane * sin..(plane + 1) * sin];
        // The column-wise max over the window's rows, then each output takes
        // the max of its columns: the first pass is contiguous.
        let mut vrow = vec![lowest; iw as usize];
        for (r, orow) in out.chunks_mut(ow).enumerate() {
            vrow.fill(lowest);
            let h0 = r as i64 * sh - ph;
            let (ha, hb) = taps(h0, dh, kh, 0, ih);
            for a in ha..hb {
                let at = ((h0 + a * dh) * iw) as usize;
                for (v, x) in vrow.iter_mut().zip(&xs[at..at + iw as usize]) {
                    *v = max_nan(*v, *x);
                }
            }
            for (o, &(w0, wa, wb)) in orow.iter_mut().zip(&cols) {
                let mut m = lowest;
                for b in wa..wb {
                    m = max_nan(m, vrow[(w0 + b * dw) as usize]);
                }
                *o = m;
            }
        }
    });
}

/// 2-D average pooling without indices: for each output, the window is
/// clamped to the input once, then scanned with no per-element bounds checks.
fn avg_pool2d<T: AnyNum>(p: &Pool, w: &Win, src: &[T], y: &mut [T]) {
    let (ih, iw) = (w.input[0] as i64, w.input[1] as i64);
    let (oh, ow) = (w.output[0], w.output[1]);
    let (kh, kw) = (w.kernel[0] as i64, w.kernel[1] as i64);
    let (sh, sw) = (w.strides[0] as i64, w.strides[1] as i64);
    let (dh, dw) = (w.dilations[0] as i64, w.dilations[1] as i64);
    let (ph, pw) = (w.pad_begin[0], w.pad_begin[1]);
    let (eh, ew) = (ih + w.pad_end[0], iw + w.pad_end[1]);
    let sin = (ih * iw) as usize;
    if let Some(geom) = vector_geom::<T>(w) {
        // The divisor of output (r, c) is a row count times a column count:
        // taps inside the input, or inside the padded extent.
        let count = |o: i64, s: i64, d: i64, k: i64, pad: i64, n: i64, end: i64| {
            let (a, b) = if p.count_include_pad {
                taps(o * s - pad, d, k, -pad, end)
            } else {
                taps(o * s - pad, d, k, 0, n)
            };
            if b > a {
                1.0 / (b - a) as f32
            } else {
                0.0
            }
        };
        let rows: Vec<f32> = (0..oh as i64)
            .map(|r| count(r, sh, dh, kh, ph, ih, eh))
            .collect();
        let mut cols: Vec<f32> = (0..ow as i64)
            .map(|c| count(c, sw, dw, kw, pw, iw, ew))
            .collect();
        cols.resize(window::mean_cols(ow), 0.0);
        let (x, y) = (
            bytemuck::cast_slice::<T, f32>(src),
            bytemuck::cast_slice_mut::<T, f32>(y),
        );
        #[cfg(target_arch = "x86_64")]
        if across_planes(&geom) {
            let reduce = window_lanes::Reduce::Mean {
                rows: &rows,
                cols: &cols,
            };
            let planes = y.len() / (oh * ow).max(1);
            return window_lanes::run(&geom, planes, x, y, reduce);
        }
        let reduce = window::Reduce::Mean {
            rows: &rows,
            cols: &cols,
        };
        par_rows(y, oh * ow, |plane, out| {
            window::plane(&geom, &x[plane * sin..], out, reduce)
        });
        return;
    }
    par_rows(y, oh * ow, |plane, row| {
        let xs = &src[plane * sin..(plane + 1) * sin];
        for r in 0..oh {
            let h0 = r as i64 * sh - ph;
            let (ha, hb) = taps(h0, dh, kh, 0, ih);
            let (hpa, hpb) = taps(h0, dh, kh, -ph, eh);
            for c in 0..ow {
                let w0 = c as i64 * sw - pw;
                let (wa, wb) = taps(w0, dw, kw, 0, iw);
                let v = {
                    let mut sum = 0f64;
                    for a in ha..hb {
                        let line = &xs[((h0 + a * dh) * iw) as usize..];
                        for b in wa..wb {
                            sum += line[(w0 + b * dw) as usize].as_f64();
                        }
                    }
                    let count = ((hb - ha) * (wb - wa)) as usize;
                    let div = if p.count_include_pad {
                        let (wpa, wpb) = taps(w0, dw, kw, -pw, ew);
                        ((hpb - hpa) * (wpb - wpa)) as usize
                    } else {
                        count
                    };
                    T::of_f64(if div == 0 { 0.0 } else { sum / div as f64 })
                };
                row[r * ow + c] = v;
            }
        }
    });
}

fn pool_max<T: AnyNum>(p: &Pool, x: &TensorRef, outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let w = Win::new(p, x.dims, outs[0].dims);
    if w.input.len() == 2 && outs.len() == 1 {
        max_pool2d(&w, x.slice::<T>()?, outs[0].slice::<T>()?);
        return Ok(());
    }
    let src = x.slice::<T>()?;
    let (sin, sout) = (
        w.input.iter().product::<usize>(),
        w.output.iter().product::<usize>(),
    );
    let c = x.dims[1];
    let mut idx_out: Vec<i64> = Vec::new();
    let with_idx = outs.len() > 1;
    {
        let y = outs[0].slice::<T>()?;
        par_rows(y, sout, |plane, row| {
            let xs = &src[plane * sin..(plane + 1) * sin];
            for (o, v) in row.iter_mut().enumerate() {
                let mut best: Option<T> = None;
                w.visit(o, &mut |off, _| {
                    if let Some(off) = off {
                        let e = xs[off];
                        if best.is_none_or(|b| e > b || e.as_f64().is_nan()) {
                            best = Some(e);
                        }
                    }
                });
                *v = best.unwrap_or(T::of_f64(f64::NEG_INFINITY));
            }
        });
        if with_idx {
            idx_out = vec![0i64; y.len()];
            par_rows(&mut idx_out, sout, |plane, row| {
                let xs = &src[plane * sin..(plane + 1) * sin];
                let (n, ch) = (plane / c, plane % c);
                for (o, v) in row.iter_mut().enumerate() {
                    let mut best: Option<(T, usize)> = None;
                    w.visit(o, &mut |off, _| {
                        if let Some(off) = off {
                            if best.is_none_or(|(b, _)| xs[off] > b) {
                                best = Some((xs[off], off));
                            }
                        }
                    });
                    let off = best.map_or(0, |b| b.1);
                    let flat = if p.storage_order == 1 {
                        // Column-major within the spatial dims.
                        let mut r = off;
                        let mut idx = vec![0usize; w.input.len()];
                        for d in (0..w.input.len()).rev() {
                            idx[d] = r % w.input[d];
                            r /= w.input[d];
                        }
                        let mut f = 0usize;
                        for d in (0..w.input.len()).rev() {
                            f = f * w.input[d] + idx[d];
                        }
                        f
                    } else {
                        off
                    };
                    *v = ((n * c + ch) * sin + flat) as i64;
                }
            });
        }
    }
    if with_idx {
        outs[1].slice::<i64>()?.copy_from_slice(&idx_out);
    }
    Ok(())
}

fn pool_avg_lp<T: Real + AnyNum>(
    p: &Pool,
    x: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let w = Win::new(p, x.dims, out.dims);
    if w.input.len() == 2 && p.kind == PoolKind::Avg {
        avg_pool2d(p, &w, x.slice::<T>()?, out.slice::<T>()?);
        return Ok(());
    }
    let src = x.slice::<T>()?;
    let (sin, sout) = (
        w.input.iter().product::<usize>(),
        w.output.iter().product::<usize>(),
    );
    let y = out.slice::<T>()?;
    let lp = p.kind == PoolKind::Lp;
    let pw = p.p as f64;
    par_rows(y, sout, |plane, row| {
        let xs = &src[plane * sin..(plane + 1) * sin];
        for (o, v) in row.iter_mut().enumerate() {
            let (mut sum, mut count, mut padded) = (0f64, 0usize, 0usize);
            w.visit(o, &mut |off, in_padded| {
                if let Some(off) = off {
                    let e = xs[off].to_f64();
                    sum += if lp { e.abs().powf(pw) } else { e };
                    count += 1;
                }
                if in_padded {
                    padded += 1;
                }
            });
            *v = T::from_f64(if lp {
                sum.powf(1.0 / pw)
            } else {
                let div = if p.count_include_pad { padded } else { count };
                if div == 0 {
                    0.0
                } else {
                    sum / div as f64
                }
            });
        }
    });
    Ok(())
}

fn pool(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Pool(p) = op else {
        return Err(KernelError::Internal("not a pool".into()));
    };
    let x = &ins[0];
    match p.kind {
        PoolKind::Max => with_dtype!(x.dtype, T => pool_max::<T>(p, x, outs), num),
        _ => with_dtype!(x.dtype, T => pool_avg_lp::<T>(p, x, &mut outs[0]), float),
    }
}

fn global_typed<T: Real>(
    kind: GlobalPoolKind,
    pw: i64,
    x: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let src = x.slice::<T>()?;
    let sin: usize = x.dims[2..].iter().product();
    let y = out.slice::<T>()?;
    let pw = pw as f64;
    if let (Some(src), Some(y)) = (super::num::as_f32(src), super::num::as_f32_mut(y)) {
        if kind != GlobalPoolKind::Lp {
            global_f32(kind, src, sin, y);
            return Ok(());
        }
    }
    super::layout::par_fill_costly(y, sin, |plane| {
        let xs = &src[plane * sin..(plane + 1) * sin];
        T::from_f64(match kind {
            GlobalPoolKind::Avg => xs.iter().map(|v| v.to_f64()).sum::<f64>() / sin.max(1) as f64,
            GlobalPoolKind::Max => xs
                .iter()
                .map(|v| v.to_f64())
                .fold(f64::NEG_INFINITY, f64::max),
            GlobalPoolKind::Lp => xs
                .iter()
                .map(|v| v.to_f64().abs().powf(pw))
                .sum::<f64>()
                .powf(1.0 / pw),
        })
    });
    Ok(())
}

/// Global average or max pooling of f32 planes: sixteen running sums (or
/// maxima) per plane, in vector registers, planes split over the threads.
fn global_f32(kind: GlobalPoolKind, src: &[f32], sin: usize, y: &mut [f32]) {
    super::layout::par_fill_costly(y, sin, |plane| {
        let xs = &src[plane * sin..(plane + 1) * sin];
        super::vmath::vectorized(|| {
            let mut lanes = [0f32; 16];
            let chunks = xs.chunks_exact(16);
            let tail = chunks.remainder();
            if kind == GlobalPoolKind::Avg {
                for c in chunks {
                    lanes.iter_mut().zip(c).for_each(|(l, v)| *l += v);
                }
                let sum = lanes.iter().chain(tail).map(|&v| f64::from(v)).sum::<f64>();
                (sum / sin.max(1) as f64) as f32
            } else {
                lanes = [f32::NEG_INFINITY; 16];
                for c in chunks {
                    lanes.iter_mut().zip(c).for_each(|(l, &v)| *l = l.max(v));
                }
                lanes
                    .iter()
                    .chain(tail)
                    .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
            }
        })
    });
}

fn global_pool(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::GlobalPool(g) = op else {
        return Err(KernelError::Internal("not a global pool".into()));
    };
    with_dtype!(ins[0].dtype, T => global_typed::<T>(g.kind, g.p, &ins[0], &mut outs[0]), float)
}

/// Local response normalization across channels, in f64: one output plane
/// per task (planes in parallel), the window's sum of squares accumulated
/// plane by plane over the spatial positions (so the loops run along
/// memory), and `t^-beta` without `powf` for the usual betas.
fn lrn_typed<T: Real>(
    size: usize,
    alpha: f64,
    beta: f64,
    bias: f64,
    x: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let src = x.slice::<T>()?;
    let c = x.dims[1];
    let sp: usize = x.dims[2..].iter().product();
    let y = out.slice::<T>()?;
    let lo = (size - 1) / 2;
    let hi = size - 1 - lo;
    let scale = alpha / size as f64;
    let inv_pow = |t: f64| -> f64 {
        if beta == 0.75 {
            let r = t.sqrt();
            1.0 / (r * r.sqrt())
        } else if beta == 0.5 {
            1.0 / t.sqrt()
        } else if beta == 1.0 {
            1.0 / t
        } else {
            t.powf(-beta)
        }
    };
    par_rows(y, sp, |row, plane| {
        let (b, ch) = (row / c, row % c);
        let xs = &src[b * c * sp..(b + 1) * c * sp];
        let c0 = ch.saturating_sub(lo);
        let c1 = (ch + hi).min(c - 1);
        super::vmath::vectorized(|| {
            let mut sq = vec![0f64; sp];
            for k in c0..=c1 {
                let xk = &xs[k * sp..(k + 1) * sp];
                for s in 0..sp {
                    let v = xk[s].to_f64();
                    sq[s] += v * v;
                }
            }
            let xc = &xs[ch * sp..(ch + 1) * sp];
            for s in 0..sp {
                plane[s] = T::from_f64(xc[s].to_f64() * inv_pow(bias + scale * sq[s]));
            }
        });
    });
    Ok(())
}

fn lrn(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Lrn(l) = op else {
        return Err(KernelError::Internal("not lrn".into()));
    };
    let d = ins[0].dtype;
    if d == DType::Bool {
        return Err(KernelError::DType(d));
    }
    with_dtype!(d, T => lrn_typed::<T>(l.size as usize, l.alpha as f64, l.beta as f64, l.bias as f64, &ins[0], &mut outs[0]), float)
}

/// Places each input value at its flat index into the unpooled shape that the
/// attributes give (`(in - 1) * stride - pads + kernel`), as MaxPool's indices
/// output numbers them. An explicit, larger output shape holds that result at
/// its origin (as the ONNX reference does); every other element is zero.
fn max_unpool(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::MaxUnpool(u) = op else {
        return Err(KernelError::Internal("not max_unpool".into()));
    };
    let (x, ind) = (&ins[0], &ins[1]);
    if ind.dims != x.dims {
        return Err(KernelError::Value(format!(
            "indices {:?} and input {:?} differ in shape",
            ind.dims, x.dims
        )));
    }
    let out = &mut outs[0];
    let nsp = x.rank().saturating_sub(2);
    if u.kernel_shape.len() != nsp || u.strides.len() != nsp || u.pads.len() != 2 * nsp {
        return Err(KernelError::Value(format!(
            "kernel_shape, strides and pads need {nsp} spatial values"
        )));
    }
    let mut unpooled = x.dims[..2].to_vec();
    for d in 0..nsp {
        let v = (x.dims[d + 2] as i64 - 1) * u.strides[d] - u.pads[d] - u.pads[d + nsp]
            + u.kernel_shape[d];
        unpooled.push(v.max(0) as usize);
    }
    if out.dims.len() != unpooled.len() || out.dims.iter().zip(&unpooled).any(|(o, i)| o < i) {
        return Err(KernelError::Value(format!(
            "output shape {:?} is smaller than the unpooled shape {unpooled:?}",
            out.dims
        )));
    }
    let total: usize = unpooled.iter().product();
    let os = super::layout::strides(out.dims);
    let mut targets = Vec::with_capacity(x.numel());
    for i in ind.to_i64s()? {
        if i < 0 || i as usize >= total {
            return Err(KernelError::Value(format!(
                "index {i} is outside an unpooled tensor of {total} elements"
            )));
        }
        targets.push(super::layout::offset_of(i as usize, &unpooled, &os));
    }
    out.bytes.fill(0);
    with_width!(x.dtype, T => {
        let (src, dst) = (x.slice::<T>()?, out.slice::<T>()?);
        for (v, &t) in src.iter().zip(&targets) {
            dst[t] = *v;
        }
        Ok(())
    })
}

#[cfg(test)]
mod unpool_tests {
    use super::*;
    use rlx_ir::ops::MaxUnpool;

    #[test]
    fn unpool_into_a_larger_output_keeps_coordinates() {
        // 1x1x1x2 input unpooled with kernel 2, stride 2 gives 1x1x2x4; indices
        // 1 and 6 are (0,1) and (1,2) there, placed into a 1x1x3x5 output.
        let x = [5f32, 6.];
        let idx = [1i64, 6];
        let op = Op::MaxUnpool(MaxUnpool {
            kernel_shape: vec![2, 2],
            strides: vec![2, 2],
            pads: vec![0, 0, 0, 0],
        });
        let ins = [
            TensorRef {
                dtype: DType::F32,
                dims: &[1, 1, 1, 2],
                bytes: bytemuck::cast_slice(&x),
            },
            TensorRef {
                dtype: DType::I64,
                dims: &[1, 1, 1, 2],
                bytes: bytemuck::cast_slice(&idx),
            },
        ];
        let mut y = [0f32; 15];
        let mut outs = [TensorMut {
            dtype: DType::F32,
            dims: &[1, 1, 3, 5],
            bytes: bytemuck::cast_slice_mut(&mut y),
        }];
        max_unpool(&op, &ins, &mut outs).unwrap();
        let mut want = [0f32; 15];
        want[1] = 5.;
        want[5 + 2] = 6.;
        assert_eq!(y, want);
    }
}
