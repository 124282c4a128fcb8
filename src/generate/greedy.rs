//! Greedy choice where the step runs. The in-place decoder graph ends in an
//! ArgMax over its logits ([`GREEDY_TOKENS`]), so that a greedy decode
//! step on a GPU brings down one token a row instead of a row of logits
//! (a batch-8 GPT-2 step's are 1.6 MB, read back each step before).

use rlx_ir::ops::{ArgReduce, ArgReduceKind};
use rlx_ir::{DType, Node, Shape, TensorType, Value as IrValue};

use crate::compile::CompiledModel;
use crate::error::{Error, Result};
use crate::value::Value;

/// The output the in-place decoder graph adds: each position's greedy
/// token, the index of the first largest logit (as [`super::argmax`] picks
/// it), `[batch, positions]` (or `[batch]` where the logits are one
/// position's) i64.
pub const GREEDY_TOKENS: &str = "rlx.greedy_tokens";

/// Adds [`GREEDY_TOKENS`] over the output `logits` of `model`.
pub(super) fn add_output(
    model: &mut CompiledModel,
    logits: &str,
) -> std::result::Result<(), String> {
    let g = &mut model.graph;
    let Some(out) = g
        .outputs()
        .iter()
        .find(|o| o.name == logits)
        .map(|o| o.value)
    else {
        return Err(format!("no output `{logits}`"));
    };
    let ty = g.ty(out).clone();
    let dims = match ty.shape.0.split_last() {
        Some((_, rows)) if !rows.is_empty() => rows.to_vec(),
        _ => return Err(format!("logits of shape {} have no rows", ty.shape)),
    };
    let argmax = ArgReduce {
        kind: ArgReduceKind::Max,
        axis: -1,
        keepdims: false,
        select_last_index: false,
    };
    let node = Node::new(
        argmax.into(),
        g.unique_name("greedy_tokens"),
        vec![],
        vec![TensorType::new(DType::I64, Shape(dims))],
    );
    let id = g.add_node(node, &[out]).map_err(|e| e.to_string())?;
    g.add_output(GREEDY_TOKENS, IrValue::of(id))
        .map_err(|e| e.to_string())
}

/// Each row's token at the last position of `tokens` ([`GREEDY_TOKENS`]).
pub(super) fn last(tokens: &Value, batch: usize) -> Result<Vec<i64>> {
    let t = tokens.to_host()?;
    let all = t.as_slice::<i64>()?;
    let per_row = match t.dims() {
        [b] if *b == batch => 1,
        [b, p] if *b == batch && *p > 0 => *p,
        d => {
            return Err(Error::Generate(format!(
                "greedy tokens of shape {d:?} for a batch of {batch}"
            )))
        }
    };
    Ok(all.chunks(per_row).map(|row| row[per_row - 1]).collect())
}
