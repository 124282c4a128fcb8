//! Device-free checks of the data-movement, indexing, scatter, resize,
//! quant and loss families: IR graphs exercising each op over several
//! dtypes are planned (one snapshotted), and every module they generate is
//! compiled by NVRTC (through `tests::compile_all`).

use crate::tests::{compile_all, graph, planned};

/// Movement over 1-, 2-, 4- and 8-byte elements.
pub const MOVEMENT: &str = "  %0 = input \"x\" : f16[2,3,4]
  %1 = transpose(%0) {perm=[2,0,1]} : f16[4,2,3]
  %2 = constant i64[1] [1] : i64[1]
  %3 = constant i64[1] [3] : i64[1]
  %4 = constant i64[1] [2] : i64[1]
  %5 = slice(%0, %2, %3, %4) : f16[2,3,2]
  %6 = input \"b\" : u8[2,3]
  %7 = input \"c\" : u8[2,2]
  %8 = concat(%6, %7) {axis=1} : u8[2,5]
  %9:2 = split(%8) {axis=1, num_outputs=2} : (u8[2,3], u8[2,2])
  %10 = input \"d\" : i64[3,1]
  %11 = constant i64[2] [3,4] : i64[2]
  %12 = expand(%10, %11) : i64[3,4]
  %13 = input \"e\" : f32[1,8,2,3]
  %14 = depth_to_space(%13) {blocksize=2, mode=crd} : f32[1,2,4,6]
  %15 = space_to_depth(%14) {blocksize=2, mode=dcr} : f32[1,8,2,3]
  %16 = constant i64[8] [0,0,1,2,0,0,1,0] : i64[8]
  %17 = constant f32[] [1.5] : f32[]
  %18 = pad(%13, %16, %17) {mode=reflect} : f32[1,8,4,4]
  %19 = constant i64[2] [1,2] : i64[2]
  %20 = tile(%10, %19) : i64[3,2]
  output \"t\" = %1
  output \"s\" = %5
  output \"p\" = %9.0
  output \"q\" = %9.1
  output \"e\" = %12
  output \"d\" = %15
  output \"pad\" = %18
  output \"tile\" = %20
";

/// Gathers, trilu and cumulative sums and products.
pub const INDEXING: &str = "  %0 = input \"x\" : bf16[5,4]
  %1 = input \"i\" : i64[3]
  %2 = gather(%0, %1) {axis=0} : bf16[3,4]
  %3 = input \"j\" : i32[2,4]
  %4 = gather_elements(%0, %3) {axis=0} : bf16[2,4]
  %5 = input \"d\" : i8[2,3,4]
  %6 = input \"k\" : i64[2,1,1]
  %7 = gather_nd(%5, %6) {batch_dims=1} : i8[2,1,4]
  %8 = trilu(%5) {upper=true} : i8[2,3,4]
  %9 = input \"c\" : f32[4,100]
  %10 = constant i64[] [1] : i64[]
  %11 = cumsum(%9, %10) {exclusive=true, reverse=true} : f32[4,100]
  %12 = input \"e\" : i64[3,64]
  %13 = constant i64[] [0] : i64[]
  %14 = cumprod(%12, %13) {exclusive=false, reverse=false} : i64[3,64]
  output \"g\" = %2
  output \"ge\" = %4
  output \"gn\" = %7
  output \"t\" = %8
  output \"cs\" = %11
  output \"cp\" = %14
";

/// Scatters with and without reductions.
pub const SCATTER: &str = "  %0 = input \"x\" : f16[4,3]
  %1 = input \"i\" : i64[2,3]
  %2 = input \"u\" : f16[2,3]
  %3 = scatter_elements(%0, %1, %2) {axis=0, reduction=add} : f16[4,3]
  %4 = input \"y\" : i32[4,3]
  %5 = input \"j\" : i64[2,1]
  %6 = input \"v\" : i32[2,3]
  %7 = scatter_nd(%4, %5, %6) {reduction=max} : i32[4,3]
  %8 = input \"b\" : bool[4,3]
  %9 = input \"w\" : bool[2,3]
  %10 = scatter_nd(%8, %5, %9) {reduction=none} : bool[4,3]
  output \"a\" = %3
  output \"b\" = %7
  output \"c\" = %10
";

/// Resizes over two axes (a scratch pass) and one, float and integer.
pub const RESIZE: &str = "  %0 = input \"x\" : f32[1,1,4,4]
  %1 = constant f32[0] [] : f32[0]
  %2 = constant f32[4] [1,1,2,1.5] : f32[4]
  %3 = resize(%0, %1, %2) {mode=linear, coordinate_transformation_mode=half_pixel, nearest_mode=round_prefer_floor, cubic_coeff_a=-0.75, exclude_outside=false, extrapolation_value=0, antialias=false, axes=[], keep_aspect_ratio_policy=stretch, target=scales} : f32[1,1,8,6]
  %4 = input \"u\" : u8[1,3,4,4]
  %5 = constant i64[4] [1,3,2,4] : i64[4]
  %6 = resize(%4, %1, %5) {mode=cubic, coordinate_transformation_mode=half_pixel, nearest_mode=round_prefer_floor, cubic_coeff_a=-0.75, exclude_outside=false, extrapolation_value=0, antialias=false, axes=[], keep_aspect_ratio_policy=stretch, target=sizes} : u8[1,3,2,4]
  output \"a\" = %3
  output \"b\" = %6
";

/// Quantization per tensor, per axis and blocked; NllLoss.
pub const QUANT_LOSS: &str = "  %0 = input \"x\" : f32[2,6]
  %1 = constant f32[] [0.5] : f32[]
  %2 = constant i8[] [3] : i8[]
  %3 = quantize_linear(%0, %1, %2) {axis=1, block_size=0, saturate=true} : i8[2,6]
  %4 = constant f32[6] [1,2,3,4,5,6] : f32[6]
  %5 = constant i8[6] [0,1,2,3,4,5] : i8[6]
  %6 = dequantize_linear(%3, %4, %5) {axis=1, block_size=0} : f32[2,6]
  %7 = input \"h\" : f16[2,6]
  %8 = constant f16[2,2] [1,2,3,4] : f16[2,2]
  %9 = constant u16[2,2] [0,1,2,3] : u16[2,2]
  %10 = quantize_linear(%7, %8, %9) {axis=1, block_size=3, saturate=true} : u16[2,6]
  %11 = input \"p\" : f32[3,5]
  %12 = input \"t\" : i64[3]
  %13 = nll_loss(%11, %12) {reduction=mean, ignore_index=1} : f32[]
  %14 = nll_loss(%11, %12) {reduction=none, ignore_index=none} : f32[3]
  output \"q\" = %6
  output \"r\" = %10
  output \"l\" = %13
  output \"n\" = %14
";

#[test]
fn movement_schedule() {
    insta::assert_snapshot!(planned(MOVEMENT).to_string());
}

#[test]
fn data_modules_compile_with_nvrtc() {
    compile_all(&[
        planned(MOVEMENT),
        planned(INDEXING),
        planned(SCATTER),
        planned(RESIZE),
        planned(QUANT_LOSS),
    ]);
}

#[test]
fn graphs_parse() {
    for g in [MOVEMENT, INDEXING, SCATTER, RESIZE, QUANT_LOSS] {
        let _ = graph(g);
    }
}

#[test]
fn resize_schedule_places_tap_tables_past_scratch() {
    let s = planned(RESIZE);
    insta::assert_snapshot!(s.to_string());
    // Constants the lowering made are uploaded and disjoint from scratch.
    assert!(s.consts.len() >= 3, "{}", s.consts.len());
}
