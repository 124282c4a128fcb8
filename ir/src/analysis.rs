//! Whole-graph type inference, compile-time values, specialization and the verifier.

use std::collections::HashMap;

use crate::dim::{Bindings, Dim};
use crate::graph::{Graph, NodeId, Value};
use crate::ops::{eval_known, InferCx, InferError, KnownValue, Op};
use crate::shape::TensorType;
use crate::weights::Weights;

/// An inference error located at a node.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("node `{node}` ({op}{}): {source}", origin_suffix(.origin))]
pub struct NodeError {
    pub node: String,
    pub op: &'static str,
    pub origin: Vec<String>,
    #[source]
    pub source: InferError,
}

fn origin_suffix(origin: &[String]) -> String {
    if origin.is_empty() {
        String::new()
    } else {
        format!(", from ONNX {}", origin.join(", "))
    }
}

impl NodeError {
    pub fn new(g: &Graph, id: NodeId, source: InferError) -> NodeError {
        let n = g.node(id);
        NodeError {
            node: n.name.clone(),
            op: n.op.name(),
            origin: n.origin.clone(),
            source,
        }
    }
}

/// Compile-time values of a graph's outputs, computed so far.
pub type Values = HashMap<Value, KnownValue>;

/// Largest weight read as a compile-time value.
const MAX_WEIGHT_VALUE_ELEMS: usize = 4096;

/// Infers the output types of `id` from the current input types and values.
pub fn infer_node(
    g: &Graph,
    id: NodeId,
    values: &Values,
    weights: Option<&Weights>,
) -> Result<Vec<TensorType>, InferError> {
    let node = g.node(id);
    let ins = g.inputs_of(id);
    let types: Vec<TensorType> = ins.iter().map(|v| g.ty(*v).clone()).collect();
    let vals: Vec<Option<KnownValue>> = ins.iter().map(|v| values.get(v).cloned()).collect();
    let cx = InferCx {
        inputs: &types,
        values: &vals,
        node: &node.name,
        prior: &node.outputs,
    };
    let out = node.op.infer(&cx)?;
    let _ = weights;
    Ok(out)
}

/// Records the compile-time values of `id`'s outputs into `values`.
pub fn record_values(g: &Graph, id: NodeId, values: &mut Values, weights: Option<&Weights>) {
    let node = g.node(id);
    if let (Op::Weight(w), Some(ws)) = (&node.op, weights) {
        if let Some(t) = ws.get(&w.name) {
            if t.numel() <= MAX_WEIGHT_VALUE_ELEMS {
                values.insert(Value::of(id), KnownValue::Tensor(t.clone()));
            }
        }
        return;
    }
    let ins = g.inputs_of(id);
    let types: Vec<TensorType> = ins.iter().map(|v| g.ty(*v).clone()).collect();
    let vals: Vec<Option<KnownValue>> = ins.iter().map(|v| values.get(v).cloned()).collect();
    for (port, v) in eval_known(&node.op, &types, &vals, &node.outputs)
        .into_iter()
        .enumerate()
    {
        if let Some(v) = v {
            values.insert(Value::new(id, port as u16), v);
        }
    }
}

/// Re-infers every node's output types in topological order, storing them, and
/// returns the compile-time values found on the way. Subgraph captures take the
/// types (and known values) of the outer values they capture.
pub fn infer_graph(g: &mut Graph, weights: Option<&Weights>) -> Result<Values, NodeError> {
    infer_graph_seeded(g, weights, &HashMap::new())
}

/// [`infer_graph`] with known values for some inputs (by input index).
pub fn infer_graph_seeded(
    g: &mut Graph,
    weights: Option<&Weights>,
    seeds: &HashMap<usize, KnownValue>,
) -> Result<Values, NodeError> {
    let order = g.topo_order().map_err(|e| NodeError {
        node: String::new(),
        op: "graph",
        origin: Vec::new(),
        source: InferError::Value {
            port: 0,
            reason: e.to_string(),
        },
    })?;
    let mut values = seed_values(g, seeds);
    for id in order {
        refresh_subgraphs(g, id, weights, &values)?;
        let out = infer_node(g, id, &values, weights).map_err(|e| NodeError::new(g, id, e))?;
        g.node_mut(id).outputs = out;
        record_values(g, id, &mut values, weights);
    }
    Ok(values)
}

fn seed_values(g: &Graph, seeds: &HashMap<usize, KnownValue>) -> Values {
    let mut values = Values::new();
    for (i, id) in g.inputs().iter().enumerate() {
        if let Some(v) = seeds.get(&i) {
            values.insert(Value::of(*id), v.clone());
        }
    }
    values
}

/// For a control-flow node: (first outer port that is a capture, offset from
/// body input index to outer port).
fn capture_layout(op: &Op) -> Option<(usize, usize)> {
    match op {
        Op::If(_) => Some((1, 1)),
        // Negative counts (a crafted file) leave no captures; inference refuses them.
        Op::Loop(l) => Some((2 + usize::try_from(l.num_carried).unwrap_or(0), 0)),
        Op::Scan(s) => Some((
            usize::try_from(s.num_state.saturating_add(s.num_scan_inputs)).unwrap_or(0),
            0,
        )),
        // Every input: the mapped sequences (one element each), the whole
        // tensors and the captures.
        Op::SequenceMap(_) => Some((0, 0)),
        _ => None,
    }
}

/// Known values of a control-flow node's captures, by body input index.
fn capture_seeds(g: &Graph, id: NodeId, values: &Values) -> HashMap<usize, KnownValue> {
    let Some((first, offset)) = capture_layout(&g.node(id).op) else {
        return HashMap::new();
    };
    let mut seeds = HashMap::new();
    for (port, v) in g.inputs_of(id).into_iter().enumerate() {
        if port >= first {
            if let Some(kv) = values.get(&v) {
                seeds.insert(port - offset, kv.clone());
            }
        }
    }
    seeds
}

/// The subgraph (by index in `subgraphs()`) that can never run: the branch an
/// `if` with a known condition does not take. Its types need not infer (a
/// `Reshape` there may not fit the shapes that chose the other branch).
fn untaken_branch(g: &Graph, id: NodeId, values: &Values) -> Option<usize> {
    if !matches!(g.node(id).op, Op::If(_)) {
        return None;
    }
    let cond = g
        .inputs_of(id)
        .first()
        .and_then(|c| values.get(c))?
        .as_i64s()?;
    match cond.as_slice() {
        [c] => Some(usize::from(*c != 0)),
        _ => None,
    }
}

/// Updates the capture inputs of a control-flow node's subgraphs to the outer
/// types and re-infers the subgraphs (the untaken branch of a decided `if`
/// as far as it goes).
fn refresh_subgraphs(
    g: &mut Graph,
    id: NodeId,
    weights: Option<&Weights>,
    values: &Values,
) -> Result<(), NodeError> {
    let Some((first, offset)) = capture_layout(&g.node(id).op) else {
        return Ok(());
    };
    let outer: Vec<TensorType> = g.inputs_of(id).iter().map(|v| g.ty(*v).clone()).collect();
    let seeds = capture_seeds(g, id, values);
    let untaken = untaken_branch(g, id, values);
    let node = g.node_mut(id);
    for sub in node.op.subgraphs_mut() {
        let ins = sub.inputs().to_vec();
        for (k, input) in ins.iter().enumerate() {
            let outer_port = k + offset;
            if outer_port >= first && outer_port < outer.len() {
                let mut t = outer[outer_port].clone();
                // A body that takes one element of a sequence sees its element type.
                if t.kind == crate::ValueKind::Sequence
                    && sub.node(*input).outputs[0].kind == crate::ValueKind::Tensor
                {
                    t.kind = crate::ValueKind::Tensor;
                }
                sub.node_mut(*input).outputs = vec![t];
            }
        }
    }
    let name = node.name.clone();
    let origin = node.origin.clone();
    let op_name = node.op.name();
    for (i, sub) in node.op.subgraphs_mut().into_iter().enumerate() {
        let result = infer_graph_seeded(sub, weights, &seeds);
        if untaken == Some(i) {
            continue;
        }
        result.map_err(|e| NodeError {
            node: format!("{name}/{}", e.node),
            op: op_name,
            origin: if e.origin.is_empty() {
                origin.clone()
            } else {
                e.origin.clone()
            },
            source: e.source,
        })?;
    }
    Ok(())
}

/// Substitutes bound symbols in the declared input types (of the graph and,
/// recursively, of subgraphs), then re-infers everything.
pub fn specialize(
    g: &Graph,
    bindings: &Bindings,
    weights: Option<&Weights>,
) -> Result<Graph, NodeError> {
    let mut out = g.clone();
    substitute_inputs(&mut out, bindings).map_err(|e| NodeError {
        node: String::new(),
        op: "input",
        origin: Vec::new(),
        source: InferError::Dim(e),
    })?;
    infer_graph(&mut out, weights)?;
    Ok(out)
}

fn substitute_inputs(g: &mut Graph, b: &Bindings) -> Result<(), crate::dim::DimError> {
    let f = |s: &str| b.get(s).map(|v| Dim::Known(*v));
    for id in g.node_ids() {
        let node = g.node_mut(id);
        if matches!(node.op, Op::Input(_)) {
            for t in &mut node.outputs {
                t.shape = t.shape.substitute(&f)?;
            }
        }
        for sub in node.op.subgraphs_mut() {
            substitute_inputs(sub, b)?;
        }
    }
    Ok(())
}

/// A structural or type error found by [`verify`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerifyError {
    #[error("{0}")]
    Graph(#[from] crate::graph::GraphError),
    #[error("node `{node}`: input ports are {ports:?}, expected 0..{n}")]
    Ports {
        node: String,
        ports: Vec<u16>,
        n: usize,
    },
    #[error(transparent)]
    Infer(#[from] NodeError),
    #[error("node `{node}`: stored types {stored} differ from inferred {inferred}")]
    Types {
        node: String,
        stored: String,
        inferred: String,
    },
    #[error("input node `{0}` is not in the input list")]
    Input(String),
}

/// Checks acyclicity, arity, port ranges, and that every stored type equals
/// what inference computes now; recurses into subgraphs.
pub fn verify(g: &Graph, weights: Option<&Weights>) -> Result<(), VerifyError> {
    verify_seeded(g, weights, &HashMap::new())
}

fn verify_seeded(
    g: &Graph,
    weights: Option<&Weights>,
    seeds: &HashMap<usize, KnownValue>,
) -> Result<(), VerifyError> {
    let order = g.topo_order()?;
    let mut values = seed_values(g, seeds);
    for id in order {
        let node = g.node(id);
        if matches!(node.op, Op::Input(_)) && !g.inputs().contains(&id) {
            return Err(VerifyError::Input(node.name.clone()));
        }
        let ins = g.inputs_of(id);
        let mut ports: Vec<u16> = g
            .petgraph()
            .edges_directed(id, petgraph::Direction::Incoming)
            .map(|e| e.weight().dst_input)
            .collect();
        ports.sort();
        if ports.iter().enumerate().any(|(i, p)| usize::from(*p) != i) {
            return Err(VerifyError::Ports {
                node: node.name.clone(),
                ports,
                n: ins.len(),
            });
        }
        for v in &ins {
            g.check_value(*v)?;
        }
        let sub_seeds = capture_seeds(g, id, &values);
        let untaken = untaken_branch(g, id, &values);
        for (i, sub) in node.op.subgraphs().into_iter().enumerate() {
            if untaken != Some(i) {
                verify_seeded(sub, weights, &sub_seeds)?;
            }
        }
        let inferred = infer_node(g, id, &values, weights).map_err(|e| NodeError::new(g, id, e))?;
        if inferred != node.outputs {
            let show = |t: &[TensorType]| {
                t.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(VerifyError::Types {
                node: node.name.clone(),
                stored: show(&node.outputs),
                inferred: show(&inferred),
            });
        }
        record_values(g, id, &mut values, weights);
    }
    for o in g.outputs() {
        g.check_value(o.value)?;
    }
    Ok(())
}

/// Why runtime input shapes do not fit the declared ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error("input `{input}` has rank {got}, expected {expected} (declared {declared})")]
    Rank {
        input: String,
        got: usize,
        expected: usize,
        declared: String,
    },
    #[error("input `{input}` dim {axis} is {got}, expected {expected} (declared {declared})")]
    Dim {
        input: String,
        axis: usize,
        got: usize,
        expected: i64,
        declared: String,
    },
    #[error("input `{input}` dim {axis} binds `{symbol}` to {got}, but an earlier input bound it to {bound}")]
    Conflict {
        input: String,
        axis: usize,
        symbol: String,
        got: usize,
        bound: i64,
    },
}

/// Binds the graph's input symbols from concrete input shapes (in input order)
/// and checks every known dim.
pub fn bind_shapes(g: &Graph, shapes: &[&[usize]]) -> Result<Bindings, BindError> {
    let mut b = Bindings::new();
    // Plain symbols first, then check composite expressions.
    for pass in 0..2 {
        for (id, dims) in g.inputs().iter().zip(shapes) {
            let node = g.node(*id);
            let ty = &node.outputs[0];
            // A sequence's or optional's shape is its elements' hint, not a binding.
            if ty.kind != crate::ValueKind::Tensor {
                continue;
            }
            // Formatted for an error only (every run binds its shapes).
            let declared = || ty.shape.to_string();
            if ty.rank() != dims.len() {
                return Err(BindError::Rank {
                    input: node.name.clone(),
                    got: dims.len(),
                    expected: ty.rank(),
                    declared: declared(),
                });
            }
            for (axis, (d, &got)) in ty.shape.0.iter().zip(dims.iter()).enumerate() {
                match (d, d.as_symbol()) {
                    (Dim::Known(k), _) => {
                        if *k != got as i64 {
                            return Err(BindError::Dim {
                                input: node.name.clone(),
                                axis,
                                got,
                                expected: *k,
                                declared: declared(),
                            });
                        }
                    }
                    (_, Some(s)) if pass == 0 => match b.get(s) {
                        Some(&bound) if bound != got as i64 => {
                            return Err(BindError::Conflict {
                                input: node.name.clone(),
                                axis,
                                symbol: s.to_string(),
                                got,
                                bound,
                            })
                        }
                        _ => {
                            b.insert(s.to_string(), got as i64);
                        }
                    },
                    (_, None) if pass == 1 => {
                        if let Ok(v) = d.eval(&b) {
                            if v != got as i64 {
                                return Err(BindError::Dim {
                                    input: node.name.clone(),
                                    axis,
                                    got,
                                    expected: v,
                                    declared: declared(),
                                });
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(b)
}

/// Indices (into `g.inputs()`) of the inputs whose *values* determine some
/// output type: those that reach a value port through shape arithmetic. The
/// condition of an `if` whose branches differ in rank counts only through
/// integer and bool inputs (a rate, a length, a flag): a float input that
/// decides it is data, and the graph runs with the rank found at run time.
pub fn value_inputs(g: &Graph) -> Vec<usize> {
    let (shapes, conds) = value_roots(g);
    let ids = g.inputs();
    let by_shapes = reach(g, shapes);
    let by_conds = reach(g, conds);
    ids.iter()
        .enumerate()
        .filter(|(_, id)| {
            by_shapes.contains(id)
                || (by_conds.contains(id) && !g.node(**id).outputs[0].dtype.is_float())
        })
        .map(|(i, _)| i)
        .collect()
}

/// The nodes feeding value ports: (of ops other than `if`, of `if` conditions),
/// including what bodies need through their captures.
fn value_roots(g: &Graph) -> (Vec<NodeId>, Vec<NodeId>) {
    let (mut shapes, mut conds) = (Vec::new(), Vec::new());
    for id in g.node_ids() {
        let node = g.node(id);
        for &p in node.op.value_ports() {
            if let Some(v) = g.input(id, p) {
                match node.op {
                    Op::If(_) => conds.push(v.node),
                    _ => shapes.push(v.node),
                }
            }
        }
        // A body's value needs become the outer op's needs through its captures.
        let subs = node.op.subgraphs();
        if !subs.is_empty() {
            let ins = g.inputs_of(id);
            let offset = usize::from(matches!(node.op, Op::If(_)));
            for sub in subs {
                for k in value_inputs(sub) {
                    if let Some(v) = ins.get(k + offset) {
                        shapes.push(v.node);
                    }
                }
            }
        }
    }
    (shapes, conds)
}

/// The nodes `roots` derive from through shape arithmetic.
fn reach(g: &Graph, mut work: Vec<NodeId>) -> std::collections::HashSet<NodeId> {
    let mut seen: std::collections::HashSet<NodeId> = Default::default();
    while let Some(n) = work.pop() {
        if !seen.insert(n) {
            continue;
        }
        let op = &g.node(n).op;
        let propagates = matches!(
            op,
            Op::Reshape(_)
                | Op::Flatten(_)
                | Op::Squeeze(_)
                | Op::Unsqueeze(_)
                | Op::Concat(_)
                | Op::Gather(_)
                | Op::Slice(_)
                | Op::Cast(_)
                | Op::Binary(_)
                | Op::Unary(_)
                | Op::Compare(_)
                | Op::Where(_)
                | Op::Reduce(_)
                | Op::Range(_)
                | Op::Expand(_)
                | Op::ConstantOfShape(_)
        );
        if propagates {
            work.extend(g.inputs_of(n).into_iter().map(|v| v.node));
        }
    }
    seen
}

/// Replaces the uses of input `i` by a constant holding `t`, for each pair. The
/// input nodes stay in the input list (callers still pass them).
pub fn bind_input_values(
    g: &mut Graph,
    values: &[(usize, crate::tensor::Tensor)],
) -> Result<(), crate::graph::GraphError> {
    for (i, t) in values {
        let Some(&input) = g.inputs().get(*i) else {
            continue;
        };
        let name = g.unique_name(&format!("{}.value", g.node(input).name));
        let node = crate::graph::Node::new(
            Op::Constant(crate::ops::Constant { value: t.clone() }),
            name,
            Vec::new(),
            vec![t.ty()],
        );
        let c = g.add_node(node, &[])?;
        g.replace_uses(Value::of(input), Value::of(c))?;
        // Graph outputs that are the input itself stay the input.
        for o in g.outputs_mut() {
            if o.value == Value::of(c) {
                o.value = Value::of(input);
            }
        }
    }
    Ok(())
}
