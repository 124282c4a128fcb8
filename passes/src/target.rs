//! What passes need from a backend, without depending on one: an evaluator for
//! constant folding, and the per-node support check that legalization asks.

use std::fmt;

use rlx_ir::{Node, Tensor, TensorType};

/// Evaluates one node on concrete inputs. The facade wires this to the CPU
/// backend's kernels, so folding computes exactly what execution would.
pub trait Evaluator {
    fn eval(&self, node: &Node, inputs: &[Tensor]) -> Result<Vec<Tensor>, String>;
}

/// What a backend runs, node by node (attributes and input types included).
/// Backends implement it; passes only see the trait object.
pub trait Backend {
    /// The target's name (`cpu`), which also picks its pipeline.
    fn name(&self) -> &str;

    /// Whether the backend runs `node` as it is, with inputs of `inputs` types.
    fn supports(&self, node: &Node, inputs: &[TensorType]) -> Result<(), Reason>;
}

/// Why a backend cannot run a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason(pub String);

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Reason {
    pub fn new(s: impl Into<String>) -> Reason {
        Reason(s.into())
    }
}
