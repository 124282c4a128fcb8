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
        NodeError { node: n.name.clone(), op: n.op.name(), origin: n.origin.clone(), source }
    }
}

/// Compile-time values of a graph's outputs, computed so far.
pub type Values = HashMap<Value, KnownValue>;

/// Largest weight read as a compile-time value.
const MAX_WEIGHT_VALUE_ELEMS: usize = 4096;

/// Infers the output types of `id` from the current input types and values.
pub fn infer_node(g: &Graph, id: NodeId, values: &Values, weights: Option<&Weights>) -> Result<Vec<TensorType>, InferError> {
    let node = g.node(id);
    let ins = g.inputs_of(id);
    let types: Vec<TensorType> = ins.iter().map(|v| g.ty(*v).clone()).collect();
    let vals: Vec<Option<KnownValue>> = ins.iter().map(|v| values.get(v).cloned()).collect();
    let cx = InferCx { inputs: &types, values: &vals, node: &node.name, prior: &node.outputs };
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
    for (port, v) in eval_known(&node.op, &types, &vals, &node.outputs).into_iter().enumerate() {
        if let Some(v) = v {
            values.insert(Value::new(id, port as u16), v);
        }
    }
}

/// Re-infers every node's output types in topological order, storing them, and
/// returns the compile-time values found on the way. Subgraph captures take the
/// types of the outer values they capture.
pub fn infer_graph(g: &mut Graph, weights: Option<&Weights>) -> Result<Values, NodeError> {
    let order = g.topo_order().map_err(|e| NodeError {
        node: String::new(),
        op: "graph",
        origin: Vec::new(),
        source: InferError::Value { port: 0, reason: e.to_string() },
    })?;
    let mut values = Values::new();
    for id in order {
        refresh_subgraphs(g, id, weights)?;
        let out = infer_node(g, id, &values, weights).map_err(|e| NodeError::new(g, id, e))?;
        g.node_mut(id).outputs = out;
        record_values(g, id, &mut values, weights);
    }
    Ok(values)
}

/// Updates the capture inputs of a control-flow node's subgraphs to the outer
/// types and re-infers the subgraphs.
fn refresh_subgraphs(g: &mut Graph, id: NodeId, weights: Option<&Weights>) -> Result<(), NodeError> {
    if g.node(id).op.subgraphs().is_empty() {
        return Ok(());
    }
    let outer: Vec<TensorType> = g.inputs_of(id).iter().map(|v| g.ty(*v).clone()).collect();
    // Ports of the op whose type a body input takes directly (captures only).
    let first_capture = match &g.node(id).op {
        Op::If(_) => 1,
        Op::Loop(l) => 2 + l.num_carried as usize,
        Op::Scan(s) => (s.num_state + s.num_scan_inputs) as usize,
        _ => return Ok(()),
    };
    let body_offset = match &g.node(id).op {
        Op::If(_) => 1,
        _ => 0,
    };
    let node = g.node_mut(id);
    for sub in node.op.subgraphs_mut() {
        let ins = sub.inputs().to_vec();
        for (k, input) in ins.iter().enumerate() {
            let outer_port = k + body_offset;
            if outer_port >= first_capture && outer_port < outer.len() {
                sub.node_mut(*input).outputs = vec![outer[outer_port].clone()];
            }
        }
    }
    let name = node.name.clone();
    let origin = node.origin.clone();
    let op_name = node.op.name();
    for sub in node.op.subgraphs_mut() {
        infer_graph(sub, weights).map_err(|e| NodeError {
            node: format!("{name}/{}", e.node),
            op: op_name,
            origin: if e.origin.is_empty() { origin.clone() } else { e.origin.clone() },
            source: e.source,
        })?;
    }
    Ok(())
}

/// Substitutes bound symbols in the declared input types (of the graph and,
/// recursively, of subgraphs), then re-infers everything.
pub fn specialize(g: &Graph, bindings: &Bindings, weights: Option<&Weights>) -> Result<Graph, NodeError> {
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
    Ports { node: String, ports: Vec<u16>, n: usize },
    #[error(transparent)]
    Infer(#[from] NodeError),
    #[error("node `{node}`: stored types {stored} differ from inferred {inferred}")]
    Types { node: String, stored: String, inferred: String },
    #[error("input node `{0}` is not in the input list")]
    Input(String),
}

/// Checks acyclicity, arity, port ranges, and that every stored type equals
/// what inference computes now; recurses into subgraphs.
pub fn verify(g: &Graph, weights: Option<&Weights>) -> Result<(), VerifyError> {
    let order = g.topo_order()?;
    let mut values = Values::new();
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
            return Err(VerifyError::Ports { node: node.name.clone(), ports, n: ins.len() });
        }
        for v in &ins {
            g.check_value(*v)?;
        }
        for sub in node.op.subgraphs() {
            verify(sub, weights)?;
        }
        let inferred = infer_node(g, id, &values, weights).map_err(|e| NodeError::new(g, id, e))?;
        if inferred != node.outputs {
            let show = |t: &[TensorType]| t.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
            return Err(VerifyError::Types { node: node.name.clone(), stored: show(&node.outputs), inferred: show(&inferred) });
        }
        record_values(g, id, &mut values, weights);
    }
    for o in g.outputs() {
        g.check_value(o.value)?;
    }
    Ok(())
}
