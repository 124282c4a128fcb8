//! Convolutions. Conv and FusedConv: f32 2-D convolutions with constant
//! weights run as implicit GEMMs over the input on the microkernels
//! (AVX-512 or AVX2, [`super::conv_plan`]), bias, residual and activation
//! applied as the product is stored; 3-D ones im2col in column tiles into
//! the same microkernels; the rest (run-time weights, other dtypes, CPUs
//! without AVX2) im2col + the `gemm` crate per group. ConvTranspose: in
//! [`super::conv_transpose`]. f16/bf16 widen to f32; integer convs (ConvInteger) use a direct
//! loop.

use rlx_ir::ops::{resolve_pads, Activation, Conv};
use rlx_ir::{DType, Op};

use super::conv_plan::ConvPlan;
use super::gemm::{gemm, GemmElem};
use super::matmul::{activate, widen};
use super::num::{Comp, Int};
use super::packed_gemm::{self, Epilogue, Out, PackedA, Shape, B};
use crate::kernel::{Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};

/// Resolved geometry of one convolution.
#[derive(Debug, Clone)]
pub struct ConvGeom {
    pub n: usize,
    pub c: usize,
    pub m: usize,
    pub group: usize,
    pub input: Vec<usize>,
    pub kernel: Vec<usize>,
    pub output: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    /// Begin pads (end pads only shape the output).
    pub pads: Vec<usize>,
}

impl ConvGeom {
    fn from_conv(c: &Conv, x: &[usize], w: &[usize], y: &[usize]) -> Result<ConvGeom, KernelError> {
        let nsp = x.len() - 2;
        let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
        let pads = resolve_pads(
            c.auto_pad,
            &c.pads,
            &i64s(&x[2..]),
            &i64s(&w[2..]),
            &c.strides,
            &c.dilations,
        );
        Ok(ConvGeom {
            n: x[0],
            c: x[1],
            m: w[0],
            group: c.group.max(1) as usize,
            input: x[2..].to_vec(),
            kernel: w[2..].to_vec(),
            output: y[2..].to_vec(),
            strides: c.strides.iter().map(|&s| s as usize).collect(),
            dilations: c.dilations.iter().map(|&s| s as usize).collect(),
            pads: pads[..nsp].iter().map(|&p| p.max(0) as usize).collect(),
        }
        .as_2d())
    }

    /// A 1-D convolution as a 2-D one of height 1 (the same memory layout), so
    /// it takes the 2-D im2col, packed and depthwise paths.
    fn as_2d(mut self) -> ConvGeom {
        if self.input.len() == 1 {
            self.input.insert(0, 1);
            self.kernel.insert(0, 1);
            self.output.insert(0, 1);
            self.strides.insert(0, 1);
            self.dilations.insert(0, 1);
            self.pads.insert(0, 0);
        }
        self
    }

    pub fn spatial_in(&self) -> usize {
        self.input.iter().product()
    }
    pub fn spatial_out(&self) -> usize {
        self.output.iter().product()
    }
    pub fn kernel_size(&self) -> usize {
        self.kernel.iter().product()
    }
    /// Two per multiply-add when each of `positions` (output positions of a
    /// convolution, input positions of a transposed one) meets one filter
    /// per channel of the other side: `m * c / group` filters in all.
    pub fn flops(&self, positions: usize) -> u64 {
        [
            self.n,
            self.m,
            self.c / self.group.max(1),
            self.kernel_size(),
            positions,
            2,
        ]
        .iter()
        .fold(1u64, |a, &v| a.saturating_mul(v as u64))
    }
    /// Rows of the im2col matrix of one group.
    pub fn col_rows(&self) -> usize {
        self.c / self.group * self.kernel_size()
    }
    /// One group whose single output position reads every input element:
    /// each kernel dim spans its input dim, with no pads or dilation.
    pub fn is_fully_connected(&self) -> bool {
        self.group == 1
            && self.spatial_out() == 1
            && self.input == self.kernel
            && self.pads.iter().all(|&p| p == 0)
            && self.dilations.iter().all(|&d| d == 1)
    }

    pub fn is_pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.strides.iter().all(|&s| s == 1)
            && self.pads.iter().all(|&p| p == 0)
    }
    /// Output columns per im2col tile: about 4 MiB of f32 per tile, so each
    /// GEMM call is wide enough to amortize packing the weights.
    fn tile(&self) -> usize {
        ((1 << 20) / self.col_rows().max(1))
            .max(64)
            .min(self.spatial_out().max(1))
    }
}

/// Fills `col[r, j - j0]` for output positions `j0..j1` of one group's channels.
fn im2col<T: Copy + Default>(
    g: &ConvGeom,
    x: &[T],
    c0: usize,
    j0: usize,
    j1: usize,
    col: &mut [T],
) {
    let width = j1 - j0;
    let ks = g.kernel_size();
    let nsp = g.input.len();
    let sin = g.spatial_in();
    if nsp == 2 {
        for cc in 0..g.c / g.group {
            let xc = &x[(c0 + cc) * sin..(c0 + cc + 1) * sin];
            for kh in 0..g.kernel[0] {
                for kw in 0..g.kernel[1] {
                    let row = (cc * ks + kh * g.kernel[1] + kw) * width;
                    im2col_row_2d(g, xc, (kh, kw), j0, &mut col[row..row + width]);
                }
            }
        }
        return;
    }
    // Any spatial rank: walk multi-indices.
    let mut kidx = vec![0usize; nsp];
    let mut oidx = vec![0usize; nsp];
    for cc in 0..g.c / g.group {
        let xc = &x[(c0 + cc) * sin..(c0 + cc + 1) * sin];
        for kf in 0..ks {
            unflatten(kf, &g.kernel, &mut kidx);
            let row = (cc * ks + kf) * width;
            for j in j0..j1 {
                unflatten(j, &g.output, &mut oidx);
                let mut off = 0usize;
                let mut inside = true;
                for d in 0..nsp {
                    let p = (oidx[d] * g.strides[d] + kidx[d] * g.dilations[d]) as isize
                        - g.pads[d] as isize;
                    if p < 0 || p >= g.input[d] as isize {
                        inside = false;
                        break;
                    }
                    off = off * g.input[d] + p as usize;
                }
                col[row + j - j0] = if inside { xc[off] } else { T::default() };
            }
        }
    }
}

/// Columns `j0..j0 + dst.len()` of the im2col row of kernel tap `(kh, kw)`
/// over channel plane `xc` of a 2-D convolution.
fn im2col_row_2d<T: Copy + Default>(
    g: &ConvGeom,
    xc: &[T],
    (kh, kw): (usize, usize),
    j0: usize,
    dst: &mut [T],
) {
    let (ih, iw) = (g.input[0] as isize, g.input[1] as isize);
    let ow = g.output[1];
    let j1 = j0 + dst.len();
    let (dh, dw) = (
        (kh * g.dilations[0]) as isize - g.pads[0] as isize,
        (kw * g.dilations[1]) as isize - g.pads[1] as isize,
    );
    let (sh, sw) = (g.strides[0] as isize, g.strides[1] as isize);
    let mut j = j0;
    while j < j1 {
        let (oh, ow0) = (j / ow, j % ow);
        let run = (ow - ow0).min(j1 - j);
        let hh = oh as isize * sh + dh;
        let out = &mut dst[j - j0..j - j0 + run];
        if hh < 0 || hh >= ih {
            out.fill(T::default());
        } else {
            let xr = &xc[(hh * iw) as usize..((hh + 1) * iw) as usize];
            // Outputs t of the run read column (ow0 + t) * sw + dw: those
            // in [lo, hi) fall inside the row, the rest are padding.
            let first = ow0 as isize * sw + dw;
            let lo = if first >= 0 {
                0
            } else {
                ((-first + sw - 1) / sw) as usize
            }
            .min(run);
            let hi = if iw - first <= 0 {
                0
            } else {
                (((iw - first + sw - 1) / sw) as usize).min(run)
            }
            .max(lo);
            out[..lo].fill(T::default());
            out[hi..].fill(T::default());
            if hi == lo {
                // The whole run reads padding.
                j += run;
                continue;
            }
            let start = (first + lo as isize * sw) as usize;
            if sw == 1 {
                out[lo..hi].copy_from_slice(&xr[start..start + (hi - lo)]);
            } else {
                for (o, v) in out[lo..hi]
                    .iter_mut()
                    .zip(xr[start..].iter().step_by(sw as usize))
                {
                    *o = *v;
                }
            }
        }
        j += run;
    }
}

pub(super) fn unflatten(mut i: usize, dims: &[usize], out: &mut [usize]) {
    for d in (0..dims.len()).rev() {
        out[d] = i % dims[d].max(1);
        i /= dims[d].max(1);
    }
}

struct ConvKernel {
    dtype: DType,
    g: ConvGeom,
    act: Activation,
    /// A 2-D convolution with constant f32 weights, on the microkernels.
    plan: Option<ConvPlan>,
    /// Constant f32 weights of another convolution packed for the
    /// microkernels (im2col tiles), one per group.
    packed: Option<Vec<PackedA>>,
    /// Constant f32 weights (`[M, C·K]` as stored) of a convolution whose
    /// one output position sees the whole input: a fully connected layer
    /// written as a conv (a 1x1 conv after global pooling). It runs as dot
    /// products of the weight rows with the input, split over the rows.
    fc: Option<Vec<f32>>,
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
        let weights = match spec.consts.get(1) {
            Some(Some(t)) if dtype == DType::F32 && !super::depthwise::applies(&g) => {
                t.as_slice::<f32>().ok()
            }
            _ => None,
        };
        let fc = weights
            .filter(|_| g.is_fully_connected())
            .map(<[f32]>::to_vec);
        let plan = weights
            .filter(|_| fc.is_none())
            .and_then(|w| ConvPlan::new(&g, w));
        let packed = match (&plan, &fc) {
            (None, None) => weights.and_then(|w| pack_weights(&g, w)),
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
            let g = super::conv_transpose::geom(t, &x, &w, &y);
            check_sizes(&g, (w[0], w[1]), bias, true)?;
            Ok(Box::new(super::conv_transpose::ConvTransposeKernel {
                dtype,
                g,
            }))
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
        } else if super::depthwise::applies(g) {
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
        let col = if g.is_pointwise() || super::depthwise::applies(g) {
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
                let rest = super::layout::aligned_mut(rest, 8);
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

pub(super) fn bias<'a, T: bytemuck::Pod>(
    ins: &[TensorRef<'a>],
) -> Result<Option<&'a [T]>, KernelError> {
    ins.get(2).map(|b| b.slice::<T>()).transpose()
}

/// Runs `f` on f32 copies of an f16/bf16 convolution's input, weights and
/// bias (in `scratch`), then narrows its f32 output into `out`; `f` gets the
/// rest of `scratch`.
pub(super) fn widened(
    ins: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut [u8],
    f: impl FnOnce(&[f32], &[f32], Option<&[f32]>, &mut [f32], &mut [u8]) -> Result<(), KernelError>,
) -> Result<(), KernelError> {
    let (nx, nw, ny) = (ins[0].numel(), ins[1].numel(), out.numel());
    let nb = ins.get(2).map_or(0, |b| b.numel());
    let (wide, rest) = scratch.split_at_mut(4 * (nx + nw + ny + nb));
    let all: &mut [f32] =
        bytemuck::try_cast_slice_mut(wide).map_err(|e| KernelError::Internal(e.to_string()))?;
    let (fx, r) = all.split_at_mut(nx);
    let (fw, r) = r.split_at_mut(nw);
    let (fb, fy) = r.split_at_mut(nb);
    widen(&ins[0], fx)?;
    widen(&ins[1], fw)?;
    if let Some(b) = ins.get(2) {
        widen(b, fb)?;
    }
    f(fx, fw, (nb > 0).then_some(&*fb), fy, rest)?;
    narrow(fy, out)
}

/// Narrows f32 results into an f16/bf16 output.
pub fn narrow(src: &[f32], out: &mut TensorMut) -> Result<(), KernelError> {
    match out.dtype {
        DType::F16 => out
            .slice::<half::f16>()?
            .iter_mut()
            .zip(src)
            .for_each(|(o, v)| *o = half::f16::from_f32(*v)),
        DType::BF16 => out
            .slice::<half::bf16>()?
            .iter_mut()
            .zip(src)
            .for_each(|(o, v)| *o = half::bf16::from_f32(*v)),
        d => return Err(KernelError::DType(d)),
    }
    Ok(())
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
    if super::depthwise::applies(g) {
        super::depthwise::run(g, x, w, bias, act, y);
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
    let scratch = super::layout::aligned_mut(scratch, sz);
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
    super::layout::par_rows(y, sout.max(1), |r, row| {
        let v = b[r % m];
        // A plain loop in the CPU's widest lanes (`for_each` stayed an
        // out-of-line fold in the baseline's).
        super::vmath::vectorized(|| {
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
        let scratch = super::layout::aligned_mut(scratch, 4);
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
            for (grp, wg) in self.packed.iter().flatten().enumerate() {
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
                    packed_gemm::gemm(wg, b, width, Out::dense(&mut yg[j0..], sout), ep);
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
            super::gemv::rows(w, k, xn, first, out);
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
