//! The kernel interface and the op -> kernel registry.

use rlx_ir::{DType, Node, Op, Tensor, TensorType, Weights};

use crate::dynamic;

use crate::kernels;
use crate::tensor::{TensorMut, TensorRef};

/// Why a kernel cannot be built or run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelError {
    #[error("dtype {0} is not supported")]
    DType(DType),
    #[error("{0}")]
    Unsupported(String),
    #[error("invalid input: {0}")]
    Value(String),
    #[error("internal error: {0}")]
    Internal(String),
    #[error("in a subgraph: {0}")]
    Subgraph(String),
}

/// What a kernel is built from: the node, its concrete input and output types,
/// the values of its constant inputs, the weight store (for subgraphs), and
/// the store of prepared constants kernels share across plans.
pub struct Spec<'a> {
    pub node: &'a Node,
    pub inputs: &'a [TensorType],
    pub outputs: &'a [TensorType],
    pub consts: &'a [Option<Tensor>],
    pub weights: &'a Weights,
    pub limits: RunLimits,
    pub packs: &'a crate::packs::Packs,
}

/// Limits a run enforces where sizes are not known before it: a model is
/// untrusted input, and a Loop asking for 2^62 iterations must end with an
/// error naming it, not run for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// The most iterations one Loop node may run [default: 2^20].
    pub max_loop_iterations: u64,
    /// The most elements of one tensor a node run node by node may make
    /// (its shape known only as it runs) [default: 2^31].
    pub max_tensor_elements: u64,
}

impl Default for RunLimits {
    fn default() -> RunLimits {
        RunLimits {
            max_loop_iterations: 1 << 20,
            max_tensor_elements: 1 << 31,
        }
    }
}

impl Spec<'_> {
    pub fn op(&self) -> &Op {
        &self.node.op
    }

    /// Concrete dims of input `i`.
    pub fn in_dims(&self, i: usize) -> Vec<usize> {
        self.inputs[i].shape.as_known().unwrap_or_default()
    }

    pub fn out_dims(&self, i: usize) -> Vec<usize> {
        self.outputs[i].shape.as_known().unwrap_or_default()
    }

    /// Constant input `i` with where its preparations are kept; `None`
    /// where the input is not constant.
    pub fn keep(&self, i: usize) -> Option<(&Tensor, crate::packs::Keep<'_>)> {
        let t = self.consts.get(i)?.as_ref()?;
        Some((t, crate::packs::Keep::of(self.packs, t)))
    }
}

/// A compiled step: reads its inputs, writes its outputs (which never alias the
/// inputs), may use `scratch` bytes of its own.
pub trait Kernel: Send + Sync {
    /// A short description for schedule listings (`matmul.f32 gemm 64x128x32`).
    fn label(&self) -> String;

    /// Scratch bytes `run` needs.
    fn scratch_bytes(&self) -> usize {
        0
    }

    /// Scratch `run` takes on each thread ([`crate::scratch`]): staged
    /// rows, packed panels, bordered planes.
    fn per_thread(&self) -> crate::scratch::PerThread {
        crate::scratch::PerThread::NONE
    }

    /// Floating-point (or integer multiply-add) operations of one run, for
    /// kernels whose rate is worth reporting (products, convolutions): two
    /// per multiply-add.
    fn flops(&self) -> Option<u64> {
        None
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        scratch: &mut [u8],
    ) -> Result<(), KernelError>;
}

/// A kernel that is a plain function of the op and the tensors.
pub struct FnKernel {
    pub op: Op,
    pub label: String,
    pub f: fn(&Op, &[TensorRef], &mut [TensorMut]) -> Result<(), KernelError>,
    /// What `f` takes on each thread ([`crate::scratch`]).
    pub per_thread: crate::scratch::PerThread,
}

impl Kernel for FnKernel {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn per_thread(&self) -> crate::scratch::PerThread {
        self.per_thread
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        _: &mut [u8],
    ) -> Result<(), KernelError> {
        (self.f)(&self.op, ins, outs)
    }
}

/// Wraps a function kernel.
pub fn fn_kernel(
    spec: &Spec,
    f: fn(&Op, &[TensorRef], &mut [TensorMut]) -> Result<(), KernelError>,
) -> Box<dyn Kernel> {
    fn_kernel_with(spec, f, crate::scratch::PerThread::NONE)
}

/// Wraps a function kernel that takes `per_thread` on each thread.
pub fn fn_kernel_with(
    spec: &Spec,
    f: fn(&Op, &[TensorRef], &mut [TensorMut]) -> Result<(), KernelError>,
    per_thread: crate::scratch::PerThread,
) -> Box<dyn Kernel> {
    let dt = spec
        .inputs
        .first()
        .map_or(String::new(), |t| format!(".{}", t.dtype));
    Box::new(FnKernel {
        op: spec.node.op.clone(),
        label: format!("{}{dt}", spec.node.op.name()),
        f,
        per_thread,
    })
}

/// An op whose output shapes depend on data (or on subgraphs): it computes its
/// outputs together with their shapes.
pub type EvalFn = fn(&Node, &[Tensor], &EvalCx) -> Result<Vec<Tensor>, KernelError>;

/// What an [`EvalFn`] runs with besides its node and inputs: the weight store
/// and the kernels already built for its subgraphs.
pub struct EvalCx<'a> {
    pub weights: &'a Weights,
    pub cache: &'a dynamic::BodyCache,
}

impl EvalCx<'_> {
    /// Refuses an output of `dims` past the run's element limit, before it
    /// is allocated: what an op evaluated node by node makes (strings,
    /// sequences, data-dependent shapes) is bounded as a planned tensor is.
    pub fn check_elements(&self, dims: &[usize]) -> Result<(), KernelError> {
        self.check_count(
            dims.iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
                .unwrap_or(u64::MAX),
        )
    }

    /// Refuses `n` elements (or sequence items) past the run's limit.
    pub fn check_count(&self, n: u64) -> Result<(), KernelError> {
        let limit = self.cache.limits.max_tensor_elements;
        if n > limit {
            return Err(KernelError::Value(format!(
                "makes {n} elements; the limit is {limit} \
                 (Limits::max_tensor_elements, --max-tensor-elements)"
            )));
        }
        Ok(())
    }
}

/// Runs an [`EvalFn`] inside a planned schedule, where inference already knew
/// the output shapes; the results are checked against them and copied. Its
/// subgraphs' kernels are built once and kept in `cache`.
pub struct EvalKernel {
    pub node: Node,
    pub weights: Weights,
    pub f: EvalFn,
    pub cache: dynamic::BodyCache,
}

impl Kernel for EvalKernel {
    fn label(&self) -> String {
        format!("{} (evaluated)", self.node.op.name())
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        _: &mut [u8],
    ) -> Result<(), KernelError> {
        let owned: Vec<Tensor> = ins
            .iter()
            .map(|t| t.to_tensor())
            .collect::<Result<_, _>>()?;
        let cx = EvalCx {
            weights: &self.weights,
            cache: &self.cache,
        };
        let results = (self.f)(&self.node, &owned, &cx)?;
        if results.len() != outs.len() {
            return Err(KernelError::Internal(format!(
                "{} results for {} outputs",
                results.len(),
                outs.len()
            )));
        }
        for (r, o) in results.iter().zip(outs.iter_mut()) {
            if r.dims() != o.dims || r.dtype() != o.dtype {
                return Err(KernelError::Internal(format!(
                    "computed {} where the plan expects {}{:?}",
                    r.ty(),
                    o.dtype,
                    o.dims
                )));
            }
            o.bytes.copy_from_slice(r.bytes());
        }
        Ok(())
    }
}

/// Builds the kernel for a node.
pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    if let Some(f) = kernels::evaluated(spec.op()) {
        return Ok(Box::new(EvalKernel {
            node: spec.node.clone(),
            weights: spec.weights.clone(),
            f,
            cache: dynamic::BodyCache::new(spec.limits),
        }));
    }
    kernels::build(spec)
}

/// Runs a subgraph with the dynamic interpreter, for control-flow ops.
pub fn run_subgraph(
    g: &rlx_ir::Graph,
    cx: &EvalCx,
    inputs: Vec<Tensor>,
) -> Result<Vec<Tensor>, KernelError> {
    dynamic::run_graph_cached(g, cx.weights, inputs, cx.cache)
        .map_err(|e| KernelError::Subgraph(e.to_string()))
}
