//! Attention formation (`fuse-attention`): scaled dot-product attention written
//! out with 4-D head tensors becomes one `attention` (ONNX semantics):
//!
//! ```text
//! s = matmul(Q, KT) [* scale | / c] [+ mask]
//! y = matmul(softmax(s, axis=-1), V)
//! ```
//!
//! with `Q [B,H,S,D]`, `KT [B,H,D,T]`, `V [B,H,T,Dv]` and a float mask that
//! broadcasts into the scores. `K` is `transpose(KT, [0,1,3,2])`; `simplify`
//! then merges that with the head transpose in front of it. As exporters
//! also write it:
//! - the scale split over both operands, `matmul(Q * a, KT * b)` (PyTorch's
//!   decomposed `scaled_dot_product_attention` multiplies each by the square
//!   root of the scale): scale `a * b`;
//! - the probabilities guarded as `where(isnan(p), 0, p)` (rows whose every
//!   key is masked): the op gives such rows zeros already;
//! - grouped-query heads repeated for the product, `reshape(expand(
//!   unsqueeze(k, 2)))` (`repeat_kv`) on K and V: attention reads the
//!   `kv_heads` of `k` and `v` as they are.
//!
//! A second rule (`attention.heads`) takes the head split and merge into the
//! op: where Q, K and V are each `transpose(reshape(x, [B,S,H,D]), [0,2,1,3])`
//! of a `[B,S,H*D]` tensor and the output is merged back the same way,
//! attention reads the 3-D tensors with `q_num_heads`/`kv_num_heads` and
//! writes `[B,S,H*Dv]` (ONNX's 3-D form), so the four head transposes, each a
//! copy of the whole tensor, are gone. Where only K or V is such a split (a
//! decoder's rotated Q and K are computed in 4-D, its V is not), that
//! operand alone is read in 3-D (`attention.kv-heads`).

use rlx_ir::ops::{Attention, Reshape, SoftmaxKind, Transpose};
use rlx_ir::{Dim, Graph, Op, Shape, Tensor, Value};

use crate::fold_batchnorm::rev;
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, op_if, Match, Pat, Rule};
use crate::rewrite::{add_op, constant, remove_dead, replace_root, splat, union_origin};

pub struct FuseAttention;

const NAME: &str = "fuse-attention";

fn is_softmax(op: &Op) -> bool {
    matches!(op, Op::Softmax(s) if s.kind == SoftmaxKind::Softmax)
}

fn patterns() -> Vec<Pat> {
    let qs = [
        op("mul", [any("q"), leaf("q_scale")]).commutative(),
        any("q"),
    ];
    let ks = [
        op("mul", [any("kt"), leaf("k_scale")]).commutative(),
        any("kt"),
    ];
    let mut v = Vec::new();
    for q in &qs {
        for kt in &ks {
            let qk = || op("matmul", [q.clone(), kt.clone()]).bind("qk");
            let scaled = [
                op("mul", [qk(), leaf("scale")]).commutative(),
                op("div", [qk(), leaf("div")]),
                qk(),
            ];
            for s in scaled {
                for masked in [op("add", [s.clone(), any("mask")]).commutative(), s] {
                    let p = || op_if(is_softmax, [masked.clone()]).bind("softmax");
                    let guarded = op("where", [op("isnan", [p()]), leaf("nan_zero"), p()]);
                    v.push(op("matmul", [guarded, any("v")]));
                    v.push(op("matmul", [p(), any("v")]));
                }
            }
        }
    }
    v
}

impl Pass for FuseAttention {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let mut rules: Vec<Rule> = patterns()
            .into_iter()
            .map(|pattern| Rule {
                name: "attention",
                pattern,
                rewrite,
            })
            .collect();
        rules.extend(head_patterns().into_iter().map(|pattern| Rule {
            name: "attention.heads",
            pattern,
            rewrite: heads_in_place,
        }));
        let fused = apply_rules(g, cx, NAME, &rules)? > 0;
        Ok(kv_heads_in_place(g, cx)? || fused)
    }
}

/// `x3 [B,S,H*D]` and `H` when `v` is `transpose(reshape(x3, [B,S,H,D]),
/// [0,2,1,3])`.
fn split_of(g: &Graph, v: Value) -> Option<(Value, i64)> {
    if !is_head_swap(&g.node(v.node).op) {
        return None;
    }
    let r = g.inputs_of(v.node)[0];
    if !matches!(g.node(r.node).op, Op::Reshape(_)) {
        return None;
    }
    let x = g.inputs_of(r.node)[0];
    split_heads(g, x, r).map(|h| (x, h))
}

/// Reads K and V of 4-D attentions in 3-D where each is a head split of a
/// `[B,S,H*D]` tensor, with `kv_num_heads` set. Q stays: its rank decides
/// the output's.
fn kv_heads_in_place(g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
    let mut changed = false;
    for id in g.node_ids() {
        // An earlier rewrite may have removed it.
        if !g.contains(id) {
            continue;
        }
        let Op::Attention(a) = &g.node(id).op else {
            continue;
        };
        if a.has_past || g.node(id).outputs.len() != 1 {
            continue;
        }
        let mut a = a.clone();
        let mut ins = g.inputs_of(id);
        let mut absorbed = Vec::new();
        for port in [1, 2] {
            let Some((x3, h)) = split_of(g, ins[port]) else {
                continue;
            };
            if a.kv_num_heads != 0 && a.kv_num_heads != h {
                continue;
            }
            // A 3-D K or V needs the head count; the other, if 4-D, ignores it.
            a.kv_num_heads = h;
            absorbed.push(ins[port].node);
            ins[port] = x3;
        }
        if absorbed.is_empty() {
            continue;
        }
        let (origin, node) = (g.node(id).origin.clone(), g.node(id).name.clone());
        replace_root(g, cx.weights, id, a, &ins, origin).map_err(|reason| PassError::Node {
            pass: NAME,
            origin: g.get(id).map_or(String::new(), |n| n.origin_text()),
            node,
            reason,
        })?;
        remove_dead(g, &absorbed);
        cx.count("attention.kv-heads");
        changed = true;
    }
    if changed {
        crate::rewrite::finish(g, cx, NAME)?;
    }
    Ok(changed)
}

fn rewrite(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let (q, kt, v) = (m.v("q"), m.v("kt"), m.v("v"));
    let (qt, ktt, vt) = (g.ty(q).clone(), g.ty(kt).clone(), g.ty(v).clone());
    if qt.rank() != 4 || ktt.rank() != 4 || vt.rank() != 4 || !qt.dtype.is_float() {
        return Ok(false);
    }
    if ktt.dtype != qt.dtype || vt.dtype != qt.dtype {
        return Ok(false);
    }
    // Heads and batch must line up without broadcasting.
    if qt.shape.0[..2] != ktt.shape.0[..2] || qt.shape.0[..2] != vt.shape.0[..2] {
        return Ok(false);
    }
    let Op::Softmax(sm) = &g.node(m.n("softmax")).op else {
        return Ok(false);
    };
    if sm.axis != -1 && sm.axis != 3 {
        return Ok(false);
    }
    let scores = g.node(m.n("qk")).outputs[0].clone();
    if g.node(m.n("softmax")).outputs[0] != scores {
        return Ok(false);
    }
    let scale = match (m.values.get("scale"), m.values.get("div")) {
        (Some(s), _) => splat(g, cx.weights, *s),
        (_, Some(d)) => splat(g, cx.weights, *d)
            .filter(|d| *d != 0.0)
            .map(|d| 1.0 / d),
        _ => Some(1.0),
    };
    // Scales on the operands: scalars of the operand's dtype, so the product
    // broadcasts nothing.
    let operand_scale = |name: &str, x: Value| match m.values.get(name) {
        None => Some(1.0),
        Some(s)
            if g.ty(*s).dtype == g.ty(x).dtype
                && g.ty(*s)
                    .shape
                    .as_known()
                    .is_some_and(|d| d.iter().product::<usize>() == 1) =>
        {
            splat(g, cx.weights, *s)
        }
        Some(_) => None,
    };
    let (Some(scale), Some(qs), Some(ks)) = (
        scale,
        operand_scale("q_scale", q),
        operand_scale("k_scale", kt),
    ) else {
        return Ok(false);
    };
    let scale = scale * qs * ks;
    if m.values
        .get("nan_zero")
        .is_some_and(|z| splat(g, cx.weights, *z) != Some(0.0))
    {
        return Ok(false);
    }
    let mask = m.values.get("mask").copied();
    if let Some(mk) = mask {
        if g.ty(mk).dtype != qt.dtype {
            return Ok(false);
        }
    }
    let name = g.node(m.root()).name.clone();
    // K = transpose(KT, [0,1,3,2]), composed with a transpose that made KT
    // (the head split of K, usually), so the split stays one transpose.
    let mut nodes = rev(g, m);
    let (k_src, perm) = match &g.node(kt.node).op {
        Op::Transpose(t) if kt.port == 0 && t.perm.len() == 4 => {
            let p = &t.perm;
            nodes.insert(0, kt.node);
            (g.inputs_of(kt.node)[0], vec![p[0], p[1], p[3], p[2]])
        }
        _ => (kt, vec![0, 1, 3, 2]),
    };
    let origin = union_origin(g, &nodes);
    // Grouped-query heads repeated for the products: read the shared ones.
    let identity = perm == [0, 1, 2, 3];
    let v_read = v;
    let (k_src, v, repeated) = match (repeat_kv(g, k_src), repeat_kv(g, v)) {
        (Some((k1, rk)), Some((v1, rv))) if identity && rk == rv => (k1, v1, true),
        _ => (k_src, v, false),
    };
    let k = if identity {
        k_src
    } else {
        Value::of(add_op(
            g,
            cx.weights,
            Transpose { perm },
            &format!("{name}.k"),
            origin.clone(),
            &[k_src],
        )?)
    };
    let mut ins = vec![q, k, v];
    ins.extend(mask);
    let op = Attention {
        scale: Some(scale as f32),
        has_mask: mask.is_some(),
        ..Attention::default()
    };
    if let Err(e) = replace_root(g, cx.weights, m.root(), op, &ins, origin) {
        if !identity {
            g.remove_node(k.node);
        }
        return Err(e);
    }
    // The repeats are dead now: drop them, so the heads they read are read
    // by attention alone (and `attention.heads` may take their splits).
    remove_dead(g, &[kt.node, v_read.node]);
    if repeated {
        cx.count("attention.shared-kv-heads");
    }
    Ok(true)
}

/// `x [B, Hkv, T, D]` and the repeat when `v` is `x` with each head repeated
/// `rep` times: `reshape(expand(unsqueeze(x, 2), [B, Hkv, rep, T, D]),
/// [B, Hkv * rep, T, D])`.
fn repeat_kv(g: &Graph, v: Value) -> Option<(Value, usize)> {
    let reshape = g.node(v.node);
    let e = *g.inputs_of(v.node).first()?;
    let u = *g.inputs_of(e.node).first()?;
    let x = *g.inputs_of(u.node).first()?;
    if !matches!(reshape.op, Op::Reshape(_))
        || !matches!(g.node(e.node).op, Op::Expand(_))
        || !matches!(g.node(u.node).op, Op::Unsqueeze(_))
    {
        return None;
    }
    let dims = |v: Value| g.ty(v).shape.as_known();
    let (xd, ud, ed, vd) = (dims(x)?, dims(u)?, dims(e)?, dims(v)?);
    let [b, h, t, d] = xd[..] else { return None };
    let rep = *ed.get(2)?;
    (ud == [b, h, 1, t, d] && ed == [b, h, rep, t, d] && vd == [b, h * rep, t, d])
        .then_some((x, rep))
}

fn is_head_swap(op: &Op) -> bool {
    matches!(op, Op::Transpose(t) if t.perm == [0, 2, 1, 3])
}

fn is_plain_attention(op: &Op) -> bool {
    matches!(op, Op::Attention(a) if a.q_num_heads == 0
        && a.kv_num_heads == 0
        && !a.has_past
        && !a.has_nonpad
        && a.num_outputs == 1)
}

/// `reshape(transpose(attention(split(q), split(k), split(v)[, mask])))` with
/// `split(x) = transpose(reshape(x))`.
fn head_patterns() -> Vec<Pat> {
    // Shape operands get their own names: one bound twice must be one value.
    let split = |x: &'static str, reshape: &'static str, to: &'static str| {
        op_if(
            is_head_swap,
            [op("reshape", [any(x), leaf(to)]).bind(reshape)],
        )
    };
    let merge = |att: Pat| {
        op(
            "reshape",
            [op_if(is_head_swap, [att.bind("attention")]), leaf("y_to")],
        )
    };
    let q = || split("q3", "q_split", "q_to");
    let k = || split("k3", "k_split", "k_to");
    let v = || split("v3", "v_split", "v_to");
    vec![
        merge(op_if(is_plain_attention, [q(), k(), v(), any("mask")])),
        merge(op_if(is_plain_attention, [q(), k(), v()])),
    ]
}

/// The head count of a split `[B,S,N] -> [B,S,H,D]` when it is one (the
/// leading dims kept and `N = H*D`), else `None`.
fn split_heads(g: &Graph, x: Value, split: Value) -> Option<i64> {
    let (from, to) = (&g.ty(x).shape.0, &g.ty(split).shape.0);
    let [b, s, n] = from.as_slice() else {
        return None;
    };
    let [b2, s2, h, d] = to.as_slice() else {
        return None;
    };
    let heads = h.known()?;
    (b == b2 && s == s2 && *n == h.mul(d) && heads > 0).then_some(heads)
}

fn heads_in_place(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let heads = |name: &str, shape: &str| split_heads(g, m.v(name), Value::of(m.n(shape)));
    let (Some(hq), Some(hk), Some(hv)) = (
        heads("q3", "q_split"),
        heads("k3", "k_split"),
        heads("v3", "v_split"),
    ) else {
        return Ok(false);
    };
    if hk != hv {
        return Ok(false);
    }
    // The merge must undo the split: [B,H,S,Dv] -> [B,S,H*Dv], or a view of
    // that (`[B*S, H*Dv]` for the output projection, say), which then
    // reshapes the 3-D output.
    let att = m.n("attention");
    let (y4, y3) = (
        &g.node(att).outputs[0].shape.0,
        &g.ty(Value::of(m.root())).shape.0,
    );
    let [b, h, s, dv] = y4.as_slice() else {
        return Ok(false);
    };
    if *h != Dim::from(hq) {
        return Ok(false);
    }
    let merged = [b.clone(), s.clone(), h.mul(dv)];
    let exact = *y3 == merged;
    let view = match Shape(y3.clone()).as_known() {
        Some(dims) if !exact => dims,
        _ if exact => Vec::new(),
        _ => return Ok(false),
    };
    let Op::Attention(a) = &g.node(att).op else {
        return Ok(false);
    };
    let op = Attention {
        q_num_heads: hq,
        kv_num_heads: hk,
        ..a.clone()
    };
    let mut ins = vec![m.v("q3"), m.v("k3"), m.v("v3")];
    ins.extend(m.values.get("mask").copied());
    let origin = union_origin(g, &rev(g, m));
    if exact {
        replace_root(g, cx.weights, m.root(), op, &ins, origin)?;
        return Ok(true);
    }
    let name = g.node(m.root()).name.clone();
    let y = add_op(
        g,
        cx.weights,
        op,
        &format!("{name}.attention"),
        origin.clone(),
        &ins,
    )?;
    let shape: Vec<i64> = view.iter().map(|&d| d as i64).collect();
    let t = Tensor::from_i64(&[shape.len()], &shape).map_err(|e| e.to_string())?;
    let shape = constant(g, cx.weights, &format!("{name}.shape"), origin.clone(), t);
    let reshape = Reshape { allowzero: false };
    replace_root(
        g,
        cx.weights,
        m.root(),
        reshape,
        &[Value::of(y), shape],
        origin,
    )?;
    Ok(true)
}
