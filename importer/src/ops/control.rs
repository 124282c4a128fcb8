//! If, Loop and Scan. Bodies are imported as subgraphs whose outer references
//! become explicit captures: extra op inputs after the op's own operands.

use rlx_ir::ops::{If, Input, Loop, Refused, Scan};
use rlx_ir::{DType, Graph, Node, Op, Shape, Tensor, TensorType};

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("If", 1, if_);
    r.add("Loop", 1, loop_);
    r.add("Scan", 8, scan_v8);
    r.add("Scan", 9, scan);
}

pub(crate) fn body<'a>(
    cx: &mut NodeCtx<'a, '_>,
    name: &str,
) -> Result<&'a crate::proto::GraphProto, MapError> {
    cx.attr_g(name)?.ok_or_else(|| MapError::Attr {
        name: name.into(),
        reason: "is required".into(),
    })
}

/// Gives `g` an input for every name of `all` it lacks and orders its capture
/// inputs (after the first `own` inputs) as in `all`.
fn align_captures(
    cx: &mut NodeCtx,
    g: &mut Graph,
    own: usize,
    have: &[String],
    all: &[String],
) -> Result<(), MapError> {
    let mut by_name: std::collections::HashMap<String, rlx_ir::NodeId> =
        std::collections::HashMap::new();
    for (i, name) in have.iter().enumerate() {
        by_name.insert(name.clone(), g.inputs()[own + i]);
    }
    let mut order: Vec<rlx_ir::NodeId> = g.inputs()[..own].to_vec();
    for name in all {
        let id = match by_name.get(name) {
            Some(id) => *id,
            None => {
                let v = cx.lookup(name)?;
                let ty = cx.ty(v);
                g.add_input(Node::new(
                    Op::Input(Input { name: name.clone() }),
                    name.clone(),
                    Vec::new(),
                    vec![ty],
                ))
            }
        };
        order.push(id);
    }
    g.set_input_order(order);
    Ok(())
}

fn if_(cx: &mut NodeCtx) -> Result<(), MapError> {
    let then_gp = body(cx, "then_branch")?;
    let else_gp = body(cx, "else_branch")?;
    let cond = cx.req(0)?;
    if let Some([c]) = cx.known_ints(cond).as_deref() {
        // A condition known at import time: only the taken branch exists, inlined.
        let (attr, gp) = if *c != 0 {
            ("then_branch", then_gp)
        } else {
            ("else_branch", else_gp)
        };
        let (g, captures) = cx.subgraph(attr, gp, &[])?;
        let mut args = Vec::new();
        for name in &captures {
            args.push(cx.lookup(name)?);
        }
        let ys = cx.inline(&g, &args)?;
        cx.set_outputs(&ys);
        return Ok(());
    }
    let then_r = cx.subgraph("then_branch", then_gp, &[]);
    let else_r = cx.subgraph("else_branch", else_gp, &[]);
    let ((mut then_g, then_c), (mut else_g, else_c)) = match (then_r, else_r) {
        (Ok(t), Ok(e)) => (t, e),
        (Err(err), Ok(e)) if deferrable(&err) => {
            let r = refusal(&e.0, &err, "then_branch", cx.name())?;
            ((r, Vec::new()), e)
        }
        (Ok(t), Err(err)) if deferrable(&err) => {
            let r = refusal(&t.0, &err, "else_branch", cx.name())?;
            (t, (r, Vec::new()))
        }
        (Err(err), _) | (_, Err(err)) => return Err(err),
    };
    let mut all = then_c.clone();
    for c in &else_c {
        if !all.contains(c) {
            all.push(c.clone());
        }
    }
    align_captures(cx, &mut then_g, 0, &then_c, &all)?;
    align_captures(cx, &mut else_g, 0, &else_c, &all)?;
    let mut ins = vec![cond];
    for name in &all {
        ins.push(cx.lookup(name)?);
    }
    let ys = cx.add(
        If {
            then_branch: then_g,
            else_branch: else_g,
        },
        &ins,
    )?;
    cx.set_outputs(&ys);
    Ok(())
}

/// True if `err`, a branch's import error, may wait for a run that takes the
/// branch (as ONNX Runtime checks a branch when it runs): nodes that could not
/// be mapped or typed for the values this import sees. An op no mapper knows
/// is refused at once, as ONNX Runtime refuses a kernel it does not have.
fn deferrable(err: &MapError) -> bool {
    let MapError::Subgraph { source, .. } = err else {
        return false;
    };
    match source.as_ref() {
        crate::error::ImportError::Nodes(issues) => issues
            .iter()
            .all(|i| !matches!(i.error, MapError::UnknownOp { .. })),
        _ => false,
    }
}

/// A branch that fails with `err` when it runs, with the outputs (names and
/// types) of the other branch `like`; its node is named for the branch
/// attribute `attr` of the ONNX node `node`.
fn refusal(like: &Graph, err: &MapError, attr: &str, node: &str) -> Result<Graph, MapError> {
    let reason = match err {
        MapError::Subgraph { source, .. } => source.to_string(),
        other => other.to_string(),
    };
    let mut g = Graph::new();
    let types = like
        .outputs()
        .iter()
        .map(|o| like.ty(o.value).clone())
        .collect();
    let id = g
        .add_node(
            Node::new(
                Op::Refused(Refused { reason }),
                attr.to_string(),
                vec![node.to_string()],
                types,
            ),
            &[],
        )
        .map_err(|e| MapError::Unsupported(e.to_string()))?;
    for (p, o) in like.outputs().iter().enumerate() {
        g.add_output(o.name.clone(), rlx_ir::Value::new(id, p as u16))
            .map_err(|e| MapError::Unsupported(e.to_string()))?;
    }
    Ok(g)
}

fn loop_(cx: &mut NodeCtx) -> Result<(), MapError> {
    let gp = body(cx, "body")?;
    let m = match cx.input(0)? {
        Some(m) => m,
        None => cx.constant(Tensor::scalar_i64(i64::MAX)),
    };
    let cond = match cx.input(1)? {
        Some(c) => c,
        None => cx.constant(
            Tensor::from_slice(DType::Bool, &[], &[1u8])
                .map_err(|e| MapError::Unsupported(e.to_string()))?,
        ),
    };
    let mut carried = Vec::new();
    for i in 2..cx.num_inputs() {
        carried.push(cx.input(i)?.ok_or(MapError::MissingInput { index: i })?);
    }
    let mut formal = vec![
        Some(TensorType::scalar(DType::I64)),
        Some(TensorType::scalar(DType::Bool)),
    ];
    formal.extend(carried.iter().map(|v| Some(cx.ty(*v))));
    let (g, captures) = cx.subgraph("body", gp, &formal)?;
    let mut ins = vec![m, cond];
    ins.extend(&carried);
    for name in &captures {
        ins.push(cx.lookup(name)?);
    }
    let ys = cx.add(
        Loop {
            body: g,
            num_carried: carried.len() as i64,
        },
        &ins,
    )?;
    cx.set_outputs(&ys);
    Ok(())
}

fn scan_v8(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.unsupported(
        "Scan-8 (with a batch axis and sequence_lens) is not supported; opset 9+ Scan is",
    )
}

fn scan(cx: &mut NodeCtx) -> Result<(), MapError> {
    let gp = body(cx, "body")?;
    let m = cx
        .attr_i_opt("num_scan_inputs")?
        .ok_or_else(|| MapError::Attr {
            name: "num_scan_inputs".into(),
            reason: "is required".into(),
        })? as usize;
    let inputs = cx.all_inputs()?;
    if m == 0 || m > inputs.len() {
        return Err(MapError::Attr {
            name: "num_scan_inputs".into(),
            reason: format!("{m} for {} inputs", inputs.len()),
        });
    }
    let n = inputs.len() - m;
    let in_axes = cx
        .attr_ints("scan_input_axes")?
        .unwrap_or_else(|| vec![0; m]);
    let in_dirs = cx
        .attr_ints("scan_input_directions")?
        .unwrap_or_else(|| vec![0; m]);
    let k = gp.output.len().saturating_sub(n);
    let out_axes = cx
        .attr_ints("scan_output_axes")?
        .unwrap_or_else(|| vec![0; k]);
    let out_dirs = cx
        .attr_ints("scan_output_directions")?
        .unwrap_or_else(|| vec![0; k]);
    if in_axes.len() != m || in_dirs.len() != m || out_axes.len() != k || out_dirs.len() != k {
        return Err(MapError::Attr {
            name: "scan_input_axes".into(),
            reason: "axes and directions need one entry per scanned input/output".into(),
        });
    }
    let mut formal: Vec<Option<TensorType>> = inputs[..n].iter().map(|v| Some(cx.ty(*v))).collect();
    for (j, v) in inputs[n..].iter().enumerate() {
        let t = cx.ty(*v);
        let r = t.rank() as i64;
        let a = if in_axes[j] < 0 {
            in_axes[j] + r
        } else {
            in_axes[j]
        };
        if !(0..r).contains(&a) {
            return Err(MapError::Attr {
                name: "scan_input_axes".into(),
                reason: format!("axis {} out of range", in_axes[j]),
            });
        }
        let mut s = t.shape.0.clone();
        s.remove(a as usize);
        formal.push(Some(TensorType::new(t.dtype, Shape(s))));
    }
    let (g, captures) = cx.subgraph("body", gp, &formal)?;
    let mut ins = inputs.clone();
    for name in &captures {
        ins.push(cx.lookup(name)?);
    }
    let op = Scan {
        body: g,
        num_state: n as i64,
        num_scan_inputs: m as i64,
        scan_input_directions: in_dirs,
        scan_output_directions: out_dirs,
        scan_input_axes: in_axes,
        scan_output_axes: out_axes,
    };
    let ys = cx.add(op, &ins)?;
    cx.set_outputs(&ys);
    Ok(())
}
