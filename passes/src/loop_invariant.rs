//! Loop-invariant values (`loop-invariants`): what a control-flow body reads
//! unchanged on every iteration becomes visible to the body's own passes.
//!
//! - A loop-carried value the body returns as it got it (exporters such as
//!   Paddle's pass a decoder's weights through its loop that way) is a
//!   capture: the loop's output for it is its initial value.
//! - A capture (of a loop, scan or branch) that is a constant or a weight in
//!   the enclosing graph becomes that constant inside the body, so folding
//!   and kernel building inside the body see it (a body's transposed weight
//!   folds once instead of being transposed on every iteration).
//!
//! - A body node computed only from captures and constants (a decoder's
//!   projection of the encoder's features) moves out of the loop or scan:
//!   it runs once, before the loop, and the body captures its result. Like
//!   ONNX Runtime and other compilers that move loop-invariant code, this
//!   computes it even when the loop then runs no iteration.
//!
//! Enclosing graphs go first, so a nested body sees the constants its parent
//! body received.

use std::collections::{HashMap, HashSet};

use rlx_ir::ops::Input;
use rlx_ir::{Graph, Node, NodeId, Op, Value};

use crate::fold::FoldConstants;
use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::finish;

pub struct LoopInvariants;

const NAME: &str = "loop-invariants";

impl Pass for LoopInvariants {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let captured = walk(g, cx, Step::Captures).map_err(|e| PassError::graph(NAME, e))?;
        if captured {
            finish(g, cx, NAME)?;
            // What the bodies received may fold there now; what folds is not
            // moved out of them below.
            FoldConstants.run(g, cx)?;
        }
        let hoisted = walk(g, cx, Step::Hoist).map_err(|e| PassError::graph(NAME, e))?;
        if hoisted {
            finish(g, cx, NAME)?;
        }
        Ok(captured || hoisted)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Step {
    /// Pass-through carried values to captures, constant captures into bodies.
    Captures,
    /// Invariant body nodes out of loops and scans.
    Hoist,
}

/// Runs `step` over `g`'s control-flow nodes, then over their bodies.
fn walk(g: &mut Graph, cx: &mut PassContext, step: Step) -> Result<bool, String> {
    let mut changed = false;
    for id in g.topo_order().map_err(|e| e.to_string())? {
        changed |= match (step, &g.node(id).op) {
            (Step::Captures, Op::Loop(_)) => {
                let c = carried_to_captures(g, id, cx)?;
                constant_captures(g, id, cx)? || c
            }
            (Step::Captures, Op::Scan(_) | Op::If(_)) => constant_captures(g, id, cx)?,
            (Step::Hoist, Op::Loop(_) | Op::Scan(_)) => hoist(g, id, cx)?,
            _ => false,
        };
    }
    for id in g.node_ids() {
        for sub in g.node_mut(id).op.subgraphs_mut() {
            if walk(sub, cx, step)? {
                changed = true;
                crate::dce::dce(sub);
            }
        }
    }
    Ok(changed)
}

/// Turns each carried value of loop `id` that its body passes through into a
/// capture. The loop's inputs are `(M, cond, carried..., captures...)`, its
/// body's the same, its body's outputs `(cond, carried..., scans...)` and its
/// own outputs `(carried..., scans...)`.
fn carried_to_captures(g: &mut Graph, id: NodeId, cx: &mut PassContext) -> Result<bool, String> {
    let Op::Loop(op) = &g.node(id).op else {
        return Ok(false);
    };
    let Ok(k) = usize::try_from(op.num_carried) else {
        return Ok(false);
    };
    let body = &op.body;
    if body.inputs().len() < 2 + k || body.outputs().len() < 1 + k {
        return Ok(false);
    }
    let through: Vec<usize> = (0..k)
        .filter(|&i| body.outputs()[1 + i].value == Value::of(body.inputs()[2 + i]))
        .collect();
    if through.is_empty() {
        return Ok(false);
    }
    let mut ins = g.inputs_of(id);
    if ins.len() != body.inputs().len() {
        return Ok(false);
    }
    // Highest first: moving carried value i leaves the positions below it alone.
    for &i in through.iter().rev() {
        let init = ins.remove(2 + i);
        ins.push(init);
        // The loop's output i is the initial value; later outputs shift down.
        let ports = g.node(id).outputs.len();
        g.replace_uses(Value::new(id, i as u16), init)
            .map_err(|e| e.to_string())?;
        for p in i + 1..ports {
            g.replace_uses(Value::new(id, p as u16), Value::new(id, p as u16 - 1))
                .map_err(|e| e.to_string())?;
        }
        let node = g.node_mut(id);
        node.outputs.remove(i);
        let Op::Loop(op) = &mut node.op else {
            return Err("not a loop".into());
        };
        let body = &mut op.body;
        let mut order = body.inputs().to_vec();
        let moved = order.remove(2 + i);
        order.push(moved);
        body.set_input_order(order);
        body.outputs_mut().remove(1 + i);
        op.num_carried -= 1;
        cx.count("loop-invariants.carried");
    }
    g.set_inputs(id, &ins).map_err(|e| e.to_string())?;
    Ok(true)
}

/// The first input of `op` that is a capture, and where the captures start
/// among each body's inputs.
fn captures(op: &Op) -> Option<(usize, usize)> {
    match op {
        Op::Loop(o) => {
            let k = usize::try_from(o.num_carried).ok()?;
            Some((2 + k, 2 + k))
        }
        Op::Scan(o) => {
            let n = usize::try_from(o.num_state).ok()? + usize::try_from(o.num_scan_inputs).ok()?;
            Some((n, n))
        }
        Op::If(_) => Some((1, 0)),
        _ => None,
    }
}

/// Replaces every capture of `id` that is a constant or weight of `g` by a
/// copy of it inside each body, and drops it from the node's inputs.
fn constant_captures(g: &mut Graph, id: NodeId, cx: &mut PassContext) -> Result<bool, String> {
    let Some((first, body_first)) = captures(&g.node(id).op) else {
        return Ok(false);
    };
    let ins = g.inputs_of(id);
    let leaf = |v: &Value| matches!(g.node(v.node).op, Op::Constant(_) | Op::Weight(_));
    let constant: Vec<usize> = (first..ins.len()).filter(|&j| leaf(&ins[j])).collect();
    if constant.is_empty() {
        return Ok(false);
    }
    let leaves: Vec<rlx_ir::Node> = constant
        .iter()
        .map(|&j| g.node(ins[j].node).clone())
        .collect();
    let node = g.node_mut(id);
    for sub in node.op.subgraphs_mut() {
        if sub.inputs().len() + first != ins.len() + body_first {
            return Err(format!("`{}` has a body of another arity", node.name));
        }
        // Highest first, so the lower positions stay valid.
        for (&j, leaf) in constant.iter().zip(&leaves).rev() {
            let input = sub.inputs()[j - first + body_first];
            let c = sub.add_node(leaf.clone(), &[]).map_err(|e| e.to_string())?;
            sub.replace_uses(Value::of(input), Value::of(c))
                .map_err(|e| e.to_string())?;
            sub.remove_node(input);
            // Its own name unless the body has a node of that name (the input
            // it replaced often did, and is gone now).
            let taken = sub
                .node_ids()
                .into_iter()
                .any(|id| id != c && sub.node(id).name == leaf.name);
            if taken {
                let name = sub.unique_name(&leaf.name);
                sub.rename(c, name);
            }
        }
    }
    let kept: Vec<Value> = (0..ins.len())
        .filter(|j| !constant.contains(j))
        .map(|j| ins[j])
        .collect();
    g.set_inputs(id, &kept).map_err(|e| e.to_string())?;
    for _ in &constant {
        cx.count("loop-invariants.constant");
    }
    Ok(true)
}

/// Moves the body nodes of loop or scan `id` that depend only on captures
/// and constants into `g`, before the node; the body captures what the rest
/// of it reads of them.
fn hoist(g: &mut Graph, id: NodeId, cx: &mut PassContext) -> Result<bool, String> {
    let Some((first, body_first)) = captures(&g.node(id).op) else {
        return Ok(false);
    };
    let outer_ins = g.inputs_of(id);
    let body = match &g.node(id).op {
        Op::Loop(o) => &o.body,
        Op::Scan(o) => &o.body,
        _ => return Ok(false),
    };
    if body.inputs().len() + first != outer_ins.len() + body_first {
        return Ok(false);
    }
    // Body node -> its value outside: captures and constants to begin with.
    let mut outside: HashMap<NodeId, Option<Value>> = HashMap::new();
    for (j, &input) in body.inputs().iter().enumerate().skip(body_first) {
        outside.insert(input, Some(outer_ins[j - body_first + first]));
    }
    let order = body.topo_order().map_err(|e| e.to_string())?;
    let mut moved: Vec<NodeId> = Vec::new();
    for &n in &order {
        let op = &body.node(n).op;
        if op.is_leaf() {
            if matches!(op, Op::Constant(_) | Op::Weight(_)) {
                outside.insert(n, None);
            }
            continue;
        }
        if crate::cse::is_pure(op)
            && body
                .inputs_of(n)
                .iter()
                .all(|v| outside.contains_key(&v.node))
        {
            outside.insert(n, None);
            moved.push(n);
        }
    }
    // What the rest of the body reads of the moved nodes.
    let moved_set: HashSet<NodeId> = moved.iter().copied().collect();
    let mut read: Vec<Value> = Vec::new();
    for &n in &order {
        if moved_set.contains(&n) || body.node(n).op.is_leaf() {
            continue;
        }
        for v in body.inputs_of(n) {
            if moved_set.contains(&v.node) && !read.contains(&v) {
                read.push(v);
            }
        }
    }
    for o in body.outputs() {
        if moved_set.contains(&o.value.node) && !read.contains(&o.value) {
            read.push(o.value);
        }
    }
    if read.is_empty() {
        return Ok(false);
    }
    // Copy the moved nodes (and the constants they read) into `g`.
    let mut copies: HashMap<NodeId, NodeId> = HashMap::new();
    let body = body.clone();
    let map =
        |v: Value, g: &mut Graph, copies: &mut HashMap<NodeId, NodeId>| -> Result<Value, String> {
            if let Some(Some(out)) = outside.get(&v.node) {
                return Ok(*out);
            }
            if let Some(&c) = copies.get(&v.node) {
                return Ok(Value::new(c, v.port));
            }
            // A constant of the body, read by a moved node.
            let mut leaf: Node = body.node(v.node).clone();
            leaf.name = g.unique_name(&leaf.name);
            let c = g.add_node(leaf, &[]).map_err(|e| e.to_string())?;
            copies.insert(v.node, c);
            Ok(Value::new(c, v.port))
        };
    for &n in &moved {
        let ins = body
            .inputs_of(n)
            .into_iter()
            .map(|v| map(v, g, &mut copies))
            .collect::<Result<Vec<_>, _>>()?;
        let mut node = body.node(n).clone();
        node.name = g.unique_name(&node.name);
        let c = g.add_node(node, &ins).map_err(|e| e.to_string())?;
        copies.insert(n, c);
        cx.count("loop-invariants.hoisted");
    }
    // The body captures each value it still reads.
    let mut new_ins = outer_ins;
    let node = g.node_mut(id);
    let body = match &mut node.op {
        Op::Loop(o) => &mut o.body,
        Op::Scan(o) => &mut o.body,
        _ => return Ok(false),
    };
    for v in read {
        let ty = body.ty(v).clone();
        let name = body.unique_name(&format!("{}.hoisted", body.node(v.node).name));
        let input = body.add_input(Node::new(
            Op::Input(Input { name: name.clone() }),
            name,
            body.node(v.node).origin.clone(),
            vec![ty],
        ));
        body.replace_uses(v, Value::of(input))
            .map_err(|e| e.to_string())?;
        let copy = copies
            .get(&v.node)
            .ok_or("a hoisted value without its copy")?;
        new_ins.push(Value::new(*copy, v.port));
    }
    crate::dce::dce(body);
    g.set_inputs(id, &new_ins).map_err(|e| e.to_string())?;
    Ok(true)
}
