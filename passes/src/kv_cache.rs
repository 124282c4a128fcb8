//! The key/value cache written in place (`kv-cache-in-place`). A decoder
//! exported with its cache concatenates each cache input with the new
//! positions and returns the result,
//!
//! ```text
//! present = concat(past, new, axis)        (past a graph input, present an output)
//! ```
//!
//! so every step's shapes grow by one position. Rewritten, the concatenation
//! is a `tensor_scatter` of `new` into `past` at the positions a new graph
//! input [`CACHE_POSITION`] (`[batch]` i64) names: past and present become
//! one buffer of a length fixed when the decoder starts, and every decode
//! step has the same shapes (one plan, one CUDA graph, replayed).
//!
//! The rewrite is exact for the cache itself. The rest of the graph then
//! sees the whole buffer as the past: an `attention_mask` of the buffer's
//! length must hide the positions not yet written, and positions must come
//! from `position_ids`, not from the cache's length. The decoder that asks
//! for the rewrite checks its first step against the growing graph.

use rlx_ir::analysis::infer_graph;
use rlx_ir::ops::{Input, TensorScatter};
use rlx_ir::{DType, Graph, Node, Op, Shape, TensorType, Value};

use crate::manager::PassError;

const NAME: &str = "kv-cache-in-place";

/// The name of the graph input that says where each batch row's new
/// positions go.
pub const CACHE_POSITION: &str = "cache_position";

/// Rewrites `present = concat(past, new)` into an in-place write for each
/// `(past input, present output)` pair named; returns how many. A pair
/// whose output is not such a concatenation of its input is an error naming
/// it (the decoder then keeps the growing cache).
pub fn kv_cache_in_place(g: &mut Graph, pairs: &[(String, String)]) -> Result<usize, PassError> {
    let err = |reason: String| PassError::graph(NAME, reason);
    if g.inputs().iter().any(|&i| g.node(i).name == CACHE_POSITION) {
        return Err(err(format!(
            "the graph already has an input `{CACHE_POSITION}`"
        )));
    }
    let mut position: Option<Value> = None;
    let mut done = 0;
    for (past_name, present_name) in pairs {
        let past = g
            .inputs()
            .iter()
            .copied()
            .find(|&i| matches!(&g.node(i).op, Op::Input(x) if &x.name == past_name))
            .ok_or_else(|| err(format!("no input `{past_name}`")))?;
        let out = g
            .outputs()
            .iter()
            .find(|o| &o.name == present_name)
            .map(|o| o.value)
            .ok_or_else(|| err(format!("no output `{present_name}`")))?;
        let concat = out.node;
        let axis = match &g.node(concat).op {
            Op::Concat(c) => c.axis,
            other => {
                return Err(err(format!(
                    "`{present_name}` comes from {} `{}`, not a concatenation of `{past_name}`",
                    other.name(),
                    g.node(concat).origin_text()
                )))
            }
        };
        let ins = g.inputs_of(concat);
        let [first, new] = ins.as_slice() else {
            return Err(err(format!(
                "`{present_name}` concatenates {} values, not the cache and the new positions",
                ins.len()
            )));
        };
        if *first != Value::of(past) || out.port != 0 {
            return Err(err(format!(
                "`{present_name}` does not start with `{past_name}`"
            )));
        }
        let ty = g.ty(Value::of(past)).clone();
        let pos =
            match position {
                Some(p) => p,
                None => {
                    let batch =
                        ty.shape.dims().first().cloned().ok_or_else(|| {
                            err(format!("`{past_name}` is a scalar, not a cache"))
                        })?;
                    let id = g.add_input(Node::new(
                        Op::Input(Input {
                            name: CACHE_POSITION.into(),
                        }),
                        CACHE_POSITION,
                        vec![],
                        vec![TensorType::new(DType::I64, Shape(vec![batch]))],
                    ));
                    *position.insert(Value::of(id))
                }
            };
        let node = g.node(concat);
        let scatter = Node::new(
            Op::TensorScatter(TensorScatter {
                axis,
                circular: false,
                has_indices: true,
            }),
            g.unique_name(&format!("{}/in_place", node.name)),
            node.origin.clone(),
            vec![ty],
        );
        let new = *new;
        let id = g
            .add_node(scatter, &[Value::of(past), new, pos])
            .map_err(|e| err(e.to_string()))?;
        g.replace_uses(out, Value::of(id))
            .map_err(|e| err(e.to_string()))?;
        g.remove_node(concat);
        done += 1;
    }
    infer_graph(g, None).map_err(|source| PassError::Infer { pass: NAME, source })?;
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::text::{parse_graph, print_graph};

    const DECODER: &str = "rlx-ir 2\ngraph {\n  %0 = input \"past\" : f32[b,2,p,4]\n  %1 = input \"new\" : f32[b,2,1,4]\n  %2 = concat(%0, %1) {axis=2} : f32[b,2,p+1,4]\n  %3 = neg(%2) : f32[b,2,p+1,4]\n  output \"present\" = %2\n  output \"y\" = %3\n}\n";

    #[test]
    fn the_cache_concatenation_becomes_a_write_in_place() {
        let mut g = parse_graph(DECODER).unwrap();
        let pairs = [("past".to_string(), "present".to_string())];
        assert_eq!(kv_cache_in_place(&mut g, &pairs).unwrap(), 1);
        let text = print_graph(&g);
        assert!(text.contains("input \"cache_position\" : i64[b]"), "{text}");
        assert!(text.contains("tensor_scatter(%0, %1, "), "{text}");
        assert!(!text.contains("concat"), "{text}");
        // Everything after the cache now sees its fixed length.
        assert!(
            text.contains("neg(") && text.contains(": f32[b,2,p,4]\n  output"),
            "{text}"
        );
    }

    #[test]
    fn an_output_that_is_no_cache_concatenation_is_named() {
        let mut g = parse_graph(DECODER).unwrap();
        let pairs = [("past".to_string(), "y".to_string())];
        let e = kv_cache_in_place(&mut g, &pairs).unwrap_err().to_string();
        assert!(e.contains("`y` comes from neg"), "{e}");
        let pairs = [("new".to_string(), "present".to_string())];
        let e = kv_cache_in_place(&mut g, &pairs).unwrap_err().to_string();
        assert!(e.contains("does not start with `new`"), "{e}");
    }
}
