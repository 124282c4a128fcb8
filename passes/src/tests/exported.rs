//! The transformer forms PyTorch's two ONNX exporters write (transformers 5,
//! torch 2.11): decomposed `scaled_dot_product_attention` with the scale on
//! both operands and a NaN guard, `repeat_kv` for grouped-query heads, the
//! `[B*H, S, D]` batched K transpose, unit-dim transposes of sequence-first
//! attention, and decomposed RMSNorm. Each case is the exporter's shape of
//! the pattern, cut to a few dims; `tests/transformers_exported.rs` runs the
//! whole exported models.

use super::{attention, graph, ops, run};

#[test]
fn sdpa_with_split_scale_nan_guard_and_repeated_kv_heads() {
    // Q [1,4,3,2]; K and V [1,2,3,2] repeated to 4 heads; scale 0.5 split as
    // sqrt(0.5) on Q and on K^T; softmax guarded by where(isnan).
    let src = graph(
        r#"  %0 = input "q" : f32[1,4,3,2]
  %1 = input "k" : f32[1,2,3,2]
  %2 = input "v" : f32[1,2,3,2]
  %3 = input "mask" : f32[1,1,3,3]
  %4 = constant i64[1] [2] : i64[1]
  %5 = unsqueeze(%1, %4) : f32[1,2,1,3,2]  # KU
  %6 = constant i64[5] [1, 2, 2, 3, 2] : i64[5]
  %7 = expand(%5, %6) : f32[1,2,2,3,2]  # KE
  %8 = constant i64[4] [1, 4, 3, 2] : i64[4]
  %9 = reshape(%7, %8) {allowzero=false} : f32[1,4,3,2]  # KR
  %10 = transpose(%9) {perm=[0, 1, 3, 2]} : f32[1,4,2,3]  # KT
  %11 = constant f32[] [0.70710677] : f32[]
  %12 = mul(%0, %11) : f32[1,4,3,2]  # QS
  %13 = mul(%10, %11) : f32[1,4,2,3]  # KS
  %14 = matmul(%12, %13) : f32[1,4,3,3]  # QK
  %15 = add(%14, %3) : f32[1,4,3,3]  # M
  %16 = softmax(%15) {axis=-1} : f32[1,4,3,3]  # P
  %17 = isnan(%16) : bool[1,4,3,3]  # N
  %18 = constant f32[] [0.0] : f32[]
  %19 = where(%17, %18, %16) : f32[1,4,3,3]  # G
  %20 = unsqueeze(%2, %4) : f32[1,2,1,3,2]  # VU
  %21 = expand(%20, %6) : f32[1,2,2,3,2]  # VE
  %22 = reshape(%21, %8) {allowzero=false} : f32[1,4,3,2]  # VR
  %23 = matmul(%19, %22) : f32[1,4,3,2]  # Y
  output "y" = %23
"#,
    );
    let g = run(&["fuse-attention", "simplify", "dce"], &src, None).unwrap();
    assert_eq!(ops(&g), ["attention"], "{}", rlx_ir::text::print_graph(&g));
    let a = attention(&g);
    assert!((a.scale.unwrap() - 0.5).abs() < 1e-6, "{:?}", a.scale);
    assert!(a.has_mask);
}

#[test]
fn a_nan_guard_other_than_zero_is_not_absorbed() {
    let src = graph(
        r#"  %0 = input "q" : f32[1,2,3,2]
  %1 = input "kt" : f32[1,2,2,3]
  %2 = input "v" : f32[1,2,3,2]
  %3 = matmul(%0, %1) : f32[1,2,3,3]  # QK
  %4 = softmax(%3) {axis=-1} : f32[1,2,3,3]  # P
  %5 = isnan(%4) : bool[1,2,3,3]  # N
  %6 = constant f32[] [1.0] : f32[]
  %7 = where(%5, %6, %4) : f32[1,2,3,3]  # G
  %8 = matmul(%7, %2) : f32[1,2,3,2]  # Y
  output "y" = %8
"#,
    );
    let g = run(&["fuse-attention"], &src, None).unwrap();
    assert!(
        !ops(&g).contains(&"attention"),
        "{}",
        rlx_ir::text::print_graph(&g)
    );
}

#[test]
fn batched_k_transposes_become_four_d_ones() {
    // The dynamo exporter's K^T: [B,H,T,D] -> [B*H,T,D] -> [B*H,D,T] -> [B,H,D,T].
    let src = graph(
        r#"  %0 = input "k" : f32[2,3,5,4]
  %1 = constant i64[3] [6, 5, 4] : i64[3]
  %2 = reshape(%0, %1) {allowzero=false} : f32[6,5,4]  # R1
  %3 = transpose(%2) {perm=[0, 2, 1]} : f32[6,4,5]  # T
  %4 = constant i64[4] [2, 3, 4, 5] : i64[4]
  %5 = reshape(%3, %4) {allowzero=false} : f32[2,3,4,5]  # R2
  output "kt" = %5
"#,
    );
    let g = run(&["simplify", "dce"], &src, None).unwrap();
    let text = rlx_ir::text::print_graph(&g);
    assert_eq!(ops(&g), ["transpose"], "{text}");
    assert!(text.contains("perm=[0, 1, 3, 2]"), "{text}");
}

#[test]
fn transposes_of_unit_dims_are_views() {
    let src = graph(
        r#"  %0 = input "x" : f32[1,17,64]
  %1 = transpose(%0) {perm=[1, 0, 2]} : f32[17,1,64]  # T
  %2 = transpose(%0) {perm=[2, 1, 0]} : f32[64,17,1]  # U
  output "a" = %1
  output "b" = %2
"#,
    );
    let g = run(&["simplify", "dce"], &src, None).unwrap();
    // The first keeps every element in place; the second does not.
    assert_eq!(
        ops(&g),
        ["reshape", "transpose"],
        "{}",
        rlx_ir::text::print_graph(&g)
    );
}

#[test]
fn decomposed_rms_norms_fuse() {
    for (sq, inv) in [
        (
            "mul(%0, %0)",
            "%6 = reciprocal(%5) : f32[2,1]  # I\n  %7 = mul(%0, %6) : f32[2,4]  # N",
        ),
        (
            "pow(%0, %9)",
            "%6 = div(%8, %5) : f32[2,1]  # I\n  %7 = mul(%6, %0) : f32[2,4]  # N",
        ),
    ] {
        let src = graph(&format!(
            r#"  %0 = input "x" : f32[2,4]
  %1 = constant i64[1] [-1] : i64[1]
  %8 = constant f32[] [1.0] : f32[]
  %9 = constant f32[] [2.0] : f32[]
  %2 = {sq} : f32[2,4]  # SQ
  %3 = reduce_mean(%2, %1) {{keepdims=true, noop_with_empty_axes=false}} : f32[2,1]  # V
  %10 = constant f32[] [1e-6] : f32[]
  %4 = add(%3, %10) : f32[2,1]  # E
  %5 = sqrt(%4) : f32[2,1]  # S
  {inv}
  %11 = constant f32[4] [1.0, 2.0, 3.0, 4.0] : f32[4]
  %12 = mul(%11, %7) : f32[2,4]  # G
  output "y" = %12
"#
        ));
        let g = run(&["fuse-layer-norm", "dce"], &src, None).unwrap();
        assert_eq!(ops(&g), ["rms_norm"], "{}", rlx_ir::text::print_graph(&g));
    }
}

#[test]
fn kv_head_splits_are_read_in_place() {
    // Q comes rotated in 4-D; V is a head split of [B,T,H*D]: V alone is
    // read in 3-D.
    let src = graph(
        r#"  %0 = input "q" : f32[1,2,3,4]
  %1 = input "k" : f32[1,2,3,4]
  %2 = input "v" : f32[1,3,8]
  %3 = constant i64[4] [1, 3, 2, 4] : i64[4]
  %4 = reshape(%2, %3) {allowzero=false} : f32[1,3,2,4]  # VR
  %5 = transpose(%4) {perm=[0, 2, 1, 3]} : f32[1,2,3,4]  # VT
  %6 = attention(%0, %1, %5) {q_num_heads=0, kv_num_heads=0, scale=none, is_causal=true, softcap=0.0, qk_matmul_output_mode=0, has_mask=false, has_past=false, has_nonpad=false, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none} : f32[1,2,3,4]  # A
  output "y" = %6
"#,
    );
    let g = run(&["fuse-attention", "dce"], &src, None).unwrap();
    assert_eq!(ops(&g), ["attention"], "{}", rlx_ir::text::print_graph(&g));
    assert_eq!(attention(&g).kv_num_heads, 2);
}

#[test]
fn split_half_rotations_become_rotary_embeddings_on_the_projection() {
    // x3 [1,2,4] split into 2 heads of 2; cos/sin [1,1,2,2] with equal halves.
    let src = graph(
        r#"  %0 = input "x" : f32[1,2,4]
  %1 = constant i64[4] [1, 2, 2, 2] : i64[4]
  %2 = reshape(%0, %1) {allowzero=false} : f32[1,2,2,2]  # R
  %3 = transpose(%2) {perm=[0, 2, 1, 3]} : f32[1,2,2,2]  # T
  %4 = constant f32[1,1,2,2] [0.5, 0.5, 0.25, 0.25] : f32[1,1,2,2]
  %5 = constant f32[1,1,2,2] [0.75, 0.75, 0.125, 0.125] : f32[1,1,2,2]
  %6 = constant i64[1] [0] : i64[1]
  %7 = constant i64[1] [1] : i64[1]
  %8 = constant i64[1] [9223372036854775807] : i64[1]
  %9 = constant i64[1] [-1] : i64[1]
  %10 = slice(%3, %7, %8, %9, %7) : f32[1,2,2,1]  # HI
  %11 = neg(%10) : f32[1,2,2,1]  # N
  %12 = slice(%3, %6, %7, %9, %7) : f32[1,2,2,1]  # LO
  %13 = concat(%11, %12) {axis=-1} : f32[1,2,2,2]  # C
  %14 = mul(%3, %4) : f32[1,2,2,2]  # XC
  %15 = mul(%13, %5) : f32[1,2,2,2]  # RS
  %16 = add(%14, %15) : f32[1,2,2,2]  # Y
  output "y" = %16
"#,
    );
    let g = run(&["fuse-rope", "dce"], &src, None).unwrap();
    let text = rlx_ir::text::print_graph(&g);
    assert_eq!(
        ops(&g),
        ["reshape", "rotary_embedding", "transpose"],
        "{text}"
    );
    assert!(text.contains("num_heads=2"), "{text}");
    // Halves that differ are not a split-half rotation.
    let bad = src.replace("[0.5, 0.5, 0.25, 0.25]", "[0.5, 0.4, 0.25, 0.25]");
    let g = run(&["fuse-rope", "dce"], &bad, None).unwrap();
    assert!(!ops(&g).contains(&"rotary_embedding"));
}

/// One decode position of a TorchScript-exported Llama: the tables are
/// computed from `position_ids` at run time (`cos(concat(f, f))`), so the
/// rotation takes their first half, sliced once.
const COMPUTED_TABLES: &str = r#"  %0 = input "q" : f32[1,1,8]
  %1 = input "position_ids" : i64[1,1]
  %2 = constant i64[4] [1, 2, 1, 4] : i64[4]
  %3 = reshape(%0, %2) {allowzero=false} : f32[1,2,1,4]  # Heads
  %4 = constant f32[1,2,1] [1.0, 0.01] : f32[1,2,1]
  %5 = constant i64[1] [1] : i64[1]
  %6 = unsqueeze(%1, %5) : i64[1,1,1]
  %7 = cast(%6) {to=f32, saturate=true, round_mode=up} : f32[1,1,1]
  %8 = matmul(%4, %7) : f32[1,2,1]
  %9 = constant i64[3] [1, 1, 2] : i64[3]
  %10 = reshape(%8, %9) {allowzero=false} : f32[1,1,2]
  %11 = concat(%10, %10) {axis=-1} : f32[1,1,4]  # Freqs
  %12 = cos(%11) : f32[1,1,4]
  %13 = unsqueeze(%12, %5) : f32[1,1,1,4]  # Cos
  %14 = sin(%11) : f32[1,1,4]
  %15 = unsqueeze(%14, %5) : f32[1,1,1,4]  # Sin
  %16 = constant i64[1] [2] : i64[1]
  %17 = constant i64[1] [9223372036854775807] : i64[1]
  %18 = constant i64[1] [3] : i64[1]
  %19 = constant i64[1] [0] : i64[1]
  %20 = slice(%3, %16, %17, %18, %5) : f32[1,2,1,2]  # HI
  %21 = neg(%20) : f32[1,2,1,2]
  %22 = slice(%3, %19, %16, %18, %5) : f32[1,2,1,2]  # LO
  %23 = concat(%21, %22) {axis=-1} : f32[1,2,1,4]
  %24 = mul(%3, %13) : f32[1,2,1,4]
  %25 = mul(%23, %15) : f32[1,2,1,4]
  %26 = add(%24, %25) : f32[1,2,1,4]  # Y
  output "y" = %26
"#;

#[test]
fn split_half_rotations_with_tables_computed_at_run_time() {
    let src = graph(COMPUTED_TABLES);
    let g = run(&["fuse-rope", "dce"], &src, None).unwrap();
    let text = rlx_ir::text::print_graph(&g);
    let ops = ops(&g);
    assert!(ops.contains(&"rotary_embedding"), "{text}");
    assert!(!ops.contains(&"neg"), "{text}");
    // Each table's first half, as [B, S, D/2].
    assert_eq!(ops.iter().filter(|o| **o == "slice").count(), 2, "{text}");
    assert!(text.contains("rotary_embedding(%3, "), "{text}");
    assert!(text.contains(": f32[1,1,2]  # [Y.cos.rows]"), "{text}");
    // A table whose halves are not equal by construction is left alone.
    let other = src.replace(
        "%11 = concat(%10, %10) {axis=-1}",
        "%30 = neg(%10) : f32[1,1,2]\n  %11 = concat(%10, %30) {axis=-1}",
    );
    let g = run(&["fuse-rope", "dce"], &other, None).unwrap();
    assert!(!super::ops(&g).contains(&"rotary_embedding"));
}
