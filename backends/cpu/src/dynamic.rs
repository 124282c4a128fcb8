//! The dynamic interpreter: runs a graph whose shapes are only known at run
//! time (data-dependent sizes, control-flow bodies). Each node's output types are
//! inferred from its concrete inputs, then the same kernels as the planned path
//! run on freshly allocated outputs.
//!
//! A [`BodyCache`] keeps what inference and kernel building produced for a
//! node, keyed by its input types and the values of its small inputs, so a loop
//! body or a branch re-run with inputs of the same shapes (every iteration,
//! every run of a session) only runs kernels.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rlx_ir::analysis::Values;
use rlx_ir::ops::InferCx;
use rlx_ir::tensor::AlignedBuf;
use rlx_ir::{DType, Graph, KnownValue, Node, NodeId, Op, Tensor, TensorType, Value, Weights};
use rlx_passes::memory::is_view;

use crate::kernel::{build, EvalCx, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::RunError;

/// Inputs up to this many elements are offered to inference as values.
const VALUE_ELEMS: usize = 1 << 16;

fn node_err(node: &Node, source: KernelError) -> RunError {
    RunError::Node {
        node: node.name.clone(),
        origin: node.origin.clone(),
        source,
    }
}

/// Integer and bool inputs up to this many elements take part in a cache key
/// by value (shape tensors, axes, counts, conditions), and float inputs up to
/// `KEY_FLOATS` (scales, range bounds); these are the inputs offered to
/// kernels as constants besides the graph's own constants and weights.
const KEY_ELEMS: usize = 64;
const KEY_FLOATS: usize = 4;

/// True when `t` is keyed by value.
fn keyed(t: &Tensor) -> bool {
    let limit = if t.dtype().is_float() {
        KEY_FLOATS
    } else {
        KEY_ELEMS
    };
    t.numel() <= limit
}

/// Most entries a [`BodyCache`] holds; past it, new shapes are built and not kept.
const CACHE_ENTRIES: usize = 4096;

/// Kernels (and output types) the interpreter built, shared across loop
/// iterations and runs. Thread-safe: concurrent runs look up and insert under
/// a short lock and run kernels outside it.
#[derive(Default)]
pub struct BodyCache {
    entries: Mutex<HashMap<Key, Arc<Built>>>,
    /// What the kernels built here enforce.
    pub limits: crate::kernel::RunLimits,
    /// What they prepare of constant operands, shared across shapes.
    packs: crate::packs::Packs,
}

impl BodyCache {
    pub fn new(limits: crate::kernel::RunLimits) -> BodyCache {
        BodyCache {
            limits,
            ..BodyCache::default()
        }
    }
}

impl std::fmt::Debug for BodyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.entries.lock().map_or(0, |e| e.len());
        write!(f, "BodyCache({n} kernels)")
    }
}

#[derive(PartialEq, Eq, Hash)]
struct Key {
    /// The graph the node belongs to (its address: graphs do not move while a
    /// schedule that owns them runs).
    graph: usize,
    node: NodeId,
    types: Vec<(DType, Vec<usize>)>,
    /// The bytes of each input of at most KEY_ELEMS elements.
    small: Vec<Option<Vec<u8>>>,
}

/// A node's output types and its kernel (`None` for a view).
struct Built {
    out_types: Vec<TensorType>,
    kernel: Option<Box<dyn Kernel>>,
}

/// Runs one node on concrete inputs and returns its outputs; every input is
/// offered to the kernel as a constant.
pub fn eval_node(
    node: &Node,
    inputs: &[Tensor],
    weights: &Weights,
) -> Result<Vec<Tensor>, RunError> {
    if let Some(f) = crate::kernels::evaluated(&node.op) {
        let cache = BodyCache::default();
        let cx = EvalCx {
            weights,
            cache: &cache,
        };
        return f(node, inputs, &cx).map_err(|e| node_err(node, e));
    }
    let built = build_node(
        node,
        inputs,
        &vec![true; inputs.len()],
        weights,
        crate::kernel::RunLimits::default(),
        &crate::packs::Packs::new(),
    )?;
    run_built(node, &built, inputs)
}

/// Infers `node`'s output types from its inputs and builds its kernel, with
/// the inputs marked in `constant` as the kernel's constants.
fn build_node(
    node: &Node,
    inputs: &[Tensor],
    constant: &[bool],
    weights: &Weights,
    limits: crate::kernel::RunLimits,
    packs: &crate::packs::Packs,
) -> Result<Built, RunError> {
    let types: Vec<TensorType> = inputs.iter().map(Tensor::ty).collect();
    let values: Vec<Option<KnownValue>> = inputs
        .iter()
        .map(|t| (t.numel() <= VALUE_ELEMS).then(|| KnownValue::Tensor(t.clone())))
        .collect();
    let cx = InferCx {
        inputs: &types,
        values: &values,
        node: &node.name,
        prior: &node.outputs,
    };
    let out_types = node
        .op
        .infer(&cx)
        .map_err(|e| node_err(node, KernelError::Value(e.to_string())))?;
    for t in &out_types {
        let Some(dims) = t.shape.as_known() else {
            return Err(node_err(
                node,
                KernelError::Internal(format!("output type {t} is not concrete at run time")),
            ));
        };
        let n = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
            .unwrap_or(u64::MAX);
        if n > limits.max_tensor_elements {
            return Err(node_err(
                node,
                KernelError::Value(format!(
                    "makes a {t} tensor of {n} elements; the limit is {} \
                     (Limits::max_tensor_elements, --max-tensor-elements)",
                    limits.max_tensor_elements
                )),
            ));
        }
    }
    if is_view(&node.op) {
        return Ok(Built {
            out_types,
            kernel: None,
        });
    }
    let consts: Vec<Option<Tensor>> = inputs
        .iter()
        .zip(constant)
        .map(|(t, c)| c.then(|| t.clone()))
        .collect();
    let concrete = Node {
        op: node.op.clone(),
        name: node.name.clone(),
        origin: node.origin.clone(),
        outputs: out_types.clone(),
    };
    let spec = Spec {
        node: &concrete,
        inputs: &types,
        outputs: &out_types,
        consts: &consts,
        weights,
        limits,
        packs,
    };
    let kernel = build(&spec).map_err(|e| node_err(node, e))?;
    Ok(Built {
        out_types,
        kernel: Some(kernel),
    })
}

/// Runs a built node on freshly allocated outputs.
fn run_built(node: &Node, built: &Built, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
    let out_types = &built.out_types;
    let Some(kernel) = &built.kernel else {
        let dims = out_types[0].shape.as_known().unwrap_or_default();
        return inputs[0]
            .reshaped(dims)
            .map(|t| vec![t])
            .map_err(|e| node_err(node, KernelError::Internal(e.to_string())));
    };
    let mut bufs: Vec<(AlignedBuf, Vec<usize>)> = Vec::new();
    for t in out_types {
        let bytes = t
            .byte_size()
            .ok_or_else(|| node_err(node, KernelError::Internal("output too large".into())))?;
        bufs.push((
            AlignedBuf::zeroed(bytes),
            t.shape.as_known().unwrap_or_default(),
        ));
    }
    {
        let ins: Vec<TensorRef> = inputs.iter().map(TensorRef::of).collect();
        let mut outs: Vec<TensorMut> = bufs
            .iter_mut()
            .zip(out_types)
            .map(|((b, dims), t)| TensorMut {
                dtype: t.dtype,
                dims: dims.as_slice(),
                bytes: b.as_mut_bytes(),
            })
            .collect();
        let mut scratch = vec![0u8; kernel.scratch_bytes()];
        // Node by node, a kernel's per-thread scratch is its own, not the
        // region of a planned run this one may be inside (a subgraph run by
        // a planned step).
        crate::scratch::enter(crate::scratch::Regions::NONE, 0, || {
            kernel.run(&ins, &mut outs, &mut scratch)
        })
        .map_err(|e| node_err(node, e))?;
    }
    bufs.into_iter()
        .zip(out_types)
        .map(|((b, dims), t)| {
            Tensor::new(t.dtype, dims, b.freeze())
                .map_err(|e| node_err(node, KernelError::Internal(e.to_string())))
        })
        .collect()
}

/// [`eval_node`] through `cache`: node `id` of graph `g`, whose inputs marked
/// in `constant` are the graph's constants or weights.
fn eval_cached(
    g: &Graph,
    id: NodeId,
    inputs: &[Tensor],
    constant: &[bool],
    weights: &Weights,
    cache: &BodyCache,
) -> Result<Vec<Tensor>, RunError> {
    let node = g.node(id);
    if let Some(f) = crate::kernels::evaluated(&node.op) {
        let cx = EvalCx { weights, cache };
        return f(node, inputs, &cx).map_err(|e| node_err(node, e));
    }
    let small: Vec<Option<Vec<u8>>> = inputs
        .iter()
        .map(|t| keyed(t).then(|| t.bytes().to_vec()))
        .collect();
    let key = Key {
        graph: g as *const Graph as usize,
        node: id,
        types: inputs
            .iter()
            .map(|t| (t.dtype(), t.dims().to_vec()))
            .collect(),
        small,
    };
    let hit = cache.entries.lock().ok().and_then(|e| e.get(&key).cloned());
    let built = match hit {
        Some(b) => b,
        None => {
            // Small inputs are part of the key, so a kernel may take them as
            // constants too.
            let constant: Vec<bool> = constant
                .iter()
                .zip(inputs)
                .map(|(c, t)| *c || keyed(t))
                .collect();
            let b = Arc::new(build_node(
                node,
                inputs,
                &constant,
                weights,
                cache.limits,
                &cache.packs,
            )?);
            if let Ok(mut e) = cache.entries.lock() {
                if e.len() < CACHE_ENTRIES {
                    e.insert(key, b.clone());
                }
            }
            b
        }
    };
    run_built(node, &built, inputs)
}

/// Runs a whole graph on concrete inputs (in input order), building every
/// kernel afresh.
pub fn run_graph(
    g: &Graph,
    weights: &Weights,
    inputs: Vec<Tensor>,
) -> Result<Vec<Tensor>, RunError> {
    run_graph_cached(g, weights, inputs, &BodyCache::default())
}

/// [`run_graph`], reusing (and adding to) the kernels in `cache`.
pub fn run_graph_cached(
    g: &Graph,
    weights: &Weights,
    inputs: Vec<Tensor>,
    cache: &BodyCache,
) -> Result<Vec<Tensor>, RunError> {
    run_graph_observed(g, weights, inputs, cache, None)
}

/// Sees each node of a node-by-node run right after it ran, with its
/// outputs (as [`crate::exec::StepObserver`] does for a planned run).
pub type NodeObserver<'a> = dyn FnMut(&rlx_ir::Node, &mut [Tensor]) + 'a;

/// [`run_graph_cached`], showing every computed node's outputs to `observe`.
pub fn run_graph_observed(
    g: &Graph,
    weights: &Weights,
    inputs: Vec<Tensor>,
    cache: &BodyCache,
    mut observe: Option<&mut NodeObserver>,
) -> Result<Vec<Tensor>, RunError> {
    if inputs.len() != g.inputs().len() {
        return Err(RunError::Internal(format!(
            "{} inputs for a graph of {}",
            inputs.len(),
            g.inputs().len()
        )));
    }
    let mut vals: HashMap<Value, Tensor> = HashMap::new();
    for (id, t) in g.inputs().iter().zip(inputs) {
        vals.insert(Value::of(*id), t);
    }
    let order = g
        .topo_order()
        .map_err(|e| RunError::Internal(e.to_string()))?;
    for id in order {
        let node = g.node(id);
        let outs = match &node.op {
            Op::Input(_) => continue,
            Op::Constant(c) => vec![c.value.clone()],
            Op::Weight(w) => vec![weights
                .get(&w.name)
                .cloned()
                .ok_or_else(|| RunError::Internal(format!("weight `{}` is missing", w.name)))?],
            _ => {
                let sources = g.inputs_of(id);
                let ins: Vec<Tensor> = sources
                    .iter()
                    .map(|v| {
                        vals.get(v).cloned().ok_or_else(|| {
                            RunError::Internal(format!(
                                "node `{}` reads a value not computed yet",
                                node.name
                            ))
                        })
                    })
                    .collect::<Result<_, _>>()?;
                let constant: Vec<bool> = sources
                    .iter()
                    .map(|v| matches!(g.node(v.node).op, Op::Constant(_) | Op::Weight(_)))
                    .collect();
                let mut outs = eval_cached(g, id, &ins, &constant, weights, cache)?;
                if let Some(o) = observe.as_deref_mut() {
                    o(node, &mut outs);
                }
                outs
            }
        };
        for (p, t) in outs.into_iter().enumerate() {
            vals.insert(Value::new(id, p as u16), t);
        }
        // Values no later node reads could be dropped here; bodies are small.
    }
    g.outputs()
        .iter()
        .map(|o| {
            vals.get(&o.value)
                .cloned()
                .ok_or_else(|| RunError::Internal(format!("output `{}` was not computed", o.name)))
        })
        .collect()
}

/// Known values of small tensors, for inference inside bodies.
pub fn values_of(vals: &HashMap<Value, Tensor>) -> Values {
    vals.iter()
        .filter(|(_, t)| t.numel() <= VALUE_ELEMS)
        .map(|(v, t)| (*v, KnownValue::Tensor(t.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::text::parse_graph;

    fn entries(cache: &BodyCache) -> usize {
        cache.entries.lock().map_or(0, |e| e.len())
    }

    #[test]
    fn a_cache_builds_each_node_once_per_shape_and_keeps_results_exact() {
        let g = parse_graph(
            "rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[\"n\"]\n  %1 = relu(%0) : f32[\"n\"]\n  %2 = exp(%1) : f32[\"n\"]\n  output \"y\" = %2\n}\n",
        )
        .unwrap();
        let w = Weights::new();
        let cache = BodyCache::default();
        let run = |v: &[f32]| {
            // Longer than KEY_FLOATS: keyed by shape, not by value.
            let x = Tensor::from_f32(&[v.len()], v).unwrap();
            let y = run_graph_cached(&g, &w, vec![x.clone()], &cache).unwrap();
            let fresh = run_graph(&g, &w, vec![x]).unwrap();
            assert_eq!(y[0].bytes(), fresh[0].bytes());
            y[0].as_slice::<f32>().unwrap().to_vec()
        };
        assert_eq!(run(&[-1.0, 0.0, 1.0, -2.0, 0.5])[..2], [1.0, 1.0]);
        assert_eq!(entries(&cache), 2);
        // Same shape, other values: the kernels are reused.
        assert_eq!(run(&[2.0, -3.0, 0.0, 1.0, 1.0])[1..3], [1.0, 1.0]);
        assert_eq!(entries(&cache), 2);
        // A new shape builds its own.
        assert_eq!(run(&[-5.0; 7]), vec![1.0; 7]);
        assert_eq!(entries(&cache), 4);
    }
}
