//! Which nodes the CUDA backend runs, and why not: leaves, views, control
//! flow whose bodies run, and every node its kernel family
//! ([`crate::kernels::family`]) accepts. Everything else is refused by op
//! name, so legalization can report it.

use rlx_ir::{Node, Op, TensorType};

/// Whether the backend runs `node` as it is, with inputs of these types.
pub fn supports(node: &Node, inputs: &[TensorType]) -> Result<(), String> {
    match &node.op {
        Op::Input(_) | Op::Weight(_) | Op::Constant(_) => Ok(()),
        Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_) => Ok(()),
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => rlx_gpu::support::bodies(node, supports),
        op => match crate::kernels::family(op) {
            Some(f) => (f.supports)(node, inputs),
            None => Err(format!(
                "the cuda backend has no kernel for `{}` yet",
                op.name()
            )),
        },
    }
}
