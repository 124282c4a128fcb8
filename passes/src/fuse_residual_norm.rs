//! Residual-norm fusion (`fuse-residual-norm`): `layer_norm(add(x, r), ...)` or
//! `rms_norm(add(x, r), ...)` becomes `residual_norm(x, r, ...)`, whose second
//! output is the sum, so the residual stream that reads the add keeps reading it
//! (from output 1). The add's operands must have the sum's shape.

use rlx_ir::ops::ResidualNorm;
use rlx_ir::{Graph, Op, Value};

use crate::fold_batchnorm::rev;
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, matches, op, op_if, Match, Pat};
use crate::rewrite::{finish, replace_root, union_origin};

pub struct FuseResidualNorm;

const NAME: &str = "fuse-residual-norm";

fn is_ln(op: &Op) -> bool {
    matches!(op, Op::LayerNorm(l) if !l.stats)
}

fn is_rms(op: &Op) -> bool {
    matches!(op, Op::RmsNorm(_))
}

fn patterns() -> Vec<Pat> {
    let sum = || op("add", [any("x"), any("r")]).bind("sum");
    vec![
        op_if(is_ln, [sum(), any("scale"), any("bias")]),
        op_if(is_ln, [sum(), any("scale")]),
        op_if(is_rms, [sum(), any("scale")]),
    ]
}

impl Pass for FuseResidualNorm {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let pats = patterns();
        let mut n = 0;
        for id in g.topo_order().map_err(|e| PassError::graph(NAME, e))? {
            if !g.contains(id) {
                continue;
            }
            let Some(m) = pats.iter().find_map(|p| matches(g, p, id)) else {
                continue;
            };
            if rewrite(g, cx, &m).map_err(|reason| PassError::Node {
                pass: NAME,
                node: g.node(id).name.clone(),
                origin: g.node(id).origin_text(),
                reason,
            })? {
                n += 1;
                cx.count("residual_norm");
            }
        }
        if n > 0 {
            finish(g, cx, NAME)?;
        }
        Ok(n > 0)
    }
}

fn rewrite(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let (root, sum) = (m.root(), m.n("sum"));
    let st = g.node(sum).outputs[0].clone();
    if *g.ty(m.v("x")) != st || *g.ty(m.v("r")) != st {
        return Ok(false);
    }
    // Parameters computed from the sum would close a cycle through output 1.
    let params = ["scale", "bias"].map(|k| m.values.get(k).map(|v| g.node(v.node).op.is_leaf()));
    if params.iter().any(|p| *p == Some(false)) {
        return Ok(false);
    }
    let (axis, epsilon, rms) = match &g.node(root).op {
        Op::LayerNorm(l) => (l.axis, l.epsilon, false),
        Op::RmsNorm(r) => (r.axis, r.epsilon, true),
        _ => return Ok(false),
    };
    let mut ins = vec![m.v("x"), m.v("r"), m.v("scale")];
    if let Some(b) = m.values.get("bias") {
        ins.push(*b);
    }
    let origin = union_origin(g, &rev(g, m));
    replace_root(
        g,
        cx.weights,
        root,
        ResidualNorm { axis, epsilon, rms },
        &ins,
        origin,
    )?;
    // Whatever else read the sum reads output 1 now.
    g.replace_uses(Value::of(sum), Value::new(root, 1))
        .map_err(|e| e.to_string())?;
    g.remove_node(sum);
    Ok(true)
}
