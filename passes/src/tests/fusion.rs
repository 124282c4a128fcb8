//! Tests of the fusion passes, one IR-text case (or more) per pass.

use super::{check, graph, ops, run, Without};

const CONV: &str = "strides=[1, 1], dilations=[1, 1], pads=[0, 0, 0, 0], auto_pad=notset, group=1";

#[test]
fn batchnorm_folds_into_conv_weights_and_bias() {
    let src = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = constant f32[2,1,1,1] [2.0, 3.0] : f32[2,1,1,1]
  %2 = constant f32[2] [1.0, -1.0] : f32[2]
  %3 = conv(%0, %1, %2) {{{CONV}}} : f32[1,2,3,3]  # C
  %4 = constant f32[2,1,1] [10.0, 100.0] : f32[2,1,1]
  %5 = mul(%3, %4) : f32[1,2,3,3]  # M
  %6 = constant f32[2,1,1] [0.5, 0.25] : f32[2,1,1]
  %7 = add(%5, %6) : f32[1,2,3,3]  # A
  output "y" = %7
"#
    ));
    let want = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = constant f32[2,1,1,1] [20.0, 300.0] : f32[2,1,1,1]  # C, M
  %2 = constant f32[2] [10.5, -99.75] : f32[2]  # C, M, A
  %3 = conv(%0, %1, %2) {{{CONV}}} : f32[1,2,3,3]  # C, M, A
  output "y" = %3
"#
    ));
    check(&["fold-batchnorm"], &src, &want);
}

#[test]
fn batchnorm_folds_into_matmul_columns() {
    let src = graph(
        r#"  %0 = input "x" : f32[N,2]
  %1 = constant f32[2,2] [1.0, 2.0, 3.0, 4.0] : f32[2,2]
  %2 = matmul(%0, %1) : f32[N,2]  # MM
  %3 = constant f32[2] [1.0, 1.0] : f32[2]
  %4 = add(%2, %3) : f32[N,2]  # Bias
  %5 = constant f32[2] [2.0, 10.0] : f32[2]
  %6 = mul(%4, %5) : f32[N,2]  # Scale
  %7 = constant f32[2] [0.5, 0.5] : f32[2]
  %8 = add(%6, %7) : f32[N,2]  # Shift
  output "y" = %8
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[N,2]
  %1 = constant f32[2,2] [2.0, 20.0, 6.0, 40.0] : f32[2,2]  # MM, Bias, Scale
  %2 = matmul(%0, %1) : f32[N,2]  # MM
  %3 = constant f32[2] [2.5, 10.5] : f32[2]  # MM, Bias, Scale, Shift
  %4 = add(%2, %3) : f32[N,2]  # MM, Bias, Scale, Shift
  output "y" = %4
"#,
    );
    check(&["fold-batchnorm"], &src, &want);
}

#[test]
fn matmul_bias_and_activation_fuse() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = input "w" : f32[3,4]
  %2 = matmul(%0, %1) : f32[2,4]  # MM
  %3 = constant f32[4] [1.0, 2.0, 3.0, 4.0] : f32[4]
  %4 = add(%3, %2) : f32[2,4]  # Add
  %5 = relu(%4) : f32[2,4]  # Relu
  %6 = matmul(%5, %1) : f32[2,4]  # MM2
  %7 = sigmoid(%6) : f32[2,4]  # Sig
  %8 = mul(%7, %6) : f32[2,4]  # Silu
  output "y" = %8
"#,
    );
    // The second matmul reads a 2x4 value with a 3x4 weight: shapes do not
    // matter to the rewrite, but inference must accept them, so use w twice
    // only where it fits.
    let src = src
        .replace(
            "%6 = matmul(%5, %1) : f32[2,4]",
            "%6 = matmul(%5, %9) : f32[2,4]",
        )
        .replace(
            "%1 = input \"w\" : f32[3,4]",
            "%1 = input \"w\" : f32[3,4]\n  %9 = input \"w2\" : f32[4,4]",
        );
    let want = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = input "w" : f32[3,4]
  %2 = input "w2" : f32[4,4]
  %3 = constant f32[4] [1.0, 2.0, 3.0, 4.0] : f32[4]
  %4 = fused_matmul(%0, %1, %3) {activation=relu} : f32[2,4]  # MM, Add, Relu
  %5 = fused_matmul(%4, %2) {activation=silu} : f32[2,4]  # MM2, Sig, Silu
  output "y" = %5
"#,
    );
    check(&["fuse-matmul"], &src, &want);
}

/// GPT-2's `Conv1D` as the TorchScript exporter writes it: the product on
/// rows, viewed back to `[B, S, N]`, then the GELU; the GELU joins the
/// product and the view moves after it.
#[test]
fn activation_through_a_view_joins_the_product() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = input "w" : f32[3,4]
  %2 = constant f32[4] [1.0, 2.0, 3.0, 4.0] : f32[4]
  %3 = matmul(%0, %1) : f32[2,4]  # MM
  %4 = add(%3, %2) : f32[2,4]  # Bias
  %5 = constant i64[3] [1, 2, 4] : i64[3]
  %6 = reshape(%4, %5) {allowzero=false} : f32[1,2,4]  # View
  %7 = gelu(%6) {approximate=tanh} : f32[1,2,4]  # Gelu
  output "y" = %7
"#,
    );
    let g = run(&["fuse-matmul", "dce"], &src, None).unwrap();
    let text = rlx_ir::text::print_graph(&g);
    assert_eq!(ops(&g), ["fused_matmul", "reshape"], "{text}");
    assert!(text.contains("{activation=gelu_tanh}"), "{text}");
    assert!(
        text.contains("= reshape(") && text.contains(": f32[1,2,4]  # [Gelu]"),
        "{text}"
    );
    // A view whose product is read elsewhere too keeps the activation apart.
    let shared = src.replace(
        r#"  output "y" = %7"#,
        "  output \"y\" = %7\n  output \"p\" = %4",
    );
    let g = run(&["fuse-matmul", "dce"], &shared, None).unwrap();
    assert!(ops(&g).contains(&"gelu"));
}

#[test]
fn conv_bias_and_activation_fuse() {
    let src = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = constant f32[2,1,1,1] [2.0, 3.0] : f32[2,1,1,1]
  %2 = conv(%0, %1) {{{CONV}}} : f32[1,2,3,3]  # C
  %3 = constant f32[2,1,1] [0.5, 0.25] : f32[2,1,1]
  %4 = add(%2, %3) : f32[1,2,3,3]  # B
  %5 = tanh(%4) : f32[1,2,3,3]  # T
  output "y" = %5
"#
    ));
    let want = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = constant f32[2,1,1,1] [2.0, 3.0] : f32[2,1,1,1]
  %2 = constant f32[2] [0.5, 0.25] : f32[2]  # C, B
  %3 = fused_conv(%0, %1, %2) {{{CONV}, activation=tanh}} : f32[1,2,3,3]  # C, B, T
  output "y" = %3
"#
    ));
    check(&["fuse-conv"], &src, &want);
}

/// A ResNet shortcut: `relu(conv(x) + b + y)` where the target runs it.
#[test]
fn conv_residual_and_activation_fuse() {
    let src = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = input "s" : f32[1,2,3,3]
  %2 = constant f32[2,1,1,1] [2.0, 3.0] : f32[2,1,1,1]
  %3 = conv(%0, %2) {{{CONV}}} : f32[1,2,3,3]  # C
  %4 = add(%1, %3) : f32[1,2,3,3]  # Add
  %5 = relu(%4) : f32[1,2,3,3]  # R
  output "y" = %5
"#
    ));
    let want = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = input "s" : f32[1,2,3,3]
  %2 = constant f32[2,1,1,1] [2.0, 3.0] : f32[2,1,1,1]
  %3 = constant f32[2] [0.0, 0.0] : f32[2]  # C, Add
  %4 = fused_conv(%0, %2, %3, %1) {{{CONV}, activation=relu}} : f32[1,2,3,3]  # C, Add, R
  output "y" = %4
"#
    ));
    check(&["fuse-conv"], &src, &want);
    // A target without a residual conv keeps the add.
    let kept = run(&["fuse-conv"], &src, Some(&Without(&["fused_conv"]))).unwrap();
    let text = rlx_ir::text::print_graph(&kept);
    assert!(text.contains("add(%1, %3)"), "{text}");
}

#[test]
fn erf_and_tanh_gelu_form() {
    let src = graph(
        r#"  %0 = input "x" : f32[4]
  %1 = constant f32[] [1.4142135] : f32[]
  %2 = div(%0, %1) : f32[4]  # Div
  %3 = erf(%2) : f32[4]  # Erf
  %4 = constant f32[] [1.0] : f32[]
  %5 = add(%3, %4) : f32[4]  # Add
  %6 = mul(%0, %5) : f32[4]  # Mul
  %7 = constant f32[] [0.5] : f32[]
  %8 = mul(%6, %7) : f32[4]  # Mul_1
  %9 = constant f32[] [3.0] : f32[]
  %10 = pow(%8, %9) : f32[4]  # Pow
  %11 = constant f32[] [0.044715] : f32[]
  %12 = mul(%11, %10) : f32[4]  # C
  %13 = add(%8, %12) : f32[4]  # Inner
  %14 = constant f32[] [0.7978846] : f32[]
  %15 = mul(%13, %14) : f32[4]  # K
  %16 = tanh(%15) : f32[4]  # Tanh
  %17 = add(%4, %16) : f32[4]  # One
  %18 = mul(%8, %7) : f32[4]  # Half
  %19 = mul(%18, %17) : f32[4]  # Out
  output "y" = %19
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[4]
  %1 = gelu(%0) {approximate=none} : f32[4]  # Div, Erf, Add, Mul, Mul_1
  %2 = gelu(%1) {approximate=tanh} : f32[4]  # Half, Pow, C, Inner, K, Tanh, One, Out
  output "y" = %2
"#,
    );
    check(&["fuse-gelu"], &src, &want);
}

#[test]
fn decomposed_layer_norm_forms() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,4]
  %1 = constant i64[1] [-1] : i64[1]
  %2 = reduce_mean(%0, %1) {keepdims=true, noop_with_empty_axes=false} : f32[2,1]  # Mean
  %3 = sub(%0, %2) : f32[2,4]  # Sub
  %4 = constant f32[] [2.0] : f32[]
  %5 = pow(%3, %4) : f32[2,4]  # Pow
  %6 = reduce_mean(%5, %1) {keepdims=true, noop_with_empty_axes=false} : f32[2,1]  # Var
  %7 = constant f32[] [1e-5] : f32[]
  %8 = add(%6, %7) : f32[2,1]  # Eps
  %9 = sqrt(%8) : f32[2,1]  # Sqrt
  %10 = div(%3, %9) : f32[2,4]  # Div
  %11 = constant f32[4] [1.0, 2.0, 3.0, 4.0] : f32[4]
  %12 = mul(%10, %11) : f32[2,4]  # Gamma
  %13 = constant f32[4] [0.0, 0.5, 0.0, 0.5] : f32[4]
  %14 = add(%12, %13) : f32[2,4]  # Beta
  output "y" = %14
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[2,4]
  %1 = constant f32[4] [1.0, 2.0, 3.0, 4.0] : f32[4]
  %2 = constant f32[4] [0.0, 0.5, 0.0, 0.5] : f32[4]
  %3 = layer_norm(%0, %1, %2) {axis=-1, epsilon=1e-5, stats=false} : f32[2,4]  # Mean, Sub, Pow, Var, Eps, Sqrt, Div, Gamma, Beta
  output "y" = %3
"#,
    );
    check(&["fuse-layer-norm"], &src, &want);
}

#[test]
fn residual_add_joins_the_norm() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,4]
  %1 = input "r" : f32[2,4]
  %2 = add(%0, %1) : f32[2,4]  # Res
  %3 = constant f32[4] [1.0, 1.0, 1.0, 1.0] : f32[4]
  %4 = constant f32[4] [0.0, 0.0, 0.0, 0.0] : f32[4]
  %5 = layer_norm(%2, %3, %4) {axis=-1, epsilon=1e-5, stats=false} : f32[2,4]  # LN
  %6 = add(%2, %5) : f32[2,4]  # Res2
  output "y" = %6
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[2,4]
  %1 = input "r" : f32[2,4]
  %2 = constant f32[4] [1.0, 1.0, 1.0, 1.0] : f32[4]
  %3 = constant f32[4] [0.0, 0.0, 0.0, 0.0] : f32[4]
  %4:2 = residual_norm(%0, %1, %2, %3) {axis=-1, epsilon=1e-5, rms=false} : (f32[2,4], f32[2,4])  # Res, LN
  %5 = add(%4.1, %4.0) : f32[2,4]  # Res2
  output "y" = %5
"#,
    );
    check(&["fuse-residual-norm"], &src, &want);
}

#[test]
fn attention_pattern_forms() {
    let src = graph(
        r#"  %0 = input "q" : f32[1,2,3,4]
  %1 = input "kt" : f32[1,2,4,3]
  %2 = input "v" : f32[1,2,3,4]
  %3 = input "mask" : f32[1,1,1,3]
  %4 = matmul(%0, %1) : f32[1,2,3,3]  # QK
  %5 = constant f32[] [0.5] : f32[]
  %6 = mul(%4, %5) : f32[1,2,3,3]  # S
  %7 = add(%6, %3) : f32[1,2,3,3]  # M
  %8 = softmax(%7) {axis=-1} : f32[1,2,3,3]  # P
  %9 = matmul(%8, %2) : f32[1,2,3,4]  # Y
  output "y" = %9
"#,
    );
    let want = graph(
        r#"  %0 = input "q" : f32[1,2,3,4]
  %1 = input "kt" : f32[1,2,4,3]
  %2 = input "v" : f32[1,2,3,4]
  %3 = input "mask" : f32[1,1,1,3]
  %4 = transpose(%1) {perm=[0, 1, 3, 2]} : f32[1,2,3,4]  # QK, S, M, P, Y
  %5 = attention(%0, %4, %2, %3) {q_num_heads=0, kv_num_heads=0, scale=0.5, is_causal=false, softcap=0.0, qk_matmul_output_mode=0, has_mask=true, has_past=false, has_nonpad=false, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none} : f32[1,2,3,4]  # QK, S, M, P, Y
  output "y" = %5
"#,
    );
    check(&["fuse-attention"], &src, &want);
}

#[test]
fn attention_reads_heads_in_place() {
    // Q, K and V split into 2 heads of 4, attention, merge: the splits and the
    // merge fold into 3-D attention operands.
    let src = graph(
        r#"  %0 = input "q" : f32[B,S,8]
  %1 = input "k" : f32[B,T,8]
  %2 = input "v" : f32[B,T,8]
  %3 = constant i64[4] [0, 0, 2, 4] : i64[4]
  %4 = reshape(%0, %3) {allowzero=false} : f32[B,S,2,4]  # QR
  %5 = transpose(%4) {perm=[0, 2, 1, 3]} : f32[B,2,S,4]  # QT
  %6 = reshape(%1, %3) {allowzero=false} : f32[B,T,2,4]  # KR
  %7 = transpose(%6) {perm=[0, 2, 3, 1]} : f32[B,2,4,T]  # KT
  %8 = reshape(%2, %3) {allowzero=false} : f32[B,T,2,4]  # VR
  %9 = transpose(%8) {perm=[0, 2, 1, 3]} : f32[B,2,T,4]  # VT
  %10 = matmul(%5, %7) : f32[B,2,S,T]  # QK
  %11 = softmax(%10) {axis=-1} : f32[B,2,S,T]  # P
  %12 = matmul(%11, %9) : f32[B,2,S,4]  # Y
  %13 = transpose(%12) {perm=[0, 2, 1, 3]} : f32[B,S,2,4]  # YT
  %14 = constant i64[3] [0, 0, 8] : i64[3]
  %15 = reshape(%13, %14) {allowzero=false} : f32[B,S,8]  # YR
  output "y" = %15
"#,
    );
    let want = graph(
        r#"  %0 = input "q" : f32[B,S,8]
  %1 = input "k" : f32[B,T,8]
  %2 = input "v" : f32[B,T,8]
  %3 = attention(%0, %1, %2) {q_num_heads=2, kv_num_heads=2, scale=1.0, is_causal=false, softcap=0.0, qk_matmul_output_mode=0, has_mask=false, has_past=false, has_nonpad=false, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none} : f32[B,S,8]  # QR, QT, KR, KT, QK, P, Y, VR, VT, YT, YR
  output "y" = %3
"#,
    );
    check(&["fuse-attention"], &src, &want);
}

#[test]
fn hard_swish_becomes_one_region() {
    let src = graph(
        r#"  %0 = input "x" : f32[4]
  %1 = constant f32[] [0.25] : f32[]
  %2 = mul(%0, %1) : f32[4]  # HM
  %3 = constant f32[] [0.5] : f32[]
  %4 = add(%2, %3) : f32[4]  # HA
  %5 = constant f32[] [0.0] : f32[]
  %6 = constant f32[] [1.0] : f32[]
  %7 = clip(%4, %5, %6) : f32[4]  # HC
  %8 = mul(%0, %7) : f32[4]  # HS
  output "y" = %8
"#,
    );
    let want = graph(
        r#"  %0 = input "x" : f32[4]
  %1 = elementwise_region(%0) {program=[mul(x0, 0.25), add(t0, 0.5), max(t1, 0.0), min(t2, 1.0), mul(x0, t3)]} : f32[4]  # HM, HA, HC, HS
  output "y" = %1
"#,
    );
    check(&["fuse-hard-activations"], &src, &want);
}

#[test]
fn elementwise_chains_become_regions() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = constant f32[3] [1.0, 2.0, 3.0] : f32[3]
  %2 = mul(%0, %1) : f32[2,3]  # M
  %3 = constant f32[] [0.5] : f32[]
  %4 = add(%2, %3) : f32[2,3]  # A
  %5 = relu(%4) : f32[2,3]  # R
  %6 = exp(%5) : f32[2,3]  # E
  %7 = neg(%5) : f32[2,3]  # N
  %8 = sub(%6, %7) : f32[2,3]  # S
  output "y" = %8
  output "r" = %5
"#,
    );
    // `relu` is an output too, so it ends one region and starts the next.
    let want = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = constant f32[3] [1.0, 2.0, 3.0] : f32[3]
  %2 = elementwise_region(%0, %1) {program=[mul(x0, x1), add(t0, 0.5), relu(t1)]} : f32[2,3]  # M, A, R
  %3 = elementwise_region(%2) {program=[exp(x0), neg(x0), sub(t0, t1)]} : f32[2,3]  # E, N, S
  output "y" = %3
  output "r" = %2
"#,
    );
    check(&["fuse-elementwise"], &src, &want);
}

/// An i32 matmul of a widened u8 activation less its zero point and a
/// constant whose values fit in i8 becomes `matmul_integer` on the bytes;
/// a target without `matmul_integer` keeps the i32 form.
#[test]
fn int8_matmul_fuses_where_the_target_runs_it() {
    let src = graph(
        r#"  %0 = input "q" : u8[2,3]
  %1 = input "z" : u8[]
  %2 = cast(%0) {to=i32, saturate=true, round_mode=nearest} : i32[2,3]  # CastQ
  %3 = cast(%1) {to=i32, saturate=true, round_mode=nearest} : i32[]  # CastZ
  %4 = sub(%2, %3) : i32[2,3]  # SubZ
  %5 = constant i32[3,2] [1, -2, 3, -128, 127, 0] : i32[3,2]
  %6 = matmul(%4, %5) : i32[2,2]  # MM
  output "y" = %6
"#,
    );
    let g = run(&["fuse-int8-matmul", "dce"], &src, None).unwrap();
    let ops: Vec<&str> = g
        .node_ids()
        .iter()
        .map(|&id| g.node(id).op.name())
        .collect();
    assert!(
        ops.contains(&"matmul_integer") && !ops.contains(&"matmul"),
        "{ops:?}"
    );
    assert!(!ops.contains(&"sub") && !ops.contains(&"cast"), "{ops:?}");
    let mm = g
        .node_ids()
        .into_iter()
        .find(|&id| g.node(id).op.name() == "matmul_integer")
        .unwrap();
    let dtypes: Vec<_> = g.inputs_of(mm).iter().map(|&v| g.ty(v).dtype).collect();
    use rlx_ir::DType::{I8, U8};
    assert_eq!(dtypes, [U8, I8, U8, I8]);
    let kept = run(
        &["fuse-int8-matmul", "dce"],
        &src,
        Some(&Without(&["matmul_integer"])),
    )
    .unwrap();
    assert!(kept
        .node_ids()
        .iter()
        .any(|&id| kept.node(id).op.name() == "matmul"));
    // Out of the 8-bit range, the constant stays i32 and the product too.
    let wide = src.replace("127, 0]", "300, 0]");
    let g = run(&["fuse-int8-matmul", "dce"], &wide, None).unwrap();
    assert!(g
        .node_ids()
        .iter()
        .all(|&id| g.node(id).op.name() != "matmul_integer"));
}

/// A QDQ product (a per-tensor activation, a weight with a scale and zero
/// point per column) becomes `matmul_integer` on the bytes, widened and
/// scaled by the product of the scales; a scale per row (it does not factor
/// out of the sum) and a target without `matmul_integer` keep the f32 form.
#[test]
fn qdq_matmul_runs_on_the_bytes() {
    let src = graph(
        r#"  %0 = input "x" : f32[2,3]
  %1 = constant f32[] [0.5] : f32[]
  %2 = constant u8[] [128] : u8[]
  %3 = quantize_linear(%0, %1, %2) {axis=1, block_size=0, saturate=true} : u8[2,3]  # Q
  %4 = dequantize_linear(%3, %1, %2) {axis=1, block_size=0} : f32[2,3]  # DQ
  %5 = constant i8[3,2] [1, -2, 3, -128, 127, 0] : i8[3,2]
  %6 = constant f32[2] [0.25, 0.125] : f32[2]
  %7 = constant i8[2] [0, 3] : i8[2]
  %8 = dequantize_linear(%5, %6, %7) {axis=1, block_size=0} : f32[3,2]  # DQW
  %9 = matmul(%4, %8) : f32[2,2]  # MM
  output "y" = %9
"#,
    );
    let ops = |g: &rlx_ir::Graph| -> Vec<String> {
        g.node_ids()
            .iter()
            .map(|&id| g.node(id).op.name().to_string())
            .collect()
    };
    let g = run(&["fuse-qdq-matmul", "dce"], &src, None).unwrap();
    let got = ops(&g);
    assert!(got.contains(&"matmul_integer".into()), "{got:?}");
    assert!(!got.contains(&"matmul".into()), "{got:?}");
    // Only the activation's quantization remains; both dequantizations go.
    assert!(!got.contains(&"dequantize_linear".into()), "{got:?}");
    assert!(
        got.contains(&"cast".into()) && got.contains(&"mul".into()),
        "{got:?}"
    );
    let kept = run(
        &["fuse-qdq-matmul", "dce"],
        &src,
        Some(&Without(&["matmul_integer"])),
    )
    .unwrap();
    assert!(ops(&kept).contains(&"matmul".into()));
    let per_row = src
        .replace(
            "constant f32[2] [0.25, 0.125] : f32[2]",
            "constant f32[3] [0.25, 0.125, 1.0] : f32[3]",
        )
        .replace(
            "constant i8[2] [0, 3] : i8[2]",
            "constant i8[3] [0, 3, 1] : i8[3]",
        )
        .replace(
            "{axis=1, block_size=0} : f32[3,2]",
            "{axis=0, block_size=0} : f32[3,2]",
        );
    let g = run(&["fuse-qdq-matmul", "dce"], &per_row, None).unwrap();
    assert!(ops(&g).contains(&"matmul".into()));
}

/// HardSwish as `fuse-hard-activations` leaves it becomes the conv's activation.
#[test]
fn conv_and_hard_swish_fuse() {
    let src = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = constant f32[2,1,1,1] [2.0, 3.0] : f32[2,1,1,1]
  %2 = conv(%0, %1) {{{CONV}}} : f32[1,2,3,3]  # C
  %3 = constant f32[] [0.16666667] : f32[]
  %4 = mul(%2, %3) : f32[1,2,3,3]  # M
  %5 = constant f32[] [0.5] : f32[]
  %6 = add(%4, %5) : f32[1,2,3,3]  # A
  %7 = constant f32[] [0.0] : f32[]
  %8 = constant f32[] [1.0] : f32[]
  %9 = clip(%6, %7, %8) : f32[1,2,3,3]  # HS
  %10 = mul(%2, %9) : f32[1,2,3,3]  # HW
  output "y" = %10
"#
    ));
    let want = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = constant f32[2,1,1,1] [2.0, 3.0] : f32[2,1,1,1]
  %2 = fused_conv(%0, %1) {{{CONV}, activation=hard_swish}} : f32[1,2,3,3]  # C, M, A, HS, HW
  output "y" = %2
"#
    ));
    check(&["fuse-hard-activations", "fuse-conv"], &src, &want);
}

/// ReLU6 (a `clip` to constant bounds 0 and 6, MobileNet's) becomes the
/// conv's and the product's activation; a clip to other bounds stays.
#[test]
fn relu6_clip_fuses_into_conv_and_matmul() {
    let src = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = constant f32[2,1,1,1] [2.0, 3.0] : f32[2,1,1,1]
  %2 = conv(%0, %1) {{{CONV}}} : f32[1,2,3,3]  # C
  %3 = constant f32[] [0.0] : f32[]
  %4 = constant f32[] [6.0] : f32[]
  %5 = clip(%2, %3, %4) : f32[1,2,3,3]  # R6
  output "y" = %5
"#
    ));
    let want = graph(&format!(
        r#"  %0 = input "x" : f32[1,1,3,3]
  %1 = constant f32[2,1,1,1] [2.0, 3.0] : f32[2,1,1,1]
  %2 = fused_conv(%0, %1) {{{CONV}, activation=relu6}} : f32[1,2,3,3]  # C, R6
  output "y" = %2
"#
    ));
    check(&["fuse-conv"], &src, &want);
    let src = graph(
        r#"  %0 = input "a" : f32[2,3]
  %1 = constant f32[3,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] : f32[3,2]
  %2 = matmul(%0, %1) : f32[2,2]  # MM
  %3 = constant f32[2] [0.5, -1.5] : f32[2]
  %4 = add(%2, %3) : f32[2,2]  # B
  %5 = constant f32[] [0.0] : f32[]
  %6 = constant f32[] [6.0] : f32[]
  %7 = clip(%4, %5, %6) : f32[2,2]  # R6
  output "y" = %7
"#,
    );
    let want = graph(
        r#"  %0 = input "a" : f32[2,3]
  %1 = constant f32[3,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] : f32[3,2]
  %2 = constant f32[2] [0.5, -1.5] : f32[2]
  %3 = fused_matmul(%0, %1, %2) {activation=relu6} : f32[2,2]  # MM, B, R6
  output "y" = %3
"#,
    );
    check(&["fuse-matmul"], &src, &want);
    let six_and_a_half = src.replace("[6.0]", "[6.5]");
    let g = run(&["fuse-matmul", "dce"], &six_and_a_half, None).unwrap();
    assert!(ops(&g).contains(&"clip".into()));
}

/// The f32 epilogue of an 8-bit product (the `cast`, the scale, a bias per
/// column, the ReLU) becomes one `fused_matmul_integer`; a bias of the
/// product's shape does not fit the epilogue, and a target without the
/// fused op keeps the nodes.
#[test]
fn int8_epilogue_fuses_into_the_product() {
    let src = graph(
        r#"  %0 = input "q" : u8[2,3]
  %1 = input "s" : f32[]
  %2 = constant u8[] [128] : u8[]
  %3 = constant i8[3,2] [1, -2, 3, -128, 127, 0] : i8[3,2]
  %4 = constant i8[] [0] : i8[]
  %5 = matmul_integer(%0, %3, %2, %4) : i32[2,2]  # MM
  %6 = cast(%5) {to=f32, saturate=true, round_mode=up} : f32[2,2]  # Cast
  %7 = mul(%1, %6) : f32[2,2]  # Scale
  %8 = constant f32[2] [0.5, -1.5] : f32[2]
  %9 = add(%7, %8) : f32[2,2]  # Bias
  %10 = relu(%9) : f32[2,2]  # Relu
  output "y" = %10
"#,
    );
    let want = graph(
        r#"  %0 = input "q" : u8[2,3]
  %1 = input "s" : f32[]
  %2 = constant u8[] [128] : u8[]
  %3 = constant i8[3,2] [1, -2, 3, -128, 127, 0] : i8[3,2]
  %4 = constant i8[] [0] : i8[]
  %5 = constant f32[2] [0.5, -1.5] : f32[2]
  %6 = fused_matmul_integer(%0, %3, %2, %4, %1, %5) {activation=relu} : f32[2,2]  # MM, Cast, Scale, Bias, Relu
  output "y" = %6
"#,
    );
    check(&["fuse-matmul", "dce"], &src, &want);
    // Legalization for a target without it takes it apart again.
    let apart = run(
        &["legalize"],
        &want,
        Some(&Without(&["fused_matmul_integer"])),
    )
    .unwrap();
    let mut ops: Vec<&str> = apart
        .node_ids()
        .iter()
        .map(|&id| apart.node(id).op.name())
        .collect();
    ops.retain(|o| !matches!(*o, "input" | "constant"));
    assert_eq!(ops, ["matmul_integer", "cast", "mul", "add", "relu"]);
    let kept = run(
        &["fuse-matmul", "dce"],
        &src,
        Some(&Without(&["fused_matmul_integer"])),
    )
    .unwrap();
    assert!(kept
        .node_ids()
        .iter()
        .all(|&id| kept.node(id).op.name() != "fused_matmul_integer"));
    // A bias of the product's whole shape stays an `add` after the fused
    // scale.
    let full = src.replace(
        "constant f32[2] [0.5, -1.5] : f32[2]",
        "constant f32[2,2] [0.5, -1.5, 1.0, 2.0] : f32[2,2]",
    );
    let g = run(&["fuse-matmul", "dce"], &full, None).unwrap();
    let ops: Vec<&str> = g
        .node_ids()
        .iter()
        .map(|&id| g.node(id).op.name())
        .collect();
    assert!(
        ops.contains(&"fused_matmul_integer") && ops.contains(&"add") && ops.contains(&"relu"),
        "{ops:?}"
    );
}

#[test]
fn products_of_one_weight_over_independent_rows_stack() {
    // P0 and P1 read the weight over independent inputs (1 and 2 rows): one
    // product over 3 rows, split back. P2 reads what P0 feeds: it stays.
    let src = graph(
        r#"  %0 = input "a" : f32[1,4]
  %1 = input "b" : f32[2,4]
  %2 = constant f32[4,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0] : f32[4,2]
  %3 = constant f32[2] [0.5, -0.5] : f32[2]
  %4 = fused_matmul(%0, %2, %3) {activation=none} : f32[1,2]  # P0
  %5 = fused_matmul(%1, %2, %3) {activation=none} : f32[2,2]  # P1
  %6 = constant f32[2,4] [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0] : f32[2,4]
  %7 = matmul(%4, %6) : f32[1,4]  # Back
  %8 = fused_matmul(%7, %2, %3) {activation=none} : f32[1,2]  # P2
  output "y0" = %5
  output "y1" = %8
"#,
    );
    let want = graph(
        r#"  %0 = input "a" : f32[1,4]
  %1 = input "b" : f32[2,4]
  %2 = constant f32[4,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0] : f32[4,2]
  %3 = constant f32[2] [0.5, -0.5] : f32[2]
  %4 = concat(%0, %1) {axis=0} : f32[3,4]  # "P0, P1"
  %5 = fused_matmul(%4, %2, %3) {activation=none} : f32[3,2]  # "P0, P1"
  %6 = constant i64[2] [1, 2] : i64[2]  # "P0, P1"
  %7:2 = split(%5, %6) {axis=0, num_outputs=2} : (f32[1,2], f32[2,2])  # "P0, P1"
  %8 = constant f32[2,4] [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0] : f32[2,4]
  %9 = matmul(%7.0, %8) : f32[1,4]  # Back
  %10 = fused_matmul(%9, %2, %3) {activation=none} : f32[1,2]  # P2
  output "y0" = %7.1
  output "y1" = %10
"#,
    );
    check(&["stack-matmuls"], &src, &want);
}

/// One row's Q/K/V-style projections and a gated pair: each group becomes
/// one product and a split; the gate's SiLU moves after the split.
#[test]
fn projections_of_one_row_merge() {
    let fill = |n: usize, v: &str| format!("[{}]", vec![v; n].join(", "));
    let src = graph(
        &r#"  %0 = input "x" : f32[1,1,16]
  %1 = constant f32[16,16] W1 : f32[16,16]
  %2 = constant f32[16,32] W2 : f32[16,32]
  %3 = constant f32[16] B1 : f32[16]
  %4 = fused_matmul(%0, %1, %3) {activation=silu} : f32[1,1,16]  # Gate
  %5 = matmul(%0, %2) : f32[1,1,32]  # Up
  %6 = relu(%5) : f32[1,1,32]  # R
  output "g" = %4
  output "u" = %6
"#
        .replace("W1", &fill(256, "0.5"))
        .replace("W2", &fill(512, "0.25"))
        .replace("B1", &fill(16, "1.0")),
    );
    let g = run(&["merge-projections", "dce"], &src, None).unwrap();
    let text = rlx_ir::text::print_graph(&g);
    let mut got = ops(&g);
    got.sort();
    assert_eq!(
        got,
        ["fused_matmul", "mul", "relu", "sigmoid", "split"],
        "{text}"
    );
    assert!(
        text.contains("f32[16,48]") && text.contains("f32[48]"),
        "{text}"
    );
    // Two rows: the split would copy, so nothing merges.
    let rows = src
        .replace("f32[1,1,16]", "f32[1,2,16]")
        .replace("f32[1,1,32]", "f32[1,2,32]");
    let g = run(&["merge-projections", "dce"], &rows, None).unwrap();
    let mut got = ops(&g);
    got.sort();
    assert_eq!(got, ["fused_matmul", "matmul", "relu"]);
}
