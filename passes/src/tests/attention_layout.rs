//! `fold-attention-layout`: Q, K and V read as views of what they were cut
//! from (a packed projection, three projections of one input merged), and
//! left alone where the target cannot run the result.

use rlx_ir::ops::HeadView;

use super::{attention, graph, ops, run, Without};

/// `[1, 2 heads, 3 positions, 2]` at column `at` of rows `row` wide.
fn view(at: usize, row: usize) -> HeadView {
    HeadView {
        dims: [1, 2, 3, 2],
        offset: at,
        strides: [3 * row, 2, row],
    }
}

const ATTN: &str = "{q_num_heads=2, kv_num_heads=2, scale=none, is_causal=false, softcap=0.0, \
qk_matmul_output_mode=0, has_mask=false, has_past=false, has_nonpad=false, num_outputs=1, \
left_window_size=-1, right_window_size=-1, softmax_precision=none}";

fn projection(n: usize, w: &str, b: &str) -> String {
    format!(
        "  %{w} = constant f32[4,4] [{}] : f32[4,4]\n  %{b} = constant f32[4] [0.5, 0.25, 0.0, -1.0] : f32[4]\n  %{n} = fused_matmul(%0, %{w}, %{b}) {{activation=none}} : f32[1,3,4]  # P{n}\n",
        (0..16).map(|i| format!("{}.0", i % 5)).collect::<Vec<_>>().join(", ")
    )
}

#[test]
fn three_projections_of_one_input_become_one() {
    let mut body = String::from("  %0 = input \"x\" : f32[1,3,4]\n");
    body += &projection(3, "1", "2");
    body += &projection(6, "4", "5");
    body += &projection(9, "7", "8");
    body +=
        &format!("  %10 = attention(%3, %6, %9) {ATTN} : f32[1,3,4]  # A\n  output \"y\" = %10\n");
    let g = run(&["fold-attention-layout"], &graph(&body), None).unwrap();
    assert_eq!(ops(&g), ["attention", "fused_matmul"]);
    let a = attention(&g);
    assert_eq!(a.views.0, [view(0, 12), view(4, 12), view(8, 12)]);
}

const PACKED: &str = r#"  %0 = input "p" : f32[1,3,12]
  %1:3 = split(%0) {axis=2, num_outputs=3} : (f32[1,3,4], f32[1,3,4], f32[1,3,4])  # S
"#;

#[test]
fn a_split_packed_projection_is_read_in_place() {
    let body = format!("{PACKED}  %2 = attention(%1.0, %1.1, %1.2) {ATTN} : f32[1,3,4]  # A\n  output \"y\" = %2\n");
    let g = run(&["fold-attention-layout"], &graph(&body), None).unwrap();
    assert_eq!(ops(&g), ["attention"]);
    assert_eq!(
        attention(&g).views.0,
        [view(0, 12), view(4, 12), view(8, 12)]
    );
}

#[test]
fn a_target_without_views_keeps_the_split() {
    let body = format!("{PACKED}  %2 = attention(%1.0, %1.1, %1.2) {ATTN} : f32[1,3,4]  # A\n  output \"y\" = %2\n");
    let g = run(
        &["fold-attention-layout"],
        &graph(&body),
        Some(&Without(&["attention"])),
    )
    .unwrap();
    assert_eq!(ops(&g), ["attention", "split"]);
    assert!(attention(&g).views.is_empty());
}

#[test]
fn heads_that_no_strides_can_reach_stay_copies() {
    // K's heads interleave its positions: [1,3,2,2] -> transpose -> [1,2,3,2]
    // -> merged back to [1,6,2] -> reshaped as [1,3,4] reads position-major
    // rows that are not contiguous in the packed input.
    let body = format!(
        r#"{PACKED}  %3 = constant i64[4] [1, 3, 2, 2] : i64[4]
  %4 = reshape(%1.1, %3) {{allowzero=false}} : f32[1,3,2,2]  # R
  %5 = transpose(%4) {{perm=[0, 2, 1, 3]}} : f32[1,2,3,2]  # T
  %6 = constant i64[3] [1, 3, 4] : i64[3]
  %7 = reshape(%5, %6) {{allowzero=false}} : f32[1,3,4]  # M
  %8 = attention(%1.0, %7, %1.2) {ATTN} : f32[1,3,4]  # A
  output "y" = %8
"#
    );
    let g = run(&["fold-attention-layout"], &graph(&body), None).unwrap();
    assert!(attention(&g).views.is_empty());
}

#[test]
fn views_round_trip_through_the_text_form() {
    let body = format!("{PACKED}  %2 = attention(%1.0, %1.1, %1.2) {ATTN} : f32[1,3,4]  # A\n  output \"y\" = %2\n");
    let g = run(&["fold-attention-layout"], &graph(&body), None).unwrap();
    let text = rlx_ir::text::print_graph(&g);
    assert!(
        text.contains("views=[[1, 2, 3, 2, 0, 36, 2, 12], [1, 2, 3, 2, 4, 36, 2, 12], [1, 2, 3, 2, 8, 36, 2, 12]]"),
        "{text}"
    );
    let back = rlx_ir::text::parse_graph(&text).unwrap();
    assert_eq!(attention(&back).views, attention(&g).views);
}
