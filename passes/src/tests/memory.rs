//! Tests of the memory planner's in-place concatenation.

use rlx_ir::{Op, Value};

use super::graph;
use crate::memory::{plan_memory_with, MemoryOptions, MemoryPlan, Slot};

fn plan(src: &str, concat_in_place: bool) -> (rlx_ir::Graph, MemoryPlan) {
    let g = rlx_ir::text::parse_graph(&graph(src)).unwrap();
    let plan = plan_memory_with(&g, &MemoryOptions { concat_in_place }).unwrap();
    plan.check_no_overlap().unwrap();
    (g, plan)
}

/// The arena offset of the value of the node named `name`.
fn offset(g: &rlx_ir::Graph, plan: &MemoryPlan, name: &str) -> usize {
    let id = g
        .node_ids()
        .into_iter()
        .find(|&id| g.node(id).name == name)
        .unwrap();
    match plan.slots[&Value::of(id)] {
        Slot::Arena { offset, .. } => offset,
        Slot::Const(_) => panic!("{name} is a constant"),
    }
}

/// DenseNet's pattern: a concatenation that is itself a piece of the next.
const NESTED: &str = r#"  %0 = input "x" : f32[1,4,2,2]
  %1 = relu(%0) : f32[1,4,2,2]  # A
  %2 = sigmoid(%0) : f32[1,4,2,2]  # B
  %3 = concat(%1, %2) {axis=1} : f32[1,8,2,2]  # C1
  %4 = tanh(%3) : f32[1,8,2,2]  # D
  %5 = concat(%3, %4) {axis=1} : f32[1,16,2,2]  # C2
  %6 = neg(%5) : f32[1,16,2,2]  # E
  output "y" = %6
"#;

#[test]
fn nested_concatenations_take_their_pieces_in_place() {
    let (g, plan) = plan(NESTED, true);
    let c2 = offset(&g, &plan, "C2");
    // Each piece at its place in the outermost buffer: 64 bytes per 4x2x2 floats.
    assert_eq!(offset(&g, &plan, "C1"), c2);
    assert_eq!(offset(&g, &plan, "A"), c2);
    assert_eq!(offset(&g, &plan, "B"), c2 + 64);
    assert_eq!(offset(&g, &plan, "D"), c2 + 128);
    let names: Vec<&str> = plan
        .in_place
        .iter()
        .map(|&id| g.node(id).name.as_str())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // The outermost buffer is reserved from the first piece's definition
    // on: nothing else written meanwhile may overlap it.
    let e = offset(&g, &plan, "E");
    assert!(
        e >= c2 + 256 || e + 256 <= c2,
        "E at {e} overlaps C2 at {c2}"
    );
}

#[test]
fn without_the_option_every_value_has_its_own_buffer() {
    let (g, plan) = plan(NESTED, false);
    assert!(plan.in_place.is_empty());
    assert_ne!(offset(&g, &plan, "A"), offset(&g, &plan, "C1"));
}

#[test]
fn pieces_that_are_not_consecutive_or_not_owned_stay_copied() {
    // Along the last axis the pieces interleave; a graph input, a constant and
    // a value used twice cannot be moved into the output.
    let src = r#"  %0 = input "x" : f32[2,3]
  %1 = relu(%0) : f32[2,3]  # A
  %2 = concat(%1, %1) {axis=1} : f32[2,6]  # Twice
  %3 = concat(%1, %0) {axis=0} : f32[4,3]  # WithInput
  %4 = constant f32[1,3] [1.0, 2.0, 3.0] : f32[1,3]
  %5 = relu(%0) : f32[2,3]  # B
  %6 = concat(%5, %4) {axis=0} : f32[3,3]  # WithConstant
  %7 = sigmoid(%0) : f32[2,3]  # C
  %8 = tanh(%0) : f32[2,3]  # D
  %9 = concat(%7, %8) {axis=1} : f32[2,6]  # Interleaved
  output "a" = %2
  output "b" = %3
  output "c" = %6
  output "d" = %9
"#;
    let (g, plan) = plan(src, true);
    let names: Vec<&str> = plan
        .in_place
        .iter()
        .map(|&id| g.node(id).name.as_str())
        .collect();
    assert!(names.is_empty(), "{names:?}");
    assert!(g
        .node_ids()
        .into_iter()
        .any(|id| matches!(g.node(id).op, Op::Concat(_))));
}
