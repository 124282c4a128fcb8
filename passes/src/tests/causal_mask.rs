//! `causal-mask`: the decoder masks PyTorch's exporters write, back to the
//! causal flag; masks it must leave alone.

use super::{attention, graph, ops, run};

/// `where(and(T, P), 0, neg)` over 3 positions feeding an attention, `T`
/// the constant `tri` (row-major 3x3), `P` the padding mask `[1,1,1,3]`.
fn decoder(tri: [bool; 9], neg: &str) -> String {
    let t: Vec<String> = tri.iter().map(|b| b.to_string()).collect();
    graph(&format!(
        r#"  %0 = input "q" : f32[1,2,3,4]
  %1 = input "k" : f32[1,2,3,4]
  %2 = input "v" : f32[1,2,3,4]
  %3 = input "pad" : bool[1,1,1,3]
  %4 = constant bool[1,1,3,3] [{}] : bool[1,1,3,3]
  %5 = and(%4, %3) : bool[1,1,3,3]  # C
  %6 = constant f32[] [0.0] : f32[]
  %7 = constant f32[] [{neg}] : f32[]
  %8 = where(%5, %6, %7) : f32[1,1,3,3]  # M
  %9 = attention(%0, %1, %2, %8) {{q_num_heads=2, kv_num_heads=2, scale=0.5, is_causal=false, softcap=0.0, qk_matmul_output_mode=0, has_mask=true, has_past=false, has_nonpad=false, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none}} : f32[1,2,3,4]  # A
  output "y" = %9
"#,
        t.join(", ")
    ))
}

const LOWER: [bool; 9] = [true, false, false, true, true, false, true, true, true];

#[test]
fn a_written_lower_triangle_becomes_the_flag_and_the_padding_stays_per_key() {
    for neg in ["-3.4028235e38", "-inf"] {
        let g = run(&["causal-mask", "dce"], &decoder(LOWER, neg), None).unwrap();
        let text = rlx_ir::text::print_graph(&g);
        let a = attention(&g);
        assert!(a.is_causal && a.has_mask, "{neg}\n{text}");
        assert_eq!(ops(&g), ["attention", "where"], "{neg}\n{text}");
        // The mask left is the padding's: one bias per key.
        assert!(text.contains("where(%3"), "{text}");
        assert!(text.contains(": f32[1,1,1,3]"), "{text}");
    }
}

#[test]
fn a_triangle_alone_leaves_no_mask() {
    let src = graph(
        r#"  %0 = input "q" : f32[1,3,8]
  %1 = input "k" : f32[1,3,8]
  %2 = input "v" : f32[1,3,8]
  %3 = constant bool[3,3] [true, false, false, true, true, false, true, true, true] : bool[3,3]
  %4 = constant f32[1] [0.0] : f32[1]
  %5 = constant f32[1] [-inf] : f32[1]
  %6 = where(%3, %4, %5) : f32[3,3]  # M
  %7 = attention(%0, %1, %2, %6) {q_num_heads=2, kv_num_heads=2, scale=0.5, is_causal=false, softcap=0.0, qk_matmul_output_mode=0, has_mask=true, has_past=false, has_nonpad=false, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none} : f32[1,3,8]  # A
  output "y" = %7
"#,
    );
    let g = run(&["causal-mask", "dce"], &src, None).unwrap();
    let a = attention(&g);
    assert!(
        a.is_causal && !a.has_mask,
        "{}",
        rlx_ir::text::print_graph(&g)
    );
    assert_eq!(ops(&g), ["attention"]);
}

#[test]
fn other_masks_stay() {
    // An upper triangle, a lower one missing a diagonal entry, and a bias
    // that does not hide (-1e4: the scores keep their order).
    let upper = [true, true, true, false, true, true, false, false, true];
    let mut holed = LOWER;
    holed[4] = false;
    for (tri, neg) in [(upper, "-inf"), (holed, "-inf"), (LOWER, "-10000.0")] {
        let g = run(&["causal-mask", "dce"], &decoder(tri, neg), None).unwrap();
        let a = attention(&g);
        assert!(!a.is_causal && a.has_mask, "{tri:?} {neg}");
        assert_eq!(ops(&g), ["and", "attention", "where"], "{tri:?} {neg}");
    }
}
