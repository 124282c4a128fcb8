//! Tests of the generic passes: simplify, cse, legalize, the pipeline table.

use super::{check, check_on, graph, ops, run, Without};

#[test]
fn simplify_drops_identity_ops_and_transpose_pairs() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = transpose(%0) {perm=[1, 0]} : f32[3,2]  # T1
  %2 = transpose(%1) {perm=[1, 0]} : f32[2,3]  # T2
  %3 = constant f32[] [1.0] : f32[]
  %4 = mul(%2, %3) : f32[2,3]  # M
  %5 = constant f32[] [0.0] : f32[]
  %6 = add(%5, %4) : f32[2,3]  # A
  %7 = cast(%6) {to=f32, saturate=true, round_mode=nearest} : f32[2,3]  # C
  %8 = constant f32[3] [1.0, 1.0, 1.0] : f32[3]
  %9 = div(%7, %8) : f32[2,3]  # D
  output "y" = %9
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[2,3]
  output "y" = %0
"#,
    );
    check(&["simplify"], &src, &want);
}

#[test]
fn simplify_keeps_ops_that_change_values() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = constant f32[] [2.0] : f32[]
  %2 = mul(%0, %1) : f32[2,3]  # M
  %3 = constant f32[3] [0.0, 1.0, 0.0] : f32[3]
  %4 = add(%2, %3) : f32[2,3]  # A
  output "y" = %4
"#,
    );
    check(&["simplify"], &src, &src);
}

#[test]
fn simplify_moves_broadcasts_past_elementwise_ops() {
    // An identity that only broadcasts (x + zeros[2,3]) is an expand of x,
    // which moves past the multiply: the multiply runs on 3 elements.
    let src = graph(
        r#"  %0 = input "x" : f32[3]
  %1 = constant f32[2,3] [0.0, 0.0, 0.0, 0.0, 0.0, 0.0] : f32[2,3]
  %2 = add(%0, %1) : f32[2,3]  # A
  %3 = constant f32[] [2.0] : f32[]
  %4 = mul(%2, %3) : f32[2,3]  # M
  output "y" = %4
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[3]
  %1 = constant f32[] [2.0] : f32[]
  %2 = mul(%0, %1) : f32[3]  # M
  %3 = constant i64[2] [2, 3] : i64[2]  # A, M
  %4 = expand(%2, %3) : f32[2,3]  # A, M
  output "y" = %4
"#,
    );
    check(&["simplify"], &src, &want);
}

#[test]
fn simplify_keeps_a_padding_mask_one_bias_a_key() {
    // torch.export's padding mask: and(ones[1,1,q,1], pad[b,1,1,k]), a
    // where over [b,1,q,k], added to the scores. The bias stays [b,1,1,k].
    let src = graph(
        r#"  %0 = input "pad" : bool[2,1,1,4]
  %1 = input "scores" : f32[2,3,4,4]
  %2 = constant bool[1,1,4,1] [true, true, true, true] : bool[1,1,4,1]
  %3 = and(%2, %0) : bool[2,1,4,4]  # And
  %4 = constant f32[] [0.0] : f32[]
  %5 = constant f32[] [-3.4028235e38] : f32[]
  %6 = where(%3, %4, %5) : f32[2,1,4,4]  # Where
  %7 = add(%1, %6) : f32[2,3,4,4]  # Add
  output "y" = %7
"#,
    );
    let want = graph(
        r#"  %0 = input "pad" : bool[2,1,1,4]
  %1 = input "scores" : f32[2,3,4,4]
  %2 = constant f32[] [0.0] : f32[]
  %3 = constant f32[] [-3.4028235e38] : f32[]
  %4 = where(%0, %2, %3) : f32[2,1,1,4]  # Where
  %5 = add(%1, %4) : f32[2,3,4,4]  # Add
  output "y" = %5
"#,
    );
    check(&["simplify"], &src, &want);
}

#[test]
fn simplify_merges_view_chains_and_cancels_squeeze_pairs() {
    let src = graph(
        r#"  %0 = input "x" : f32[N,3]
  %1 = constant i64[1] [0] : i64[1]
  %2 = unsqueeze(%0, %1) : f32[1,N,3]  # U
  %3 = squeeze(%2, %1) : f32[N,3]  # S
  %4 = input "z" : f32[2,6]
  %5 = constant i64[2] [3, 4] : i64[2]
  %6 = reshape(%4, %5) {allowzero=false} : f32[3,4]  # R1
  %7 = constant i64[2] [4, 3] : i64[2]
  %8 = reshape(%6, %7) {allowzero=false} : f32[4,3]  # R2
  output "y" = %3
  output "w" = %8
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[N,3]
  %1 = input "z" : f32[2,6]
  %2 = constant i64[2] [4, 3] : i64[2]  # R1, R2
  %3 = reshape(%1, %2) {allowzero=false} : f32[4,3]  # R1, R2
  output "y" = %0
  output "w" = %3
"#,
    );
    check(&["simplify"], &src, &want);
}

#[test]
fn simplify_merges_lossless_cast_chains_only() {
    let src = graph(
        r#"  %0 = input "x" : f16[4]
  %1 = cast(%0) {to=f32, saturate=true, round_mode=nearest} : f32[4]  # C1
  %2 = cast(%1) {to=f64, saturate=true, round_mode=nearest} : f64[4]  # C2
  %3 = input "z" : f32[4]
  %4 = cast(%3) {to=f16, saturate=true, round_mode=nearest} : f16[4]  # C3
  %5 = cast(%4) {to=f32, saturate=true, round_mode=nearest} : f32[4]  # C4
  output "y" = %2
  output "w" = %5
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f16[4]
  %1 = input "z" : f32[4]
  %2 = cast(%0) {to=f64, saturate=true, round_mode=nearest} : f64[4]  # C1, C2
  %3 = cast(%1) {to=f16, saturate=true, round_mode=nearest} : f16[4]  # C3
  %4 = cast(%3) {to=f32, saturate=true, round_mode=nearest} : f32[4]  # C4
  output "y" = %2
  output "w" = %4
"#,
    );
    check(&["simplify"], &src, &want);
}

#[test]
fn cse_merges_equal_nodes_and_constants() {
    let src = graph(
        r#"  %0 = input "x" : f32[4]
  %1 = relu(%0) : f32[4]  # R1
  %2 = relu(%0) : f32[4]  # R2
  %3 = constant f32[] [2.0] : f32[]
  %4 = mul(%1, %3) : f32[4]  # M1
  %5 = constant f32[] [2.0] : f32[]
  %6 = mul(%2, %5) : f32[4]  # M2
  %7 = sigmoid(%0) : f32[4]  # S
  %8 = add(%4, %6) : f32[4]  # A
  %9 = add(%8, %7) : f32[4]  # B
  output "y" = %9
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[4]
  %1 = relu(%0) : f32[4]  # R1, R2
  %2 = constant f32[] [2.0] : f32[]
  %3 = mul(%1, %2) : f32[4]  # M1, M2
  %4 = add(%3, %3) : f32[4]  # A
  %5 = sigmoid(%0) : f32[4]  # S
  %6 = add(%4, %5) : f32[4]  # B
  output "y" = %6
"#,
    );
    check(&["cse"], &src, &want);
}

#[test]
fn legalize_decomposes_what_the_target_lacks() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = constant f32[3,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] : f32[3,2]
  %2 = constant f32[2] [0.5, -0.5] : f32[2]
  %3 = fused_matmul(%0, %1, %2) {activation=silu} : f32[2,2]  # MM, Add, Silu
  %4 = elementwise_region(%3) {program=[mul(x0, 2.0), tanh(t0)]} : f32[2,2]  # M, T
  output "y" = %4
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = constant f32[3,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] : f32[3,2]
  %2 = matmul(%0, %1) : f32[2,2]  # MM, Add, Silu
  %3 = constant f32[2] [0.5, -0.5] : f32[2]
  %4 = add(%2, %3) : f32[2,2]  # MM, Add, Silu
  %5 = sigmoid(%4) : f32[2,2]  # MM, Add, Silu
  %6 = mul(%4, %5) : f32[2,2]  # MM, Add, Silu
  %7 = constant f32[] [2.0] : f32[]  # M, T
  %8 = mul(%6, %7) : f32[2,2]  # M, T
  %9 = tanh(%8) : f32[2,2]  # M, T
  output "y" = %9
"#,
    );
    let b = Without(&["fused_matmul", "elementwise_region"]);
    check_on(&["legalize"], &src, &want, Some(&b));
}

#[test]
fn legalize_lists_every_node_left_unsupported() {
    let src = graph(
        r#"  %0 = input "x" : f32[4]
  %1 = relu(%0) : f32[4]  # R
  %2 = sigmoid(%1) : f32[4]  # S
  %3 = tanh(%2) : f32[4]  # T
  output "y" = %3
"#,
    );
    let b = Without(&["relu", "tanh"]);
    let e = run(&["legalize"], &src, Some(&b)).unwrap_err().to_string();
    assert!(e.contains("cannot run 2 node(s)"), "{e}");
    assert!(
        e.contains("(relu, from ONNX R): `relu` is off in this test"),
        "{e}"
    );
    assert!(e.contains("(tanh, from ONNX T)"), "{e}");
    assert!(!e.contains("sigmoid"), "{e}");
}

#[test]
fn legalize_decomposes_attention() {
    let src = graph(
        r#"  %0 = input "q" : f32[1,2,3,4]
  %1 = input "k" : f32[1,2,5,4]
  %2 = input "v" : f32[1,2,5,4]
  %3 = attention(%0, %1, %2) {q_num_heads=0, kv_num_heads=0, scale=none, is_causal=false, softcap=0.0, qk_matmul_output_mode=0, has_mask=false, has_past=false, has_nonpad=false, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none} : f32[1,2,3,4]  # Att
  output "y" = %3
"#,
    );
    let want = graph(
        r#"  %0 = input "q" : f32[1,2,3,4]
  %1 = input "k" : f32[1,2,5,4]
  %2 = input "v" : f32[1,2,5,4]
  %3 = transpose(%1) {perm=[0, 1, 3, 2]} : f32[1,2,4,5]  # Att
  %4 = matmul(%0, %3) : f32[1,2,3,5]  # Att
  %5 = constant f32[] [0.5] : f32[]  # Att
  %6 = mul(%4, %5) : f32[1,2,3,5]  # Att
  %7 = softmax(%6) {axis=-1} : f32[1,2,3,5]  # Att
  %8 = matmul(%7, %2) : f32[1,2,3,4]  # Att
  output "y" = %8
"#,
    );
    check_on(&["legalize"], &src, &want, Some(&Without(&["attention"])));
}

#[test]
fn simplify_collapses_constant_affine_chains() {
    // (x*a + b)*c + d with per-channel constants -> x*(a*c) + (b*c + d).
    let src = graph(
        r#"  %0 = input "x" : f32[1,2,3]
  %1 = constant f32[2,1] [2.0, 3.0] : f32[2,1]
  %2 = mul(%0, %1) : f32[1,2,3]  # M1
  %3 = constant f32[2,1] [1.0, -1.0] : f32[2,1]
  %4 = add(%2, %3) : f32[1,2,3]  # A1
  %5 = constant f32[2,1] [10.0, 100.0] : f32[2,1]
  %6 = mul(%4, %5) : f32[1,2,3]  # M2
  %7 = constant f32[2,1] [0.5, 0.25] : f32[2,1]
  %8 = add(%6, %7) : f32[1,2,3]  # A2
  output "y" = %8
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[1,2,3]
  %1 = constant f32[2,1] [20.0, 300.0] : f32[2,1]  # M1, A1, M2
  %2 = mul(%0, %1) : f32[1,2,3]  # M1, A1, M2
  %3 = constant f32[2,1] [10.5, -99.75] : f32[2,1]  # M1, A1, M2, A2
  %4 = add(%2, %3) : f32[1,2,3]  # M1, A1, M2, A2
  output "y" = %4
"#,
    );
    check(&["simplify"], &src, &want);
}

#[test]
fn simplify_keeps_affine_steps_that_are_shared() {
    // x*a is also an output: the chain stays as it is.
    let src = graph(
        r#"  %0 = input "x" : f32[2]
  %1 = constant f32[2] [2.0, 3.0] : f32[2]
  %2 = mul(%0, %1) : f32[2]  # M1
  %3 = constant f32[2] [5.0, 7.0] : f32[2]
  %4 = mul(%2, %3) : f32[2]  # M2
  output "y" = %4
  output "z" = %2
"#,
    );
    check(&["simplify"], &src, &src);
}

#[test]
fn simplify_squares_by_multiplying() {
    let src = graph(
        r#"  %0 = input "x" : f32[4]
  %1 = constant f32[] [2.0] : f32[]
  %2 = pow(%0, %1) : f32[4]  # P
  %3 = constant f32[] [3.0] : f32[]
  %4 = pow(%0, %3) : f32[4]  # Q
  output "y" = %2
  output "z" = %4
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[4]
  %1 = mul(%0, %0) : f32[4]  # P
  %2 = constant f32[] [3.0] : f32[]
  %3 = pow(%0, %2) : f32[4]  # Q
  output "y" = %1
  output "z" = %3
"#,
    );
    check(&["simplify"], &src, &want);
}

#[test]
fn simplify_makes_enumerating_gathers_reshapes() {
    // gather_nd over every (i, j) of [2, 3] in order, and gather of 0..3
    // along an axis of 3: reshapes. Out of order, a gather stays.
    let src = graph(
        r#"  %0 = input "x" : f32[2,3,4]
  %1 = constant i64[2,3,2] [0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, -1] : i64[2,3,2]
  %2 = gather_nd(%0, %1) {batch_dims=0} : f32[2,3,4]  # G
  %3 = constant i64[1,3] [0, 1, 2] : i64[1,3]
  %4 = gather(%2, %3) {axis=1} : f32[2,1,3,4]  # H
  %5 = constant i64[3] [0, 2, 1] : i64[3]
  %6 = gather(%0, %5) {axis=1} : f32[2,3,4]  # K
  output "y" = %4
  output "z" = %6
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[2,3,4]
  %1 = constant i64[4] [2, 1, 3, 4] : i64[4]  # H
  %2 = reshape(%0, %1) {allowzero=false} : f32[2,1,3,4]  # H
  %3 = constant i64[3] [0, 2, 1] : i64[3]
  %4 = gather(%0, %3) {axis=1} : f32[2,3,4]  # K
  output "y" = %2
  output "z" = %4
"#,
    );
    check(&["simplify"], &src, &want);
}

#[test]
fn simplify_turns_a_quantization_round_trip_into_arithmetic() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = constant f32[] [0.5] : f32[]
  %2 = constant u8[] [128] : u8[]
  %3 = quantize_linear(%0, %1, %2) {axis=1, block_size=0, saturate=true} : u8[2,3]  # Q
  %4 = dequantize_linear(%3, %1, %2) {axis=1, block_size=0} : f32[2,3]  # DQ
  %5 = dequantize_linear(%3, %1, %2) {axis=1, block_size=0} : f32[2,3]  # DQ2
  %6 = add(%4, %5) : f32[2,3]  # A
  output "y" = %6
"#,
    );
    let g = run(&["simplify", "dce"], &src, None).unwrap();
    let got = ops(&g);
    for gone in ["quantize_linear", "dequantize_linear"] {
        assert!(!got.contains(&gone), "{got:?}");
    }
    for op in ["div", "round", "max", "min", "mul"] {
        assert!(got.contains(&op), "{got:?}");
    }
    // The clamp's bounds are the range less the zero point.
    let bounds: Vec<f64> = g
        .node_ids()
        .iter()
        .filter(|&&id| matches!(g.node(id).op.name(), "max" | "min"))
        .filter_map(|&id| {
            let c = g.inputs_of(id)[1];
            match &g.node(c.node).op {
                rlx_ir::Op::Constant(k) => k.value.to_f64_vec(),
                _ => None,
            }
        })
        .flatten()
        .collect();
    assert_eq!(bounds.len(), 4, "{bounds:?}");
    assert!(
        bounds.contains(&-128.0) && bounds.contains(&127.0),
        "{bounds:?}"
    );
    // The 8-bit value read elsewhere, another zero point, or a target
    // without `round`: the pair stays.
    let read = src.replace(
        "output \"y\" = %6",
        "output \"y\" = %6\n  output \"q\" = %3",
    );
    let other = src.replace(
        "%5 = dequantize_linear(%3, %1, %2)",
        "%7 = constant u8[] [127] : u8[]\n  %5 = dequantize_linear(%3, %1, %7)",
    );
    for (what, text, backend) in [
        ("read", &read, None),
        ("zero point", &other, None),
        (
            "round",
            &src,
            Some(&Without(&["round"]) as &dyn crate::Backend),
        ),
    ] {
        let g = run(&["simplify", "dce"], text, backend).unwrap();
        assert!(
            ops(&g).contains(&"quantize_linear"),
            "{what}: {:?}",
            ops(&g)
        );
    }
}
