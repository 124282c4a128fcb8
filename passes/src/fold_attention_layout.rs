//! Attention operands read in place (`fold-attention-layout`).
//!
//! Exporters reach an attention's Q, K and V through layout ops: a packed
//! QKV projection split three ways (GPT-2's `c_attn`, torchvision's
//! `in_proj`), sequence-first unflattening, selects and head transposes.
//! Each of those is a copy on a GPU. Here each operand's chain of layout ops
//! (reshape, flatten, squeeze, unsqueeze, transpose, gather of a constant
//! index, slice with positive steps, split) is traced back to the value it
//! reads and composed into one strided view of it; the attention then reads
//! that value through [`HeadViews`], and the chains die. Where Q, K and V
//! come from three projections of one input (`matmul` or `fused_matmul`
//! without an activation, constant 2-D weights, all with a constant bias or
//! none), the projections become one over the concatenated weights and the
//! operands views of its columns: one GEMM with three times the columns
//! fills a large GPU where three small ones do not.
//!
//! Only attentions whose one output is Y (no cache), and only where the
//! target runs the result (`Backend::supports`).

use std::collections::HashSet;

use rlx_ir::ops::{slice_range, Attention, FusedMatMul, HeadView, HeadViews};
use rlx_ir::{Graph, Node, NodeId, Op, Tensor, TensorType, Value, Weights};

use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{add_op, const_of, constant, rewrite_each, union_origin};

pub struct FoldAttentionLayout;

const NAME: &str = "fold-attention-layout";

impl Pass for FoldAttentionLayout {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        rewrite_each(
            g,
            cx,
            NAME,
            "attention.views",
            |n| matches!(&n.op, Op::Attention(a) if a.views.is_empty() && !a.has_past && a.num_outputs == 1),
            fold,
        )
    }
}

/// A strided view of a value: `dims`, element `i` at `offset + i . strides`.
#[derive(Debug, Clone, PartialEq)]
struct Strided {
    dims: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
}

impl Strided {
    /// `dims` laid out row-major (`None` if its size overflows).
    fn dense(dims: &[usize]) -> Option<Strided> {
        let mut strides = vec![1usize; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].checked_mul(dims[i + 1])?;
        }
        Some(Strided {
            dims: dims.to_vec(),
            strides,
            offset: 0,
        })
    }

    fn transpose(&self, perm: &[usize]) -> Option<Strided> {
        if perm.len() != self.dims.len() {
            return None;
        }
        Some(Strided {
            dims: perm
                .iter()
                .map(|&p| self.dims.get(p).copied())
                .collect::<Option<_>>()?,
            strides: perm
                .iter()
                .map(|&p| self.strides.get(p).copied())
                .collect::<Option<_>>()?,
            offset: self.offset,
        })
    }

    /// The same elements as `to` (row-major), where strides can say it:
    /// each run of dims merged must be contiguous in the view.
    fn reshape(&self, to: &[usize]) -> Option<Strided> {
        let size = |d: &[usize]| d.iter().try_fold(1usize, |a, &x| a.checked_mul(x));
        if size(&self.dims)? != size(to)? {
            return None;
        }
        if to.contains(&0) {
            return Strided::dense(to).map(|s| Strided {
                offset: self.offset,
                ..s
            });
        }
        // Dims of one element move freely; the rest group into runs whose
        // products match.
        let old: Vec<(usize, usize)> = self
            .dims
            .iter()
            .zip(&self.strides)
            .filter(|(&d, _)| d != 1)
            .map(|(&d, &s)| (d, s))
            .collect();
        let mut strides = vec![0; to.len()];
        let (mut i, mut j) = (0, 0);
        while j < to.len() {
            if to[j] == 1 {
                strides[j] = 1;
                j += 1;
                continue;
            }
            let (o0, n0) = (i, j);
            let (mut po, mut pn) = (old.get(i)?.0, to[j]);
            i += 1;
            j += 1;
            while po != pn {
                if po < pn {
                    po = po.checked_mul(old.get(i)?.0)?;
                    i += 1;
                } else {
                    pn = pn.checked_mul(*to.get(j)?)?;
                    j += 1;
                }
            }
            // The old run must be contiguous...
            for k in o0..i - 1 {
                if old[k].1 != old[k + 1].1 * old[k + 1].0 {
                    return None;
                }
            }
            // ...and splits into the new run innermost first.
            let mut st = old[i - 1].1;
            for k in (n0..j).rev() {
                strides[k] = st;
                st = st.checked_mul(to[k])?;
            }
        }
        (i == old.len()).then(|| Strided {
            dims: to.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    /// Index `start`, `start + step`, ... (`len` of them) of `axis`.
    fn narrow(&self, axis: usize, start: usize, len: usize, step: usize) -> Option<Strided> {
        let mut s = self.clone();
        if len > 0 && start.checked_add((len - 1).checked_mul(step)?)? >= *s.dims.get(axis)? {
            return None;
        }
        s.offset = s.offset.checked_add(start.checked_mul(s.strides[axis])?)?;
        s.strides[axis] = s.strides[axis].checked_mul(step)?;
        s.dims[axis] = len;
        Some(s)
    }

    /// Index `index` of `axis`, the axis dropped.
    fn select(&self, axis: usize, index: usize) -> Option<Strided> {
        let mut s = self.narrow(axis, index, 1, 1)?;
        s.dims.remove(axis);
        s.strides.remove(axis);
        Some(s)
    }
}

/// One layout op on the way from a value to an attention operand.
#[derive(Debug, Clone)]
enum Step {
    Reshape(Vec<usize>),
    Transpose(Vec<usize>),
    Select {
        axis: usize,
        index: usize,
    },
    Narrow {
        axis: usize,
        start: usize,
        len: usize,
        step: usize,
    },
}

impl Step {
    fn apply(&self, s: &Strided) -> Option<Strided> {
        match self {
            Step::Reshape(to) => s.reshape(to),
            Step::Transpose(p) => s.transpose(p),
            Step::Select { axis, index } => s.select(*axis, *index),
            Step::Narrow {
                axis,
                start,
                len,
                step,
            } => s.narrow(*axis, *start, *len, *step),
        }
    }
}

fn static_dims(t: &TensorType) -> Option<Vec<usize>> {
    t.shape
        .0
        .iter()
        .map(|d| d.known().and_then(|v| usize::try_from(v).ok()))
        .collect()
}

fn dims_of(g: &Graph, v: Value) -> Option<Vec<usize>> {
    static_dims(g.node(v.node).outputs.get(v.port as usize)?)
}

fn axis_of(axis: i64, rank: usize) -> Option<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(a).ok().filter(|&a| a < rank)
}

fn const_ints(g: &Graph, w: &Weights, v: Value) -> Option<Vec<i64>> {
    const_of(g, w, v)?.to_i64_vec()
}

/// The layout op producing `v` as a step over its data input, if it is one.
fn step_of(g: &Graph, w: &Weights, v: Value) -> Option<(Step, Value)> {
    let node = g.node(v.node);
    let ins = g.inputs_of(v.node);
    let x = *ins.first()?;
    let in_dims = dims_of(g, x)?;
    let out_dims = dims_of(g, v)?;
    let rank = in_dims.len();
    let step = match &node.op {
        Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_) => {
            Step::Reshape(out_dims)
        }
        Op::Transpose(t) => {
            let perm = t
                .perm
                .iter()
                .map(|&p| usize::try_from(p).ok())
                .collect::<Option<Vec<_>>>()?;
            Step::Transpose(perm)
        }
        Op::Gather(ga) => {
            let axis = axis_of(ga.axis, rank)?;
            let idx = const_of(g, w, *ins.get(1)?)?;
            let i = *idx.to_i64_vec()?.first()?;
            let i = usize::try_from(if i < 0 { i + in_dims[axis] as i64 } else { i }).ok()?;
            match idx.dims().len() {
                0 => Step::Select { axis, index: i },
                1 if idx.numel() == 1 => Step::Narrow {
                    axis,
                    start: i,
                    len: 1,
                    step: 1,
                },
                _ => return None,
            }
        }
        Op::Split(s) => {
            let axis = axis_of(s.axis, rank)?;
            let mut start = 0;
            for p in 0..v.port {
                start += dims_of(g, Value::new(v.node, p))?.get(axis)?;
            }
            Step::Narrow {
                axis,
                start,
                len: out_dims[axis],
                step: 1,
            }
        }
        Op::Slice(_) => {
            let starts = const_ints(g, w, *ins.get(1)?)?;
            let ends = const_ints(g, w, *ins.get(2)?)?;
            let axes = match ins.get(3) {
                Some(&a) => const_ints(g, w, a)?,
                None => (0..starts.len() as i64).collect(),
            };
            let steps = match ins.get(4) {
                Some(&s) => const_ints(g, w, s)?,
                None => vec![1; starts.len()],
            };
            // One sliced axis (the others whole).
            let [a] = axes[..] else { return None };
            let axis = axis_of(a, rank)?;
            let step = *steps.first()?;
            if step < 1 {
                return None;
            }
            let (start, len) =
                slice_range(in_dims[axis] as i64, *starts.first()?, *ends.first()?, step);
            if len as usize != out_dims[axis] {
                return None;
            }
            Step::Narrow {
                axis,
                start: usize::try_from(start).ok()?,
                len: len as usize,
                step: step as usize,
            }
        }
        _ => return None,
    };
    Some((step, x))
}

/// The value `v` reads in place through layout ops, and those ops (first
/// applied first) with their nodes.
fn trace(g: &Graph, w: &Weights, v: Value) -> (Value, Vec<Step>, Vec<NodeId>) {
    let (mut cur, mut steps, mut nodes) = (v, Vec::new(), Vec::new());
    while let Some((s, x)) = step_of(g, w, cur) {
        steps.push(s);
        nodes.push(cur.node);
        cur = x;
    }
    steps.reverse();
    (cur, steps, nodes)
}

/// The `[b, h, s, d]` view of an attention operand of `dims` (3-D with
/// `heads`, or 4-D) read through `s`: the head dimension must be contiguous.
fn head_view(s: &Strided, dims: &[usize], heads: i64) -> Option<HeadView> {
    let s4 = match *dims {
        [_, _, _, _] => s.clone(),
        [b, n, hidden] => {
            let h = usize::try_from(heads)
                .ok()
                .filter(|&h| h > 0 && hidden % h == 0)?;
            s.reshape(&[b, n, h, hidden / h])?
                .transpose(&[0, 2, 1, 3])?
        }
        _ => return None,
    };
    if s4.dims.len() != 4 || (s4.dims[3] > 1 && s4.strides[3] != 1) {
        return None;
    }
    let dims = [s4.dims[0], s4.dims[1], s4.dims[2], s4.dims[3]];
    let mut strides = [s4.strides[0], s4.strides[1], s4.strides[2]];
    // A dim of one element has no step of its own: give it the extent of the
    // others, as a dense layout would (kernels test strides for alignment).
    let extent = (0..3)
        .filter(|&i| dims[i] > 1)
        .map(|i| strides[i].checked_mul(dims[i]))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .max()
        .unwrap_or(0)
        .max(dims[3]);
    for i in 0..3 {
        if dims[i] == 1 {
            strides[i] = extent;
        }
    }
    Some(HeadView {
        dims,
        offset: s4.offset,
        strides,
    })
}

/// A projection `x @ w (+ bias)` with constant 2-D `w` and constant `bias`.
struct Projection {
    node: NodeId,
    x: Value,
    w: Tensor,
    bias: Option<Tensor>,
}

fn projection(g: &Graph, w: &Weights, v: Value) -> Option<Projection> {
    let node = g.node(v.node);
    match &node.op {
        Op::MatMul(_) => {}
        Op::FusedMatMul(f) if f.activation == rlx_ir::ops::Activation::None => {}
        _ => return None,
    }
    let ins = g.inputs_of(v.node);
    let wt = const_of(g, w, ins[1])?;
    let bias = match ins.get(2) {
        Some(&b) => Some(const_of(g, w, b)?),
        None => None,
    };
    let n = *wt.dims().get(1)?;
    if wt.dims().len() != 2 || bias.as_ref().is_some_and(|b| b.dims() != [n]) {
        return None;
    }
    Some(Projection {
        node: v.node,
        x: ins[0],
        w: wt,
        bias,
    })
}

/// `parts` side by side along their last axis (each `[rows, n_i]`, or
/// `[n_i]` as one row).
pub(crate) fn concat_columns(parts: &[&Tensor]) -> Option<Tensor> {
    let dtype = parts.first()?.dtype();
    let e = dtype.size();
    let rows = |t: &Tensor| if t.dims().len() == 2 { t.dims()[0] } else { 1 };
    let r = rows(parts[0]);
    if parts
        .iter()
        .any(|t| t.dtype() != dtype || rows(t) != r || !t.is_plain())
    {
        return None;
    }
    let cols: Vec<usize> = parts
        .iter()
        .map(|t| *t.dims().last().unwrap_or(&0))
        .collect();
    let total: usize = cols.iter().sum();
    let mut bytes = Vec::with_capacity(r * total * e);
    for row in 0..r {
        for (t, &c) in parts.iter().zip(&cols) {
            bytes.extend_from_slice(t.bytes().get(row * c * e..(row + 1) * c * e)?);
        }
    }
    let dims = if parts[0].dims().len() == 2 {
        vec![r, total]
    } else {
        vec![total]
    };
    Tensor::new(dtype, dims, rlx_ir::Bytes::copy_from(&bytes)).ok()
}

/// Where three projections of one input become one: the projections, and
/// each one's columns as a view of the merged output.
struct Merge {
    parts: Vec<Projection>,
    starts: [Strided; 3],
}

/// Whether Q, K and V start at three projections of one input, each read
/// only on its way to this attention (`chains`: the layout nodes from each
/// operand back, the last one reading the projection).
fn plan_merge(
    g: &Graph,
    w: &Weights,
    roots: &[Value; 3],
    chains: &[Vec<NodeId>; 3],
) -> Option<Merge> {
    let parts = roots
        .iter()
        .map(|&r| projection(g, w, r))
        .collect::<Option<Vec<_>>>()?;
    let distinct: HashSet<NodeId> = parts.iter().map(|p| p.node).collect();
    if distinct.len() != 3
        || parts.iter().any(|p| p.x != parts[0].x)
        || parts
            .iter()
            .any(|p| p.bias.is_some() != parts[0].bias.is_some())
        || parts
            .iter()
            .any(|p| p.w.dims()[0] != parts[0].w.dims()[0] || p.w.dtype() != parts[0].w.dtype())
    {
        return None;
    }
    for (i, p) in parts.iter().enumerate() {
        let v = Value::new(p.node, 0);
        let users = g.users_of(v);
        if users.len() != 1 || g.outputs().iter().any(|o| o.value == v) {
            return None;
        }
        if chains[i].last().is_some_and(|&n| users[0].0 != n) {
            return None;
        }
    }
    let mut full = dims_of(g, roots[0])?;
    let cols: Vec<usize> = parts.iter().map(|p| p.w.dims()[1]).collect();
    *full.last_mut()? = cols.iter().sum();
    let dense = Strided::dense(&full)?;
    let mut at = 0;
    let mut starts = Vec::with_capacity(3);
    for &c in &cols {
        let mut s = dense.clone();
        let k = s.dims.len() - 1;
        s.dims[k] = c;
        s.offset = at;
        at += c;
        starts.push(s);
    }
    let starts: [Strided; 3] = starts.try_into().ok()?;
    Some(Merge { parts, starts })
}

/// The merged projection: one `fused_matmul` over the concatenated weights
/// (and biases).
fn build_merge(g: &mut Graph, cx: &mut PassContext, m: &Merge) -> Result<Option<Value>, String> {
    let [a, b, c] = &m.parts[..] else {
        return Ok(None);
    };
    let Some(wcat) = concat_columns(&[&a.w, &b.w, &c.w]) else {
        return Ok(None);
    };
    let bcat = match (&a.bias, &b.bias, &c.bias) {
        (Some(x), Some(y), Some(z)) => match concat_columns(&[x, y, z]) {
            Some(t) => Some(t),
            None => return Ok(None),
        },
        _ => None,
    };
    let nodes: Vec<NodeId> = m.parts.iter().map(|p| p.node).collect();
    // One origin naming all three: the merged output stands for none of
    // their ONNX outputs alone, and `compare` takes a step for its latest
    // origin's output.
    let origin = vec![union_origin(g, &nodes).join(", ")];
    let base = format!("{}_qkv", g.node(nodes[0]).name);
    let wv = constant(
        g,
        cx.weights,
        &format!("{base}_weight"),
        origin.clone(),
        wcat,
    );
    let mut ins = vec![a.x, wv];
    if let Some(t) = bcat {
        ins.push(constant(
            g,
            cx.weights,
            &format!("{base}_bias"),
            origin.clone(),
            t,
        ));
    }
    let op = FusedMatMul {
        activation: rlx_ir::ops::Activation::None,
    };
    let id = add_op(g, cx.weights, op, &base, origin, &ins)?;
    Ok(Some(Value::new(id, 0)))
}

/// The views of Q, K and V read from `starts` through `steps`.
fn views(
    starts: &[Strided; 3],
    steps: &[Vec<Step>; 3],
    dims: &[Vec<usize>; 3],
    a: &Attention,
) -> Option<HeadViews> {
    let mut out = Vec::with_capacity(3);
    for i in 0..3 {
        let mut s = starts[i].clone();
        for st in &steps[i] {
            s = st.apply(&s)?;
        }
        if s.dims != dims[i] {
            return None;
        }
        let heads = if i == 0 {
            a.q_num_heads
        } else {
            a.kv_num_heads
        };
        out.push(head_view(&s, &dims[i], heads)?);
    }
    Some(HeadViews(out))
}

fn fold(g: &mut Graph, cx: &mut PassContext, id: NodeId) -> Result<bool, String> {
    let Op::Attention(a) = &g.node(id).op else {
        return Ok(false);
    };
    let a = a.clone();
    let ins = g.inputs_of(id);
    let w = &*cx.weights;
    let operands = [ins[0], ins[1], ins[2]];
    let Some(dims) = operands
        .iter()
        .map(|&v| dims_of(g, v))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(false);
    };
    let dims: [Vec<usize>; 3] = [dims[0].clone(), dims[1].clone(), dims[2].clone()];
    let traced: Vec<(Value, Vec<Step>, Vec<NodeId>)> =
        operands.iter().map(|&v| trace(g, w, v)).collect();
    let roots = [traced[0].0, traced[1].0, traced[2].0];
    let steps = [
        traced[0].1.clone(),
        traced[1].1.clone(),
        traced[2].1.clone(),
    ];
    let chains = [
        traced[0].2.clone(),
        traced[1].2.clone(),
        traced[2].2.clone(),
    ];
    // Merged projections where they fold; else each operand from its own root.
    let merge = plan_merge(g, w, &roots, &chains)
        .and_then(|m| views(&m.starts, &steps, &dims, &a).map(|v| (m, v)));
    let (merge, hv) = match merge {
        Some((m, v)) => (Some(m), v),
        None => {
            if steps.iter().all(Vec::is_empty) {
                return Ok(false);
            }
            let Some(starts) = roots
                .iter()
                .map(|&r| dims_of(g, r).and_then(|d| Strided::dense(&d)))
                .collect::<Option<Vec<_>>>()
            else {
                return Ok(false);
            };
            let starts: [Strided; 3] = [starts[0].clone(), starts[1].clone(), starts[2].clone()];
            match views(&starts, &steps, &dims, &a) {
                Some(v) => (None, v),
                None => return Ok(false),
            }
        }
    };
    // With views, `q_num_heads` says Y's rank: keep it as the operands gave it.
    let (qh, kh) = if dims[0].len() == 3 {
        (a.q_num_heads, a.kv_num_heads)
    } else {
        (0, 0)
    };
    let op = Attention {
        views: hv,
        q_num_heads: qh,
        kv_num_heads: kh,
        ..a
    };
    // The target must run the attention as it would be.
    if let Some(backend) = cx.backend {
        let root_types: Option<Vec<TensorType>> = match &merge {
            Some(m) => {
                let mut t = g.node(m.parts[0].node).outputs[0].clone();
                let total: i64 = m.parts.iter().map(|p| p.w.dims()[1] as i64).sum();
                if let Some(last) = t.shape.0.last_mut() {
                    *last = rlx_ir::Dim::Known(total);
                }
                Some(vec![t.clone(), t.clone(), t])
            }
            None => roots
                .iter()
                .map(|r| g.node(r.node).outputs.get(r.port as usize).cloned())
                .collect(),
        };
        let Some(mut types) = root_types else {
            return Ok(false);
        };
        for v in &ins[3..] {
            types.push(g.node(v.node).outputs[v.port as usize].clone());
        }
        let node = g.node(id);
        let probe = Node::new(
            op.clone().into(),
            node.name.clone(),
            node.origin.clone(),
            node.outputs.clone(),
        );
        if backend.supports(&probe, &types).is_err() {
            return Ok(false);
        }
    }
    let new_roots = match &merge {
        Some(m) => match build_merge(g, cx, m)? {
            Some(v) => [v, v, v],
            None => return Ok(false),
        },
        None => roots,
    };
    let mut new_ins = new_roots.to_vec();
    new_ins.extend_from_slice(&ins[3..]);
    let origin = g.node(id).origin.clone();
    crate::rewrite::replace_root(g, cx.weights, id, op, &new_ins, origin)?;
    if merge.is_some() {
        cx.count("attention.merged-projections");
    }
    if fold_output(g, cx, id)? {
        cx.count("attention.merged-heads-in-place");
    }
    Ok(true)
}

/// Whether `s` lies row-major and dense (dims of one element anywhere).
fn is_dense(s: &Strided) -> bool {
    let mut want = 1;
    for i in (0..s.dims.len()).rev() {
        if s.dims[i] > 1 && s.strides[i] != want {
            return false;
        }
        want *= s.dims[i];
    }
    true
}

/// A 4-D Y read only by a transpose whose output is laid out as `[B, S,
/// Hq*Dv]` is (a sequence-first head merge at batch 1, as torchvision
/// writes it): Y is written that way (3-D) and the transpose becomes a
/// reshape, no copy.
fn fold_output(g: &mut Graph, cx: &mut PassContext, id: NodeId) -> Result<bool, String> {
    let Op::Attention(a) = &g.node(id).op else {
        return Ok(false);
    };
    let a = a.clone();
    let y = Value::new(id, 0);
    let users = g.users_of(y);
    if a.q_num_heads > 0 || users.len() != 1 || g.outputs().iter().any(|o| o.value == y) {
        return Ok(false);
    }
    let t = users[0].0;
    let Op::Transpose(tr) = &g.node(t).op else {
        return Ok(false);
    };
    let (Some(yd), Some(out)) = (dims_of(g, y), dims_of(g, Value::new(t, 0))) else {
        return Ok(false);
    };
    let Ok([b, h, sq, d]) = <[usize; 4]>::try_from(yd.as_slice()) else {
        return Ok(false);
    };
    let Some(perm) = tr
        .perm
        .iter()
        .map(|&p| usize::try_from(p).ok())
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(false);
    };
    // Y written [B, S, H, D], seen in its logical [B, H, S, D] order, then
    // through the transpose.
    let written = Strided::dense(&[b, sq, h, d]).and_then(|w| w.transpose(&[0, 2, 1, 3]));
    let Some(after) = written.and_then(|w| w.transpose(&perm)) else {
        return Ok(false);
    };
    if !is_dense(&after) {
        return Ok(false);
    }
    let kv_heads = a.views.get(1).map_or(a.kv_num_heads, |v| v.dims[1] as i64);
    let op = Attention {
        q_num_heads: h as i64,
        kv_num_heads: kv_heads,
        ..a
    };
    let ins = g.inputs_of(id);
    let origin = g.node(id).origin.clone();
    crate::rewrite::replace_root(g, cx.weights, id, op, &ins, origin)?;
    let t_origin = g.node(t).origin.clone();
    let shape: Vec<i64> = out.iter().map(|&x| x as i64).collect();
    let shape = Tensor::from_i64(&[shape.len()], &shape).map_err(|e| e.to_string())?;
    let sv = constant(
        g,
        cx.weights,
        &format!("{}_shape", g.node(t).name),
        t_origin.clone(),
        shape,
    );
    let reshape = rlx_ir::ops::Reshape { allowzero: false };
    crate::rewrite::replace_root(g, cx.weights, t, reshape, &[y, sv], t_origin)?;
    Ok(true)
}
