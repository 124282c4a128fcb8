//! The graph as a picture: DOT text (deterministic, for Graphviz and for
//! snapshot tests) and SVG laid out in Rust ([`crate::svg`]), so that no
//! Graphviz install is needed.
//!
//! Nodes are labelled with their op, output types and the ONNX nodes they
//! came from; weights and constants are folded into their consumer's label.
//! A node fused from several ONNX nodes (or an elementwise region) is drawn
//! as a cluster in DOT and with a blue frame in SVG, which has no clusters.
//! With a target's support table, nodes it decomposes are shaded yellow and
//! nodes it cannot run red, with the reason.

use std::collections::HashMap;
use std::fmt::Write as _;

use rlx_ir::{Graph, NodeId, Op};
use rlx_passes::legalize::Support;

/// How a target runs each node (by RLX node name), from
/// [`rlx_passes::legalize::classify`].
pub type SupportTable = HashMap<String, Support>;

/// What [`to_dot`] draws.
#[derive(Debug, Clone, Default)]
pub struct DotOptions {
    /// Shade nodes by how the target runs them.
    pub support: Option<SupportTable>,
    /// Wrap fused nodes in `subgraph cluster_*` (DOT for Graphviz); off for
    /// the SVG renderer, which draws no clusters.
    pub clusters: bool,
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// At most `n` characters of `s`, with an ellipsis when cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
    t.push('…');
    t
}

fn is_fused(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    n.origin.len() > 1 || matches!(n.op, Op::ElementwiseRegion(_))
}

/// How one box of the picture looks: its text lines and colours.
#[derive(Debug, Clone)]
pub struct Look {
    pub lines: Vec<String>,
    /// An ellipse (graph inputs and outputs) rather than a rounded box.
    pub ellipse: bool,
    pub fill: &'static str,
    /// The frame's colour, when not black.
    pub color: Option<&'static str>,
    /// A thick frame (a fused node).
    pub thick: bool,
}

/// Weights and constants are drawn inside their consumers, not as boxes.
pub(crate) fn is_drawn(g: &Graph, id: NodeId) -> bool {
    !matches!(g.node(id).op, Op::Weight(_) | Op::Constant(_))
}

/// The look of node `id`; `frame_fused` gives fused nodes a blue frame (for
/// pictures without clusters).
pub(crate) fn look(g: &Graph, id: NodeId, opts: &DotOptions, frame_fused: bool) -> Look {
    let n = g.node(id);
    let mut look = Look {
        lines: Vec::new(),
        ellipse: false,
        fill: "#ffffff",
        color: None,
        thick: false,
    };
    match &n.op {
        Op::Input(inp) => {
            look.lines.push(format!("input {}", inp.name));
            look.ellipse = true;
            look.fill = "#d9ead3";
        }
        op => {
            look.lines.push(op.name().to_string());
            if let Op::ElementwiseRegion(r) = op {
                let prog: Vec<&str> = r.program.0.iter().map(|ins| ins.f.name()).collect();
                look.lines.push(clip(&prog.join(" → "), 60));
            }
        }
    }
    for t in &n.outputs {
        look.lines.push(clip(&t.to_string(), 60));
    }
    for v in g.inputs_of(id) {
        let src = g.node(v.node);
        if let Op::Weight(w) = &src.op {
            look.lines
                .push(clip(&format!("{}: {}", w.name, src.outputs[0]), 60));
        }
    }
    if !matches!(n.op, Op::Input(_)) && !n.origin.is_empty() {
        let shown: Vec<&str> = n.origin.iter().take(4).map(String::as_str).collect();
        let more = n.origin.len().saturating_sub(4);
        let mut o = shown.join(", ");
        if more > 0 {
            let _ = write!(o, " +{more}");
        }
        look.lines.push(clip(&o, 60));
    }
    match opts.support.as_ref().and_then(|s| s.get(&n.name)) {
        Some(Support::Unsupported(why)) => {
            look.lines.push(clip(&format!("unsupported: {why}"), 60));
            look.fill = "#f4cccc";
            look.color = Some("#cc0000");
        }
        Some(Support::Decomposed(_)) => {
            look.lines.push("decomposed".into());
            look.fill = "#fff2cc";
        }
        Some(Support::FoldsWhenBound) => {
            look.lines.push("folds once shapes are bound".into());
            look.fill = "#eeeeee";
        }
        _ => {}
    }
    if frame_fused && is_fused(g, id) {
        look.color = Some("#3c78d8");
        look.thick = true;
    }
    look
}

/// The look of graph output `k`.
pub(crate) fn output_look(name: &str) -> Look {
    Look {
        lines: vec![format!("output {name}")],
        ellipse: true,
        fill: "#cfe2f3",
        color: None,
        thick: false,
    }
}

/// The graph (top level; subgraph bodies are summarized in their node) as
/// DOT text.
pub fn to_dot(g: &Graph, opts: &DotOptions) -> String {
    let (order, num) = rlx_ir::text::numbering(g);
    let mut out = String::from(
        "digraph rlx {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", fontname=\"Helvetica\", fontsize=10];\n  edge [fontsize=9];\n",
    );
    let leaf = |id: NodeId| !is_drawn(g, id);
    let mut cluster = 0;
    for &id in &order {
        let n = g.node(id);
        if leaf(id) {
            continue;
        }
        let i = num[&id];
        let l = look(g, id, opts, !opts.clusters);
        let mut attrs = String::new();
        if l.ellipse {
            attrs.push_str(", shape=ellipse");
        }
        if l.fill != "#ffffff" {
            let _ = write!(attrs, ", fillcolor=\"{}\"", l.fill);
        }
        if let Some(c) = l.color {
            let _ = write!(attrs, ", color=\"{c}\"");
        }
        if l.thick {
            attrs.push_str(", penwidth=2");
        }
        let lines = l.lines;
        let fused = is_fused(g, id);
        let label = lines
            .iter()
            .map(|l| escape(l))
            .collect::<Vec<_>>()
            .join("\\n");
        let stmt = format!("n{i} [label=\"{label}\"{attrs}];");
        if fused && opts.clusters {
            let _ = writeln!(
                out,
                "  subgraph cluster_{cluster} {{\n    label=\"fused: {}\";\n    style=rounded;\n    color=\"#3c78d8\";\n    fontsize=9;\n    {stmt}\n  }}",
                escape(&clip(&n.origin.join(", "), 80))
            );
            cluster += 1;
        } else {
            let _ = writeln!(out, "  {stmt}");
        }
    }
    for &id in &order {
        if leaf(id) {
            continue;
        }
        for v in g.inputs_of(id) {
            if leaf(v.node) {
                continue;
            }
            let port = if g.node(v.node).outputs.len() > 1 {
                format!(" [label=\"{}\"]", v.port)
            } else {
                String::new()
            };
            let _ = writeln!(out, "  n{} -> n{}{port};", num[&v.node], num[&id]);
        }
    }
    for (k, o) in g.outputs().iter().enumerate() {
        let _ = writeln!(
            out,
            "  out{k} [label=\"output {}\", shape=ellipse, fillcolor=\"#cfe2f3\"];",
            escape(&o.name)
        );
        if !leaf(o.value.node) {
            let _ = writeln!(out, "  n{} -> out{k};", num[&o.value.node]);
        }
    }
    out.push_str("}\n");
    out
}

/// The picture of [`to_dot`] without clusters (fused nodes framed in
/// blue), laid out and drawn as SVG by [`crate::svg`].
pub fn to_svg(g: &Graph, support: Option<SupportTable>) -> Result<String, String> {
    crate::svg::draw(
        g,
        &DotOptions {
            support,
            clusters: false,
        },
    )
}
