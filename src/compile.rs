//! The compiler: an ONNX model becomes a [`CompiledModel`] (optimized graph and
//! weights, specialized to dim bindings where given).

use std::fmt;
use std::path::Path;

use std::collections::BTreeMap;

use rlx_cpu::{CpuBackend, CpuEvaluator};
use rlx_cuda::CudaBackend;
use rlx_importer::{import_file, ImportedModel, Registry};
use rlx_ir::analysis::specialize;
use rlx_ir::{Bindings, Graph, Weights};
use rlx_passes::{Backend, OptLevel, PassContext, PassManager};
use rlx_wgsl::WgslBackend;

use crate::error::{Error, Result};

/// Where a compiled model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Cpu,
    /// CUDA kernels (NVRTC), cuBLASLt and cuDNN on an NVIDIA GPU.
    Cuda,
    /// WGSL kernels through wgpu (Vulkan).
    Wgpu,
    /// The same WGSL kernels as SPIR-V on Vulkan directly (ash).
    Vulkan,
}

impl Target {
    /// Every target, in the order help texts list them.
    pub const ALL: [Target; 4] = [Target::Cpu, Target::Cuda, Target::Wgpu, Target::Vulkan];

    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
            Target::Wgpu => "wgpu",
            Target::Vulkan => "vulkan",
        }
    }

    /// The backend legalization asks.
    pub fn backend(self) -> &'static dyn Backend {
        match self {
            Target::Cpu => &CpuBackend,
            Target::Cuda => &CudaBackend,
            Target::Wgpu => &WgslBackend { name: "wgpu" },
            Target::Vulkan => &WgslBackend { name: "vulkan" },
        }
    }

    pub fn parse(s: &str) -> Result<Target> {
        match s {
            "cpu" => Ok(Target::Cpu),
            "cuda" => Ok(Target::Cuda),
            "wgpu" => Ok(Target::Wgpu),
            "vulkan" => Ok(Target::Vulkan),
            other => Err(Error::Target(other.to_string())),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The arithmetic a compiled model may use in place of the model's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// The model's dtypes, f32 in plain fp32 (no TF32): results match the
    /// CPU backend.
    #[default]
    Exact,
    /// f32 matrix products and convolutions on TF32 tensor cores (CUDA; a
    /// 10-bit mantissa for the products, f32 accumulation).
    Tf32,
    /// f32 computation in f16 where the target runs it (the `to-f16` pass):
    /// f16 weights and activations, f32 at the model's inputs and outputs.
    Fp16,
    /// The same in bf16 (`to-bf16`): f32's range, 8 bits of mantissa.
    Bf16,
}

impl Precision {
    pub const ALL: [Precision; 4] = [
        Precision::Exact,
        Precision::Tf32,
        Precision::Fp16,
        Precision::Bf16,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Exact => "exact",
            Precision::Tf32 => "tf32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
        }
    }

    pub fn parse(s: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.name() == s)
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a GPU target does with the nodes it cannot run (strings, sequences,
/// ops without a kernel, shapes that depend on data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Fallback {
    /// Compiling (or planning a run) fails with an error naming every such
    /// node: nothing moves to the host unasked.
    #[default]
    Refuse,
    /// Such nodes run on the CPU backend. The graph is split into device and
    /// host segments, run in order, with the values that cross copied
    /// between device and host once per run ([`crate::partition`]).
    Cpu,
}

impl Fallback {
    pub const ALL: [Fallback; 2] = [Fallback::Refuse, Fallback::Cpu];

    pub fn name(self) -> &'static str {
        match self {
            Fallback::Refuse => "refuse",
            Fallback::Cpu => "cpu",
        }
    }

    pub fn parse(s: &str) -> Option<Fallback> {
        Fallback::ALL.into_iter().find(|f| f.name() == s)
    }
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Called after each pass with (step, pass name, graph).
pub type DumpFn<'a> = dyn FnMut(usize, &str, &Graph) + 'a;

/// Compiles ONNX models.
#[derive(Debug, Clone)]
pub struct Compiler {
    pub target: Target,
    pub opt_level: OptLevel,
    /// Symbolic dims bound at compile time.
    pub bindings: Bindings,
    /// Verify the graph after every pass (on in debug builds and tests).
    pub verify: bool,
    pub precision: Precision,
    /// What a GPU target does with nodes it cannot run.
    pub fallback: Fallback,
    /// Resource limits, checked on the compiled graph and kept in the
    /// model for its runs.
    pub limits: crate::Limits,
}

impl Default for Compiler {
    fn default() -> Compiler {
        Compiler {
            target: Target::Cpu,
            opt_level: OptLevel::O2,
            bindings: Bindings::new(),
            verify: rlx_passes::verify_by_default(),
            precision: Precision::Exact,
            fallback: Fallback::Refuse,
            limits: crate::Limits::default(),
        }
    }
}

impl Compiler {
    pub fn new(target: Target) -> Compiler {
        Compiler {
            target,
            ..Compiler::default()
        }
    }

    pub fn opt_level(mut self, level: OptLevel) -> Compiler {
        self.opt_level = level;
        self
    }

    /// Verifies the graph after every pass.
    pub fn verify(mut self, on: bool) -> Compiler {
        self.verify = on;
        self
    }

    pub fn precision(mut self, p: Precision) -> Compiler {
        self.precision = p;
        self
    }

    /// Lets a GPU target leave the nodes it cannot run to the CPU.
    pub fn fallback(mut self, f: Fallback) -> Compiler {
        self.fallback = f;
        self
    }

    /// The pass names this compiler runs.
    pub fn passes(&self) -> Vec<&'static str> {
        pipeline(self.target, self.opt_level, self.precision)
    }

    pub fn bind(mut self, name: &str, value: i64) -> Compiler {
        self.bindings.insert(name.to_string(), value);
        self
    }

    /// Imports and compiles an `.onnx` file.
    pub fn compile_file(&self, path: &Path) -> Result<CompiledModel> {
        let model = import_file(path, &Registry::standard())?;
        self.compile(model, None)
    }

    /// Compiles an imported model; `dump` sees the graph after every pass.
    pub fn compile(
        &self,
        model: ImportedModel,
        dump: Option<&mut DumpFn>,
    ) -> Result<CompiledModel> {
        let mut graph = model.graph;
        let mut weights = model.weights;
        let symbols = input_symbols(&graph);
        if let Some(name) = self.bindings.keys().find(|k| !symbols.contains(*k)) {
            return Err(crate::error::InputError::UnknownSymbol {
                name: name.clone(),
                symbols: symbols.into_iter().collect(),
            }
            .into());
        }
        if !self.bindings.is_empty() {
            graph = specialize(&graph, &self.bindings, Some(&weights))?;
        }
        // Before the passes too: a graph of millions of nodes must not run
        // through them first.
        self.limits.check(&graph)?;
        let passes = self.passes();
        run_passes(
            &mut graph,
            &mut weights,
            self.target,
            &passes,
            self.verify,
            self.fallback,
            dump,
        )?;
        self.limits.check(&graph)?;
        Ok(CompiledModel {
            graph,
            weights,
            target: self.target,
            opt_level: self.opt_level,
            bindings: self.bindings.clone(),
            producer: model.producer,
            metadata: model.metadata,
            precision: self.precision,
            fallback: self.fallback,
            cuda_ptx: None,
            limits: self.limits,
        })
    }
}

/// The symbolic dim names of a graph's inputs.
pub fn input_symbols(g: &Graph) -> std::collections::BTreeSet<String> {
    g.inputs()
        .iter()
        .flat_map(|&i| g.node(i).outputs.iter())
        .flat_map(|t| t.shape.dims().iter().flat_map(|d| d.symbols()))
        .collect()
}

/// The pass names for `target` at `level`; fp16 (bf16) adds `to-f16`
/// (`to-bf16`) before legalization.
pub fn pipeline(target: Target, level: OptLevel, precision: Precision) -> Vec<&'static str> {
    let mut passes = rlx_passes::pipeline::names(target.name(), level);
    let half = match precision {
        Precision::Fp16 => Some("to-f16"),
        Precision::Bf16 => Some("to-bf16"),
        Precision::Exact | Precision::Tf32 => None,
    };
    if let Some(pass) = half {
        let at = passes
            .iter()
            .position(|p| *p == "legalize")
            .unwrap_or(passes.len());
        passes.insert(at, pass);
    }
    passes
}

/// Runs the CPU pipeline of `level`, with CPU constant folding.
pub fn optimize(
    graph: &mut Graph,
    weights: &mut Weights,
    level: OptLevel,
    dump: Option<&mut DumpFn>,
) -> Result<()> {
    let passes = rlx_passes::pipeline::names(Target::Cpu.name(), level);
    run_passes(
        graph,
        weights,
        Target::Cpu,
        &passes,
        rlx_passes::verify_by_default(),
        Fallback::Refuse,
        dump,
    )?;
    Ok(())
}

/// Runs the named passes for `target` (CPU constant folding, the target's
/// legalization, keeping what it cannot run with `Fallback::Cpu`); returns how
/// often each rewrite applied.
pub fn run_passes(
    graph: &mut Graph,
    weights: &mut Weights,
    target: Target,
    passes: &[&str],
    verify: bool,
    fallback: Fallback,
    dump: Option<&mut DumpFn>,
) -> Result<BTreeMap<String, usize>> {
    let evaluator = CpuEvaluator {
        weights: weights.clone(),
    };
    let mut pm = PassManager::from_names(passes).map_err(Error::Pipeline)?;
    pm.verify = verify;
    let mut cx = PassContext::new(weights);
    cx.evaluator = Some(&evaluator);
    cx.backend = Some(target.backend());
    cx.fallback = fallback == Fallback::Cpu && target != Target::Cpu;
    pm.run(graph, &mut cx, dump)?;
    Ok(cx.stats)
}

/// A compiled model: what a `.rlx` artifact holds.
#[derive(Debug, Clone)]
pub struct CompiledModel {
    pub graph: Graph,
    pub weights: Weights,
    pub target: Target,
    pub opt_level: OptLevel,
    pub bindings: Bindings,
    pub producer: String,
    /// What the model says of itself (`metadata_props` included), as
    /// ONNX Runtime's `get_modelmeta()` gives it.
    pub metadata: rlx_importer::Metadata,
    pub precision: Precision,
    /// What the model's GPU target does with nodes it cannot run.
    pub fallback: Fallback,
    /// CUDA kernels compiled ahead of time ([`CompiledModel::prebuild_cuda`]).
    pub cuda_ptx: Option<rlx_cuda::compile::Prebuilt>,
    /// Resource limits of this model's runs (not stored in artifacts: a
    /// loaded artifact gets the defaults, which its user may change).
    pub limits: crate::Limits,
}

impl CompiledModel {
    /// Names of the graph inputs, in order.
    pub fn input_names(&self) -> Vec<String> {
        self.graph
            .inputs()
            .iter()
            .map(|i| self.graph.node(*i).name.clone())
            .collect()
    }

    /// The declared type of the input named `name`.
    pub fn input_type(&self, name: &str) -> Option<rlx_ir::TensorType> {
        self.graph
            .inputs()
            .iter()
            .map(|&i| self.graph.node(i))
            .find(|n| n.name == name)
            .map(|n| n.outputs[0].clone())
    }

    pub fn output_names(&self) -> Vec<String> {
        self.graph
            .outputs()
            .iter()
            .map(|o| o.name.clone())
            .collect()
    }
}
