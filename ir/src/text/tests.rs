//! Round-trip tests of the text form.

use super::{parse_graph, print_graph};

const SAMPLE: &str = r#"rlx-ir 2
graph {
  %0 = input "x" : f32[N,2*seq-1]
  %1 = input "cond" : bool[]
  %2 = weight "fc.weight" : f32[floordiv(seq+1, 2),4]
  %3 = constant i64[2] [1, -1] : i64[2]
  %4 = constant f32[3] [0.5, -inf, 1e-7] : f32[3]
  %5 = reshape(%0, %3) {allowzero=false} : f32[1,2*N*seq-N]  # Reshape_0
  %6:2 = split(%5) {axis=1, num_outputs=2} : (f32[1,3], f32["weird dim"])  # [split] "My Split", Other
  %7 = add(%6.0, %4) : f32[1,3]  # Add_1
  %8 = if(%1, %7) {then_branch=graph {
    %0 = input "a" : f32[1,3]
    %1 = relu(%0) : f32[1,3]  # Relu_2
    output "r" = %1
  }, else_branch=graph {
    %0 = input "a" : f32[1,3]
    output "r" = %0
  }} : f32[1,3]  # If_3
  output "y" = %8
  output "z" = %6.1
}
"#;

/// SAMPLE in canonical numbering: inputs, then post-order from the outputs,
/// then nodes no output reads.
const CANONICAL: &str = r#"rlx-ir 2
graph {
  %0 = input "x" : f32[N,2*seq-1]
  %1 = input "cond" : bool[]
  %2 = constant i64[2] [1, -1] : i64[2]
  %3 = reshape(%0, %2) {allowzero=false} : f32[1,2*N*seq-N]  # Reshape_0
  %4:2 = split(%3) {axis=1, num_outputs=2} : (f32[1,3], f32["weird dim"])  # [split] "My Split", Other
  %5 = constant f32[3] [0.5, -inf, 1e-7] : f32[3]
  %6 = add(%4.0, %5) : f32[1,3]  # Add_1
  %7 = if(%1, %6) {then_branch=graph {
    %0 = input "a" : f32[1,3]
    %1 = relu(%0) : f32[1,3]  # Relu_2
    output "r" = %1
  }, else_branch=graph {
    %0 = input "a" : f32[1,3]
    output "r" = %0
  }} : f32[1,3]  # If_3
  %8 = weight "fc.weight" : f32[floordiv(seq+1, 2),4]
  output "y" = %7
  output "z" = %4.1
}
"#;

#[test]
fn print_parse_print_is_identical() {
    let g = parse_graph(SAMPLE).unwrap();
    let printed = print_graph(&g);
    assert_eq!(printed, CANONICAL);
    let again = parse_graph(&printed).unwrap();
    assert_eq!(print_graph(&again), printed);
    assert_eq!(g, again);
}

#[test]
fn names_and_origins_survive() {
    let g = parse_graph(SAMPLE).unwrap();
    let split = g
        .node_ids()
        .into_iter()
        .map(|i| g.node(i))
        .find(|n| n.op.name() == "split")
        .unwrap();
    assert_eq!(split.name, "split");
    assert_eq!(
        split.origin,
        vec!["My Split".to_string(), "Other".to_string()]
    );
    assert_eq!(g.inputs().len(), 2);
}

#[test]
fn errors_have_locations() {
    let e = parse_graph("rlx-ir 2\ngraph {\n  %0 = frobnicate() : f32[]\n}\n").unwrap_err();
    assert_eq!((e.line, e.column), (3, 8));
    assert!(e.message.contains("unknown op `frobnicate`"), "{e}");
    let e = parse_graph("rlx-ir 2\ngraph {\n  %0 = relu(%4) : f32[]\n}\n").unwrap_err();
    assert!(e.message.contains("%4 is not defined"), "{e}");
    let e = parse_graph("rlx-ir 3\ngraph {}\n").unwrap_err();
    assert!(e.message.contains("version 3"), "{e}");
}
