//! Tests of `loop-invariants`: pass-through carried values, constant
//! captures and invariant body nodes.

use super::{check, graph};

#[test]
fn pass_through_carried_values_become_captures_and_invariant_nodes_move_out() {
    // `w` is carried but returned unchanged; transpose(w) and x @ transpose(w)
    // read only captures, so they run once, before the loop.
    let src = graph(
        r#"  %0 = input "x" : f32[1,2]
  %1 = input "w" : f32[2,2]
  %2 = input "m" : i64[]
  %3 = constant bool[] [true] : bool[]
  %4 = input "acc0" : f32[1,2]
  %5:3 = loop(%2, %3, %4, %1, %0) {body=graph {
    %0 = input "i" : i64[]
    %1 = input "cond" : bool[]
    %2 = input "acc" : f32[1,2]
    %3 = input "w_in" : f32[2,2]
    %4 = input "x_in" : f32[1,2]
    %5 = transpose(%3) {perm=[1, 0]} : f32[2,2]  # T
    %6 = matmul(%4, %5) : f32[1,2]  # M
    %7 = add(%2, %6) : f32[1,2]  # A
    output "cond_out" = %1
    output "acc_out" = %7
    output "w_out" = %3
    output "step" = %6
  }, num_carried=2} : (f32[1,2], f32[2,2], f32["$L.o2.d0",1,2])  # L
  output "y" = %5.0
  output "w_final" = %5.1
  output "steps" = %5.2
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[1,2]
  %1 = input "w" : f32[2,2]
  %2 = input "m" : i64[]
  %3 = constant bool[] [true] : bool[]
  %4 = input "acc0" : f32[1,2]
  %5 = transpose(%1) {perm=[1, 0]} : f32[2,2]  # T
  %6 = matmul(%0, %5) : f32[1,2]  # M
  %7:2 = loop(%2, %3, %4, %0, %1, %6) {body=graph {
    %0 = input "i" : i64[]
    %1 = input "cond" : bool[]
    %2 = input "acc" : f32[1,2]
    %3 = input "x_in" : f32[1,2]
    %4 = input "w_in" : f32[2,2]
    %5 = input "M.hoisted" : f32[1,2]  # M
    %6 = add(%2, %5) : f32[1,2]  # A
    output "cond_out" = %1
    output "acc_out" = %6
    output "step" = %5
  }, num_carried=1} : (f32[1,2], f32["$L.o1.d0",1,2])  # L
  output "y" = %7.0
  output "w_final" = %1
  output "steps" = %7.1
"#,
    );
    check(&["loop-invariants"], &src, &want);
}

#[test]
fn constant_captures_become_constants_of_the_body() {
    // The captured constant moves into the body; the body node reading it
    // and the carried value stays (it is not invariant).
    let src = graph(
        r#"  %0 = input "acc0" : f32[2]
  %1 = constant i64[] [3] : i64[]
  %2 = constant bool[] [true] : bool[]
  %3 = constant f32[2] [0.5, 2.0] : f32[2]
  %4 = loop(%1, %2, %0, %3) {body=graph {
    %0 = input "i" : i64[]
    %1 = input "cond" : bool[]
    %2 = input "acc" : f32[2]
    %3 = input "scale" : f32[2]
    %4 = mul(%2, %3) : f32[2]  # M
    output "cond_out" = %1
    output "acc_out" = %4
  }, num_carried=1} : f32[2]  # L
  output "y" = %4
"#,
    );
    let want = graph(
        r#"  %0 = input "acc0" : f32[2]
  %1 = constant i64[] [3] : i64[]
  %2 = constant bool[] [true] : bool[]
  %3 = loop(%1, %2, %0) {body=graph {
    %0 = input "i" : i64[]
    %1 = input "cond" : bool[]
    %2 = input "acc" : f32[2]
    %3 = constant f32[2] [0.5, 2.0] : f32[2]
    %4 = mul(%2, %3) : f32[2]  # M
    output "cond_out" = %1
    output "acc_out" = %4
  }, num_carried=1} : f32[2]  # L
  output "y" = %3
"#,
    );
    check(&["loop-invariants"], &src, &want);
}

#[test]
fn a_body_that_reads_only_loop_state_keeps_every_node() {
    let src = graph(
        r#"  %0 = input "acc0" : f32[2]
  %1 = input "m" : i64[]
  %2 = constant bool[] [true] : bool[]
  %3 = loop(%1, %2, %0) {body=graph {
    %0 = input "i" : i64[]
    %1 = input "cond" : bool[]
    %2 = input "acc" : f32[2]
    %3 = neg(%2) : f32[2]  # N
    output "cond_out" = %1
    output "acc_out" = %3
  }, num_carried=1} : f32[2]  # L
  output "y" = %3
"#,
    );
    check(&["loop-invariants"], &src, &src);
}

#[test]
fn body_shapes_of_captures_fold_and_of_carried_values_do_not() {
    // shape(x_in) reads a capture: [2, 3] whatever the iteration. shape(acc)
    // reads a carried value that grows each iteration although the body
    // declares it f32[4]: it stays. (Body nodes keep their names: the
    // folded constant is named past the cast it replaced.)
    let src = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = input "m" : i64[]
  %2 = constant bool[] [true] : bool[]
  %3 = input "acc0" : f32[4]
  %4:2 = loop(%1, %2, %3, %0) {body=graph {
    %0 = input "i" : i64[]
    %1 = input "cond" : bool[]
    %2 = input "acc" : f32[4]
    %3 = input "x_in" : f32[2,3]
    %4 = shape(%3) {start=0, end=none} : i64[2]  # S
    %5 = cast(%4) {to=f32, saturate=true, round_mode=up} : f32[2]  # C
    %6 = shape(%2) {start=0, end=none} : i64[1]  # SC
    %7 = concat(%2, %5) {axis=0} : f32[6]  # Grow
    output "cond_out" = %1
    output "acc_out" = %7
    output "lens" = %6
  }, num_carried=1} : (f32["$L.o0.d0"], i64["$L.o1.d0",1])  # L
  output "y" = %4.0
  output "lens" = %4.1
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = input "m" : i64[]
  %2 = constant bool[] [true] : bool[]
  %3 = input "acc0" : f32[4]
  %4:2 = loop(%1, %2, %3, %0) {body=graph {
    %0 = input "i" : i64[]
    %1 = input "cond" : bool[]
    %2 = input "acc" : f32[4]
    %3 = input "x_in" : f32[2,3]
    %4 = constant f32[2] [2.0, 3.0] : f32[2]  # [C_1] C
    %5 = concat(%2, %4) {axis=0} : f32[6]  # Grow
    %6 = shape(%2) {start=0, end=none} : i64[1]  # SC
    output "cond_out" = %1
    output "acc_out" = %5
    output "lens" = %6
  }, num_carried=1} : (f32["$L.o0.d0"], i64["$L.o1.d0",1])  # L
  output "y" = %4.0
  output "lens" = %4.1
"#,
    );
    check(&["fold-shapes"], &src, &want);
}
