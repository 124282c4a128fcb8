//! rlx-cuda: the CUDA backend.
//!
//! - [`plan`] (pure, no device): a legalized graph and its memory plan become
//!   a [`Schedule`] over one device buffer (laid out by rlx-gpu): NVRTC kernel
//!   launches with typed parameter structs, and cuBLASLt GEMMs.
//! - [`device`]: an explicit [`Context`] (driver, stream, NVRTC module cache);
//!   an [`Executable`] allocates once, uploads constants once, and replays the
//!   schedule as a CUDA graph when it needs no host reads.
//! - [`kernels`]: one file per kernel family; CUDA sources in `kernels/cuda/`.
//! - [`support`]: which nodes the backend runs, and why not.

pub mod compile;
mod dependent;
pub mod device;
mod dnn;
mod gemm;
pub mod kernels;
mod pinned_out;
pub mod plan;
pub mod schedule;
pub mod support;
mod tune;

#[cfg(test)]
mod data_tests;
#[cfg(test)]
mod family_tests;
#[cfg(test)]
mod nn_tests;
#[cfg(test)]
mod op_tests;
#[cfg(test)]
mod row_gemv_tests;
#[cfg(test)]
mod seq_tests;
#[cfg(test)]
mod tests;

use rlx_ir::{Node, TensorType};

pub use compile::{CompileOptions, Compiler};
pub use device::{Buffer, Context, ContextOptions, DeviceTensor, Executable, Holder};
pub use plan::{
    plan, AttentionKernel, ConvEpilogue, ConvGemm, FewRows, KernelLaunch, PlanOptions, SmallGemm,
};
pub use schedule::{Conv, ConvKind, Gemm, GemmAct, Launch, Module, Schedule, Work};

/// Why planning, compiling or running failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CudaError {
    /// No driver, no device, or a CUDA library missing: callers may skip.
    #[error("CUDA is not available: {0}")]
    Unavailable(String),
    #[error("node `{node}` (from ONNX {}): {reason}", .origin.join(", "))]
    Node {
        node: String,
        origin: Vec<String>,
        reason: String,
    },
    /// The model needs something this backend does not do (not a node's op).
    #[error("{0}")]
    Unsupported(String),
    #[error("input {index}: {reason}")]
    Input { index: usize, reason: String },
    #[error("device error: {0}")]
    Device(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// The CUDA backend as legalization sees it.
pub struct CudaBackend;

impl rlx_passes::Backend for CudaBackend {
    fn name(&self) -> &str {
        "cuda"
    }

    fn supports(&self, node: &Node, inputs: &[TensorType]) -> Result<(), rlx_passes::Reason> {
        support::supports(node, inputs).map_err(rlx_passes::Reason)
    }
}
