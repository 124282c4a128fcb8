//! rlx-wgpu: the wgpu backend.
//!
//! - [`plan`] (pure, no device): a legalized graph and its memory plan become a
//!   [`Schedule`] of compute dispatches over one storage buffer (arena, constants,
//!   scratch), each with its pipeline, workgroup counts, bound window and params.
//! - [`device`]: an explicit [`Context`] (adapter + device); an [`Executable`]
//!   builds pipelines and bind groups once and runs the whole schedule in one
//!   compute pass and one submission per run.
//! - [`kernels`]: one lowering file per op family; WGSL sources in `kernels/wgsl/`.
//! - [`support`]: which nodes the backend runs, and why not.

pub mod buffer;
pub mod device;
pub mod kernels;
pub mod plan;
mod profile;
pub mod schedule;
pub mod support;

#[cfg(test)]
mod int64_tests;
#[cfg(test)]
mod tests;

use rlx_ir::{Node, TensorType};

pub use buffer::{Buffer, DeviceTensor};
pub use device::{Context, Executable};
pub use plan::{plan, PlanOptions};
pub use schedule::Schedule;

/// Why planning or running failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WgpuError {
    /// No adapter or device (no Vulkan driver): callers may skip.
    #[error("no wgpu adapter is available: {0}")]
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

/// What the adapter offers that changes what the plan may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// `max_storage_buffer_binding_size` (at most 1 GiB, what operand handles
    /// address): larger buffers are bound in windows.
    pub max_binding: u64,
}

impl Default for Caps {
    /// Lavapipe's limits (the smallest of the adapters this backend targets).
    fn default() -> Caps {
        Caps {
            max_binding: 128 << 20,
        }
    }
}

/// The wgpu backend as legalization sees it.
pub struct WgpuBackend;

impl rlx_passes::Backend for WgpuBackend {
    fn name(&self) -> &str {
        "wgpu"
    }

    fn supports(&self, node: &Node, inputs: &[TensorType]) -> Result<(), rlx_passes::Reason> {
        support::supports(node, inputs).map_err(rlx_passes::Reason)
    }
}
