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

use rlx_ir::ops::{Attention, SoftmaxKind, Transpose};
use rlx_ir::{Graph, Op};

use crate::fold_batchnorm::rev;
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, op_if, Match, Pat, Rule};
use crate::rewrite::{add_op, replace_root, splat, union_origin};

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
        let rules: Vec<Rule> = patterns()
            .into_iter()
            .map(|pattern| Rule {
                name: "attention",
                pattern,
                rewrite,
            })
            .collect();
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
    let origin = union_origin(g, &rev(g, m));
    let name = g.node(m.root()).name.clone();
    let k = add_op(
        g,
        cx.weights,
        Transpose {
            perm: vec![0, 1, 3, 2],
        },
        &format!("{name}.k"),
        origin.clone(),
        &[kt],
    )?;
    let mut ins = vec![q, rlx_ir::Value::of(k), v];
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
    Ok(true)
}
