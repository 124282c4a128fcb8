//! Products of one row by several weights, merged (`merge-projections`).
//!
//! A decoder's step reads one token per sequence: its Q, K and V
//! projections (and a gated MLP's gate and up projections) are each a
//! product of the same row by its own constant weight, a launch apiece on a
//! GPU, where each takes a few microseconds of mostly fixed cost. Over the
//! weights side by side they are one product, and since the input is one
//! row, the product's output is the projections' outputs back to back: the
//! `split` that hands each its columns is views of it (the memory plan's
//! `split_in_place`), no copy.
//!
//! Members: `matmul` or `fused_matmul` nodes reading the same input of one
//! row (every dim but the last 1), with constant 2-D weights of the same
//! depth and dtype and constant `[N]` biases (or none: zeros stand in where
//! only some have one). Their activations stay theirs: the same one on all
//! is the merged product's; else each applies to its piece after the split
//! (`fuse-elementwise` then joins it to what reads it, as SiLU to the
//! gated MLP's product). Each piece but the last must end on the memory
//! plan's alignment, so that the split is views. GPU targets only: on the
//! CPU a product's fixed cost is small and the merged weights would be a
//! second copy in host memory.

use std::collections::HashMap;

use rlx_ir::ops::{Activation, FusedMatMul, Split};
use rlx_ir::{Graph, NodeId, Op, Tensor, Value};

use crate::fold_attention_layout::concat_columns;
use crate::manager::{Pass, PassContext, PassError};
use crate::memory::ALIGN;
use crate::rewrite::{add_op, const_of, constant, finish, union_origin};

pub struct MergeProjections;

const NAME: &str = "merge-projections";

impl Pass for MergeProjections {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let order = g.topo_order().map_err(|e| PassError::graph(NAME, e))?;
        // Members by (input, weight depth, weight dtype), in topological order.
        let mut groups: Vec<Vec<NodeId>> = Vec::new();
        let mut by_key: HashMap<(Value, usize, rlx_ir::DType), usize> = HashMap::new();
        for &id in &order {
            if let Some(key) = member_key(g, cx, id) {
                let at = *by_key.entry(key).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[at].push(id);
            }
        }
        let mut changed = false;
        for members in groups.into_iter().filter(|m| m.len() >= 2) {
            let done = merge(g, cx, &members).map_err(|reason| PassError::Node {
                pass: NAME,
                node: g.node(members[0]).name.clone(),
                origin: g.node(members[0]).origin_text(),
                reason,
            })?;
            if done {
                cx.count("matmul.merged-projections");
                changed = true;
            }
        }
        if changed {
            finish(g, cx, NAME)?;
        }
        Ok(changed)
    }
}

/// (input, depth, dtype) of a product that may join others: one input row,
/// a constant 2-D weight and a constant `[N]` bias or none.
fn member_key(g: &Graph, cx: &PassContext, id: NodeId) -> Option<(Value, usize, rlx_ir::DType)> {
    let node = g.node(id);
    if !matches!(node.op, Op::MatMul(_) | Op::FusedMatMul(_)) || node.outputs.len() != 1 {
        return None;
    }
    let ins = g.inputs_of(id);
    let (a, w) = (*ins.first()?, *ins.get(1)?);
    let dims = g.ty(a).shape.as_known()?;
    let (&k, lead) = dims.split_last()?;
    let wt = g.ty(w);
    let wd = wt.shape.as_known()?;
    if lead.iter().product::<usize>() != 1 || wd.len() != 2 || wd[0] != k || !wt.dtype.is_float() {
        return None;
    }
    let constant = |v: Value| const_of(g, cx.weights, v).is_some();
    let bias_ok = match ins.get(2) {
        None => true,
        Some(&b) => constant(b) && g.ty(b).shape.as_known()? == [wd[1]],
    };
    (constant(w) && bias_ok && g.ty(a).dtype == wt.dtype).then_some((a, k, wt.dtype))
}

fn activation(g: &Graph, id: NodeId) -> Activation {
    match &g.node(id).op {
        Op::FusedMatMul(f) => f.activation,
        _ => Activation::None,
    }
}

/// Replaces `members` by one product over their weights side by side and a
/// split of it; false where a piece would not end aligned.
fn merge(g: &mut Graph, cx: &mut PassContext, members: &[NodeId]) -> Result<bool, String> {
    let ins: Vec<Vec<Value>> = members.iter().map(|&m| g.inputs_of(m)).collect();
    let weights: Vec<Tensor> = ins
        .iter()
        .map(|i| const_of(g, cx.weights, i[1]).ok_or("a weight is not constant"))
        .collect::<Result<_, _>>()?;
    let cols: Vec<usize> = weights.iter().map(|w| w.dims()[1]).collect();
    let size = weights[0].dtype().size();
    if cols[..cols.len() - 1]
        .iter()
        .any(|c| (c * size) % ALIGN != 0)
    {
        return Ok(false);
    }
    let Some(wcat) = concat_columns(&weights.iter().collect::<Vec<_>>()) else {
        return Ok(false);
    };
    let biases: Vec<Option<Tensor>> = ins
        .iter()
        .map(|i| i.get(2).and_then(|&b| const_of(g, cx.weights, b)))
        .collect();
    let bcat = if biases.iter().any(Option::is_some) {
        let dtype = weights[0].dtype();
        let filled: Vec<Tensor> = biases
            .iter()
            .zip(&cols)
            .map(|(b, &n)| match b {
                Some(t) => Ok(t.clone()),
                None => Tensor::zeros(dtype, &[n]).map_err(|e| e.to_string()),
            })
            .collect::<Result<_, String>>()?;
        let Some(t) = concat_columns(&filled.iter().collect::<Vec<_>>()) else {
            return Ok(false);
        };
        Some(t)
    } else {
        None
    };
    let acts: Vec<Activation> = members.iter().map(|&m| activation(g, m)).collect();
    let shared = if acts.iter().all(|a| *a == acts[0]) {
        acts[0]
    } else {
        Activation::None
    };
    // One origin naming every member: the merged product stands for none of
    // their ONNX outputs alone (`compare` maps a step to its origin's output).
    let origin = vec![union_origin(g, members).join(", ")];
    let base = format!("{}_merged", g.node(members[0]).name);
    let wv = constant(
        g,
        cx.weights,
        &format!("{base}_weight"),
        origin.clone(),
        wcat,
    );
    let mut args = vec![ins[0][0], wv];
    if let Some(t) = bcat {
        args.push(constant(
            g,
            cx.weights,
            &format!("{base}_bias"),
            origin.clone(),
            t,
        ));
    }
    let op = FusedMatMul { activation: shared };
    let product = add_op(g, cx.weights, op, &base, origin.clone(), &args)?;
    let sizes: Vec<i64> = cols.iter().map(|&c| c as i64).collect();
    let sizes = Tensor::from_i64(&[sizes.len()], &sizes).map_err(|e| e.to_string())?;
    let sizes = constant(
        g,
        cx.weights,
        &format!("{base}_columns"),
        origin.clone(),
        sizes,
    );
    let split = Split {
        axis: -1,
        num_outputs: members.len() as i64,
    };
    let inputs = [Value::of(product), sizes];
    let parts = add_op(
        g,
        cx.weights,
        split,
        &format!("{base}_split"),
        origin,
        &inputs,
    )?;
    for (i, (&m, &act)) in members.iter().zip(&acts).enumerate() {
        let mut piece = Value::new(parts, i as u16);
        if act != shared {
            let name = g.node(m).name.clone();
            let origin = g.node(m).origin.clone();
            piece = crate::decompose::activation(g, cx.weights, &name, origin, act, piece)?;
        }
        g.replace_uses(Value::of(m), piece)
            .map_err(|e| e.to_string())?;
    }
    Ok(true)
}
