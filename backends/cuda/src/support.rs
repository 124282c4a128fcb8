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
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => bodies(node),
        op => match crate::kernels::family(op) {
            Some(f) => (f.supports)(node, inputs),
            None => Err(format!(
                "the cuda backend has no kernel for `{}` yet",
                op.name()
            )),
        },
    }
}

/// Control flow runs when every node of its bodies does.
fn bodies(node: &Node) -> Result<(), String> {
    for sub in node.op.subgraphs() {
        for id in sub.node_ids() {
            let n = sub.node(id);
            if n.op.is_leaf() {
                continue;
            }
            let ins: Vec<TensorType> = sub
                .inputs_of(id)
                .iter()
                .map(|v| sub.ty(*v).clone())
                .collect();
            supports(n, &ins).map_err(|r| format!("body node `{}`: {r}", n.name))?;
        }
    }
    Ok(())
}
