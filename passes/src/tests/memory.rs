//! Tests of the memory planner's in-place concatenation, split and cache
//! write.

use rlx_ir::{Op, Value};

use super::graph;
use crate::memory::{plan_memory_with, MemoryOptions, MemoryPlan, Slot};

fn plan(src: &str, concat_in_place: bool) -> (rlx_ir::Graph, MemoryPlan) {
    let opts = MemoryOptions {
        concat_in_place,
        split_in_place: concat_in_place,
        scatter_in_place: concat_in_place,
    };
    let g = rlx_ir::text::parse_graph(&graph(src)).unwrap();
    let plan = plan_memory_with(&g, &opts).unwrap();
    plan.check_no_overlap().unwrap();
    (g, plan)
}

/// The names of the nodes the plan runs in place (sorted).
fn in_place_names<'g>(g: &'g rlx_ir::Graph, plan: &MemoryPlan) -> Vec<&'g str> {
    let mut names: Vec<&str> = plan
        .in_place
        .iter()
        .map(|&id| g.node(id).name.as_str())
        .collect();
    names.sort();
    names
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
    let names = in_place_names(&g, &plan);
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
    let names = in_place_names(&g, &plan);
    assert!(names.is_empty(), "{names:?}");
    assert!(g
        .node_ids()
        .into_iter()
        .any(|id| matches!(g.node(id).op, Op::Concat(_))));
}

/// One token's fused projection split into three: the pieces are views of
/// the projection, which stays alive while any of them is read.
const ONE_ROW_SPLIT: &str = r#"  %0 = input "x" : f32[1,1,48]
  %1 = relu(%0) : f32[1,1,48]  # P
  %2:3 = split(%1) {axis=2, num_outputs=3} : (f32[1,1,16], f32[1,1,16], f32[1,1,16])  # S
  %4 = constant i64[2] [1, 16] : i64[2]
  %3 = reshape(%2.1, %4) {allowzero=false} : f32[1,16]  # K
  %5 = sigmoid(%2.0) : f32[1,1,16]  # A
  %6 = tanh(%3) : f32[1,16]  # B
  %7 = neg(%2.2) : f32[1,1,16]  # C
  output "a" = %5
  output "b" = %6
  output "c" = %7
"#;

#[test]
fn a_split_of_one_row_is_views_of_its_input() {
    let (g, plan) = plan(ONE_ROW_SPLIT, true);
    let names = in_place_names(&g, &plan);
    assert_eq!(names, ["S"]);
    let p = offset(&g, &plan, "P");
    let id = |name: &str| {
        g.node_ids()
            .into_iter()
            .find(|&id| g.node(id).name == name)
            .unwrap()
    };
    let s = id("S");
    for (port, want) in [(0, p), (1, p + 64), (2, p + 128)] {
        assert_eq!(
            plan.slots[&Value::new(s, port)],
            Slot::Arena {
                offset: want,
                bytes: 64
            }
        );
    }
    // A view of a piece (K) is at the piece's offset.
    assert_eq!(offset(&g, &plan, "K"), p + 64);
    // Nothing written while the pieces are read overlaps the projection.
    for later in ["A", "B", "C"] {
        let o = offset(&g, &plan, later);
        assert!(
            o >= p + 192 || o + 64 <= p,
            "{later} at {o} overlaps P at {p}"
        );
    }
}

#[test]
fn splits_of_many_rows_or_unaligned_pieces_run() {
    // Two rows interleave the pieces; 3-float pieces sit at unaligned
    // offsets; a constant input has no arena buffer to view.
    let src = r#"  %0 = input "x" : f32[2,8]
  %1 = relu(%0) : f32[2,8]  # P
  %2:2 = split(%1) {axis=1, num_outputs=2} : (f32[2,4], f32[2,4])  # Rows
  %3 = input "y" : f32[1,6]
  %4 = relu(%3) : f32[1,6]  # Q
  %5:2 = split(%4) {axis=1, num_outputs=2} : (f32[1,3], f32[1,3])  # Unaligned
  output "a" = %2.0
  output "b" = %2.1
  output "c" = %5.0
  output "d" = %5.1
"#;
    let (g, plan) = plan(src, true);
    assert!(
        plan.in_place.is_empty(),
        "{:?}",
        plan.in_place
            .iter()
            .map(|&id| &g.node(id).name)
            .collect::<Vec<_>>()
    );
}

/// YOLOv8's C2f block: a projection split in two halves, a layer over the
/// second, and the two halves and that layer concatenated again.
const C2F: &str = r#"  %0 = input "x" : f32[1,8,2,2]
  %1 = relu(%0) : f32[1,8,2,2]  # P
  %2:2 = split(%1) {axis=1, num_outputs=2} : (f32[1,4,2,2], f32[1,4,2,2])  # S
  %3 = tanh(%2.1) : f32[1,4,2,2]  # M
  %4 = concat(%2.0, %2.1, %3) {axis=1} : f32[1,12,2,2]  # C
  %5 = neg(%4) : f32[1,12,2,2]  # E
  output "y" = %5
"#;

#[test]
fn a_split_concatenated_again_in_order_is_one_piece() {
    let (g, plan) = plan(C2F, true);
    assert_eq!(in_place_names(&g, &plan), ["C", "S"]);
    let c = offset(&g, &plan, "C");
    // The projection is the first 128 bytes of the concatenation; the
    // layer over its second half writes the next 64.
    assert_eq!(offset(&g, &plan, "P"), c);
    assert_eq!(offset(&g, &plan, "M"), c + 128);
    let e = offset(&g, &plan, "E");
    assert!(e >= c + 192 || e + 192 <= c, "E at {e} overlaps C at {c}");
}

#[test]
fn split_pieces_out_of_order_or_in_part_stay_copied() {
    // The halves swapped; one half only; a half also returned by the run.
    let src = r#"  %0 = input "x" : f32[1,8,2,2]
  %1 = relu(%0) : f32[1,8,2,2]  # P
  %2:2 = split(%1) {axis=1, num_outputs=2} : (f32[1,4,2,2], f32[1,4,2,2])  # S
  %3 = concat(%2.1, %2.0) {axis=1} : f32[1,8,2,2]  # Swapped
  %4 = tanh(%2.1) : f32[1,4,2,2]  # M
  %5 = concat(%2.0, %4) {axis=1} : f32[1,8,2,2]  # Half
  %6 = sigmoid(%0) : f32[1,8,2,2]  # Q
  %7:2 = split(%6) {axis=1, num_outputs=2} : (f32[1,4,2,2], f32[1,4,2,2])  # T
  %8 = concat(%7.0, %7.1, %4) {axis=1} : f32[1,12,2,2]  # Returned
  output "a" = %3
  output "b" = %5
  output "c" = %8
  output "d" = %7.1
"#;
    let (g, plan) = plan(src, true);
    assert_eq!(in_place_names(&g, &plan), ["S", "T"]);
}

#[test]
fn empty_pieces_of_a_concatenation_are_planned() {
    // An empty value of its own, and an empty piece of a split before the
    // halves that cover the rest.
    let src = r#"  %0 = input "x" : f32[1,8,2,2]
  %1 = relu(%0) : f32[1,8,2,2]  # P
  %2 = input "z" : f32[1,0,2,2]
  %3 = relu(%2) : f32[1,0,2,2]  # Empty
  %4 = concat(%3, %1) {axis=1} : f32[1,8,2,2]  # C
  %5 = sigmoid(%0) : f32[1,8,2,2]  # Q
  %9 = constant i64[3] [0, 4, 4] : i64[3]
  %6:3 = split(%5, %9) {axis=1, num_outputs=3} : (f32[1,0,2,2], f32[1,4,2,2], f32[1,4,2,2])  # S
  %7 = concat(%6.0, %6.1, %6.2) {axis=1} : f32[1,8,2,2]  # D
  output "c" = %4
  output "d" = %7
"#;
    let (g, plan) = plan(src, true);
    assert_eq!(in_place_names(&g, &plan), ["C", "D", "S"]);
}

/// A decode step's cache write: the cache input, the new position, and
/// what reads the written cache; `LATE` also reads the old cache after the
/// write.
const SCATTER: &str = r#"  %0 = input "past" : f32[1,2,4,3]
  %1 = input "new" : f32[1,2,1,3]
  %2 = input "at" : i64[1]
  %3 = tensor_scatter(%0, %1, %2) {axis=2, circular=false, has_indices=true} : f32[1,2,4,3]  # W
  %4 = relu(%3) : f32[1,2,4,3]  # R
  output "present" = %3
  output "y" = %4
"#;

#[test]
fn a_cache_write_takes_its_cache_in_place() {
    let (g, with) = plan(SCATTER, true);
    assert_eq!(offset(&g, &with, "W"), offset(&g, &with, "past"));
    assert_eq!(with.updates_in_place.len(), 1);
    // Without the option, a buffer of its own.
    let (g, without) = plan(SCATTER, false);
    assert_ne!(offset(&g, &without, "W"), offset(&g, &without, "past"));
    assert!(without.updates_in_place.is_empty());
}

#[test]
fn a_cache_read_after_its_write_keeps_the_write_apart() {
    // LATE reads the old cache and the written one's relu: it runs after W.
    let late = SCATTER.replace(
        "  output \"present\" = %3",
        "  %5 = add(%0, %4) : f32[1,2,4,3]  # LATE\n  output \"present\" = %3\n  output \"old\" = %5",
    );
    let (g, plan) = plan(&late, true);
    assert_ne!(offset(&g, &plan, "W"), offset(&g, &plan, "past"));
    assert!(plan.updates_in_place.is_empty());
}
