//! rlx-vulkan: the Vulkan device half of the WGSL backends, on `ash`.
//!
//! The plan is rlx-wgsl's, the same as wgpu's: a [`Schedule`] of compute
//! dispatches over one storage buffer. This crate runs it with explicit
//! Vulkan:
//! - [`Context`]: the loader opened at run time, an instance (with the
//!   Khronos validation layer when asked), a physical device chosen by
//!   [`ContextOptions`] (a discrete GPU first), one compute queue.
//! - [`Executable`]: the arena and parameters in device-local memory
//!   (host-visible memory only for staging), constants uploaded once,
//!   SPIR-V made by naga from each pipeline's WGSL, descriptor sets written
//!   once, and for a schedule without control flow the command buffer of its
//!   dispatches recorded once and resubmitted every run; barriers where the
//!   plan placed them ([`rlx_wgsl::sync`]).
//! - [`Buffer`]: device tensors, for outputs that stay on the device.

mod buffer;
mod context;
mod executable;
mod memory;
mod record;
mod spirv;
mod statistics;

#[cfg(test)]
mod tests;

pub use buffer::{Buffer, DeviceTensor};
pub use context::{Context, ContextOptions, DeviceChoice, Validation};
pub use executable::Executable;
pub use rlx_wgsl::{Caps, Schedule};
pub use statistics::KernelStatistics;

/// Why loading or running failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VulkanError {
    /// No loader, no instance or no usable device: callers may skip.
    #[error("no Vulkan device is available: {0}")]
    Unavailable(String),
    #[error("node `{node}` (from ONNX {}): {reason}", .origin.join(", "))]
    Node {
        node: String,
        origin: Vec<String>,
        reason: String,
    },
    /// The model needs something this device does not do (not a node's op).
    #[error("{0}")]
    Unsupported(String),
    #[error("input {index}: {reason}")]
    Input { index: usize, reason: String },
    #[error("device error: {0}")]
    Device(String),
    /// What the validation layer reported while the device ran.
    #[error("the Vulkan validation layer reported: {0}")]
    Validation(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<rlx_wgsl::PlanError> for VulkanError {
    fn from(e: rlx_wgsl::PlanError) -> VulkanError {
        match e {
            rlx_wgsl::PlanError::Node {
                node,
                origin,
                reason,
            } => VulkanError::Node {
                node,
                origin,
                reason,
            },
            rlx_wgsl::PlanError::Internal(s) => VulkanError::Internal(s),
        }
    }
}

impl From<rlx_gpu::io::RunMismatch> for VulkanError {
    fn from(m: rlx_gpu::io::RunMismatch) -> VulkanError {
        match m {
            rlx_gpu::io::RunMismatch::Input { index, reason } => {
                VulkanError::Input { index, reason }
            }
            rlx_gpu::io::RunMismatch::Places(why) => VulkanError::Internal(why),
        }
    }
}

/// A Vulkan call that failed, as a device error naming the call.
pub(crate) fn vk_err(what: &'static str) -> impl Fn(ash::vk::Result) -> VulkanError {
    move |e| VulkanError::Device(format!("{what}: {e}"))
}
