//! The pass trait, the pass context and the pass manager.
//!
//! A pipeline is a plain list of pass names (see [`crate::pipeline`]); the
//! manager builds the passes by name, runs them in order, verifies the graph
//! after each one when asked, dumps the IR after any of them and can stop after
//! a given step (to bisect a miscompile).

use std::collections::BTreeMap;
use std::fmt;

use rlx_ir::{analysis::verify, Graph, VerifyError, Weights};

use crate::pipeline;
use crate::target::{Backend, Evaluator};

/// A node a target cannot run, even after decomposition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedNode {
    pub node: String,
    pub op: String,
    pub origin: String,
    pub reason: String,
}

impl fmt::Display for UnsupportedNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` ({}, from ONNX {}): {}",
            self.node, self.op, self.origin, self.reason
        )
    }
}

fn list(nodes: &[UnsupportedNode]) -> String {
    nodes
        .iter()
        .map(|n| format!("\n  {n}"))
        .collect::<Vec<_>>()
        .join("")
}

/// How a GPU target's user can still run such nodes.
fn fallback_hint(target: &str) -> &'static str {
    if target == "cpu" {
        ""
    } else {
        "\n(a CPU fallback, when asked for with `--fallback cpu` or \
         `Compiler::fallback(Fallback::Cpu)`, runs them on the CPU)"
    }
}

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("pass `{pass}`: {source}")]
    Infer {
        pass: &'static str,
        #[source]
        source: rlx_ir::NodeError,
    },
    #[error("pass `{pass}` left an invalid graph: {source}")]
    Verify {
        pass: &'static str,
        #[source]
        source: VerifyError,
    },
    #[error("pass `{pass}`: node `{node}` (from ONNX {origin}): {reason}")]
    Node {
        pass: &'static str,
        node: String,
        origin: String,
        reason: String,
    },
    #[error("pass `{pass}`: {reason}")]
    Graph { pass: &'static str, reason: String },
    #[error("target `{target}` cannot run {} node(s):{}{}", .nodes.len(), list(.nodes), fallback_hint(.target))]
    Unsupported {
        target: String,
        nodes: Vec<UnsupportedNode>,
    },
}

impl PassError {
    /// A structural failure of `pass` (a graph edit that did not apply).
    pub fn graph(pass: &'static str, reason: impl fmt::Display) -> PassError {
        PassError::Graph {
            pass,
            reason: reason.to_string(),
        }
    }
}

/// What passes share: the weight store, an optional evaluator (constant
/// folding), an optional backend (legalization) and counters of what formed.
pub struct PassContext<'a> {
    pub weights: &'a mut Weights,
    pub evaluator: Option<&'a dyn Evaluator>,
    pub backend: Option<&'a dyn Backend>,
    /// Legalization keeps the nodes the backend cannot run (counted as
    /// `fallback.<op>`) instead of failing: the session runs them on the
    /// CPU, as the user asked with a fallback option.
    pub fallback: bool,
    /// `fused_matmul` -> 3: how often each rewrite applied (see [`PassContext::count`]).
    pub stats: BTreeMap<String, usize>,
}

impl<'a> PassContext<'a> {
    pub fn new(weights: &'a mut Weights) -> PassContext<'a> {
        PassContext {
            weights,
            evaluator: None,
            backend: None,
            fallback: false,
            stats: BTreeMap::new(),
        }
    }

    /// Records that the rewrite `what` applied once more.
    pub fn count(&mut self, what: &str) {
        *self.stats.entry(what.to_string()).or_default() += 1;
    }
}

/// A named graph rewrite. Returns whether it changed the graph.
pub trait Pass {
    fn name(&self) -> &'static str;
    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError>;
}

/// How much the pipeline optimizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OptLevel {
    /// Only what running needs: inference and legalization.
    O0,
    /// Folding, simplification, CSE and dead-code elimination.
    O1,
    /// Everything, fusions included (the default).
    O2,
}

impl OptLevel {
    pub fn parse(s: &str) -> Option<OptLevel> {
        match s {
            "0" | "O0" => Some(OptLevel::O0),
            "1" | "O1" => Some(OptLevel::O1),
            "2" | "O2" => Some(OptLevel::O2),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OptLevel::O0 => "O0",
            OptLevel::O1 => "O1",
            OptLevel::O2 => "O2",
        }
    }
}

/// Called after each pass with (step number from 1, pass name, graph).
pub type DumpHook<'a> = dyn FnMut(usize, &str, &Graph) + 'a;

/// True when verification after every pass is on by default: debug builds.
/// Release builds turn it on through the typed option (`Compiler::verify`,
/// `PassManager::verify`).
pub fn verify_by_default() -> bool {
    cfg!(debug_assertions)
}

/// Runs a pipeline of passes in order.
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    /// Verify the graph after every pass (tests and debug builds).
    pub verify: bool,
}

impl PassManager {
    pub fn new(passes: Vec<Box<dyn Pass>>) -> PassManager {
        PassManager {
            passes,
            verify: verify_by_default(),
        }
    }

    /// Builds the passes named in `names`, in order.
    pub fn from_names(names: &[&str]) -> Result<PassManager, String> {
        let passes = names
            .iter()
            .map(|n| {
                pipeline::make_pass(n).ok_or_else(|| {
                    format!(
                        "unknown pass `{n}`; the passes are: {}",
                        pipeline::PASSES
                            .iter()
                            .map(|p| p.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(PassManager::new(passes))
    }

    /// The named pipeline of `target` at `level` (see [`pipeline::names`]).
    pub fn for_target(target: &str, level: OptLevel) -> PassManager {
        let names = pipeline::names(target, level);
        // Every name in the table is registered (a unit test checks it).
        PassManager::new(
            names
                .iter()
                .filter_map(|n| pipeline::make_pass(n))
                .collect(),
        )
    }

    /// The target-independent pipeline for `level` (no legalization).
    pub fn pipeline(level: OptLevel) -> PassManager {
        PassManager::for_target(pipeline::GENERIC, level)
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Drops the passes after step `step` (1-based), to bisect a pipeline.
    pub fn stop_after(&mut self, step: usize) {
        self.passes.truncate(step);
    }

    /// Runs every pass; `dump` sees the graph after each.
    pub fn run(
        &self,
        g: &mut Graph,
        cx: &mut PassContext,
        mut dump: Option<&mut DumpHook>,
    ) -> Result<(), PassError> {
        for (i, p) in self.passes.iter().enumerate() {
            p.run(g, cx)?;
            if self.verify {
                verify(g, Some(cx.weights)).map_err(|source| PassError::Verify {
                    pass: p.name(),
                    source,
                })?;
            }
            if let Some(d) = dump.as_deref_mut() {
                d(i + 1, p.name(), g);
            }
        }
        Ok(())
    }
}
