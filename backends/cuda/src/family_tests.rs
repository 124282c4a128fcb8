//! Device-free checks of the element-wise, reduce, softmax and norm
//! families: every element-wise function on every dtype the CUDA printer
//! takes, generated and compiled by NVRTC (in batches, each node's kernel in
//! its own namespace); small IR graphs of each op and dtype planned (the
//! modules they generate compiled too), with a reviewed snapshot.

use rlx_gpu::kernels::elementwise::cuda::{kernel, Indexing, HELPERS};
use rlx_gpu::kernels::elementwise::{build, params, Geometry};
use rlx_ir::ops::{
    Binary, BinaryKind, Cast, Clip, Compare, CompareKind, Gelu, GeluApprox, Logical, LogicalKind,
    RoundMode, Unary, UnaryKind, Where,
};
use rlx_ir::{DType, Op};

use crate::kernels::PRELUDE;
use crate::tests::{nvrtc_or_skip, planned};

const DTYPES: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::Bool,
];

/// Every element-wise node shape: (op, input dtypes).
fn elementwise_nodes() -> Vec<(Op, Vec<DType>)> {
    let mut v = Vec::new();
    for &d in DTYPES {
        for &kind in UnaryKind::ALL {
            v.push((Op::Unary(Unary { kind }), vec![d]));
        }
        for &kind in BinaryKind::ALL {
            v.push((Op::Binary(Binary { kind }), vec![d, d]));
        }
        for &kind in CompareKind::ALL {
            v.push((Op::Compare(Compare { kind }), vec![d, d]));
        }
        v.push((Op::Where(Where {}), vec![DType::Bool, d, d]));
        v.push((Op::Clip(Clip {}), vec![d, d, d]));
        for &approximate in GeluApprox::ALL {
            v.push((Op::Gelu(Gelu { approximate }), vec![d]));
        }
        for &to in DTYPES {
            let c = Cast {
                to,
                saturate: true,
                round_mode: RoundMode::Nearest,
            };
            v.push((Op::Cast(c), vec![d]));
        }
    }
    for &kind in LogicalKind::ALL {
        v.push((
            Op::Logical(Logical { kind }),
            vec![DType::Bool, DType::Bool],
        ));
    }
    for e in [DType::I32, DType::I64, DType::F64] {
        let pow = Op::Binary(Binary {
            kind: BinaryKind::Pow,
        });
        v.push((pow.clone(), vec![DType::F32, e]));
        v.push((pow, vec![DType::F16, e]));
    }
    v
}

#[test]
fn every_elementwise_kernel_compiles_with_nvrtc() {
    if !nvrtc_or_skip("the elementwise compile test") {
        return;
    }
    let c = crate::tests::test_compiler();
    let mut bodies = Vec::new();
    let (mut printed, mut refused) = (0, 0);
    for (op, dtypes) in elementwise_nodes() {
        let Ok(e) = build(&op, &dtypes) else {
            refused += 1;
            continue;
        };
        let shapes: Vec<&[usize]> = vec![&[2, 1, 3][..]; dtypes.len()];
        let g = Geometry::new(&[2, 4, 3], &shapes).unwrap();
        let p = params(&g, &e.lits).unwrap();
        let k = bodies.len();
        let strided = kernel(&e, Indexing::Strided(g.rank()), &p.layout, &format!("s{k}"));
        let Ok(strided) = strided else {
            if std::env::var_os("RLX_SHOW_REFUSED").is_some() {
                eprintln!("refused: {} on {dtypes:?}", op.name());
            }
            refused += 1;
            continue;
        };
        printed += 1;
        let flat = kernel(&e, Indexing::Contiguous, &p.layout, &format!("c{k}")).unwrap();
        for src in [strided, flat] {
            let body = src
                .strip_prefix(HELPERS)
                .expect("sources start with the helpers");
            bodies.push(format!("namespace n{} {{\n{body}}}\n", bodies.len()));
        }
    }
    // Every op kind prints on f32 at least; the count guards against a
    // printer that silently refuses everything.
    assert!(printed > 550, "{printed} printed, {refused} refused");
    let batches = bodies
        .chunks(200)
        .enumerate()
        .map(|(i, chunk)| {
            let src = format!("{PRELUDE}\n{HELPERS}\n{}", chunk.concat());
            (format!("elementwise_batch{i}"), src)
        })
        .collect();
    crate::tests::compile_once(&c, batches);
}

/// Reductions of every kind over inner, outer and all axes, argmax/argmin,
/// global pools, on a float and integer dtype each; long rows that split.
fn reductions(d: &str) -> String {
    let mut s = format!("  %0 = input \"x\" : {d}[4,6,5]\n  %1 = constant i64[1] [1] : i64[1]\n  %2 = constant i64[2] [0, 2] : i64[2]\n");
    let mut n = 3;
    let mut outs = Vec::new();
    let float = d.starts_with('f') || d.starts_with('b');
    for k in [
        "sum",
        "mean",
        "max",
        "min",
        "prod",
        "l1",
        "l2",
        "log_sum",
        "log_sum_exp",
        "sum_square",
    ] {
        if !float && matches!(k, "l2" | "log_sum" | "log_sum_exp") && d != "i32" {
            continue;
        }
        s.push_str(&format!("  %{n} = reduce_{k}(%0, %1) {{keepdims=true, noop_with_empty_axes=false}} : {d}[4,1,5]\n"));
        s.push_str(&format!(
            "  %{} = reduce_{k}(%0, %2) {{keepdims=false, noop_with_empty_axes=false}} : {d}[6]\n",
            n + 1
        ));
        outs.extend([n, n + 1]);
        n += 2;
    }
    for (k, last) in [("argmax", true), ("argmin", false)] {
        s.push_str(&format!(
            "  %{n} = {k}(%0) {{axis=-1, keepdims=false, select_last_index={last}}} : i64[4,6]\n"
        ));
        outs.push(n);
        n += 1;
    }
    s.push_str(&format!("  %{n} = input \"long\" : {d}[2,70000]\n"));
    s.push_str(&format!(
        "  %{} = reduce_sum(%{n}, %1) {{keepdims=false, noop_with_empty_axes=false}} : {d}[2]\n",
        n + 1
    ));
    s.push_str(&format!(
        "  %{} = argmax(%{n}) {{axis=1, keepdims=true, select_last_index=false}} : i64[2,1]\n",
        n + 2
    ));
    outs.extend([n + 1, n + 2]);
    n += 3;
    if float {
        for k in ["global_avg_pool", "global_max_pool"] {
            s.push_str(&format!("  %{n} = {k}(%0) {{p=0}} : {d}[4,6,1]\n"));
            outs.push(n);
            n += 1;
        }
        s.push_str(&format!(
            "  %{n} = global_lp_pool(%0) {{p=2}} : {d}[4,6,1]\n"
        ));
        outs.push(n);
    }
    for (i, o) in outs.iter().enumerate() {
        s.push_str(&format!("  output \"y{i}\" = %{o}\n"));
    }
    s
}

/// Softmax kinds on contiguous (short and long) and strided rows; norms
/// with and without bias and stats, on warp and block rows; residual norms.
fn rows(d: &str) -> String {
    format!(
        "  %0 = input \"x\" : {d}[4,6,5]
  %1 = softmax(%0) {{axis=-1}} : {d}[4,6,5]
  %2 = log_softmax(%0) {{axis=1}} : {d}[4,6,5]
  %3 = hardmax(%0) {{axis=-1}} : {d}[4,6,5]
  %4 = input \"long\" : {d}[3,5000]
  %5 = softmax(%4) {{axis=1}} : {d}[3,5000]
  %6 = input \"s\" : {d}[5]
  %7 = input \"b\" : {d}[5]
  %8:3 = layer_norm(%0, %6, %7) {{axis=-1, epsilon=1e-5, stats=true}} : ({d}[4,6,5], f32[4,6,1], f32[4,6,1])
  %9 = rms_norm(%0, %6) {{axis=-1, epsilon=1e-6}} : {d}[4,6,5]
  %10 = input \"ls\" : {d}[5000]
  %11 = layer_norm(%4, %10) {{axis=-1, epsilon=1e-5, stats=false}} : {d}[3,5000]
  %12 = input \"r\" : {d}[4,6,5]
  %13:2 = residual_norm(%0, %12, %6, %7) {{axis=-1, epsilon=1e-5, rms=false}} : ({d}[4,6,5], {d}[4,6,5])
  %14:2 = residual_norm(%0, %12, %6) {{axis=-1, epsilon=1e-5, rms=true}} : ({d}[4,6,5], {d}[4,6,5])
  output \"a\" = %1
  output \"b\" = %2
  output \"c\" = %3
  output \"d\" = %5
  output \"e\" = %8.0
  output \"f\" = %8.1
  output \"g\" = %8.2
  output \"h\" = %9
  output \"i\" = %11
  output \"j\" = %13.0
  output \"k\" = %13.1
  output \"l\" = %14.0
"
    )
}

/// Element-wise nodes over broadcasts, a contiguous f32 map (float4 path),
/// casts, where, a region, on several dtypes.
fn elementwise(d: &str) -> String {
    format!(
        "  %0 = input \"x\" : {d}[2,3,4]
  %1 = input \"y\" : {d}[4]
  %2 = add(%0, %1) : {d}[2,3,4]
  %3 = mul(%0, %0) : {d}[2,3,4]
  %4 = less(%0, %1) : bool[2,3,4]
  %5 = where(%4, %0, %3) : {d}[2,3,4]
  %6 = cast(%5) {{to=f32, saturate=true, round_mode=up}} : f32[2,3,4]
  %7 = max(%2, %5) : {d}[2,3,4]
  output \"a\" = %6
  output \"b\" = %7
"
    )
}

const REGION: &str = "  %0 = input \"x\" : f32[1,8,4,4]
  %1 = input \"y\" : f32[1,8,1,1]
  %2 = elementwise_region(%0, %1) {program=[add(x0, x1), relu(t0)]} : f32[1,8,4,4]
  %3 = gelu(%2) {approximate=tanh} : f32[1,8,4,4]
  %4 = clip(%3, %1, %1) : f32[1,8,4,4]
  output \"y\" = %4
";

fn graphs() -> Vec<String> {
    let mut v = vec![REGION.to_string()];
    for d in ["f32", "f16", "bf16", "f64", "i64", "i32", "u8"] {
        v.push(elementwise(d));
    }
    for d in ["f32", "f16", "f64", "i64", "i32", "u8", "i8"] {
        v.push(reductions(d));
    }
    for d in ["f32", "f16", "bf16", "f64"] {
        v.push(rows(d));
    }
    v
}

#[test]
fn family_graphs_plan_and_their_modules_compile() {
    let schedules: Vec<_> = graphs().iter().map(|g| planned(g)).collect();
    if !nvrtc_or_skip("the NVRTC half") {
        return;
    }
    let c = crate::tests::test_compiler();
    let modules = schedules
        .into_iter()
        .flat_map(|s| s.modules)
        .map(|m| (m.name, m.source))
        .collect();
    crate::tests::compile_once(&c, modules);
}

#[test]
fn rows_schedule() {
    insta::assert_snapshot!(planned(&rows("f32")).to_string());
}

#[test]
fn reduce_schedule() {
    insta::assert_snapshot!(planned(&reductions("i64")).to_string());
}

#[test]
fn elementwise_schedule() {
    insta::assert_snapshot!(planned(REGION).to_string());
}
