//! rlx-cpu: the CPU backend.
//!
//! - [`plan`]: a concrete graph and its memory plan become a [`Schedule`] of
//!   compiled kernels with resolved arena offsets (pure, printable).
//! - [`exec`]: runs a schedule over one arena per run (pooled).
//! - [`dynamic`]: runs graphs whose shapes depend on data, node by node.
//! - [`scratch`]: the memory kernels use on each thread, declared when they
//!   are planned and laid out at the end of a run's arena.
//! - [`kernels`]: one module per op family, in every dtype the op supports. They
//!   are also the reference the GPU backends are compared to.

mod arena;
pub mod dynamic;
pub mod exec;
pub mod homes;
#[cfg(test)]
mod homes_tests;
pub mod kernel;
pub mod kernels;
mod outputs;
pub mod packs;
pub mod par;
pub mod plan;
pub mod scratch;
#[cfg(test)]
mod scratch_tests;
pub mod tensor;

use rlx_ir::{Node, Tensor, TensorType, Weights};

pub use arena::Arenas;
pub use exec::{PlannedExecutable, RunState};
pub use kernel::{Kernel, KernelError, RunLimits};
pub use packs::Packs;
pub use plan::{plan, plan_with, Schedule};

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    #[error("node `{node}` (from ONNX {}): {source}", .origin.join(", "))]
    Node {
        node: String,
        origin: Vec<String>,
        #[source]
        source: KernelError,
    },
    #[error("internal error: {0}")]
    Internal(String),
}

/// Evaluates single nodes with the CPU kernels (used by constant folding).
pub struct CpuEvaluator {
    pub weights: Weights,
}

impl rlx_passes::Evaluator for CpuEvaluator {
    fn eval(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        dynamic::eval_node(node, inputs, &self.weights).map_err(|e| e.to_string())
    }
}

/// The CPU backend as legalization sees it: which nodes it runs.
pub struct CpuBackend;

impl rlx_passes::Backend for CpuBackend {
    fn name(&self) -> &str {
        "cpu"
    }

    fn supports(&self, node: &Node, inputs: &[TensorType]) -> Result<(), rlx_passes::Reason> {
        kernels::supports(node, inputs).map_err(rlx_passes::Reason)
    }
}
