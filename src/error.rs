//! The facade's error type: every failure of compiling, loading or running.

use std::path::PathBuf;

use rlx_ir::analysis::BindError;
use rlx_ir::DType;

/// A problem with the inputs given to [`Session::run`](crate::Session::run).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("unknown input `{name}`; the model's inputs are {expected:?}")]
    Unknown { name: String, expected: Vec<String> },
    #[error("input `{0}` is missing")]
    Missing(String),
    #[error("input `{0}` is given twice")]
    Duplicate(String),
    #[error("input `{name}` has dtype {got}, expected {expected}")]
    DType {
        name: String,
        expected: DType,
        got: DType,
    },
    #[error(transparent)]
    Shape(#[from] BindError),
    #[error("input `{name}` {reason}")]
    Device { name: String, reason: String },
    #[error("unknown output `{name}`; the model's outputs are {expected:?}")]
    UnknownOutput { name: String, expected: Vec<String> },
    #[error("`{name}` is not a symbolic dim of the model's inputs; its symbols are {symbols:?}")]
    UnknownSymbol { name: String, symbols: Vec<String> },
    /// Shapes the declared dims allow but a node cannot take (a window
    /// wider than its padded input, a reshape to a size that differs): the
    /// model was checked for its symbolic shapes; these inputs fail it.
    #[error("the model cannot run on inputs of these shapes ({shapes}): {reason}")]
    Unfit { shapes: String, reason: String },
}

/// Any error of the rlx-onnx library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Import(#[from] rlx_importer::ImportError),
    #[error(transparent)]
    Pass(#[from] rlx_passes::PassError),
    #[error(transparent)]
    Infer(#[from] rlx_ir::NodeError),
    #[error("memory planning: {0}")]
    Plan(#[from] rlx_passes::memory::PlanError),
    #[error(transparent)]
    Run(#[from] rlx_cpu::RunError),
    #[error(transparent)]
    Wgpu(#[from] rlx_wgpu::WgpuError),
    #[error(transparent)]
    Vulkan(#[from] rlx_vulkan::VulkanError),
    #[error(transparent)]
    Cuda(#[from] rlx_cuda::CudaError),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Artifact(#[from] crate::artifact::ArtifactError),
    #[error("cannot {action} `{path}`: {reason}")]
    Io {
        action: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error(transparent)]
    Graph(#[from] rlx_ir::graph::GraphError),
    #[error(transparent)]
    Tensor(#[from] rlx_ir::tensor::TensorError),
    #[error(transparent)]
    Npy(#[from] crate::npy::NpyError),
    #[error("pass pipeline: {0}")]
    Pipeline(String),
    #[error("unknown target `{0}`; the targets are {targets}", targets = crate::Target::ALL.map(|t| t.name()).join(", "))]
    Target(String),
    #[error("cannot start the thread pool: {0}")]
    Threads(String),
    #[error("debug run: {0}")]
    Debug(String),
    #[error("resource limit: {0}")]
    Limit(String),
    #[error("generate: {0}")]
    Generate(String),
    #[error("splitting the graph for the CPU fallback: {0}")]
    Partition(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
