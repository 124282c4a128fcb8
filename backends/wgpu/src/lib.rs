//! rlx-wgpu: the wgpu device half of the WGSL backends.
//!
//! The plan is rlx-wgsl's (pure, shared with the Vulkan device): a
//! [`Schedule`] of compute dispatches over one storage buffer. This crate runs
//! it: an explicit [`Context`] (adapter + device); an [`Executable`] builds
//! pipelines and bind groups once and runs the whole schedule in one compute
//! pass and one submission per run; [`Buffer`]s are device tensors.

pub mod buffer;
pub mod device;
mod profile;

#[cfg(test)]
mod control_tests;
#[cfg(test)]
mod int64_tests;

pub use buffer::{Buffer, DeviceTensor};
pub use device::{Context, Executable};
pub use rlx_wgsl::{Caps, Schedule};

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

impl From<rlx_wgsl::PlanError> for WgpuError {
    fn from(e: rlx_wgsl::PlanError) -> WgpuError {
        match e {
            rlx_wgsl::PlanError::Node {
                node,
                origin,
                reason,
            } => WgpuError::Node {
                node,
                origin,
                reason,
            },
            rlx_wgsl::PlanError::Internal(s) => WgpuError::Internal(s),
        }
    }
}

impl From<rlx_gpu::io::RunMismatch> for WgpuError {
    fn from(m: rlx_gpu::io::RunMismatch) -> WgpuError {
        match m {
            rlx_gpu::io::RunMismatch::Input { index, reason } => WgpuError::Input { index, reason },
            rlx_gpu::io::RunMismatch::Places(why) => WgpuError::Internal(why),
        }
    }
}
