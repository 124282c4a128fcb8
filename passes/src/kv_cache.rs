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
//! The cache input then holds the whole buffer, new positions included. What
//! else of the graph read the past (its length, for masks and positions)
//! reads the buffer less the new positions, `slice(cache, 0, -new)`, so the
//! graph's length arithmetic is that of the growing graph at its last step
//! (and the slice folds away once shapes are known). An `attention_mask`
//! of the buffer's length must hide the positions not yet written, and
//! positions must come from `position_ids`. The decoder that asks for the
//! rewrite checks its first step against the growing graph.

use rlx_ir::analysis::infer_graph;
use rlx_ir::ops::{Input, ShapeOf, Slice, TensorScatter, Unary, UnaryKind};
use rlx_ir::{DType, Graph, Node, Op, Shape, Tensor, TensorType, Value, Weights};

use crate::manager::PassError;
use crate::rewrite::{add_op, constant};

const NAME: &str = "kv-cache-in-place";

/// The name of the graph input that says where each batch row's new
/// positions go.
pub const CACHE_POSITION: &str = "cache_position";

/// Rewrites `present = concat(past, new)` into an in-place write for each
/// `(past input, present output)` pair named; returns how many. A pair
/// whose output is not such a concatenation of its input is an error naming
/// it (the decoder then keeps the growing cache).
pub fn kv_cache_in_place(
    g: &mut Graph,
    w: &mut Weights,
    pairs: &[(String, String)],
) -> Result<usize, PassError> {
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
        let origin = node.origin.clone();
        let id = g
            .add_node(scatter, &[Value::of(past), new, pos])
            .map_err(|e| err(e.to_string()))?;
        g.replace_uses(out, Value::of(id))
            .map_err(|e| err(e.to_string()))?;
        g.remove_node(concat);
        // The other readers of the past see the buffer less the new positions.
        let readers: Vec<(rlx_ir::NodeId, u16)> = g
            .users_of(Value::of(past))
            .into_iter()
            .filter(|(u, _)| *u != id)
            .collect();
        if !readers.is_empty() {
            let earlier = past_view(g, w, Value::of(past), new, axis, origin).map_err(err)?;
            for (u, port) in readers {
                g.set_input(u, usize::from(port), earlier)
                    .map_err(|e| err(e.to_string()))?;
            }
        }
        done += 1;
    }
    infer_graph(g, None).map_err(|source| PassError::Infer { pass: NAME, source })?;
    Ok(done)
}

/// `slice(cache, 0, -len(new))` along `axis`: the past positions of a
/// buffer that holds the new ones too.
fn past_view(
    g: &mut Graph,
    w: &mut Weights,
    cache: Value,
    new: Value,
    axis: i64,
    origin: Vec<String>,
) -> Result<Value, String> {
    let rank = g.ty(cache).shape.rank() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    let len = add_op(
        g,
        w,
        ShapeOf {
            start: a,
            end: Some(a + 1),
        },
        "cache/new_len",
        origin.clone(),
        &[new],
    )?;
    let neg = add_op(
        g,
        w,
        Unary {
            kind: UnaryKind::Neg,
        },
        "cache/past_end",
        origin.clone(),
        &[Value::of(len)],
    )?;
    let i64s = |v: i64| Tensor::from_i64(&[1], &[v]).map_err(|e| e.to_string());
    let starts = constant(g, w, "cache/starts", origin.clone(), i64s(0)?);
    let axes = constant(g, w, "cache/axes", origin.clone(), i64s(a)?);
    let view = add_op(
        g,
        w,
        Slice {},
        "cache/past",
        origin,
        &[cache, starts, Value::of(neg), axes],
    )?;
    Ok(Value::of(view))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::text::{parse_graph, print_graph};

    /// A cache, its new positions, and a reader of the past's length.
    const DECODER: &str = "rlx-ir 2\ngraph {\n  %0 = input \"past\" : f32[b,2,p,4]\n  %1 = input \"new\" : f32[b,2,1,4]\n  %2 = concat(%0, %1) {axis=2} : f32[b,2,p+1,4]\n  %3 = neg(%2) : f32[b,2,p+1,4]\n  %4 = shape(%0) {start=2, end=3} : i64[1]\n  output \"present\" = %2\n  output \"y\" = %3\n  output \"past_len\" = %4\n}\n";

    #[test]
    fn the_cache_concatenation_becomes_a_write_in_place() {
        let mut g = parse_graph(DECODER).unwrap();
        let mut w = Weights::default();
        let pairs = [("past".to_string(), "present".to_string())];
        assert_eq!(kv_cache_in_place(&mut g, &mut w, &pairs).unwrap(), 1);
        let text = print_graph(&g);
        assert!(text.contains("input \"cache_position\" : i64[b]"), "{text}");
        assert!(text.contains("tensor_scatter(%0, %1, "), "{text}");
        assert!(!text.contains("concat"), "{text}");
        // Everything after the cache now sees its fixed length.
        assert!(text.contains("neg(%3) : f32[b,2,p,4]"), "{text}");
        // The past's length is read from the buffer less the new position.
        let len = g
            .outputs()
            .iter()
            .find(|o| o.name == "past_len")
            .unwrap()
            .value;
        let view = g.inputs_of(len.node)[0].node;
        assert!(matches!(g.node(view).op, Op::Slice(_)), "{text}");
    }

    #[test]
    fn an_output_that_is_no_cache_concatenation_is_named() {
        let mut g = parse_graph(DECODER).unwrap();
        let mut w = Weights::default();
        let pairs = [("past".to_string(), "y".to_string())];
        let e = kv_cache_in_place(&mut g, &mut w, &pairs)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`y` comes from neg"), "{e}");
        let pairs = [("new".to_string(), "present".to_string())];
        let e = kv_cache_in_place(&mut g, &mut w, &pairs)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not start with `new`"), "{e}");
    }
}
