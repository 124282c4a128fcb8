//! The pass trait, the pass context and the pass manager.

use rlx_ir::{analysis::verify, Graph, VerifyError, Weights};

use crate::target::Evaluator;

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
}

/// What passes share: the weight store and an optional evaluator.
pub struct PassContext<'a> {
    pub weights: &'a mut Weights,
    pub evaluator: Option<&'a dyn Evaluator>,
}

/// A named graph rewrite. Returns whether it changed the graph.
pub trait Pass {
    fn name(&self) -> &'static str;
    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError>;
}

/// How much the pipeline optimizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OptLevel {
    /// Only what running needs: inference.
    O0,
    /// Folding and dead-code elimination.
    O1,
    /// Everything (the default).
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
}

/// Called after each pass with (step number, pass name, graph).
pub type DumpHook<'a> = dyn FnMut(usize, &str, &Graph) + 'a;

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
            verify: cfg!(debug_assertions),
        }
    }

    /// The generic pipeline for `level`.
    pub fn pipeline(level: OptLevel) -> PassManager {
        let mut v: Vec<Box<dyn Pass>> = vec![Box::new(crate::fold::Infer)];
        if level >= OptLevel::O1 {
            v.push(Box::new(crate::fold::FoldShapes));
            v.push(Box::new(crate::fold::FoldConstants::default()));
            v.push(Box::new(crate::dce::Dce));
        }
        PassManager::new(v)
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
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
