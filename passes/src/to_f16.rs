//! Half precision (`to-f16`, `to-bf16`): every node that computes in f32
//! and that the target runs in the half type computes in it instead, its f32
//! weights and constants stored so. `to-f16` keeps 11 bits of mantissa and
//! a range to 65504; `to-bf16` 8 bits and f32's range (no overflow where
//! f32 had none). Values keep f32 where they meet the rest of the graph: a
//! cast to f16 after each f32 graph input or producer an f16 node reads, a
//! cast back to f32 before each graph output and each consumer left in f32
//! (one cast per value and direction). What stays f32: control flow
//! (If/Loop/Scan and their bodies), casts, Resize and Range (their float
//! inputs decide output shapes), and any node whose op infers
//! another output dtype from f16 inputs or that the target does not run in
//! f16. Inputs and outputs of the model keep their dtypes.
//!
//! The typed precision option of the compiler (`--precision fp16` or
//! `bf16`) adds the pass before legalization; it is not part of any default
//! pipeline. Below, "f16" is either half type.

use std::collections::{HashMap, HashSet};

use rlx_ir::analysis::{infer_graph, Values};
use rlx_ir::ops::{Cast, InferCx, RoundMode};
use rlx_ir::{DType, Graph, Node, NodeId, Op, TensorType, Value};

use crate::fold::leaf_tensor;
use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::float_tensor;

/// The pass, for one half type (`F16` or `BF16`).
pub struct ToF16 {
    half: DType,
}

impl ToF16 {
    /// `to-f16`.
    pub const F16: ToF16 = ToF16 { half: DType::F16 };
    /// `to-bf16`.
    pub const BF16: ToF16 = ToF16 { half: DType::BF16 };

    fn half(&self, t: &TensorType) -> TensorType {
        if t.dtype == DType::F32 {
            TensorType::new(self.half, t.shape.clone())
        } else {
            t.clone()
        }
    }

    /// The pass name and its counters.
    fn names(&self) -> (&'static str, &'static str, &'static str) {
        match self.half {
            DType::BF16 => ("to-bf16", "to_bf16.cast", "to_bf16.node"),
            _ => ("to-f16", "to_f16.cast", "to_f16.node"),
        }
    }
}

/// Whether `id` computes in f16 once its f32 inputs and outputs are: it
/// touches f32, its op infers f16 where it had f32, and the target runs it.
fn runs_in_f16(pass: &ToF16, g: &Graph, cx: &PassContext, values: &Values, id: NodeId) -> bool {
    let node = g.node(id);
    // Resize scales and Range bounds decide shapes: in f16 they could round
    // to another output size than the graph was inferred with.
    if matches!(
        node.op,
        Op::Input(_) | Op::Constant(_) | Op::Weight(_) | Op::Cast(_) | Op::Resize(_) | Op::Range(_)
    ) || !node.op.subgraphs().is_empty()
    {
        return false;
    }
    let ins: Vec<TensorType> = g.inputs_of(id).iter().map(|v| g.ty(*v).clone()).collect();
    let f32s = |ts: &[TensorType]| ts.iter().any(|t| t.dtype == DType::F32);
    if !f32s(&ins) && !f32s(&node.outputs) {
        return false;
    }
    let halves: Vec<TensorType> = ins.iter().map(|t| pass.half(t)).collect();
    let outs: Vec<TensorType> = node.outputs.iter().map(|t| pass.half(t)).collect();
    let known: Vec<_> = g
        .inputs_of(id)
        .iter()
        .map(|v| values.get(v).cloned())
        .collect();
    let icx = InferCx {
        inputs: &halves,
        values: &known,
        node: &node.name,
        prior: &outs,
    };
    let Ok(inferred) = node.op.infer(&icx) else {
        return false;
    };
    if inferred.len() != outs.len() || inferred.iter().zip(&outs).any(|(a, b)| a.dtype != b.dtype) {
        return false;
    }
    let trial = Node {
        outputs: outs,
        ..node.clone()
    };
    cx.backend
        .is_none_or(|b| b.supports(&trial, &halves).is_ok())
}

fn cast(
    g: &mut Graph,
    from: Value,
    to: DType,
    origin: Vec<String>,
    pass: &'static str,
) -> Result<Value, PassError> {
    let ty = TensorType::new(to, g.ty(from).shape.clone());
    let name = g.unique_name(&format!("{}.{}", g.node(from.node).name, to));
    let op = Op::Cast(Cast {
        to,
        saturate: true,
        round_mode: RoundMode::Nearest,
    });
    let id = g
        .add_node(Node::new(op, name, origin, vec![ty]), &[from])
        .map_err(|e| PassError::graph(pass, e))?;
    Ok(Value::of(id))
}

impl Pass for ToF16 {
    fn name(&self) -> &'static str {
        self.names().0
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let (name, cast_count, node_count) = self.names();
        let half_dtype = self.half;
        let order = g.topo_order().map_err(|e| PassError::graph(name, e))?;
        // Compile-time values (shapes for reshapes and the like) for the
        // trial inference of each node.
        let values =
            infer_graph(&mut g.clone(), Some(cx.weights)).map_err(|e| PassError::graph(name, e))?;
        let half_nodes: HashSet<NodeId> = order
            .iter()
            .copied()
            .filter(|&id| runs_in_f16(self, g, cx, &values, id))
            .collect();
        if half_nodes.is_empty() {
            return Ok(false);
        }
        // The values that turn from f32 into f16.
        let mut converted: HashSet<Value> = HashSet::new();
        // f32 leaves read only by f16 nodes become f16 leaves (a weight
        // under a new name: subgraphs may read the old one).
        for &id in &order {
            let node = g.node(id);
            if !matches!(node.op, Op::Constant(_) | Op::Weight(_))
                || node.outputs.first().map(|t| t.dtype) != Some(DType::F32)
            {
                continue;
            }
            let users = g.user_nodes(id);
            let outputs = g.outputs().iter().any(|o| o.value.node == id);
            if users.is_empty() || outputs || !users.iter().all(|u| half_nodes.contains(u)) {
                continue;
            }
            let Some(t) = leaf_tensor(g, cx.weights, id) else {
                continue;
            };
            let Some(h) = t
                .to_f64_vec()
                .and_then(|v| float_tensor(half_dtype, t.dims(), &v))
            else {
                continue;
            };
            let node = g.node_mut(id);
            match &mut node.op {
                Op::Constant(c) => c.value = h,
                Op::Weight(w) => {
                    let renamed = cx.weights.unique_name(&format!("{}.{half_dtype}", w.name));
                    cx.weights.insert(renamed.clone(), h);
                    w.name = renamed;
                }
                _ => continue,
            }
            node.outputs[0] = self.half(&node.outputs[0]);
            converted.insert(Value::of(id));
        }
        // The f16 nodes' f32 outputs become f16.
        for &id in &half_nodes {
            let node = g.node_mut(id);
            for (port, t) in node.outputs.iter_mut().enumerate() {
                if t.dtype == DType::F32 {
                    *t = self.half(t);
                    converted.insert(Value::new(id, port as u16));
                }
            }
        }
        // Casts where f16 and f32 meet, one per value and direction.
        let mut to_half: HashMap<Value, Value> = HashMap::new();
        let mut to_full: HashMap<Value, Value> = HashMap::new();
        for &id in &order {
            let wants_half = half_nodes.contains(&id);
            for (port, v) in g.inputs_of(id).into_iter().enumerate() {
                let is_half = converted.contains(&v);
                let needs = if wants_half {
                    !is_half && g.ty(v).dtype == DType::F32
                } else {
                    is_half
                };
                if !needs {
                    continue;
                }
                let origin = g.node(id).origin.clone();
                let (memo, to) = if wants_half {
                    (&mut to_half, half_dtype)
                } else {
                    (&mut to_full, DType::F32)
                };
                let c = match memo.get(&v) {
                    Some(c) => *c,
                    None => {
                        let c = cast(g, v, to, origin, name)?;
                        memo.insert(v, c);
                        c
                    }
                };
                g.set_input(id, port, c)
                    .map_err(|e| PassError::graph(name, e))?;
                cx.count(cast_count);
            }
        }
        let outputs: Vec<(usize, Value)> = g
            .outputs()
            .iter()
            .enumerate()
            .filter(|(_, o)| converted.contains(&o.value))
            .map(|(i, o)| (i, o.value))
            .collect();
        for (i, v) in outputs {
            let c = match to_full.get(&v) {
                Some(c) => *c,
                None => {
                    let origin = g.node(v.node).origin.clone();
                    let c = cast(g, v, DType::F32, origin, name)?;
                    to_full.insert(v, c);
                    c
                }
            };
            g.outputs_mut()[i].value = c;
        }
        for _ in &half_nodes {
            cx.count(node_count);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::text::parse_graph;
    use rlx_ir::Weights;

    fn run(text: &str) -> (Graph, Weights) {
        run_as(&ToF16::F16, text)
    }

    fn run_as(pass: &ToF16, text: &str) -> (Graph, Weights) {
        let mut g = parse_graph(&format!("rlx-ir 2\ngraph {{\n{text}}}\n")).unwrap();
        let mut w = Weights::default();
        let mut cx = PassContext::new(&mut w);
        pass.run(&mut g, &mut cx).unwrap();
        rlx_ir::analysis::verify(&g, Some(&w)).unwrap();
        (g, w)
    }

    #[test]
    fn bf16_is_the_same_rewrite_in_the_other_half_type() {
        let (g, _) = run_as(
            &ToF16::BF16,
            "  %0 = input \"x\" : f32[2,3]
  %1 = constant f32[3] [1.0, 2.0, 3.0] : f32[3]
  %2 = add(%0, %1) : f32[2,3]
  output \"y\" = %2
",
        );
        let text = rlx_ir::text::print_graph(&g);
        assert!(text.contains("cast(%0) {to=bf16"), "{text}");
        assert!(text.contains("constant bf16[3]"), "{text}");
        assert!(
            !text.contains(": f16") && !text.contains("to=f16"),
            "{text}"
        );
        assert_eq!(ToF16::BF16.name(), "to-bf16");
    }

    #[test]
    fn computes_in_half_between_casts_at_the_edges() {
        let (g, _) = run("  %0 = input \"x\" : f32[2,3]
  %1 = constant f32[3] [1.0, 2.0, 3.0] : f32[3]
  %2 = add(%0, %1) : f32[2,3]
  %3 = relu(%2) : f32[2,3]
  %4 = shape(%3) {start=0, end=none} : i64[2]
  output \"y\" = %3
  output \"s\" = %4
");
        let text = rlx_ir::text::print_graph(&g);
        // The input is cast once, the constant is stored as f16, add and
        // relu run in f16, the output is cast back; shape reads f16.
        assert!(text.contains("cast(%0) {to=f16"), "{text}");
        assert!(text.contains("constant f16[3]"), "{text}");
        assert!(text.contains("relu("), "{text}");
        assert_eq!(text.matches("cast(").count(), 2, "{text}");
        let y = g.outputs()[0].value;
        assert_eq!(g.ty(y).dtype, DType::F32);
        assert!(matches!(g.node(y.node).op, Op::Cast(_)));
    }

    #[test]
    fn integer_graphs_are_left_alone() {
        let (g, _) = run("  %0 = input \"x\" : i64[4]
  %1 = neg(%0) : i64[4]
  output \"y\" = %1
");
        assert_eq!(g.node_count(), 2);
    }
}
