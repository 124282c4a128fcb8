//! Convolution on CUDA through cuDNN: Conv, FusedConv (1-D to 3-D, groups,
//! strides, dilations, pads) and ConvTranspose. The plan emits a plain-data
//! [`Conv`] launch; the device half builds its descriptors and picks the
//! algorithm once, when the executable is built, within the workspace
//! reserved here in scratch. cuDNN takes one pad per spatial dim: the
//! symmetric part of asymmetric pads stays with cuDNN and the rest is padded
//! explicitly into scratch first (`conv.cu`). A 1-D convolution runs as 2-D
//! of height 1. f32 bias (and ReLU) go to cuDNN's fused call; other biases
//! and activations run in the [`epilogue`] kernel after it.
//!
//! 1-D and 2-D convolutions that are not depthwise may instead run as
//! cuBLASLt GEMMs ([`PlanOptions::conv_gemm`](crate::PlanOptions)): `y[n] =
//! w[cout, c*kh*kw] * cols[n]` (per group), where `cols` is the image itself for a
//! pointwise convolution, else its im2col unfolding (rlx-gpu's [`conv2d`]
//! geometry, the `conv_im2col` kernel), then the [`epilogue`] kernel for
//! the bias and activation (cuBLASLt's bias runs along the positions, and
//! its row-major order takes no epilogue).

use rlx_gpu::geometry::{u32_of, LResult};
use rlx_gpu::kernels::conv::{conv2d, Conv2d, Im2colParams};
use rlx_gpu::{Layout, Operand, ParamBlock, Params, Range};
use rlx_ir::ops::{resolve_pads, Activation, AutoPad, Conv as ConvOp, ConvTranspose};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{epilogue, Cx, Source, BLOCK};
use crate::plan::ConvGemm;
use crate::schedule::{
    Conv, ConvKind, ConvLaunch, Gemm, GemmAct, GemmLaunch, KernelLaunch, Launch,
};

pub const SOURCE: Source = Source {
    name: "conv",
    source: include_str!("../../../../kernels/cuda/conv.cu"),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![PadParams::LAYOUT, CropParams::LAYOUT, Im2colParams::LAYOUT]
}

/// The most bytes of unfolded images a convolution lowered to a GEMM may
/// take in scratch; larger ones go to cuDNN.
pub const MAX_COLUMNS: u64 = 64 << 20;

rlx_gpu::kernel_params! {
    /// Zero padding of a 4-D or 5-D value: output element `o` copies input
    /// `o - begin` per dim, or is zero outside it.
    pub struct PadParams {
        /// Output elements.
        pub n: u32,
        /// Dims in use (4 or 5).
        pub rank: u32,
        pub out_dims: [u32; 5],
        pub in_dims: [u32; 5],
        pub begin: [u32; 5],
    }
}

/// The workspace reserved for a convolution's algorithm: twice its
/// unfolded input (what an implicit-GEMM or FFT algorithm may want), at
/// least [`MIN_WORKSPACE`] and at most [`MAX_WORKSPACE`]. Scratch is
/// reused by the next node, so this costs the largest, not the sum.
pub const MIN_WORKSPACE: u64 = 16 << 20;
pub const MAX_WORKSPACE: u64 = 256 << 20;

fn float(what: &str, d: DType) -> LResult<()> {
    match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => Ok(()),
        d => Err(format!(
            "{what} on {d} has no cuda kernel (cuDNN: floats only)"
        )),
    }
}

/// Floats, 1 to 3 spatial dims.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let what = node.op.name();
    let x = inputs.first().ok_or("the input is missing")?;
    float(what, x.dtype)?;
    for t in inputs.iter().skip(1) {
        if t.dtype != x.dtype {
            return Err(format!("{what} mixes {} and {}", x.dtype, t.dtype));
        }
    }
    let sp = x.shape.rank().saturating_sub(2);
    if !(1..=3).contains(&sp) {
        return Err(format!(
            "{what} over {sp} spatial dims has no cuda kernel (1-D to 3-D)"
        ));
    }
    match &node.op {
        Op::Conv(_) | Op::FusedConv(_) | Op::ConvTranspose(_) => Ok(()),
        op => Err(format!("`{}` is not a convolution", op.name())),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    match &cx.node.op {
        Op::Conv(c) => forward(cx, c, Activation::None),
        Op::FusedConv(f) => forward(cx, &f.conv(), f.activation),
        Op::ConvTranspose(t) => transpose(cx, t),
        op => Err(format!("`{}` is not a convolution", op.name())),
    }
}

/// Spatial attributes resolved: (begin pads, end pads, strides, dilations).
type Window = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>);

fn window(c: &ConvOp, x: &[usize], w: &[usize]) -> LResult<Window> {
    let sp = x.len() - 2;
    let or_ones = |v: &[i64]| {
        if v.is_empty() {
            vec![1; sp]
        } else {
            v.to_vec()
        }
    };
    let (st, dl) = (or_ones(&c.strides), or_ones(&c.dilations));
    let xs: Vec<i64> = x[2..].iter().map(|&d| d as i64).collect();
    let ks: Vec<i64> = w[2..].iter().map(|&d| d as i64).collect();
    let pads = if c.pads.is_empty() && c.auto_pad == AutoPad::NotSet {
        vec![0; 2 * sp]
    } else {
        resolve_pads(c.auto_pad, &c.pads, &xs, &ks, &st, &dl)
    };
    if pads.len() != 2 * sp || st.len() != sp || dl.len() != sp {
        return Err("conv attributes do not match the spatial rank".into());
    }
    let nat = |v: &[i64], what: &str| -> LResult<Vec<usize>> {
        v.iter()
            .map(|&v| usize::try_from(v).map_err(|_| format!("a negative {what} ({v})")))
            .collect()
    };
    Ok((
        nat(&pads[..sp], "pad")?,
        nat(&pads[sp..], "pad")?,
        nat(&st, "stride")?,
        nat(&dl, "dilation")?,
    ))
}

/// A 1-D convolution as 2-D of height 1: dims get a unit axis 2, windows a
/// leading unit entry (`fill`).
fn two_d(dims: &[usize]) -> Vec<usize> {
    if dims.len() == 3 {
        vec![dims[0], dims[1], 1, dims[2]]
    } else {
        dims.to_vec()
    }
}

fn lead(v: Vec<usize>, fill: usize) -> Vec<usize> {
    if v.len() == 1 {
        vec![fill, v[0]]
    } else {
        v
    }
}

fn elem_bytes(d: DType) -> u64 {
    d.size() as u64
}

/// The plan of a forward convolution (pure: no launches), for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// Explicit padding first: (padded dims, per-dim leading pad).
    pub pad: Option<(Vec<usize>, Vec<usize>)>,
    pub x_dims: Vec<usize>,
    pub w_dims: Vec<usize>,
    pub y_dims: Vec<usize>,
    pub pads: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub groups: usize,
    pub workspace: u64,
}

/// Resolves a forward convolution over `x`, `w` giving `y` (ONNX dims).
pub fn plan_forward(
    c: &ConvOp,
    x: &[usize],
    w: &[usize],
    y: &[usize],
    elem: u64,
) -> LResult<Forward> {
    let sp = x.len().saturating_sub(2);
    if !(1..=3).contains(&sp) || w.len() != x.len() || y.len() != x.len() {
        return Err(format!("conv over {sp} spatial dims has no cuda kernel"));
    }
    let groups = usize::try_from(c.group)
        .ok()
        .filter(|&g| g >= 1)
        .ok_or("conv group must be positive")?;
    if x[1] != w[1] * groups || w[0] != y[1] || !y[1].is_multiple_of(groups) {
        return Err(format!(
            "conv weights {w:?} do not fit input {x:?} and output {y:?} in {groups} groups"
        ));
    }
    let (begin, end, strides, dilations) = window(c, x, w)?;
    let sym: Vec<usize> = begin.iter().zip(&end).map(|(&b, &e)| b.min(e)).collect();
    let extra_b: Vec<usize> = begin.iter().zip(&sym).map(|(b, s)| b - s).collect();
    let extra_e: Vec<usize> = end.iter().zip(&sym).map(|(e, s)| e - s).collect();
    let mut xd = two_d(x);
    let pad = if extra_b.iter().chain(&extra_e).any(|&v| v > 0) {
        let lb = lead(extra_b.clone(), 0);
        let le = lead(extra_e, 0);
        let mut padded = xd.clone();
        for i in 0..padded.len() - 2 {
            padded[i + 2] += lb[i] + le[i];
        }
        let mut at = vec![0, 0];
        at.extend(lb);
        xd = padded.clone();
        Some((padded, at))
    } else {
        None
    };
    let wd = two_d(w);
    let yd = two_d(y);
    let strides = lead(strides, 1);
    let dilations = lead(dilations, 1);
    let pads = lead(sym, 0);
    // Output sizes as cuDNN computes them must match the IR's.
    for i in 0..yd.len() - 2 {
        let ext = (wd[i + 2] - 1) * dilations[i] + 1;
        let span = (xd[i + 2] + 2 * pads[i]).checked_sub(ext);
        if span.map(|s| s / strides[i] + 1) != Some(yd[i + 2]) {
            return Err(format!(
                "conv output {y:?} does not follow from input {x:?} and weights {w:?}"
            ));
        }
    }
    let cols: u64 =
        (w[1] * w[2..].iter().product::<usize>()) as u64 * y[2..].iter().product::<usize>() as u64;
    let unfolded = cols * x[0] as u64 * groups as u64 * elem;
    Ok(Forward {
        pad,
        x_dims: xd,
        w_dims: wd,
        y_dims: yd,
        pads,
        strides,
        dilations,
        groups,
        workspace: (2 * unfolded).clamp(MIN_WORKSPACE, MAX_WORKSPACE),
    })
}

/// Emits the zero-padding kernel from `x` into a new scratch range.
fn pad(
    cx: &mut Cx,
    x: Range,
    in_dims: &[usize],
    out_dims: &[usize],
    begin: &[usize],
    elem: u64,
) -> LResult<Range> {
    let n: usize = out_dims.iter().product();
    let dst = cx.scratch(n as u64 * elem);
    let mut p = PadParams {
        n: u32_of(n, "a padded conv input")?,
        rank: out_dims.len() as u32,
        ..PadParams::default()
    };
    for i in 0..out_dims.len() {
        p.out_dims[i] = u32_of(out_dims[i], "a dim")?;
        p.in_dims[i] = u32_of(in_dims[i], "a dim")?;
        p.begin[i] = u32_of(begin[i], "a pad")?;
    }
    let m = cx.modules.of(&SOURCE);
    let entry = match elem {
        2 => "conv_pad_2",
        4 => "conv_pad_4",
        _ => "conv_pad_8",
    };
    cx.kernel_params(
        m,
        entry,
        (n as u64).div_ceil(256).clamp(1, 65535 * 16),
        256,
        vec![dst, x],
        &p,
    );
    Ok(dst)
}

/// The GEMM form of a convolution, if the plan options and its shape let
/// it run as one: 1-D or 2-D, not depthwise, a dtype cuBLASLt multiplies,
/// and unfolded images within [`MAX_COLUMNS`].
fn gemm_form(cx: &Cx, c: &ConvOp, x: &Operand, w: &Operand, y: &Operand) -> Option<Conv2d> {
    let mode = cx.opts.conv_gemm;
    if mode == ConvGemm::Never
        || !matches!(x.dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    {
        return None;
    }
    let g = conv2d(c, &x.dims, &w.dims, &y.dims).ok()?;
    let cols = (g.n * g.c * g.kh * g.kw * g.positions()) as u64 * elem_bytes(x.dtype);
    let fits = g.pointwise || (mode == ConvGemm::All && cols <= MAX_COLUMNS);
    // Depthwise ones (one input channel per group) stay with cuDNN: their
    // GEMMs would be a column wide.
    let grouping = g.groups == 1 || g.c / g.groups > 1;
    (grouping && fits && g.positions() > 0 && g.c > 0).then_some(g)
}

/// Lowers `g` as im2col (unless pointwise), one batched GEMM, and the
/// epilogue kernel for the bias and activation.
fn gemm(
    cx: &mut Cx,
    g: &Conv2d,
    (x, w, y): (&Operand, &Operand, &Operand),
    (bias, residual): (Option<&Operand>, Option<&Operand>),
    act: Activation,
) -> LResult<()> {
    let elem = elem_bytes(x.dtype);
    let (k, p) = (g.c * g.kh * g.kw, g.positions());
    let image = (g.c * g.h * g.w) as u64 * elem;
    let (b, stride_b) = if g.pointwise {
        (x.range(), g.c * p)
    } else {
        let per = (k * p) as u64 * elem;
        let cols = cx.scratch(g.n as u64 * per);
        let params = g.im2col(0, p)?;
        let m = cx.modules.of(&SOURCE);
        let entry = match elem {
            2 => "conv_im2col_2",
            4 => "conv_im2col_4",
            _ => "conv_im2col_8",
        };
        for i in 0..g.n as u64 {
            let xi = Range {
                offset: x.at + i * image,
                bytes: image,
            };
            let ci = Range {
                offset: cols.offset + i * per,
                bytes: per,
            };
            // Rows along y (at most the grid's 65535; the kernel strides
            // past them), columns along x in blocks of up to 256 threads
            // (whole warps; fewer when a row is short).
            let rows = (k as u64).min(65535) as u32;
            let threads = (p.next_multiple_of(32) as u32).clamp(32, BLOCK);
            let across = u32_of(p.div_ceil(threads as usize), "im2col blocks")?;
            cx.push(Launch::Kernel(KernelLaunch {
                module: m,
                entry: entry.to_string(),
                grid: [across, rows, 1],
                block: [threads, 1, 1],
                shared: 0,
                operands: vec![xi, ci],
                params: ParamBlock::of(&params),
                node: String::new(),
                origin: Vec::new(),
            }));
        }
        (cols, k * p)
    };
    // cuBLASLt's bias runs along n (the positions here): the bias along
    // the output channels and the activation go to the epilogue kernel.
    // Ungrouped: one GEMM batched over the images. Grouped: per image, one
    // GEMM batched over the groups (each group's rows of the columns, of
    // the weights and of the output lie together).
    let (gr, mg) = (g.groups, g.cout / g.groups);
    let kg = k / gr;
    let gemm = |a: Range, b: Range, c: Range, batch: usize, strides: [usize; 3]| {
        Launch::Gemm(GemmLaunch {
            gemm: Gemm {
                m: mg as u64,
                n: p as u64,
                k: kg as u64,
                trans_a: false,
                trans_b: false,
                lda: kg as u64,
                ldb: p as u64,
                ldc: p as u64,
                batch: batch as u64,
                stride_a: strides[0] as u64,
                stride_b: strides[1] as u64,
                stride_c: strides[2] as u64,
                a,
                b,
                c,
                bias: None,
                act: GemmAct::None,
                dtype: x.dtype,
            },
            node: String::new(),
            origin: Vec::new(),
        })
    };
    if gr == 1 {
        cx.push(gemm(
            w.range(),
            b,
            y.range(),
            g.n,
            [0, stride_b, g.cout * p],
        ));
    } else {
        let (b_bytes, y_bytes) = (stride_b as u64 * elem, (g.cout * p) as u64 * elem);
        for i in 0..g.n as u64 {
            let bi = Range {
                offset: b.offset + i * b_bytes,
                bytes: b_bytes,
            };
            let yi = Range {
                offset: y.at + i * y_bytes,
                bytes: y_bytes,
            };
            cx.push(gemm(w.range(), bi, yi, gr, [mg * kg, kg * p, mg * p]));
        }
    }
    channel_epilogue(cx, y, bias, residual, act)
}

/// The epilogue kernel over a convolution's output `y`: a bias per output
/// channel (if any), the residual (if any), then `act`.
fn channel_epilogue(
    cx: &mut Cx,
    y: &Operand,
    bias: Option<&Operand>,
    residual: Option<&Operand>,
    act: Activation,
) -> LResult<()> {
    let bias = bias.map(|b| {
        let mut d = vec![1; y.dims.len()];
        d[1] = b.numel();
        (b.range(), d)
    });
    epilogue::emit(
        cx,
        y.dtype,
        y.range(),
        &y.dims,
        bias.as_ref().map(|(r, d)| (*r, d.as_slice())),
        residual.map(|r| r.range()),
        act,
    )
}

fn forward(cx: &mut Cx, c: &ConvOp, act: Activation) -> LResult<()> {
    let (x, w, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = cx.io.ins.get(2).cloned();
    let residual = cx.io.ins.get(3).cloned();
    if let Some(b) = bias.as_ref().filter(|b| Some(&b.numel()) != y.dims.get(1)) {
        return Err(format!(
            "a bias of {} values for a conv output {:?}",
            b.numel(),
            y.dims
        ));
    }
    if let Some(r) = &residual {
        if r.dims != y.dims || r.dtype != y.dtype {
            return Err(format!(
                "a residual {:?} {} for a conv output {:?} {}",
                r.dims, r.dtype, y.dims, y.dtype
            ));
        }
    }
    if let Some(g) = gemm_form(cx, c, &x, &w, &y) {
        return gemm(
            cx,
            &g,
            (&x, &w, &y),
            (bias.as_ref(), residual.as_ref()),
            act,
        );
    }
    let elem = elem_bytes(x.dtype);
    let f = plan_forward(c, &x.dims, &w.dims, &y.dims, elem)?;
    let mut xr = x.range();
    if let Some((padded, begin)) = &f.pad {
        xr = pad(cx, xr, &two_d(&x.dims), padded, begin, elem)?;
    }
    let workspace = cx.scratch(f.workspace);
    // f32: the bias (and a ReLU after it) in cuDNN's fused call.
    let fused_bias = x.dtype == DType::F32
        && bias.is_some()
        && residual.is_none()
        && cx.opts.conv_epilogue == crate::plan::ConvEpilogue::Cudnn;
    let relu = fused_bias && act == Activation::Relu;
    cx.push(Launch::Conv(ConvLaunch {
        conv: Conv {
            kind: ConvKind::Forward,
            dtype: x.dtype,
            x_dims: f.x_dims,
            w_dims: f.w_dims,
            y_dims: f.y_dims.clone(),
            pads: f.pads,
            strides: f.strides,
            dilations: f.dilations,
            groups: f.groups,
            x: xr,
            w: w.range(),
            y: y.range(),
            bias: bias.as_ref().filter(|_| fused_bias).map(|b| b.range()),
            relu,
            workspace,
        },
        node: String::new(),
        origin: Vec::new(),
    }));
    let rest_act = if relu { Activation::None } else { act };
    let rest_bias = bias.as_ref().filter(|_| !fused_bias);
    channel_epilogue(cx, &y, rest_bias, residual.as_ref(), rest_act)
}

/// ConvTranspose as cuDNN's backward data: the forward convolution from the
/// output (dx) to the input (dy) has the same weights `[C, M/g, k...]`
/// (cuDNN's filter `[K = C, C' = M/g]` of a forward from M to C channels).
/// cuDNN takes symmetric pads and no output padding: the full output
/// (pads 0) goes to scratch and the planned window is cropped out of it
/// unless the pads are symmetric and the sizes follow exactly.
fn transpose(cx: &mut Cx, t: &ConvTranspose) -> LResult<()> {
    let (x, w, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = cx.io.ins.get(2).cloned();
    let elem = elem_bytes(x.dtype);
    let tp = plan_transpose(t, &x.dims, &w.dims, &y.dims)?;
    let full_bytes = tp.full_dims.iter().product::<usize>() as u64 * elem;
    let target = if tp.crop.is_some() {
        cx.scratch(full_bytes)
    } else {
        y.range()
    };
    let workspace = cx.scratch(tp.workspace(elem));
    cx.push(Launch::Conv(ConvLaunch {
        conv: Conv {
            kind: ConvKind::Transpose,
            dtype: x.dtype,
            x_dims: two_d(&x.dims),
            w_dims: two_d(&w.dims),
            y_dims: tp.full_dims.clone(),
            pads: tp.pads.clone(),
            strides: tp.strides.clone(),
            dilations: tp.dilations.clone(),
            groups: tp.groups,
            x: x.range(),
            w: w.range(),
            y: target,
            bias: None,
            relu: false,
            workspace,
        },
        node: String::new(),
        origin: Vec::new(),
    }));
    if let Some(begin) = &tp.crop {
        // The crop is a pad with negative begins: copy the window back.
        crop(
            cx,
            target,
            &tp.full_dims,
            y.range(),
            &two_d(&y.dims),
            begin,
            elem,
        )?;
    }
    channel_epilogue(cx, &y, bias.as_ref(), None, Activation::None)
}

/// A transposed convolution resolved for cuDNN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transpose {
    /// What cuDNN writes (4-D or 5-D): the output before the crop.
    pub full_dims: Vec<usize>,
    pub pads: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub groups: usize,
    /// `Some(begin)`: the output is the window at `begin` of the full one.
    pub crop: Option<Vec<usize>>,
}

impl Transpose {
    fn workspace(&self, elem: u64) -> u64 {
        (2 * self.full_dims.iter().product::<usize>() as u64 * elem)
            .clamp(MIN_WORKSPACE, MAX_WORKSPACE)
    }
}

pub fn plan_transpose(
    t: &ConvTranspose,
    x: &[usize],
    w: &[usize],
    y: &[usize],
) -> LResult<Transpose> {
    let sp = x.len().saturating_sub(2);
    if !(1..=3).contains(&sp) || w.len() != x.len() || y.len() != x.len() {
        return Err(format!(
            "conv_transpose over {sp} spatial dims has no cuda kernel"
        ));
    }
    let groups = usize::try_from(t.group)
        .ok()
        .filter(|&g| g >= 1)
        .ok_or("group must be positive")?;
    if x[1] != w[0] || w[1] * groups != y[1] || !x[1].is_multiple_of(groups) {
        return Err(format!(
            "weights {w:?} do not fit input {x:?} and output {y:?}"
        ));
    }
    let input: Vec<i64> = x[2..].iter().map(|&d| d as i64).collect();
    let kernel: Vec<i64> = w[2..].iter().map(|&d| d as i64).collect();
    let (pads, out) = t.resolve(&input, &kernel);
    if out.iter().zip(&y[2..]).any(|(&a, &b)| a != b as i64) {
        return Err(format!(
            "conv_transpose output sizes {out:?} differ from the planned {:?}",
            &y[2..]
        ));
    }
    let or_ones = |v: &[i64]| {
        if v.is_empty() {
            vec![1; sp]
        } else {
            v.to_vec()
        }
    };
    let (st, dl) = (or_ones(&t.strides), or_ones(&t.dilations));
    let mut full = vec![y[0], y[1]];
    let mut sym = Vec::with_capacity(sp);
    let mut begin = vec![0, 0];
    let mut exact = true;
    for i in 0..sp {
        let (s, d) = (st[i].max(1) as usize, dl[i].max(1) as usize);
        let whole = (x[2 + i] - 1) * s + (w[2 + i] - 1) * d + 1;
        let (pb, pe) = (pads[i], pads[i + sp]);
        if pb >= 0 && pb == pe && whole as i64 - 2 * pb == y[2 + i] as i64 {
            sym.push(pb as usize);
            full.push(y[2 + i]);
            begin.push(0);
        } else {
            // Negative pads (an output larger than the full size) and output
            // padding put zeros past the full output: cuDNN writes the full
            // output, padded at the end to cover the window.
            exact = false;
            sym.push(0);
            let b = usize::try_from(pb)
                .map_err(|_| "a negative leading pad of conv_transpose has no cuda kernel")?;
            full.push(whole.max(b + y[2 + i]));
            begin.push(b);
        }
    }
    let strides: Vec<usize> = st.iter().map(|&v| v.max(1) as usize).collect();
    let dilations: Vec<usize> = dl.iter().map(|&v| v.max(1) as usize).collect();
    // cuDNN's backward data computes dx of the size whose forward gives dy:
    // with an end padding past the full size the dx extent is larger than
    // any forward output maps from dy, which cuDNN accepts only when
    // floor((full + 2p - ext) / s) + 1 == x; check it.
    for i in 0..sp {
        let ext = (w[2 + i] - 1) * dilations[i] + 1;
        let span = (full[2 + i] + 2 * sym[i]).checked_sub(ext);
        if span.map(|v| v / strides[i] + 1) != Some(x[2 + i]) {
            return Err(format!(
                "conv_transpose with output padding of {:?} past a stride has no cuda kernel",
                &y[2..]
            ));
        }
    }
    Ok(Transpose {
        full_dims: two_d(&full),
        pads: lead(sym, 0),
        strides: lead(strides, 1),
        dilations: lead(dilations, 1),
        groups,
        crop: (!exact).then(|| {
            if begin.len() == 3 {
                vec![0, 0, 0, begin[2]]
            } else {
                begin
            }
        }),
    })
}

/// Copies the window at `begin` of `src` (`src_dims`) into `dst` (`dst_dims`).
#[allow(clippy::too_many_arguments)]
fn crop(
    cx: &mut Cx,
    src: Range,
    src_dims: &[usize],
    dst: Range,
    dst_dims: &[usize],
    begin: &[usize],
    elem: u64,
) -> LResult<()> {
    let n: usize = dst_dims.iter().product();
    let mut p = CropParams {
        n: u32_of(n, "a conv_transpose output")?,
        rank: dst_dims.len() as u32,
        ..CropParams::default()
    };
    for i in 0..dst_dims.len() {
        p.out_dims[i] = u32_of(dst_dims[i], "a dim")?;
        p.in_dims[i] = u32_of(src_dims[i], "a dim")?;
        p.begin[i] = u32_of(begin[i], "an offset")?;
    }
    let m = cx.modules.of(&SOURCE);
    let entry = match elem {
        2 => "conv_crop_2",
        4 => "conv_crop_4",
        _ => "conv_crop_8",
    };
    cx.kernel_params(
        m,
        entry,
        (n as u64).div_ceil(256).clamp(1, 65535 * 16),
        256,
        vec![dst, src],
        &p,
    );
    Ok(())
}

rlx_gpu::kernel_params! {
    /// A window of a 4-D or 5-D value: output element `o` copies input
    /// `o + begin` per dim, or is zero past the input's end.
    pub struct CropParams {
        /// Output elements.
        pub n: u32,
        /// Dims in use (4 or 5).
        pub rank: u32,
        pub out_dims: [u32; 5],
        pub in_dims: [u32; 5],
        pub begin: [u32; 5],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(strides: &[i64], pads: &[i64], group: i64) -> ConvOp {
        ConvOp {
            strides: strides.to_vec(),
            dilations: vec![1; strides.len()],
            pads: pads.to_vec(),
            auto_pad: AutoPad::NotSet,
            group,
        }
    }

    #[test]
    fn symmetric_pads_go_to_cudnn() {
        let f = plan_forward(
            &conv(&[2, 2], &[3, 3, 3, 3], 1),
            &[1, 3, 224, 224],
            &[64, 3, 7, 7],
            &[1, 64, 112, 112],
            4,
        )
        .unwrap();
        assert_eq!(f.pad, None);
        assert_eq!(
            (f.pads.clone(), f.strides.clone()),
            (vec![3, 3], vec![2, 2])
        );
        assert_eq!(f.workspace, MIN_WORKSPACE.max(2 * 3 * 49 * 112 * 112 * 4));
    }

    #[test]
    fn asymmetric_pads_pad_explicitly_and_one_d_gets_a_height() {
        // pads begin 2, end 1: cuDNN pads 1, one more zero column in front.
        let f = plan_forward(
            &conv(&[1], &[2, 1], 1),
            &[2, 4, 10],
            &[6, 4, 3],
            &[2, 6, 11],
            4,
        )
        .unwrap();
        assert_eq!(f.x_dims, vec![2, 4, 1, 11]);
        assert_eq!(f.pad, Some((vec![2, 4, 1, 11], vec![0, 0, 0, 1])));
        assert_eq!(
            (f.pads.clone(), f.w_dims.clone(), f.y_dims.clone()),
            (vec![0, 1], vec![6, 4, 1, 3], vec![2, 6, 1, 11])
        );
        assert!(plan_forward(
            &conv(&[1], &[2, 1], 1),
            &[2, 4, 10],
            &[6, 4, 3],
            &[2, 6, 12],
            4
        )
        .is_err());
        assert!(plan_forward(
            &conv(&[1, 1], &[0; 4], 3),
            &[1, 4, 5, 5],
            &[6, 2, 1, 1],
            &[1, 6, 5, 5],
            4
        )
        .is_err());
    }

    #[test]
    fn transposes_crop_when_cudnn_cannot_pad() {
        let ct = |pads: &[i64], op: &[i64]| ConvTranspose {
            strides: vec![2, 2],
            dilations: vec![1, 1],
            pads: pads.to_vec(),
            auto_pad: AutoPad::NotSet,
            group: 1,
            output_padding: op.to_vec(),
            output_shape: vec![],
        };
        let t = plan_transpose(
            &ct(&[1, 1, 1, 1], &[0, 0]),
            &[1, 2, 4, 4],
            &[2, 3, 3, 3],
            &[1, 3, 7, 7],
        )
        .unwrap();
        assert_eq!((t.crop.clone(), t.pads.clone()), (None, vec![1, 1]));
        assert_eq!(t.full_dims, vec![1, 3, 7, 7]);
        // Asymmetric pads: the full 9x9 output, cropped at (1, 0).
        let t = plan_transpose(
            &ct(&[1, 0, 0, 0], &[0, 0]),
            &[1, 2, 4, 4],
            &[2, 3, 3, 3],
            &[1, 3, 8, 9],
        )
        .unwrap();
        assert_eq!(t.full_dims, vec![1, 3, 9, 9]);
        assert_eq!(t.crop, Some(vec![0, 0, 1, 0]));
    }
}
