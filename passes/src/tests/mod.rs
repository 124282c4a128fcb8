//! IR-text unit tests of the passes: an input graph runs through one pass (with
//! verification on) and is compared, as a parsed graph, with the expected text.
//! Node names are not compared (passes pick fresh ones); origins are.

mod attention_layout;
mod causal_mask;
mod exported;
mod fusion;
mod generic;
mod loops;
mod memory;

use rlx_ir::text::{parse_graph, print_graph};
use rlx_ir::{Graph, Node, Op, TensorType, Weights};

use crate::{Backend, PassContext, PassError, PassManager, Reason};

/// A backend that runs everything except the listed ops.
pub struct Without(pub &'static [&'static str]);

impl Backend for Without {
    fn name(&self) -> &str {
        "test"
    }
    fn supports(&self, node: &Node, _: &[TensorType]) -> Result<(), Reason> {
        if self.0.contains(&node.op.name()) {
            Err(Reason::new(format!(
                "`{}` is off in this test",
                node.op.name()
            )))
        } else {
            Ok(())
        }
    }
}

/// Runs the named passes over `src`.
pub fn run(passes: &[&str], src: &str, backend: Option<&dyn Backend>) -> Result<Graph, PassError> {
    let mut g = parse_graph(src).unwrap_or_else(|e| panic!("input: {e}"));
    let mut w = Weights::new();
    let mut cx = PassContext::new(&mut w);
    cx.backend = backend;
    let mut pm = PassManager::from_names(passes).unwrap();
    pm.verify = true;
    rlx_ir::analysis::verify(&g, None).unwrap_or_else(|e| panic!("input does not verify: {e}"));
    pm.run(&mut g, &mut cx, None)?;
    Ok(g)
}

/// The text of `g` with every node named as the printer derives it.
pub fn canon(g: &Graph) -> String {
    let mut g = g.clone();
    for id in g.node_ids() {
        let n = g.node_mut(id);
        n.name = match &n.op {
            Op::Input(i) => i.name.clone(),
            Op::Weight(w) => w.name.clone(),
            _ => n.origin.first().cloned().unwrap_or_default(),
        };
    }
    print_graph(&g)
}

/// Asserts that `passes` turn `src` into `want`.
pub fn check(passes: &[&str], src: &str, want: &str) {
    check_on(passes, src, want, None);
}

pub fn check_on(passes: &[&str], src: &str, want: &str, backend: Option<&dyn Backend>) {
    let got = run(passes, src, backend).unwrap_or_else(|e| panic!("{passes:?}: {e}"));
    let want = parse_graph(want).unwrap_or_else(|e| panic!("expected: {e}"));
    assert_eq!(canon(&got), canon(&want), "{passes:?}");
}

/// `rlx-ir 2\ngraph {\n<body>}\n` from body lines.
pub fn graph(body: &str) -> String {
    format!("rlx-ir 2\ngraph {{\n{body}}}\n")
}

/// The op names of `g` other than inputs and leaves, sorted.
pub fn ops(g: &Graph) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = g
        .node_ids()
        .into_iter()
        .map(|id| g.node(id).op.name())
        .filter(|n| !matches!(*n, "input" | "constant" | "weight"))
        .collect();
    v.sort();
    v
}

/// The (first) attention of `g`.
pub fn attention(g: &Graph) -> rlx_ir::ops::Attention {
    g.node_ids()
        .into_iter()
        .find_map(|id| match &g.node(id).op {
            Op::Attention(a) => Some(a.clone()),
            _ => None,
        })
        .expect("an attention")
}
