//! The CUDA schedule: plain data that the device half executes. One device
//! buffer holds the arena, the constants, loop state and a scratch area (laid
//! out by rlx-gpu's planner); every launch is an NVRTC-compiled kernel of a
//! [`Module`] (operand pointers into the buffer, then its typed parameter
//! struct by value), a cuBLASLt GEMM ([`Gemm`]) or a cuDNN convolution
//! ([`Conv`]). Control flow is rlx-gpu's
//! [`Step`] tree.

use std::fmt;

use rlx_gpu::schedule::{fmt_slots, fmt_steps};
use rlx_gpu::{ParamBlock, Params};
use rlx_ir::DType;

use crate::kernels::tile_gemm::TileGemmParams;

pub use rlx_gpu::{ConstBlock, IoSlot, Range, Step, Trip};

/// A CUDA source module: a kernel family, compiled once by NVRTC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub name: String,
    /// Complete CUDA C: prelude, parameter structs (with their checks), kernels.
    pub source: String,
    /// PTX compiled ahead of time (from an artifact): loaded instead of
    /// compiling `source` when the device runs its architecture.
    pub ptx: Option<String>,
}

/// A kernel launch: `entry` of module `module` over `grid` x `block`, given
/// a pointer to the start of each operand range, then `params` by value.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelLaunch {
    pub module: usize,
    pub entry: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Dynamic shared memory bytes a block (0: the kernel's static arrays only).
    pub shared: u32,
    pub operands: Vec<Range>,
    pub params: ParamBlock,
    pub node: String,
    pub origin: Vec<String>,
}

/// The activation of a GEMM's cuBLASLt epilogue (GELU is cuBLASLt's tanh
/// approximation, so only `gelu_tanh` lowers to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GemmAct {
    None,
    Relu,
    GeluTanh,
}

/// One fp32 GEMM in row-major terms, batched with constant strides:
/// `C[m,n] = act(op(A)[m,k] * op(B)[k,n] (+ bias[n]))` for each of
/// `batch` matrices. `A` is `[m,k]` with row stride `lda` (`[k,m]` when
/// `trans_a`), `B` is `[k,n]` with row stride `ldb` (`[n,k]` when
/// `trans_b`), `C` is `[m,n]` with row stride `ldc`; strides are in
/// elements, a batch stride of 0 repeats the operand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gemm {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub trans_a: bool,
    pub trans_b: bool,
    pub lda: u64,
    pub ldb: u64,
    pub ldc: u64,
    pub batch: u64,
    pub stride_a: u64,
    pub stride_b: u64,
    pub stride_c: u64,
    pub a: Range,
    pub b: Range,
    pub c: Range,
    /// A row vector of `n` elements of C's dtype added to every row of C
    /// (every batch), in the f32 compute type.
    pub bias: Option<Range>,
    pub act: GemmAct,
    /// The element dtype of A, B and C: f32 (computed in exact fp32), f16
    /// or bf16 (f32 compute and accumulation), or f64.
    pub dtype: DType,
}

impl fmt::Display for Gemm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = |b: bool| if b { "t" } else { "n" };
        write!(
            f,
            "m={} n={} k={} op={}{} lda={} ldb={} ldc={} batch={} strides=[{},{},{}] a={} b={} c={}",
            self.m,
            self.n,
            self.k,
            t(self.trans_a),
            t(self.trans_b),
            self.lda,
            self.ldb,
            self.ldc,
            self.batch,
            self.stride_a,
            self.stride_b,
            self.stride_c,
            self.a,
            self.b,
            self.c
        )?;
        if let Some(b) = self.bias {
            write!(f, " bias={b}")?;
        }
        match self.act {
            GemmAct::None => {}
            GemmAct::Relu => f.write_str(" relu")?,
            GemmAct::GeluTanh => f.write_str(" gelu_tanh")?,
        }
        Ok(())
    }
}

/// A cuBLASLt GEMM launch.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmLaunch {
    pub gemm: Gemm,
    pub node: String,
    pub origin: Vec<String>,
}

/// Which cuDNN convolution a [`Conv`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvKind {
    /// `y = conv(x, w)` (cudnnConvolutionForward).
    Forward,
    /// `y = conv_transpose(x, w)`: the data gradient of a forward
    /// convolution from `y` to `x` (cudnnConvolutionBackwardData), with `x`
    /// as dy and `y` as dx.
    Transpose,
}

/// One cuDNN convolution in NCHW (NCDHW) layout, plain data: dims of `x`,
/// `w` and `y` (4-D or 5-D: a 1-D convolution runs as 2-D of height 1),
/// symmetric pads, strides and dilations per spatial dim, the group count
/// and the element type. `bias` (one per output channel) is added and
/// `relu` applied after the convolution. `workspace` is scratch the device
/// half chooses an algorithm to fit (once, when the executable is built).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv {
    pub kind: ConvKind,
    pub dtype: DType,
    pub x_dims: Vec<usize>,
    pub w_dims: Vec<usize>,
    pub y_dims: Vec<usize>,
    pub pads: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub groups: usize,
    pub x: Range,
    pub w: Range,
    pub y: Range,
    pub bias: Option<Range>,
    pub relu: bool,
    pub workspace: Range,
}

impl fmt::Display for Conv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} x={:?} w={:?} y={:?} pads={:?} strides={:?} dilations={:?} groups={} x@{} w@{} y@{}",
            self.dtype,
            self.x_dims,
            self.w_dims,
            self.y_dims,
            self.pads,
            self.strides,
            self.dilations,
            self.groups,
            self.x,
            self.w,
            self.y
        )?;
        if let Some(b) = self.bias {
            write!(f, " bias@{b}")?;
        }
        if self.relu {
            f.write_str(" relu")?;
        }
        write!(f, " workspace@{}", self.workspace)
    }
}

/// A cuDNN convolution launch.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvLaunch {
    pub conv: Conv,
    pub node: String,
    pub origin: Vec<String>,
}

/// The parameters of a tile GEMM launch (its work is in flops, not bytes).
fn tile_gemm_params(k: &KernelLaunch) -> Option<TileGemmParams> {
    if k.params.layout.name != TileGemmParams::LAYOUT.name {
        return None;
    }
    bytemuck::try_pod_read_unaligned(&k.params.bytes).ok()
}

/// One launch of the schedule.
#[derive(Debug, Clone, PartialEq)]
pub enum Launch {
    Kernel(KernelLaunch),
    Gemm(GemmLaunch),
    Conv(ConvLaunch),
}

impl Launch {
    pub fn node(&self) -> &str {
        match self {
            Launch::Kernel(k) => &k.node,
            Launch::Gemm(g) => &g.node,
            Launch::Conv(c) => &c.node,
        }
    }

    pub fn origin(&self) -> &[String] {
        match self {
            Launch::Kernel(k) => &k.origin,
            Launch::Gemm(g) => &g.origin,
            Launch::Conv(c) => &c.origin,
        }
    }

    /// The work of the launch (2 flops per multiply-add).
    pub fn work(&self) -> Work {
        let prod = |d: &[usize]| d.iter().map(|&v| v as u64).product::<u64>();
        match self {
            Launch::Kernel(k) => match tile_gemm_params(k) {
                Some(p) => Work::Flops(2 * p.macs()),
                None => Work::Bytes(k.operands.iter().map(|r| r.bytes).sum()),
            },
            Launch::Gemm(g) => {
                let g = &g.gemm;
                Work::Flops(2 * g.m * g.n * g.k * g.batch)
            }
            Launch::Conv(c) => {
                let c = &c.conv;
                // Every output (forward) or input (transposed) element takes
                // one filter's worth of multiply-adds.
                let taps = prod(&c.w_dims[1..]);
                let outs = match c.kind {
                    ConvKind::Forward => prod(&c.y_dims),
                    ConvKind::Transpose => prod(&c.x_dims),
                };
                Work::Flops(2 * outs * taps)
            }
        }
    }

    /// What a profile calls the launch: the kernel's entry point, or the
    /// library call with its size.
    pub fn label(&self) -> String {
        match self {
            Launch::Kernel(k) => k.entry.clone(),
            Launch::Gemm(g) => {
                let g = &g.gemm;
                format!("gemm {}x{}x{} batch {}", g.m, g.n, g.k, g.batch)
            }
            Launch::Conv(c) => {
                let c = &c.conv;
                let kind = match c.kind {
                    ConvKind::Forward => "conv",
                    ConvKind::Transpose => "conv_transpose",
                };
                format!("cudnn {kind} {:?} -> {:?}", c.x_dims, c.y_dims)
            }
        }
    }
}

/// What a launch does, for the rate a profile reports: arithmetic of a GEMM
/// or convolution, bytes of a kernel's operands (each read or written once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    Flops(u64),
    Bytes(u64),
}

impl Work {
    /// The achieved rate over `secs`: `812 GFLOP/s` or `95 GB/s`.
    pub fn rate(self, secs: f64) -> String {
        let per = |v: u64| v as f64 / secs.max(1e-12) / 1e9;
        match self {
            Work::Flops(f) => format!("{:.0} GFLOP/s", per(f)),
            Work::Bytes(b) => format!("{:.0} GB/s", per(b)),
        }
    }
}

/// A complete CUDA schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub modules: Vec<Module>,
    /// Every launch, top level and bodies; [`Schedule::steps`] orders them.
    pub launches: Vec<Launch>,
    pub steps: Vec<Step>,
    pub consts: Vec<ConstBlock>,
    pub inputs: Vec<IoSlot>,
    pub outputs: Vec<IoSlot>,
    /// Bytes of the memory plan's arena (at offset 0 of the buffer).
    pub arena_bytes: u64,
    /// Bytes of the whole device buffer: arenas, constants, loop state, scratch.
    pub buffer_bytes: u64,
    /// f32 GEMMs and convolutions may use TF32 tensor cores.
    pub tf32: bool,
}

impl Schedule {
    fn fmt_launch(&self, f: &mut fmt::Formatter<'_>, i: usize) -> fmt::Result {
        match self.launches.get(i) {
            Some(Launch::Kernel(k)) => {
                let module = self.modules.get(k.module).map_or("?", |m| m.name.as_str());
                let ops: Vec<String> = k.operands.iter().map(|r| r.to_string()).collect();
                let shared = match k.shared {
                    0 => String::new(),
                    b => format!(" shared={b}"),
                };
                write!(
                    f,
                    "{i:>3} {module}.{} grid={:?} block={:?}{shared} operands={} {{{}}}  # {}",
                    k.entry,
                    k.grid,
                    k.block,
                    ops.join(""),
                    k.params,
                    k.origin.join(", ")
                )
            }
            Some(Launch::Gemm(g)) => write!(
                f,
                "{i:>3} cublaslt.gemm_{} {{{}}}  # {}",
                g.gemm.dtype,
                g.gemm,
                g.origin.join(", ")
            ),
            Some(Launch::Conv(c)) => write!(
                f,
                "{i:>3} cudnn.{} {{{}}}  # {}",
                match c.conv.kind {
                    ConvKind::Forward => "conv",
                    ConvKind::Transpose => "conv_transpose",
                },
                c.conv,
                c.origin.join(", ")
            ),
            None => write!(f, "{i:>3} ?"),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cbytes: u64 = self.consts.iter().map(|c| c.bytes.len() as u64).sum();
        let gemms = self
            .launches
            .iter()
            .filter(|l| matches!(l, Launch::Gemm(_)))
            .count();
        writeln!(
            f,
            "cuda schedule: {} launches ({} gemms), {} modules, buffer {} bytes (arena {}, constants {} in {} blocks){}",
            self.launches.len(),
            gemms,
            self.modules.len(),
            self.buffer_bytes,
            self.arena_bytes,
            cbytes,
            self.consts.len(),
            if self.tf32 { ", tf32" } else { "" }
        )?;
        for (i, m) in self.modules.iter().enumerate() {
            writeln!(
                f,
                "  module {i} {} ({} bytes of CUDA C{})",
                m.name,
                m.source.len(),
                if m.ptx.is_some() {
                    ", PTX prebuilt"
                } else {
                    ""
                }
            )?;
        }
        fmt_slots(f, "input", &self.inputs)?;
        fmt_steps(f, &self.steps, 1, &mut |f, i| self.fmt_launch(f, i))?;
        fmt_slots(f, "output", &self.outputs)
    }
}
