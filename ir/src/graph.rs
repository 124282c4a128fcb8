//! The graph: nodes with ordered, port-labelled edges over a petgraph `StableDiGraph`.

use std::collections::HashMap;

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::{EdgeRef, NodeIndexable};
use petgraph::Direction;

use crate::ops::Op;
use crate::shape::TensorType;

/// A node handle. Stable across removals of other nodes.
pub type NodeId = NodeIndex<u32>;

/// One output of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value {
    pub node: NodeId,
    pub port: u16,
}

impl Value {
    pub fn new(node: NodeId, port: u16) -> Value {
        Value { node, port }
    }

    /// Output 0 of `node`.
    pub fn of(node: NodeId) -> Value {
        Value { node, port: 0 }
    }
}

/// A node: an op, a unique name, the ONNX nodes it came from, and its output types.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub op: Op,
    /// Unique within its graph; used to name data-dependent dims.
    pub name: String,
    /// The ONNX node names this node came from (fusion takes the union).
    pub origin: Vec<String>,
    pub outputs: Vec<TensorType>,
}

impl Node {
    pub fn new(
        op: Op,
        name: impl Into<String>,
        origin: Vec<String>,
        outputs: Vec<TensorType>,
    ) -> Node {
        Node {
            op,
            name: name.into(),
            origin,
            outputs,
        }
    }

    /// The origin names joined for messages: `Conv_0, Relu_1`.
    pub fn origin_text(&self) -> String {
        if self.origin.is_empty() {
            self.name.clone()
        } else {
            self.origin.join(", ")
        }
    }
}

/// An edge carries output `src_output` of its source into input `dst_input` of its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Edge {
    pub src_output: u16,
    pub dst_input: u16,
}

/// A named graph output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphOutput {
    pub name: String,
    pub value: Value,
}

/// A dataflow graph. Inputs are `Op::Input` nodes listed in declared order;
/// outputs are named values.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    g: StableDiGraph<Node, Edge, u32>,
    inputs: Vec<NodeId>,
    outputs: Vec<GraphOutput>,
    names: Names,
}

/// How many nodes bear each name, kept as nodes are added, removed and
/// renamed ([`Graph::rename`]), so that [`Graph::unique_name`] is a lookup:
/// it collected every node's name into a set, once for each node an import
/// added (two thirds of a 1,000-node model's session setup).
#[derive(Clone, Default)]
struct Names(HashMap<String, u32>);

impl Names {
    fn add(&mut self, name: &str) {
        match self.0.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                self.0.insert(name.to_string(), 1);
            }
        }
    }

    fn remove(&mut self, name: &str) {
        if let Some(n) = self.0.get_mut(name) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(name);
            }
        }
    }

    fn taken(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} names", self.0.len())
    }
}

/// A structural problem with a graph edit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("node {0:?} does not exist")]
    NoNode(NodeId),
    #[error("value {node:?}.{port} does not exist (the node has {outputs} outputs)")]
    NoValue {
        node: NodeId,
        port: u16,
        outputs: usize,
    },
    #[error("the graph has a cycle through node `{0}`")]
    Cycle(String),
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Adds a node fed by `inputs` (port i gets `inputs[i]`).
    pub fn add_node(&mut self, node: Node, inputs: &[Value]) -> Result<NodeId, GraphError> {
        for v in inputs {
            self.check_value(*v)?;
        }
        self.names.add(&node.name);
        let id = self.g.add_node(node);
        for (i, v) in inputs.iter().enumerate() {
            self.g.add_edge(
                v.node,
                id,
                Edge {
                    src_output: v.port,
                    dst_input: i as u16,
                },
            );
        }
        Ok(id)
    }

    /// Adds an `Op::Input` node and appends it to the input list.
    pub fn add_input(&mut self, node: Node) -> NodeId {
        self.names.add(&node.name);
        let id = self.g.add_node(node);
        self.inputs.push(id);
        id
    }

    pub fn check_value(&self, v: Value) -> Result<(), GraphError> {
        let n = self
            .g
            .node_weight(v.node)
            .ok_or(GraphError::NoNode(v.node))?;
        if usize::from(v.port) >= n.outputs.len() {
            return Err(GraphError::NoValue {
                node: v.node,
                port: v.port,
                outputs: n.outputs.len(),
            });
        }
        Ok(())
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.g[id]
    }

    /// The node, to change anything but its name ([`Graph::rename`]).
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.g[id]
    }

    /// Gives node `id` the name `name`.
    pub fn rename(&mut self, id: NodeId, name: String) {
        let node = &mut self.g[id];
        self.names.remove(&node.name);
        self.names.add(&name);
        node.name = name;
    }

    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.g.node_weight(id)
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.g.contains_node(id)
    }

    pub fn node_count(&self) -> usize {
        self.g.node_count()
    }

    /// All node ids in index order.
    pub fn node_ids(&self) -> Vec<NodeId> {
        self.g.node_indices().collect()
    }

    pub fn ty(&self, v: Value) -> &TensorType {
        &self.g[v.node].outputs[usize::from(v.port)]
    }

    /// The values feeding `id`, ordered by input port.
    pub fn inputs_of(&self, id: NodeId) -> Vec<Value> {
        let mut e: Vec<(u16, Value)> = self
            .g
            .edges_directed(id, Direction::Incoming)
            .map(|e| {
                (
                    e.weight().dst_input,
                    Value::new(e.source(), e.weight().src_output),
                )
            })
            .collect();
        e.sort_by_key(|(p, _)| *p);
        e.into_iter().map(|(_, v)| v).collect()
    }

    /// The input value at `port` of `id`.
    pub fn input(&self, id: NodeId, port: usize) -> Option<Value> {
        self.g
            .edges_directed(id, Direction::Incoming)
            .find(|e| usize::from(e.weight().dst_input) == port)
            .map(|e| Value::new(e.source(), e.weight().src_output))
    }

    /// Every (user node, input port) reading `v`, sorted.
    pub fn users_of(&self, v: Value) -> Vec<(NodeId, u16)> {
        let mut u: Vec<(NodeId, u16)> = self
            .g
            .edges_directed(v.node, Direction::Outgoing)
            .filter(|e| e.weight().src_output == v.port)
            .map(|e| (e.target(), e.weight().dst_input))
            .collect();
        u.sort();
        u
    }

    /// Distinct nodes reading any output of `id`.
    pub fn user_nodes(&self, id: NodeId) -> Vec<NodeId> {
        let mut u: Vec<NodeId> = self.g.neighbors_directed(id, Direction::Outgoing).collect();
        u.sort();
        u.dedup();
        u
    }

    /// True if `v` is read by a node or is a graph output.
    pub fn is_used(&self, v: Value) -> bool {
        !self.users_of(v).is_empty() || self.outputs.iter().any(|o| o.value == v)
    }

    /// Replaces the input at `port` of `id` by `v`.
    pub fn set_input(&mut self, id: NodeId, port: usize, v: Value) -> Result<(), GraphError> {
        self.check_value(v)?;
        let old: Vec<_> = self
            .g
            .edges_directed(id, Direction::Incoming)
            .filter(|e| usize::from(e.weight().dst_input) == port)
            .map(|e| e.id())
            .collect();
        for e in old {
            self.g.remove_edge(e);
        }
        self.g.add_edge(
            v.node,
            id,
            Edge {
                src_output: v.port,
                dst_input: port as u16,
            },
        );
        Ok(())
    }

    /// Replaces all inputs of `id`.
    pub fn set_inputs(&mut self, id: NodeId, inputs: &[Value]) -> Result<(), GraphError> {
        for v in inputs {
            self.check_value(*v)?;
        }
        let old: Vec<_> = self
            .g
            .edges_directed(id, Direction::Incoming)
            .map(|e| e.id())
            .collect();
        for e in old {
            self.g.remove_edge(e);
        }
        for (i, v) in inputs.iter().enumerate() {
            self.g.add_edge(
                v.node,
                id,
                Edge {
                    src_output: v.port,
                    dst_input: i as u16,
                },
            );
        }
        Ok(())
    }

    /// Redirects every use of `old` (node inputs and graph outputs) to `new`.
    pub fn replace_uses(&mut self, old: Value, new: Value) -> Result<(), GraphError> {
        self.check_value(new)?;
        if old == new {
            return Ok(());
        }
        for (user, port) in self.users_of(old) {
            self.set_input(user, usize::from(port), new)?;
        }
        for o in &mut self.outputs {
            if o.value == old {
                o.value = new;
            }
        }
        Ok(())
    }

    /// Removes a node and its edges. Graph outputs must not reference it.
    pub fn remove_node(&mut self, id: NodeId) -> Option<Node> {
        self.inputs.retain(|i| *i != id);
        let node = self.g.remove_node(id)?;
        self.names.remove(&node.name);
        Some(node)
    }

    pub fn inputs(&self) -> &[NodeId] {
        &self.inputs
    }

    pub fn set_input_order(&mut self, inputs: Vec<NodeId>) {
        self.inputs = inputs;
    }

    pub fn outputs(&self) -> &[GraphOutput] {
        &self.outputs
    }

    pub fn outputs_mut(&mut self) -> &mut Vec<GraphOutput> {
        &mut self.outputs
    }

    pub fn add_output(&mut self, name: impl Into<String>, value: Value) -> Result<(), GraphError> {
        self.check_value(value)?;
        self.outputs.push(GraphOutput {
            name: name.into(),
            value,
        });
        Ok(())
    }

    /// Nodes in a deterministic topological order: graph inputs in declared order,
    /// then a depth-first post-order from the outputs (inputs visited by port),
    /// then any node no output depends on, in index order.
    pub fn topo_order(&self) -> Result<Vec<NodeId>, GraphError> {
        // Marks by node index (the passes ask for the order again and again:
        // sets of hashed ids were a tenth of planning a new input shape).
        const DONE: u8 = 1;
        const ON_STACK: u8 = 2;
        let mut order = Vec::with_capacity(self.g.node_count());
        let mut marks = vec![0u8; self.g.node_bound()];
        let mark = |marks: &[u8], n: NodeId| marks.get(n.index()).copied().unwrap_or(0);
        let set = |marks: &mut [u8], n: NodeId, m: u8| {
            if let Some(slot) = marks.get_mut(n.index()) {
                *slot = m;
            }
        };
        for &i in &self.inputs {
            if mark(&marks, i) & DONE == 0 {
                set(&mut marks, i, DONE);
                order.push(i);
            }
        }
        let roots: Vec<NodeId> = self
            .outputs
            .iter()
            .map(|o| o.value.node)
            .chain(self.g.node_indices())
            .collect();
        for root in roots {
            if mark(&marks, root) & DONE != 0 {
                continue;
            }
            // Iterative DFS: (node, next input index to visit).
            let mut stack: Vec<(NodeId, usize, Vec<Value>)> = vec![(root, 0, self.inputs_of(root))];
            set(&mut marks, root, ON_STACK);
            while let Some((n, i, ins)) = stack.last_mut() {
                if let Some(v) = ins.get(*i).copied() {
                    *i += 1;
                    let m = mark(&marks, v.node);
                    if m & DONE != 0 {
                        continue;
                    }
                    if m & ON_STACK != 0 {
                        return Err(GraphError::Cycle(self.g[v.node].name.clone()));
                    }
                    set(&mut marks, v.node, ON_STACK);
                    let next = self.inputs_of(v.node);
                    stack.push((v.node, 0, next));
                } else {
                    let n = *n;
                    set(&mut marks, n, DONE);
                    order.push(n);
                    stack.pop();
                }
            }
        }
        Ok(order)
    }

    /// Copies `sub`'s nodes into this graph, feeding its inputs with `args`, and
    /// returns the values of its outputs. Names are made unique here.
    pub fn inline(&mut self, sub: &Graph, args: &[Value]) -> Result<Vec<Value>, GraphError> {
        let mut map: std::collections::HashMap<NodeId, NodeId> = std::collections::HashMap::new();
        let mut input_map: std::collections::HashMap<NodeId, Value> =
            std::collections::HashMap::new();
        for (k, &i) in sub.inputs().iter().enumerate() {
            let a = *args.get(k).ok_or(GraphError::NoNode(i))?;
            input_map.insert(i, a);
        }
        let resolve = |v: Value,
                       map: &std::collections::HashMap<NodeId, NodeId>|
         -> Result<Value, GraphError> {
            match input_map.get(&v.node) {
                Some(a) => Ok(*a),
                None => map
                    .get(&v.node)
                    .map(|n| Value::new(*n, v.port))
                    .ok_or(GraphError::NoNode(v.node)),
            }
        };
        for id in sub.topo_order()? {
            if input_map.contains_key(&id) {
                continue;
            }
            let mut node = sub.node(id).clone();
            node.name = self.unique_name(&node.name);
            let ins = sub
                .inputs_of(id)
                .into_iter()
                .map(|v| resolve(v, &map))
                .collect::<Result<Vec<_>, _>>()?;
            let new = self.add_node(node, &ins)?;
            map.insert(id, new);
        }
        sub.outputs()
            .iter()
            .map(|o| resolve(o.value, &map))
            .collect()
    }

    /// Inner petgraph graph, for algorithms that need it.
    pub fn petgraph(&self) -> &StableDiGraph<Node, Edge, u32> {
        &self.g
    }

    /// A fresh node name based on `base`, unique in this graph.
    pub fn unique_name(&self, base: &str) -> String {
        if !self.names.taken(base) {
            return base.to_string();
        }
        (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|n| !self.names.taken(n))
            .unwrap_or_default()
    }
}

/// Graphs are equal when their canonical text forms are: same structure, ops,
/// types and origins, regardless of node indices or insertion order.
impl PartialEq for Graph {
    fn eq(&self, other: &Graph) -> bool {
        crate::text::print_graph_body(self) == crate::text::print_graph_body(other)
    }
}
