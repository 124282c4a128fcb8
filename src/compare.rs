//! Where two runs of a model diverge. Each run's intermediates are named by
//! the ONNX tensors they stand for; walking the ONNX nodes in the model's
//! order, the first whose output differs beyond the tolerance is reported,
//! with statistics of its inputs on both sides.
//!
//! A step stands for the output of the latest ONNX node (in model order)
//! among its origins: a fused region is compared at its last ONNX output,
//! and where several steps stand for one node (a decomposition), the last to
//! run wins. Nodes a side fused away are not compared on their own.

use std::collections::HashMap;

use rlx_importer::onnx_node_name;
use rlx_importer::proto::ModelProto;
use rlx_ir::ops::values::float_tensor;
use rlx_ir::{DType, Tensor};

use crate::conformance::{compare, values_f64, Diff, Tolerance};
use crate::debug::Intermediate;

/// A top-level ONNX node, as `compare` names its tensors.
#[derive(Debug, Clone)]
pub struct OnnxNode {
    pub name: String,
    pub op_type: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

/// The top-level nodes of `m`'s graph in the model's order, named as the
/// importer names them in origins.
pub fn onnx_nodes(m: &ModelProto) -> Vec<OnnxNode> {
    let Some(g) = &m.graph else {
        return Vec::new();
    };
    g.node
        .iter()
        .enumerate()
        .map(|(i, n)| OnnxNode {
            name: onnx_node_name(n, i),
            op_type: n.op_type.clone().unwrap_or_default(),
            inputs: n.input.clone(),
            outputs: n.output.clone(),
        })
        .collect()
}

/// Tensors by ONNX name.
pub type Named = HashMap<String, Tensor>;

/// A debug run's intermediates by the ONNX tensor each stands for (see the
/// module comment), then its graph outputs by name.
pub fn name_intermediates(
    nodes: &[OnnxNode],
    run: &[Intermediate],
    outputs: &[(String, Tensor)],
) -> Named {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut named = Named::new();
    for im in run {
        let latest = im.origin.iter().filter_map(|o| index.get(o.as_str())).max();
        if let Some(name) = latest.and_then(|&i| nodes[i].outputs.get(im.port)) {
            if !name.is_empty() {
                named.insert(name.clone(), im.tensor.clone());
            }
        }
    }
    for (name, t) in outputs {
        named.insert(name.clone(), t.clone());
    }
    named
}

/// Summary statistics of a tensor's values.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// NaN elements (excluded from min, max and mean).
    pub nan: usize,
}

impl Stats {
    pub fn of(t: &Tensor) -> Stats {
        let v = values_f64(t);
        let finite: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
        let n = finite.len().max(1) as f64;
        Stats {
            dtype: t.dtype(),
            dims: t.dims().to_vec(),
            min: finite.iter().copied().fold(f64::INFINITY, f64::min),
            max: finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean: finite.iter().sum::<f64>() / n,
            nan: v.len() - finite.len(),
        }
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{:?} min {:.4e} max {:.4e} mean {:.4e}",
            self.dtype, self.dims, self.min, self.max, self.mean
        )?;
        if self.nan > 0 {
            write!(f, " ({} NaN)", self.nan)?;
        }
        Ok(())
    }
}

/// One input of a diverging node, on both sides.
#[derive(Debug, Clone)]
pub struct InputStats {
    pub name: String,
    pub left: Option<Stats>,
    pub right: Option<Stats>,
    /// How the two sides' values of this input compare, when both exist.
    pub diff: Option<Result<Diff, String>>,
}

/// The first ONNX node whose output differs beyond the tolerance.
#[derive(Debug, Clone)]
pub struct Divergence {
    pub node: String,
    pub op_type: String,
    pub output: String,
    pub dims: Vec<usize>,
    /// The comparison of the output, or why the two cannot be compared
    /// element by element (a shape that differs).
    pub diff: Result<Diff, String>,
    pub inputs: Vec<InputStats>,
}

/// What [`first_divergence`] found.
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    /// ONNX tensors present on both sides and compared.
    pub compared: usize,
    pub first: Option<Divergence>,
}

/// Compares two tensors value by value: floats of different widths (an
/// fp16 run against an fp32 one) are compared as f64.
pub fn compare_values(left: &Tensor, right: &Tensor, tol: Tolerance) -> Result<Diff, String> {
    if left.dtype() != right.dtype() && left.dtype().is_float() && right.dtype().is_float() {
        let wide = |t: &Tensor| {
            float_tensor(DType::F64, t.dims(), &values_f64(t))
                .ok_or_else(|| format!("cannot widen {} values", t.dtype()))
        };
        let narrow = if left.dtype().size() < right.dtype().size() {
            left.dtype()
        } else {
            right.dtype()
        };
        return compare(&wide(left)?, &wide(right)?, tol.for_dtype(narrow));
    }
    compare(left, right, tol)
}

/// Walks `nodes` in order and compares every output named on both sides;
/// stops at the first beyond `tol`. `inputs` are the graph inputs both
/// sides ran on (for the statistics of a diverging node's inputs).
pub fn first_divergence(
    nodes: &[OnnxNode],
    left: &Named,
    right: &Named,
    inputs: &Named,
    tol: Tolerance,
) -> Comparison {
    let mut c = Comparison::default();
    for node in nodes {
        for out in &node.outputs {
            let (Some(l), Some(r)) = (left.get(out), right.get(out)) else {
                continue;
            };
            c.compared += 1;
            let diff = compare_values(l, r, tol);
            if matches!(&diff, Ok(d) if d.mismatched == 0) {
                continue;
            }
            let side = |m: &Named, name: &str| m.get(name).or_else(|| inputs.get(name)).cloned();
            let ins = node
                .inputs
                .iter()
                .filter(|n| !n.is_empty())
                .map(|n| {
                    let (a, b) = (side(left, n), side(right, n));
                    InputStats {
                        name: n.clone(),
                        left: a.as_ref().map(Stats::of),
                        right: b.as_ref().map(Stats::of),
                        diff: a.zip(b).map(|(a, b)| compare_values(&a, &b, tol)),
                    }
                })
                .collect();
            c.first = Some(Divergence {
                node: node.name.clone(),
                op_type: node.op_type.clone(),
                output: out.clone(),
                dims: l.dims().to_vec(),
                diff,
                inputs: ins,
            });
            return c;
        }
    }
    c
}
