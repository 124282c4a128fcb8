//! What every GPU backend's support check shares: control flow runs when
//! every node of its bodies does (both branches of an If are planned,
//! whichever runs), each asked of the backend's own `supports`.

use rlx_ir::{Node, TensorType};

/// Whether every node of `node`'s bodies runs, by `supports` (which recurses
/// into nested control flow through this function).
pub fn bodies(
    node: &Node,
    supports: fn(&Node, &[TensorType]) -> Result<(), String>,
) -> Result<(), String> {
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
