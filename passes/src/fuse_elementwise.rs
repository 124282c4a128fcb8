//! Elementwise-region formation (`fuse-elementwise`): a connected group of float
//! elementwise nodes (unary math, add/sub/mul/div/pow/max/min, `clip` with
//! constant bounds, earlier regions) whose inner results nothing else reads
//! becomes one `elementwise_region`. Scalar constants become literals of the
//! program; other operands become inputs. Groups grow from the consumer end;
//! a group of one node stays as it is.

use std::collections::{HashMap, HashSet};

use rlx_ir::ops::{
    BinaryKind, ElementwiseRegion, Instr, Operand, Program, RegionFn, REGION_DTYPES,
};
use rlx_ir::{Graph, NodeId, Op, Value, Weights};

use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{finish, remove_dead, replace_root, splat, union_origin};

pub struct FuseElementwise;

const NAME: &str = "fuse-elementwise";

/// Most instructions one region holds.
const MAX_INSTRS: usize = 64;

impl Pass for FuseElementwise {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let order = g.topo_order().map_err(|e| PassError::graph(NAME, e))?;
        let pos: HashMap<NodeId, usize> = order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut taken: HashSet<NodeId> = HashSet::new();
        let mut formed = 0;
        for &root in order.iter().rev() {
            if taken.contains(&root) || !g.contains(root) || !fusable(g, cx.weights, root) {
                continue;
            }
            let mut region = grow(g, cx.weights, root, &taken);
            if region.len() < 2 {
                continue;
            }
            region.sort_by_key(|n| pos.get(n).copied().unwrap_or(0));
            let Some((program, inputs)) = build(g, cx.weights, &region) else {
                continue;
            };
            if program.0.len() > MAX_INSTRS {
                continue;
            }
            let origin = union_origin(g, &region);
            let before = g.node(root).outputs.clone();
            replace_root(
                g,
                cx.weights,
                root,
                ElementwiseRegion { program },
                &inputs,
                origin,
            )
            .map_err(|reason| PassError::Node {
                pass: NAME,
                node: g.node(root).name.clone(),
                origin: g.node(root).origin_text(),
                reason,
            })?;
            if g.node(root).outputs != before {
                return Err(PassError::graph(
                    NAME,
                    format!("region at `{}` changed its type", g.node(root).name),
                ));
            }
            taken.extend(region.iter().copied());
            remove_dead(g, &region);
            cx.count("elementwise_region");
            formed += 1;
        }
        if formed > 0 {
            finish(g, cx, NAME)?;
        }
        Ok(formed > 0)
    }
}

/// A scalar float leaf: becomes a literal.
fn literal(g: &Graph, w: &Weights, v: Value) -> Option<f64> {
    let n = g.node(v.node);
    if !n.op.is_leaf()
        || n.outputs[0]
            .shape
            .as_known()
            .is_none_or(|d| d.iter().product::<usize>() != 1)
    {
        return None;
    }
    splat(g, w, v)
}

/// True if `id` can be part of a region.
fn fusable(g: &Graph, w: &Weights, id: NodeId) -> bool {
    let node = g.node(id);
    if node.outputs.len() != 1 || !REGION_DTYPES.contains(&node.outputs[0].dtype) {
        return false;
    }
    let d = node.outputs[0].dtype;
    let ins = g.inputs_of(id);
    if ins.iter().any(|v| g.ty(*v).dtype != d) {
        return false;
    }
    match &node.op {
        Op::Unary(u) => RegionFn::Unary(u.kind).allowed(),
        Op::Binary(b) => RegionFn::Binary(b.kind).allowed(),
        Op::Clip(_) => {
            ins.len() == 3 && literal(g, w, ins[1]).is_some() && literal(g, w, ins[2]).is_some()
        }
        Op::ElementwiseRegion(_) => true,
        _ => false,
    }
}

/// The region rooted at `root`: producers join while everything reading them
/// is already in the region.
fn grow(g: &Graph, w: &Weights, root: NodeId, taken: &HashSet<NodeId>) -> Vec<NodeId> {
    let mut region = vec![root];
    let mut set: HashSet<NodeId> = HashSet::from([root]);
    let mut i = 0;
    while i < region.len() {
        let n = region[i];
        i += 1;
        for v in g.inputs_of(n) {
            let p = v.node;
            if set.contains(&p) || taken.contains(&p) || !fusable(g, w, p) {
                continue;
            }
            let only_here = !g.outputs().iter().any(|o| o.value.node == p)
                && g.users_of(Value::of(p))
                    .iter()
                    .all(|(u, _)| set.contains(u));
            if only_here {
                set.insert(p);
                region.push(p);
            }
        }
    }
    region
}

/// The program and inputs of a region (nodes in topological order).
fn build(g: &Graph, w: &Weights, region: &[NodeId]) -> Option<(Program, Vec<Value>)> {
    let set: HashSet<NodeId> = region.iter().copied().collect();
    let mut inputs: Vec<Value> = Vec::new();
    let mut result: HashMap<NodeId, u16> = HashMap::new();
    let mut prog: Vec<Instr> = Vec::new();
    let operand =
        |v: Value, inputs: &mut Vec<Value>, result: &HashMap<NodeId, u16>| -> Option<Operand> {
            if set.contains(&v.node) {
                return result.get(&v.node).map(|t| Operand::Temp(*t));
            }
            if let Some(c) = literal(g, w, v) {
                return Some(Operand::Const(c));
            }
            let k = match inputs.iter().position(|x| *x == v) {
                Some(k) => k,
                None => {
                    inputs.push(v);
                    inputs.len() - 1
                }
            };
            Some(Operand::Input(u16::try_from(k).ok()?))
        };
    for &n in region {
        let ins = g.inputs_of(n);
        let args: Vec<Operand> = ins
            .iter()
            .map(|v| operand(*v, &mut inputs, &result))
            .collect::<Option<_>>()?;
        fn push(prog: &mut Vec<Instr>, f: RegionFn, a: Vec<Operand>) -> Option<u16> {
            prog.push(Instr { f, args: a });
            u16::try_from(prog.len() - 1).ok()
        }
        let t = match &g.node(n).op {
            Op::Unary(u) => push(&mut prog, RegionFn::Unary(u.kind), args)?,
            Op::Binary(b) => push(&mut prog, RegionFn::Binary(b.kind), args)?,
            Op::Clip(_) => {
                let lo = push(
                    &mut prog,
                    RegionFn::Binary(BinaryKind::Max),
                    vec![args[0], args[1]],
                )?;
                push(
                    &mut prog,
                    RegionFn::Binary(BinaryKind::Min),
                    vec![Operand::Temp(lo), args[2]],
                )?
            }
            Op::ElementwiseRegion(r) => {
                let base = u16::try_from(prog.len()).ok()?;
                let mut last = None;
                for ins in &r.program.0 {
                    let a = ins
                        .args
                        .iter()
                        .map(|o| match *o {
                            Operand::Input(k) => args.get(usize::from(k)).copied(),
                            Operand::Temp(k) => Some(Operand::Temp(base + k)),
                            c => Some(c),
                        })
                        .collect::<Option<Vec<_>>>()?;
                    last = push(&mut prog, ins.f, a);
                }
                last?
            }
            _ => return None,
        };
        result.insert(n, t);
    }
    if inputs.is_empty() {
        return None;
    }
    Some((Program(prog), inputs))
}
