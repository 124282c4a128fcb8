//! Resource limits: a model file is untrusted input, and a shape of 1e12
//! elements (from constants, or from shape values given at run time) or a
//! loop of 2^62 iterations must be a typed error naming the node, not an
//! allocation that aborts the process or a run that never ends.

use rlx_ir::Graph;

use crate::error::Error;

/// Limits checked on every graph that is compiled or specialized for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most elements of one tensor [default: 2^31, 8 GiB of f32].
    pub max_tensor_elements: u64,
    /// The most iterations one Loop node may run, checked as it runs (a
    /// trip count of 2^62 would otherwise never end) [default: 2^24].
    pub max_loop_iterations: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_tensor_elements: 1 << 31,
            max_loop_iterations: rlx_cpu::RunLimits::default().max_loop_iterations,
        }
    }
}

impl Limits {
    /// What the CPU kernels enforce while they run.
    pub fn run_limits(&self) -> rlx_cpu::RunLimits {
        rlx_cpu::RunLimits {
            max_loop_iterations: self.max_loop_iterations,
        }
    }

    /// Checks every value of `g` (and of its bodies) whose shape is known.
    pub fn check(&self, g: &Graph) -> Result<(), Error> {
        for id in g.node_ids() {
            let node = g.node(id);
            for t in &node.outputs {
                let Some(dims) = t.shape.as_known() else {
                    continue;
                };
                let n = dims
                    .iter()
                    .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
                    .unwrap_or(u64::MAX);
                if n > self.max_tensor_elements {
                    return Err(Error::Limit(format!(
                        "node `{}` ({}) makes a {t} tensor of {n} elements; the limit is {} \
                         (Limits::max_tensor_elements, --max-tensor-elements)",
                        node.origin_text(),
                        node.op.name(),
                        self.max_tensor_elements
                    )));
                }
            }
            for sub in node.op.subgraphs() {
                self.check(sub)?;
            }
        }
        Ok(())
    }
}
