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
//! then merges that with the head transpose in front of it.
//!
//! A second rule (`attention.heads`) takes the head split and merge into the
//! op: where Q, K and V are each `transpose(reshape(x, [B,S,H,D]), [0,2,1,3])`
//! of a `[B,S,H*D]` tensor and the output is merged back the same way,
//! attention reads the 3-D tensors with `q_num_heads`/`kv_num_heads` and
//! writes `[B,S,H*Dv]` (ONNX's 3-D form), so the four head transposes, each a
//! copy of the whole tensor, are gone.

use rlx_ir::ops::{Attention, SoftmaxKind, Transpose};
use rlx_ir::{Dim, Graph, Op, Value};

use crate::fold_batchnorm::rev;
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, op_if, Match, Pat, Rule};
use crate::rewrite::{add_op, remove_dead, replace_root, splat, union_origin};

pub struct FuseAttention;

const NAME: &str = "fuse-attention";

fn is_softmax(op: &Op) -> bool {
    matches!(op, Op::Softmax(s) if s.kind == SoftmaxKind::Softmax)
}

fn patterns() -> Vec<Pat> {
    let qk = || op("matmul", [any("q"), any("kt")]).bind("qk");
    let scaled = || {
        vec![
            op("mul", [qk(), leaf("scale")]).commutative(),
            op("div", [qk(), leaf("div")]),
            qk(),
        ]
    };
    let mut v = Vec::new();
    for s in scaled() {
        for masked in [op("add", [s.clone(), any("mask")]).commutative(), s] {
            let p = op_if(is_softmax, [masked]).bind("softmax");
            v.push(op("matmul", [p, any("v")]));
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
        Ok(apply_rules(g, cx, NAME, &rules)? > 0)
    }
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
    let Some(scale) = scale else { return Ok(false) };
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
    let k = add_op(
        g,
        cx.weights,
        Transpose { perm },
        &format!("{name}.k"),
        origin.clone(),
        &[k_src],
    )?;
    let mut ins = vec![q, Value::of(k), v];
    ins.extend(mask);
    let op = Attention {
        scale: Some(scale as f32),
        has_mask: mask.is_some(),
        ..Attention::default()
    };
    if let Err(e) = replace_root(g, cx.weights, m.root(), op, &ins, origin) {
        g.remove_node(k);
        return Err(e);
    }
    remove_dead(g, &[kt.node]);
    Ok(true)
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
    // The merge must undo the split: [B,H,S,Dv] -> [B,S,H*Dv].
    let att = m.n("attention");
    let (y4, y3) = (
        &g.node(att).outputs[0].shape.0,
        &g.ty(Value::of(m.root())).shape.0,
    );
    let merges = match (y4.as_slice(), y3.as_slice()) {
        ([b, h, s, dv], [b2, s2, n]) => {
            b == b2 && s == s2 && *n == h.mul(dv) && *h == Dim::from(hq)
        }
        _ => false,
    };
    if !merges {
        return Ok(false);
    }
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
    replace_root(g, cx.weights, m.root(), op, &ins, origin)?;
    Ok(true)
}
