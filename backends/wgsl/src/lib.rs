//! rlx-wgsl: the WGSL plan, shared by the wgpu and Vulkan devices.
//!
//! Pure (no device): a legalized graph and its memory plan become a
//! [`Schedule`] of compute dispatches over one storage buffer (arena,
//! constants, scratch), each with its pipeline (WGSL source and parameter
//! layout), workgroup counts, bound windows and typed parameters. A device
//! half (rlx-wgpu, rlx-vulkan) compiles the pipelines and executes the
//! schedule; both see the same plan, so what runs on one runs on the other.
//!
//! - [`plan`]: rlx-gpu's planner with the WGSL [`rlx_gpu::Lowering`].
//! - [`kernels`]: one lowering file per op family; WGSL sources in `kernels/wgsl/`.
//! - [`schedule`]: the plan's data and how it prints (snapshot-tested).
//! - [`support`]: which nodes the plan runs, and why not.
//! - [`sync`]: where a device waits between dispatches (Vulkan's barriers).

pub mod kernels;
pub mod plan;
pub mod schedule;
pub mod support;
pub mod sync;

#[cfg(test)]
mod tests;

use rlx_ir::{Node, TensorType};

pub use plan::{plan, PlanOptions};
pub use rlx_gpu::PlanError;
pub use schedule::Schedule;

/// What the device offers that changes what the plan may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// `max_storage_buffer_binding_size` (at most 1 GiB, what operand handles
    /// address): larger buffers are bound in windows.
    pub max_binding: u64,
}

impl Default for Caps {
    /// Lavapipe's limits (the smallest of the devices this plan targets).
    fn default() -> Caps {
        Caps {
            max_binding: 128 << 20,
        }
    }
}

/// A WGSL device (wgpu or Vulkan) as legalization sees it: both run what the
/// plan supports, so they legalize alike; `name` is the target's.
pub struct WgslBackend {
    pub name: &'static str,
}

impl rlx_passes::Backend for WgslBackend {
    fn name(&self) -> &str {
        self.name
    }

    fn supports(&self, node: &Node, inputs: &[TensorType]) -> Result<(), rlx_passes::Reason> {
        support::supports(node, inputs).map_err(rlx_passes::Reason)
    }
}
