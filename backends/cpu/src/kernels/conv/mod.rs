//! Convolutions. Conv and FusedConv: f32 2-D convolutions with constant
//! weights run as implicit GEMMs over the input on the microkernels
//! (AVX-512 or AVX2, [`plan`]), bias, residual and activation applied as the
//! product is stored; 3-D ones im2col in column tiles into the same
//! microkernels; the rest (run-time weights, other dtypes, CPUs without AVX2)
//! im2col + the `gemm` crate per group. ConvTranspose: in [`transpose`];
//! DeformConv: in [`deform`]. f16/bf16 widen to f32; integer convs
//! (ConvInteger) use a direct loop.
//!
//! Imports run one way: `geometry` and `operands` know no other file here;
//! `window` and `window_lanes` slide 2-D windows (shared with pooling);
//! `depthwise` runs on them; `direct` is the in-place implicit GEMM, `plan`
//! picks among its ways; this file builds the kernel over all of them.

pub mod deform;
pub mod depthwise;
mod direct;
pub mod geometry;
mod operands;
mod plan;
mod transpose;
pub mod window;
#[cfg(target_arch = "x86_64")]
pub mod window_lanes;

use std::sync::Arc;

use rlx_ir::ops::{Activation, Conv};
use rlx_ir::{DType, Op};

use self::geometry::{im2col, ConvGeom};
pub use self::operands::narrow;
use self::operands::{bias, widened};
use self::plan::ConvPlan;
use super::gemm::packed::{self, Epilogue, Out, PackedA, Shape, B};
use super::gemm::{gemm, GemmElem};
use super::matmul::activate;
use super::num::{Comp, Int};
use crate::kernel::{Kernel, KernelError, Spec};
use crate::scratch::PerThread;
use crate::tensor::{TensorMut, TensorRef};

struct ConvKernel {
    dtype: DType,
    g: ConvGeom,
    act: Activation,
    /// A 2-D convolution with constant f32 weights, on the microkernels.
    plan: Option<ConvPlan>,
    /// Constant f32 weights of another convolution packed for the
    /// microkernels (im2col tiles), one per group.
    packed: Option<Arc<Vec<PackedA>>>,
    /// Constant f32 weights (`[M, C·K]` as stored) of a convolution whose
    /// one output position sees the whole input: a fully connected layer
    /// written as a conv (a 1x1 conv after global pooling). It runs as dot
    /// products of the weight rows with the input, split over the rows.
    fc: Option<Arc<Vec<f32>>>,
}

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    let (x, w, y) = (spec.in_dims(0), spec.in_dims(1), spec.out_dims(0));
    let dtype = spec.inputs[0].dtype;
    if x.len() < 3 {
        return Err(KernelError::Value(
            "convolution input needs rank >= 3".into(),
        ));
    }
    let bias = (spec.inputs.len() > 2).then(|| spec.in_dims(2).iter().product::<usize>());
    let conv = |c: &Conv, act: Activation| -> Result<Box<dyn Kernel>, KernelError> {
        let g = ConvGeom::from_conv(c, &x, &w, &y)?;
        check_sizes(&g, (w[0], w[1]), bias, false)?;
        // Packed weights are kept in the spec's store: the plans of other
        // input shapes take them from there.
        let weights = match spec.keep(1) {
            Some((t, keep)) if dtype == DType::F32 && !depthwise::applies(&g) => {
                t.as_slice::<f32>().ok().map(|w| (w, keep))
            }
            _ => None,
        };
        let fc = weights
            .filter(|_| g.is_fully_connected())
            .and_then(|(w, keep)| keep.get_or_make("conv.fc", &[], || Some(w.to_vec())));
        let plan = weights
            .filter(|_| fc.is_none())
            .and_then(|(w, keep)| ConvPlan::new(&g, w, keep));
        let packed = match (&plan, &fc) {
            (None, None) => weights.and_then(|(w, keep)| {
                let shape = Shape::for_product(g.m / g.group, g.tile());
                let params = [g.group, g.m, g.col_rows(), shape.mr, shape.nv];
                keep.get_or_make("conv.im2col", &params, || pack_weights(&g, w))
            }),
            _ => None,
        };
        Ok(Box::new(ConvKernel {
            dtype,
            g,
            act,
            plan,
            packed,
            fc,
        }))
    };
    match spec.op() {
        Op::Conv(c) => conv(c, Activation::None),
        Op::FusedConv(f) => conv(&f.conv(), f.activation),
        Op::ConvTranspose(t) => {
            let g = transpose::geom(t, &x, &w, &y);
            check_sizes(&g, (w[0], w[1]), bias, true)?;
            Ok(Box::new(transpose::ConvTransposeKernel { dtype, g }))
        }
        op => Err(KernelError::Internal(format!(
            "{} is not a convolution",
            op.name()
        ))),
    }
}

/// Weights `[M, C/group, k...]` (`[C, M/group, k...]` transposed) and a
/// bias of M: what the loops index by, checked once (types inferred with
/// symbolic dims, or from a crafted artifact, may disagree).
fn check_sizes(
    g: &ConvGeom,
    (w0, w1): (usize, usize),
    bias: Option<usize>,
    transpose: bool,
) -> Result<(), KernelError> {
    let (rows, per_group) = if transpose { (g.c, g.m) } else { (g.m, g.c) };
    let fits = g.group >= 1
        && w0 == rows
        && rows % g.group == 0
        && w1.checked_mul(g.group) == Some(per_group)
        && bias.is_none_or(|b| b == g.m);
    if fits {
        return Ok(());
    }
    Err(KernelError::Value(format!(
        "weights [{w0}, {w1}, ..] and bias {bias:?} do not fit {} input and {} output channels in {} groups",
        g.c, g.m, g.group
    )))
}

/// The weights of each group as the microkernel's left operand; `None` where
/// the CPU has no microkernel.
fn pack_weights(g: &ConvGeom, w: &[f32]) -> Option<Vec<PackedA>> {
    let (mg, rows) = (g.m / g.group, g.col_rows());
    if w.len() < g.group * mg * rows {
        return None;
    }
    let shape = Shape::for_product(mg, g.tile());
    (0..g.group)
        .map(|grp| {
            let wg = &w[grp * mg * rows..(grp + 1) * mg * rows];
            PackedA::new(wg, mg, rows, rows, shape)
        })
        .collect()
}

impl Kernel for ConvKernel {
    fn flops(&self) -> Option<u64> {
        Some(self.g.flops(self.g.spatial_out()))
    }

    fn label(&self) -> String {
        let g = &self.g;
        let how = if self.fc.is_some() {
            "fully connected".into()
        } else if let Some(plan) = &self.plan {
            format!("direct {}", plan.describe())
        } else if depthwise::applies(g) {
            "depthwise".into()
        } else if g.is_pointwise() {
            "pointwise".into()
        } else {
            "im2col".into()
        };
        let packed = match self.packed.as_deref().and_then(|p| p.first()) {
            Some(p) => format!(" packed {}x{}", p.shape().mr, p.shape().nr()),
            None => String::new(),
        };
        format!(
            "conv.{} {how}{packed} k{:?} s{:?} g{} {}->{} act={}",
            self.dtype, g.kernel, g.strides, g.group, g.c, g.m, self.act
        )
    }

    fn scratch_bytes(&self) -> usize {
        let g = &self.g;
        if let Some(plan) = &self.plan {
            return plan.scratch_floats() * 4 + 64;
        }
        let col = if g.is_pointwise() || depthwise::applies(g) {
            0
        } else {
            g.col_rows() * g.tile()
        };
        let widen = match self.dtype {
            DType::F16 | DType::BF16 => {
                g.n * g.c * g.spatial_in() + g.m * g.col_rows() + g.n * g.m * g.spatial_out() + g.m
            }
            _ => 0,
        };
        (col + widen) * 8 + 256
    }

    fn per_thread(&self) -> PerThread {
        let g = &self.g;
        if self.fc.is_some() {
            return PerThread::NONE;
        }
        if let Some(plan) = &self.plan {
            return plan.per_thread();
        }
        if let Some(packed) = &self.packed {
            return PerThread::each(packed.iter().map(PackedA::per_thread).max().unwrap_or(0));
        }
        match self.dtype {
            // Half floats run in f32, widened.
            DType::F32 | DType::F16 | DType::BF16 => PerThread::each(depthwise::per_thread(g)),
            _ => PerThread::NONE,
        }
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        if let Some(w) = &self.fc {
            let residual = ins.get(3).map(|r| r.slice::<f32>()).transpose()?;
            return fully_connected(
                &self.g,
                w,
                ins[0].slice()?,
                bias(ins)?,
                residual,
                self.act,
                outs[0].slice()?,
            );
        }
        if self.plan.is_some() || self.packed.is_some() {
            let residual = ins.get(3).map(|r| r.slice::<f32>()).transpose()?;
            if residual.is_some_and(|r| r.len() != outs[0].numel()) {
                return Err(KernelError::Value(format!(
                    "a residual of {} elements for a conv output of {}",
                    ins[3].numel(),
                    outs[0].numel()
                )));
            }
            let ep = Epilogue {
                bias: bias(ins)?,
                residual,
                act: self.act,
            };
            return self.conv_packed(ep, ins[0].slice()?, outs[0].slice()?, scratch);
        }
        // A residual joins after the bias and before the activation.
        let Some(residual) = ins.get(3) else {
            return self.conv(self.act, ins, outs, scratch);
        };
        self.conv(Activation::None, &ins[..3], outs, scratch)?;
        add_residual(self.act, residual, &mut outs[0])
    }
}

impl ConvKernel {
    fn conv(
        &self,
        act: Activation,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let out = &mut outs[0];
        match self.dtype {
            DType::F32 => conv_float::<f32>(
                &self.g,
                act,
                ins[0].slice()?,
                ins[1].slice()?,
                bias(ins)?,
                out.slice()?,
                scratch,
            ),
            DType::F64 => conv_float::<f64>(
                &self.g,
                act,
                ins[0].slice()?,
                ins[1].slice()?,
                bias(ins)?,
                out.slice()?,
                scratch,
            ),
            DType::F16 | DType::BF16 => widened(ins, out, scratch, |x, w, b, y, rest| {
                let rest = crate::kernels::layout::aligned_mut(rest, 8);
                conv_float::<f32>(&self.g, act, x, w, b, y, rest)
            }),
            DType::I32 => conv_int::<i32>(
                &self.g,
                ins[0].slice()?,
                ins[1].slice()?,
                ins.get(2).map(|b| b.slice::<i32>()).transpose()?,
                out.slice()?,
            ),
            d => Err(KernelError::DType(d)),
        }
    }
}

/// `y = act(y + r)` in place: a fused conv's residual `r`, added to the
/// conv and its bias as the unfused graph adds it (f16/bf16 after rounding
/// the conv, so both give the same bits).
fn add_residual(act: Activation, r: &TensorRef, y: &mut TensorMut) -> Result<(), KernelError> {
    if r.numel() != y.numel() || r.dtype != y.dtype {
        return Err(KernelError::Value(format!(
            "a residual of {} {} for a conv output of {} {}",
            r.numel(),
            r.dtype,
            y.numel(),
            y.dtype
        )));
    }
    fn add<T: Comp + bytemuck::Pod + std::ops::AddAssign>(
        act: Activation,
        r: &TensorRef,
        y: &mut TensorMut,
    ) -> Result<(), KernelError> {
        let y = y.slice::<T>()?;
        y.iter_mut()
            .zip(r.slice::<T>()?)
            .for_each(|(a, &b)| *a += b);
        activate(act, y);
        Ok(())
    }
    fn add_narrow<T: bytemuck::Pod>(
        act: Activation,
        r: &TensorRef,
        y: &mut TensorMut,
        wide: fn(T) -> f32,
        narrow: fn(f32) -> T,
    ) -> Result<(), KernelError> {
        let mut buf = [0f32; 256];
        let (y, r) = (y.slice::<T>()?, r.slice::<T>()?);
        for (yc, rc) in y.chunks_mut(buf.len()).zip(r.chunks(buf.len())) {
            let b = &mut buf[..yc.len()];
            for ((b, &y), &r) in b.iter_mut().zip(yc.iter()).zip(rc) {
                *b = wide(narrow(wide(y) + wide(r)));
            }
            activate(act, b);
            yc.iter_mut()
                .zip(b.iter())
                .for_each(|(y, &b)| *y = narrow(b));
        }
        Ok(())
    }
    match y.dtype {
        DType::F32 => add::<f32>(act, r, y),
        DType::F64 => add::<f64>(act, r, y),
        DType::F16 => add_narrow(act, r, y, half::f16::to_f32, half::f16::from_f32),
        DType::BF16 => add_narrow(act, r, y, half::bf16::to_f32, half::bf16::from_f32),
        d => Err(KernelError::DType(d)),
    }
}

fn conv_float<T: GemmElem + Comp + bytemuck::Pod + Default>(
    g: &ConvGeom,
    act: Activation,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
    scratch: &mut [u8],
) -> Result<(), KernelError> {
    if depthwise::applies(g) {
        depthwise::run(g, x, w, bias, act, y);
        return Ok(());
    }
    let (sin, sout) = (g.spatial_in(), g.spatial_out());
    if y.is_empty() || sout == 0 {
        return Ok(());
    }
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let rows = g.col_rows();
    let tile = g.tile();
    let col_len = if g.is_pointwise() { 0 } else { rows * tile };
    let sz = std::mem::size_of::<T>();
    let scratch = crate::kernels::layout::aligned_mut(scratch, sz);
    let col: &mut [T] = bytemuck::try_cast_slice_mut(&mut scratch[..col_len * sz])
        .map_err(|e| KernelError::Internal(e.to_string()))?;
    for n in 0..g.n {
        let xn = &x[n * g.c * sin..(n + 1) * g.c * sin];
        let yn = &mut y[n * g.m * sout..(n + 1) * g.m * sout];
        for grp in 0..g.group {
            let wg = &w[grp * mg * rows..(grp + 1) * mg * rows];
            let yg = &mut yn[grp * mg * sout..(grp + 1) * mg * sout];
            if g.is_pointwise() {
                let xg = &xn[grp * cg * sin..(grp + 1) * cg * sin];
                gemm(mg, sout, rows, wg, rows, xg, sout, yg, sout, false);
                continue;
            }
            let mut j0 = 0;
            while j0 < sout {
                let j1 = (j0 + tile).min(sout);
                let width = j1 - j0;
                im2col(g, xn, grp * cg, j0, j1, col);
                gemm(
                    mg,
                    width,
                    rows,
                    wg,
                    rows,
                    &col[..rows * width],
                    width,
                    &mut yg[j0..],
                    sout,
                    false,
                );
                j0 = j1;
            }
        }
    }
    bias_activate(act, bias, y, sout);
    Ok(())
}

/// `y = act(y + bias[channel])` over rows of `sout`, row by row while the
/// row is in cache (the products write `y` without a bias: no fill before
/// them, no second pass after).
fn bias_activate<T: Comp>(act: Activation, bias: Option<&[T]>, y: &mut [T], sout: usize) {
    let Some(b) = bias else {
        return activate(act, y);
    };
    let m = b.len();
    crate::kernels::layout::par_rows(y, sout.max(1), |r, row| {
        let v = b[r % m];
        // A plain loop in the CPU's widest lanes (`for_each` stayed an
        // out-of-line fold in the baseline's).
        crate::kernels::vmath::vectorized(|| {
            for x in row.iter_mut() {
                *x = *x + v;
            }
        });
        activate(act, row);
    });
}

impl ConvKernel {
    /// `conv_float` for f32 on the microkernels: bias, residual and
    /// activation are applied as the product is stored.
    fn conv_packed(
        &self,
        ep: Epilogue,
        x: &[f32],
        y: &mut [f32],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let g = &self.g;
        let (sin, sout) = (g.spatial_in(), g.spatial_out());
        if y.is_empty() || sout == 0 {
            return Ok(());
        }
        let (cg, mg) = (g.c / g.group, g.m / g.group);
        let rows = g.col_rows();
        let tile = g.tile();
        let scratch = crate::kernels::layout::aligned_mut(scratch, 4);
        let floats = match &self.plan {
            Some(plan) => plan.scratch_floats(),
            None => rows * tile,
        };
        let buf: &mut [f32] = bytemuck::try_cast_slice_mut(&mut scratch[..floats * 4])
            .map_err(|e| KernelError::Internal(e.to_string()))?;
        for n in 0..g.n {
            let xn = &x[n * g.c * sin..(n + 1) * g.c * sin];
            let yn = &mut y[n * g.m * sout..(n + 1) * g.m * sout];
            let ep = Epilogue {
                residual: ep
                    .residual
                    .map(|r| &r[n * g.m * sout..(n + 1) * g.m * sout]),
                ..ep
            };
            if let Some(plan) = &self.plan {
                plan.run(g, xn, yn, ep, buf);
                continue;
            }
            for (grp, wg) in self.packed.iter().flat_map(|p| p.iter()).enumerate() {
                let m0 = grp * mg * sout;
                let ep = Epilogue {
                    bias: ep.bias.map(|b| &b[grp * mg..(grp + 1) * mg]),
                    residual: ep.residual.map(|r| &r[m0..m0 + mg * sout]),
                    act: ep.act,
                };
                let yg = &mut yn[m0..m0 + mg * sout];
                let mut j0 = 0;
                while j0 < sout {
                    let j1 = (j0 + tile).min(sout);
                    let width = j1 - j0;
                    im2col(g, xn, grp * cg, j0, j1, buf);
                    let b = B::Rows {
                        b: &buf[..rows * width],
                        ldb: width,
                    };
                    let ep = Epilogue {
                        residual: ep.residual.map(|r| &r[j0..]),
                        ..ep
                    };
                    packed::gemm(wg, b, width, Out::dense(&mut yg[j0..], sout), ep);
                    j0 = j1;
                }
            }
        }
        Ok(())
    }
}

/// Rows of the product a task of [`fully_connected`] takes, at least.
const FC_ROWS: usize = 32;

/// `y[n, m] = act(bias[m] + dot(w[m, :], x[n, :]) + residual[n, m])`: a
/// convolution with one output position that sees its whole input.
fn fully_connected(
    g: &ConvGeom,
    w: &[f32],
    x: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    act: Activation,
    y: &mut [f32],
) -> Result<(), KernelError> {
    let k = g.c * g.spatial_in();
    if x.len() != g.n * k
        || y.len() != g.n * g.m
        || w.len() != g.m * k
        || bias.is_some_and(|b| b.len() < g.m)
        || residual.is_some_and(|r| r.len() != y.len())
    {
        return Err(KernelError::Internal(
            "fully connected conv operand sizes".into(),
        ));
    }
    let threads = crate::par::threads().min((g.m * k) >> 16).max(1);
    let per = g.m.div_ceil(threads).next_multiple_of(16).max(FC_ROWS);
    for (n, yn) in y.chunks_mut(g.m).enumerate() {
        let xn = &x[n * k..(n + 1) * k];
        crate::par::chunks_mut(yn, per, |c, out| {
            let first = c * per;
            crate::kernels::gemm::gemv::rows(w, k, xn, first, out);
            // The bias first, then the residual, as the conv epilogue adds them.
            for (i, o) in out.iter_mut().enumerate() {
                let m = first + i;
                *o = bias.map_or(0.0, |b| b[m]) + *o;
                if let Some(r) = residual {
                    *o += r[n * g.m + m];
                }
            }
            activate(act, out);
        });
    }
    Ok(())
}

fn conv_int<T: Int + Default>(
    g: &ConvGeom,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
) -> Result<(), KernelError> {
    let (sin, sout) = (g.spatial_in(), g.spatial_out());
    if y.is_empty() || sout == 0 {
        return Ok(());
    }
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let rows = g.col_rows();
    let mut col = vec![T::default(); rows * sout];
    for n in 0..g.n {
        let xn = &x[n * g.c * sin..(n + 1) * g.c * sin];
        for grp in 0..g.group {
            im2col(g, xn, grp * cg, 0, sout, &mut col);
            for mm in 0..mg {
                let m = grp * mg + mm;
                let wr = &w[m * rows..(m + 1) * rows];
                let yr = &mut y[(n * g.m + m) * sout..(n * g.m + m + 1) * sout];
                yr.fill(bias.map_or(T::zero(), |b| b[m]));
                for (r, wv) in wr.iter().enumerate() {
                    for (o, c) in yr.iter_mut().zip(&col[r * sout..(r + 1) * sout]) {
                        *o = o.wrapping_add(&wv.wrapping_mul(c));
                    }
                }
            }
        }
    }
    Ok(())
}
