//! The CUDA plan: rlx-gpu's planner lays the graph out in one device buffer
//! and walks it, control flow included; this file supplies the CUDA
//! [`Lowering`] (a node's kernels or cuBLASLt GEMMs, the slab-copy and
//! counter kernels) and attaches each launch's node. Pure: no device.

use rlx_gpu::control::SlabCopy;
use rlx_gpu::geometry::LResult;
use rlx_gpu::{Lowered, Lowering, NodeIo, PlanError, Planned, Range};
use rlx_ir::{Graph, Node, Weights};
use rlx_passes::memory::MemoryPlan;

use crate::kernels::{control, lower, Cx, Modules};
use crate::schedule::{Launch, Schedule};
use crate::CudaError;

/// Lowering choices where more than one exact form exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanOptions {
    pub conv_epilogue: ConvEpilogue,
    pub conv_gemm: ConvGemm,
    pub small_gemm: SmallGemm,
    pub few_rows: FewRows,
    /// f32 GEMMs and convolutions may use TF32 tensor cores (cuBLASLt's
    /// `COMPUTE_32F_FAST_TF32`, cuDNN's tensor-op math): faster, with a
    /// 10-bit mantissa in the products. Off: exact fp32.
    pub tf32: bool,
    pub attention: AttentionKernel,
    /// How the executable launches kernels (not a plan choice: the same
    /// schedule runs either way).
    pub launch: KernelLaunch,
}

/// How consecutive kernels of an executable are launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelLaunch {
    /// Programmatic dependent launch where the device has it (compute
    /// capability 9.0 and newer): a kernel's blocks are placed while the
    /// kernel before it finishes, and wait for it on the device (every rlx
    /// kernel's first statement), which hides most of the launch latency
    /// between short kernels. Library kernels (cuBLASLt, cuDNN) and older
    /// devices keep plain launches. The default.
    #[default]
    Overlapped,
    /// Every kernel launched when the one before it has finished.
    Serial,
}

/// Which kernel runs an attention that both can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttentionKernel {
    /// The tiled kernel (K/V tiles through shared memory, a block per query
    /// tile; tensor cores for f16/bf16), its query tiles chosen by the grid
    /// they make: for f16/bf16, 64-row tiles, or 16-row ones whose four
    /// warps split the keys where 64-row tiles would make fewer than
    /// [`FEW_BLOCKS`](crate::kernels::attention::FEW_BLOCKS) blocks. The default.
    #[default]
    Tiled,
    /// The tiled kernel with 64-row tiles (f16/bf16) whatever the grid.
    TiledWide,
    /// The tiled kernel with key-split 16-row tiles (f16/bf16) whatever
    /// the grid.
    TiledSplit,
    /// The row kernel (a warp per query row), as before the tiled one: kept
    /// for the QK output and f64, and to compare against.
    Rows,
}

/// Which convolutions run as a cuBLASLt GEMM (their bias and ReLU in its
/// epilogue) instead of through cuDNN. Only ungrouped 1-D and 2-D ones can.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConvGemm {
    /// Every convolution through cuDNN.
    Never,
    /// Pointwise ones (1x1, stride 1, no pads): the image is the GEMM's B
    /// as it lies, so the GEMM is the whole convolution.
    Pointwise,
    /// Also the others, unfolded by an im2col kernel into scratch first
    /// (when the unfolded images fit in [`crate::kernels::conv::MAX_COLUMNS`]).
    /// The default: on the H100 at batch 1 in fp32, ResNet-50 runs in 1.2 ms
    /// this way, 2.2 ms with pointwise GEMMs and 3.2 ms all in cuDNN
    /// (`scripts/gpu-check.sh ab`).
    #[default]
    All,
}

/// Where a MatMul too small for a library call to pay its way runs: at most
/// [`MAX_MACS`](crate::kernels::tile_gemm::MAX_MACS) multiply-adds with an
/// inner dim of at most [`MAX_K`](crate::kernels::tile_gemm::MAX_K).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SmallGemm {
    /// rlx's tile kernel, with the bias along N and any activation in the
    /// same launch. The default: the golden transformer at batch 1, seq 8
    /// runs its six projections in about 2 us each this way, 10 us each
    /// through cuBLASLt (`scripts/gpu-check.sh ab`).
    #[default]
    Tile,
    /// cuBLASLt, as every larger product.
    Cublaslt,
}

/// Where a MatMul of at most [`MAX_ROWS`](crate::kernels::row_gemv::MAX_ROWS)
/// rows against a wide matrix runs (a decoder's step: one row per sequence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FewRows {
    /// rlx's row GEMV for products of two to eight rows (a batched
    /// decoder's step), bias and activation in the same launch; one row
    /// stays with the libraries. The default: on an H200, alternating in
    /// one call, batch-8 decode steps of GPT-2 and a Llama-style decoder
    /// 3-4% faster than through cuBLASLt, batch-1 ones level or behind.
    #[default]
    Batched,
    /// The row GEMV for one row too.
    All,
    /// cuBLASLt (or the tile kernel, when small enough), as larger ones.
    Library,
}

impl FewRows {
    /// The fewest rows a product has for the row GEMV, if it runs at all.
    pub fn min_rows(self) -> Option<u64> {
        match self {
            FewRows::Batched => Some(2),
            FewRows::All => Some(1),
            FewRows::Library => None,
        }
    }
}

/// Where an f32 convolution's bias and ReLU are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConvEpilogue {
    /// In cuDNN's fused `cudnnConvolutionBiasActivationForward`.
    #[default]
    Cudnn,
    /// In rlx's epilogue kernel after a plain cuDNN forward.
    Kernel,
}

/// The CUDA lowering: modules shared by all launches of the schedule.
#[derive(Default)]
struct Cuda {
    opts: PlanOptions,
    modules: Modules,
}

impl Lowering for Cuda {
    type Launch = Launch;

    fn node(&mut self, node: &Node, io: NodeIo) -> LResult<Lowered<Launch>> {
        let mut cx = Cx::new(node, io, &mut self.modules);
        cx.opts = self.opts;
        lower(&mut cx)?;
        Ok(Lowered {
            scratch_end: cx.scratch_end(),
            launches: cx.take_launches(),
            consts: cx.take_consts(),
        })
    }

    fn slab_copy(&mut self, copy: SlabCopy) -> LResult<Launch> {
        Ok(control::slab(&mut self.modules, copy))
    }

    fn counter(&mut self, counter: Range, increment: bool) -> LResult<Launch> {
        Ok(control::counter(&mut self.modules, counter, increment))
    }
}

impl From<PlanError> for CudaError {
    fn from(e: PlanError) -> CudaError {
        match e {
            PlanError::Node {
                node,
                origin,
                reason,
            } => CudaError::Node {
                node,
                origin,
                reason,
            },
            PlanError::Internal(s) => CudaError::Internal(s),
        }
    }
}

/// Builds the schedule of a legalized, concrete graph.
pub fn plan(
    g: &Graph,
    weights: &Weights,
    mem: &MemoryPlan,
    opts: &PlanOptions,
) -> Result<Schedule, CudaError> {
    let mut cuda = Cuda {
        opts: *opts,
        ..Cuda::default()
    };
    let Planned {
        launches,
        steps,
        consts,
        inputs,
        outputs,
        arena_bytes,
        buffer_bytes,
    } = rlx_gpu::plan(g, weights, mem, &mut cuda)?;
    let launches = launches
        .into_iter()
        .map(|placed| {
            let mut l = placed.launch;
            let (node, origin) = match &mut l {
                Launch::Kernel(k) => (&mut k.node, &mut k.origin),
                Launch::Gemm(g) => (&mut g.node, &mut g.origin),
                Launch::Conv(c) => (&mut c.node, &mut c.origin),
            };
            *node = placed.node;
            *origin = placed.origin;
            l
        })
        .collect();
    Ok(Schedule {
        modules: cuda.modules.into_vec(),
        launches,
        steps,
        consts,
        inputs,
        outputs,
        arena_bytes,
        buffer_bytes,
        tf32: opts.tf32,
    })
}
