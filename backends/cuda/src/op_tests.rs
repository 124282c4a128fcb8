//! Device-free checks of the cast, topk, one-hot, einsum, center-crop-pad
//! and non-f32 matmul lowerings: IR graphs of each op and dtype planned,
//! and every module they generate compiled by NVRTC.

use crate::tests::{compile_all, cublaslt, planned, planned_with};

/// Casts into and out of every float8, float4, E8M0 and sub-byte integer
/// dtype, and bitcasts.
fn casts() -> String {
    let odd = [
        "f8e4m3fn",
        "f8e4m3fnuz",
        "f8e5m2",
        "f8e5m2fnuz",
        "f4e2m1",
        "f8e8m0",
        "i4",
        "u4",
        "i2",
        "u2",
    ];
    let mut s = String::from("  %0 = input \"x\" : f32[3,5]\n");
    let mut n = 1;
    for d in odd {
        s.push_str(&format!(
            "  %{n} = cast(%0) {{to={d}, saturate=false, round_mode=up}} : {d}[3,5]\n"
        ));
        for to in ["f32", "f16", "bf16", "i8", "u64", "bool", "f8e4m3fn"] {
            s.push_str(&format!(
                "  %{} = cast(%{n}) {{to={to}, saturate=true, round_mode=nearest}} : {to}[3,5]\n",
                n + 1
            ));
            s.push_str(&format!("  output \"c{}\" = %{}\n", n + 1, n + 1));
            n += 1;
        }
        n += 1;
    }
    s.push_str(&format!(
        "  %{n} = bitcast(%0) {{to=i32}} : i32[3,5]\n  output \"b\" = %{n}\n"
    ));
    s
}

/// TopK on short rows (shared memory), strided rows and a long row
/// (scratch), one-hot, einsum contractions and diagonals, center-crop-pad
/// and a pad whose value is a graph input.
fn selection(d: &str) -> String {
    format!(
        "  %0 = input \"x\" : {d}[3,5,4]
  %1 = constant i64[1] [2] : i64[1]
  %2:2 = topk(%0, %1) {{axis=1, largest=true, sorted=true}} : ({d}[3,2,4], i64[3,2,4])
  %3:2 = topk(%0, %1) {{axis=-1, largest=false, sorted=true}} : ({d}[3,5,2], i64[3,5,2])
  %4 = input \"long\" : {d}[2,10000]
  %5 = constant i64[1] [7] : i64[1]
  %6:2 = topk(%4, %5) {{axis=1, largest=true, sorted=true}} : ({d}[2,7], i64[2,7])
  %7 = input \"i\" : i64[3,2]
  %8 = constant i64[] [6] : i64[]
  %9 = input \"v\" : {d}[2]
  %10 = one_hot(%7, %8, %9) {{axis=1}} : {d}[3,6,2]
  %11 = input \"a\" : {d}[3,4]
  %12 = input \"b\" : {d}[4,5]
  %13 = einsum(%11, %12) {{equation=\"ij,jk->ik\"}} : {d}[3,5]
  %14 = input \"c\" : {d}[2,3,3]
  %15 = einsum(%14) {{equation=\"bii->bi\"}} : {d}[2,3]
  %16 = constant i64[3] [2,7,2] : i64[3]
  %17 = center_crop_pad(%0, %16) {{axes=[]}} : {d}[2,7,2]
  %18 = constant i64[6] [0,1,0,0,2,0] : i64[6]
  %19 = input \"pv\" : {d}[]
  %20 = pad(%0, %18, %19) {{mode=constant}} : {d}[3,8,4]
  %21 = input \"tk\" : i64[]
  %22 = trilu(%0, %21) {{upper=false}} : {d}[3,5,4]
  %23 = input \"ax\" : i32[]
  %24 = cumsum(%0, %23) {{exclusive=false, reverse=true}} : {d}[3,5,4]
  output \"a\" = %2.0
  output \"b\" = %2.1
  output \"c\" = %3.0
  output \"d\" = %3.1
  output \"e\" = %6.0
  output \"f\" = %6.1
  output \"g\" = %10
  output \"h\" = %13
  output \"i\" = %15
  output \"j\" = %17
  output \"k\" = %20
  output \"l\" = %22
  output \"m\" = %24
"
    )
}

/// Key/value cache writes: linear from per-row indices, circular, and from
/// position 0 without indices.
fn cache_writes(d: &str) -> String {
    format!(
        "  %0 = input \"cache\" : {d}[2,3,6,4]
  %1 = input \"new\" : {d}[2,3,2,4]
  %2 = input \"at\" : i64[2]
  %3 = tensor_scatter(%0, %1, %2) {{axis=2, circular=false, has_indices=true}} : {d}[2,3,6,4]
  %4 = tensor_scatter(%0, %1, %2) {{axis=-2, circular=true, has_indices=true}} : {d}[2,3,6,4]
  %5 = tensor_scatter(%0, %1) {{axis=2, circular=false, has_indices=false}} : {d}[2,3,6,4]
  output \"a\" = %3
  output \"b\" = %4
  output \"c\" = %5
"
    )
}

/// Batched and vector matrix products on f16, bf16 and f64 (cuBLASLt).
fn matmuls(d: &str) -> String {
    format!(
        "  %0 = input \"x\" : {d}[2,4,8]
  %1 = input \"w\" : {d}[8,5]
  %2 = matmul(%0, %1) : {d}[2,4,5]
  %3 = input \"v\" : {d}[5]
  %4 = matmul(%2, %3) : {d}[2,4]
  output \"a\" = %2
  output \"b\" = %4
"
    )
}

#[test]
fn half_matmuls_are_gemms_of_their_dtype() {
    for d in ["f16", "bf16", "f64"] {
        let s = planned_with(&matmuls(d), &cublaslt()).to_string();
        assert_eq!(s.matches(&format!("gemm_{d} ")).count(), 2, "{s}");
        let s = planned(&matmuls(d)).to_string();
        assert_eq!(s.matches(&format!("tile_gemm_{d}")).count(), 2, "{s}");
    }
    insta::assert_snapshot!(planned_with(&matmuls("bf16"), &cublaslt()).to_string());
}

/// Quantization into and out of float8 and float4, per tensor and per axis.
fn minifloat_quant(d: &str, q: &str) -> String {
    format!(
        "  %0 = input \"x\" : {d}[2,6]
  %1 = input \"s\" : {d}[6]
  %2 = input \"z\" : {q}[6]
  %3 = quantize_linear(%0, %1, %2) {{axis=1, block_size=0, saturate=false}} : {q}[2,6]
  %4 = input \"t\" : {d}[]
  %6 = input \"w\" : {q}[]
  %5 = dequantize_linear(%3, %4, %6) {{axis=1, block_size=0}} : {d}[2,6]
  output \"q\" = %3
  output \"y\" = %5
"
    )
}

fn graphs() -> Vec<String> {
    let mut v = vec![casts()];
    for d in ["f32", "f16", "bf16"] {
        for q in ["f8e4m3fn", "f8e5m2fnuz", "f4e2m1"] {
            v.push(minifloat_quant(d, q));
        }
    }
    for d in ["f32", "f16", "bf16", "f64", "i64", "i32", "u32"] {
        v.push(selection(d));
    }
    for d in ["f32", "f16", "i64", "u8"] {
        v.push(cache_writes(d));
    }
    v
}

#[test]
fn selection_schedule() {
    insta::assert_snapshot!(planned(&selection("f32")).to_string());
}

#[test]
fn op_graphs_plan_and_their_modules_compile() {
    let schedules: Vec<_> = graphs().iter().map(|g| planned(g)).collect();
    compile_all(&schedules);
}
