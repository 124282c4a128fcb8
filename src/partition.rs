//! Splitting a graph between a GPU target and the CPU ([`Fallback::Cpu`]).
//!
//! Each node is placed on the device when the target's backend runs it and
//! every value it reads and writes is a tensor of numbers of known shape;
//! otherwise on the host (strings, sequences, ops without a GPU kernel,
//! shapes that depend on data). The nodes are then ordered so that each
//! device keeps running while it has ready work, and every maximal run of
//! one placement becomes a [`Segment`]: a standalone graph whose inputs are
//! the values earlier segments (or the model's inputs) produce and whose
//! outputs are the values later segments or the model's outputs read.
//! Constants and weights are copied into each segment that reads them, so
//! they never cross. A run executes the segments in order over a table of
//! values ([`Slot`]s).
//!
//! [`Fallback::Cpu`]: crate::compile::Fallback::Cpu

use std::collections::{BTreeSet, HashMap};

use rlx_ir::ops::leaves::Input;
use rlx_ir::{Graph, Node, NodeId, Op, Tensor, TensorType, Value, Weights};
use rlx_passes::Backend;

/// An index into a run's table of values.
pub type Slot = usize;

/// Where a segment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The model's GPU target.
    Device,
    /// The CPU backend (the fallback).
    Host,
}

impl Place {
    pub fn name(self) -> &'static str {
        match self {
            Place::Device => "gpu",
            Place::Host => "cpu",
        }
    }
}

/// One standalone piece of the graph.
#[derive(Debug, Clone)]
pub struct Segment {
    pub place: Place,
    pub graph: Graph,
    /// The slot of each of `graph`'s inputs, in order.
    pub inputs: Vec<Slot>,
    /// The slot each of `graph`'s outputs fills, in order.
    pub outputs: Vec<Slot>,
}

/// A graph split into segments.
#[derive(Debug, Clone)]
pub struct Partition {
    pub segments: Vec<Segment>,
    /// Slots of the model's inputs, in order (slot `i` is input `i`).
    pub slots: usize,
    /// Values known before any segment runs: constants the model returns as
    /// they are.
    pub preset: Vec<(Slot, Tensor)>,
    /// The slot of each model output, in order.
    pub outputs: Vec<Slot>,
}

/// Whether the device runs `id`: the backend supports it and it reads and
/// writes tensors of numbers of known shape only.
fn on_device(g: &Graph, id: NodeId, backend: &dyn Backend) -> bool {
    let node = g.node(id);
    let ins: Vec<TensorType> = g.inputs_of(id).iter().map(|v| g.ty(*v).clone()).collect();
    let static_tensor = |t: &TensorType| t.is_plain() && t.shape.is_known();
    node.outputs.iter().all(static_tensor)
        && ins.iter().all(static_tensor)
        && backend.supports(node, &ins).is_ok()
}

/// Whether every node of `g` runs on the device of `backend`.
pub fn all_on_device(g: &Graph, backend: &dyn Backend) -> bool {
    g.node_ids()
        .into_iter()
        .all(|id| g.node(id).op.is_leaf() || on_device(g, id, backend))
}

/// Splits `g` between the device of `backend` and the host.
pub fn partition(g: &Graph, w: &Weights, backend: &dyn Backend) -> Result<Partition, String> {
    let topo = g.topo_order().map_err(|e| e.to_string())?;
    let rank: HashMap<NodeId, usize> = topo.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let place: HashMap<NodeId, Place> = topo
        .iter()
        .filter(|&&id| !g.node(id).op.is_leaf())
        .map(|&id| {
            let p = if on_device(g, id, backend) {
                Place::Device
            } else {
                Place::Host
            };
            (id, p)
        })
        .collect();

    // List scheduling: run the ready nodes of the current placement first,
    // switching only when it has none, so segments are as few as the
    // dependences allow.
    let mut waiting: HashMap<NodeId, usize> = HashMap::new();
    for (&id, _) in &place {
        let n = g
            .inputs_of(id)
            .iter()
            .filter(|v| place.contains_key(&v.node))
            .count();
        waiting.insert(id, n);
    }
    let mut ready: [BTreeSet<(usize, NodeId)>; 2] = Default::default();
    let index = |p: Place| p as usize;
    for (&id, &n) in &waiting {
        if n == 0 {
            ready[index(place[&id])].insert((rank[&id], id));
        }
    }
    let mut runs: Vec<(Place, Vec<NodeId>)> = Vec::new();
    let mut current = if ready[0].is_empty() {
        Place::Host
    } else {
        Place::Device
    };
    while !ready[0].is_empty() || !ready[1].is_empty() {
        if ready[index(current)].is_empty() {
            current = match current {
                Place::Device => Place::Host,
                Place::Host => Place::Device,
            };
        }
        let Some((_, id)) = ready[index(current)].pop_first() else {
            continue;
        };
        match runs.last_mut() {
            Some((p, nodes)) if *p == current => nodes.push(id),
            _ => runs.push((current, vec![id])),
        }
        for v in 0..g.node(id).outputs.len() {
            for (user, _) in g.users_of(Value::new(id, v as u16)) {
                if let Some(n) = waiting.get_mut(&user) {
                    *n -= 1;
                    if *n == 0 {
                        ready[index(place[&user])].insert((rank[&user], user));
                    }
                }
            }
        }
    }
    if runs.iter().map(|r| r.1.len()).sum::<usize>() != place.len() {
        return Err("the graph's nodes could not be ordered for partitioning".into());
    }

    let mut segment_of: HashMap<NodeId, usize> = HashMap::new();
    for (s, (_, nodes)) in runs.iter().enumerate() {
        for &id in nodes {
            segment_of.insert(id, s);
        }
    }
    let mut slots: HashMap<Value, Slot> = g
        .inputs()
        .iter()
        .enumerate()
        .map(|(i, &id)| (Value::of(id), i))
        .collect();
    let mut next = slots.len();
    let mut slot_of = |v: Value, slots: &mut HashMap<Value, Slot>| {
        *slots.entry(v).or_insert_with(|| {
            next += 1;
            next - 1
        })
    };
    let model_outputs: BTreeSet<Value> = g.outputs().iter().map(|o| o.value).collect();

    let mut segments = Vec::new();
    for (s, (p, nodes)) in runs.iter().enumerate() {
        let mut sg = Graph::new();
        let mut map: HashMap<Value, Value> = HashMap::new();
        let mut inputs = Vec::new();
        for &id in nodes {
            let mut ins = Vec::new();
            for v in g.inputs_of(id) {
                if let Some(&m) = map.get(&v) {
                    ins.push(m);
                    continue;
                }
                let producer = g.node(v.node);
                let m = if matches!(producer.op, Op::Weight(_) | Op::Constant(_)) {
                    Value::of(
                        sg.add_node(producer.clone(), &[])
                            .map_err(|e| e.to_string())?,
                    )
                } else {
                    let name = if producer.outputs.len() == 1 {
                        producer.name.clone()
                    } else {
                        format!("{}:{}", producer.name, v.port)
                    };
                    let ty = g.ty(v).clone();
                    let input = Node::new(
                        Op::Input(Input { name: name.clone() }),
                        name,
                        producer.origin.clone(),
                        vec![ty],
                    );
                    inputs.push(slot_of(v, &mut slots));
                    Value::of(sg.add_input(input))
                };
                map.insert(v, m);
                ins.push(m);
            }
            let new = sg
                .add_node(g.node(id).clone(), &ins)
                .map_err(|e| e.to_string())?;
            for port in 0..g.node(id).outputs.len() as u16 {
                map.insert(Value::new(id, port), Value::new(new, port));
            }
        }
        let mut outputs = Vec::new();
        for &id in nodes {
            for port in 0..g.node(id).outputs.len() as u16 {
                let v = Value::new(id, port);
                let crosses = g
                    .users_of(v)
                    .iter()
                    .any(|(u, _)| segment_of.get(u).is_some_and(|&t| t != s));
                if crosses || model_outputs.contains(&v) {
                    let name = sg.node(map[&v].node).name.clone();
                    let name = if port == 0 {
                        name
                    } else {
                        format!("{name}:{port}")
                    };
                    sg.add_output(name, map[&v]).map_err(|e| e.to_string())?;
                    outputs.push(slot_of(v, &mut slots));
                }
            }
        }
        segments.push(Segment {
            place: *p,
            graph: sg,
            inputs,
            outputs,
        });
    }

    // Model outputs read straight from a constant or weight.
    let mut preset = Vec::new();
    for o in g.outputs() {
        if slots.contains_key(&o.value) {
            continue;
        }
        let t = match &g.node(o.value.node).op {
            Op::Constant(c) => c.value.clone(),
            Op::Weight(wt) => w
                .get(&wt.name)
                .ok_or_else(|| format!("no weight `{}`", wt.name))?
                .clone(),
            _ => return Err(format!("output `{}` is produced by no segment", o.name)),
        };
        preset.push((slot_of(o.value, &mut slots), t));
    }
    let outputs = g.outputs().iter().map(|o| slots[&o.value]).collect();
    Ok(Partition {
        segments,
        slots: slots.len(),
        preset,
        outputs,
    })
}

impl Partition {
    /// The segments per placement, for messages: `3 segments (2 device, 1 host)`.
    pub fn summary(&self) -> String {
        let host = self
            .segments
            .iter()
            .filter(|s| s.place == Place::Host)
            .count();
        format!(
            "{} segments ({} device, {host} host)",
            self.segments.len(),
            self.segments.len() - host
        )
    }
}
