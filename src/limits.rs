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
    /// trip count of 2^62 would otherwise never end) [default: 2^20, about a
    /// second of a small body; a count known to pass it is refused before
    /// the first iteration].
    pub max_loop_iterations: u64,
    /// The most nodes of a graph, its bodies' counted in [default: 2^22].
    pub max_nodes: u64,
    /// The deepest nesting of control-flow bodies (an `If` inside a `Loop`
    /// body is depth 2) [default: 64]: runs recurse into bodies.
    pub max_nesting: u64,
    /// The largest arena a planned run may allocate for its intermediate
    /// values [default: 2^36 bytes, 64 GiB].
    pub max_arena_bytes: u64,
    /// The most input-shape specializations a session keeps planned (each
    /// holds its plan and arena, on a GPU in device memory) [default: 16];
    /// past it the least recently run is dropped, and planned again if
    /// its shapes come back.
    pub max_specializations: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_tensor_elements: rlx_cpu::RunLimits::default().max_tensor_elements,
            max_loop_iterations: rlx_cpu::RunLimits::default().max_loop_iterations,
            max_nodes: 1 << 22,
            max_nesting: 64,
            max_arena_bytes: 1 << 36,
            max_specializations: 16,
        }
    }
}

impl Limits {
    /// What the CPU kernels enforce while they run.
    pub fn run_limits(&self) -> rlx_cpu::RunLimits {
        rlx_cpu::RunLimits {
            max_loop_iterations: self.max_loop_iterations,
            max_tensor_elements: self.max_tensor_elements,
        }
    }

    /// Checks `g` (and its bodies): every value whose shape is known, the
    /// node count and the nesting depth.
    pub fn check(&self, g: &Graph) -> Result<(), Error> {
        let mut nodes = 0u64;
        self.check_graph(g, 0, &mut nodes)
    }

    /// Checks the arena a plan of `g` needs.
    pub fn check_arena(&self, bytes: usize) -> Result<(), Error> {
        if bytes as u64 > self.max_arena_bytes {
            return Err(Error::Limit(format!(
                "the run needs a {bytes}-byte arena for its intermediate values; the limit \
                 is {} (Limits::max_arena_bytes, --max-arena-bytes)",
                self.max_arena_bytes
            )));
        }
        Ok(())
    }

    fn check_graph(&self, g: &Graph, depth: u64, nodes: &mut u64) -> Result<(), Error> {
        for id in g.node_ids() {
            let node = g.node(id);
            *nodes += 1;
            if *nodes > self.max_nodes {
                return Err(Error::Limit(format!(
                    "the graph has more than {} nodes (Limits::max_nodes, --max-nodes)",
                    self.max_nodes
                )));
            }
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
            let subgraphs = node.op.subgraphs();
            if !subgraphs.is_empty() && depth + 1 > self.max_nesting {
                return Err(Error::Limit(format!(
                    "node `{}` ({}) nests control-flow bodies more than {} deep \
                     (Limits::max_nesting, --max-nesting)",
                    node.origin_text(),
                    node.op.name(),
                    self.max_nesting
                )));
            }
            for sub in subgraphs {
                self.check_graph(sub, depth + 1, nodes)?;
            }
        }
        Ok(())
    }
}
