//! The dynamic interpreter: runs a graph whose shapes are only known at run
//! time (data-dependent sizes, control-flow bodies). Each node's output types are
//! inferred from its concrete inputs, then the same kernels as the planned path
//! run on freshly allocated outputs.

use std::collections::HashMap;

use rlx_ir::analysis::Values;
use rlx_ir::ops::InferCx;
use rlx_ir::tensor::AlignedBuf;
use rlx_ir::{Graph, KnownValue, Node, Op, Tensor, TensorType, Value, Weights};
use rlx_passes::memory::is_view;

use crate::kernel::{build, KernelError, Spec};
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

/// Runs one node on concrete inputs and returns its outputs.
pub fn eval_node(
    node: &Node,
    inputs: &[Tensor],
    weights: &Weights,
) -> Result<Vec<Tensor>, RunError> {
    if let Some(f) = crate::kernels::evaluated(&node.op) {
        return f(node, inputs, weights).map_err(|e| node_err(node, e));
    }
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
        if !t.shape.is_known() {
            return Err(node_err(
                node,
                KernelError::Internal(format!("output type {t} is not concrete at run time")),
            ));
        }
    }
    if is_view(&node.op) {
        let dims = out_types[0].shape.as_known().unwrap_or_default();
        return inputs[0]
            .reshaped(dims)
            .map(|t| vec![t])
            .map_err(|e| node_err(node, KernelError::Internal(e.to_string())));
    }
    let consts: Vec<Option<Tensor>> = inputs.iter().map(|t| Some(t.clone())).collect();
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
    };
    let kernel = build(&spec).map_err(|e| node_err(node, e))?;
    let mut bufs: Vec<(AlignedBuf, Vec<usize>)> = Vec::new();
    for t in &out_types {
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
            .zip(&out_types)
            .map(|((b, dims), t)| TensorMut {
                dtype: t.dtype,
                dims: dims.as_slice(),
                bytes: b.as_mut_bytes(),
            })
            .collect();
        let mut scratch = vec![0u8; kernel.scratch_bytes()];
        kernel
            .run(&ins, &mut outs, &mut scratch)
            .map_err(|e| node_err(node, e))?;
    }
    bufs.into_iter()
        .zip(&out_types)
        .map(|((b, dims), t)| {
            Tensor::new(t.dtype, dims, b.freeze())
                .map_err(|e| node_err(node, KernelError::Internal(e.to_string())))
        })
        .collect()
}

/// Runs a whole graph on concrete inputs (in input order).
pub fn run_graph(
    g: &Graph,
    weights: &Weights,
    inputs: Vec<Tensor>,
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
                let ins: Vec<Tensor> = g
                    .inputs_of(id)
                    .into_iter()
                    .map(|v| {
                        vals.get(&v).cloned().ok_or_else(|| {
                            RunError::Internal(format!(
                                "node `{}` reads a value not computed yet",
                                node.name
                            ))
                        })
                    })
                    .collect::<Result<_, _>>()?;
                eval_node(node, &ins, weights)?
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
