//! Device-free checks of the plan: small IR graphs covering every kernel
//! family are planned, and every generated pipeline is parsed and validated
//! by naga, so WGSL errors surface on machines without a GPU.

use rlx_ir::analysis::infer_graph;
use rlx_ir::text::parse_graph;
use rlx_ir::Weights;
use rlx_passes::plan_memory;

use crate::{plan, PlanOptions, Schedule};

fn planned(body: &str) -> Schedule {
    let src = format!("rlx-ir 2\ngraph {{\n{body}}}\n");
    let mut g = parse_graph(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    infer_graph(&mut g, None).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let mem = plan_memory(&g).unwrap();
    plan(&g, &Weights::default(), &mem, &PlanOptions::default())
        .unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// Checks, by naga's reflection, that the struct a typed pipeline binds at 4
/// has the handles and fields of its Rust parameter layout, at the same
/// offsets and with the same sizes: host and kernel cannot drift.
fn check_params(p: &crate::schedule::Pipeline, module: &naga::Module) {
    let Some(params) = &p.params else { return };
    let var = module
        .global_variables
        .iter()
        .map(|(_, v)| v)
        .find(|v| {
            v.binding
                .as_ref()
                .is_some_and(|b| b.group == 0 && b.binding == 4)
        })
        .unwrap_or_else(|| panic!("{}: nothing bound at 4", p.name));
    let naga::TypeInner::Struct { members, span } = &module.types[var.ty].inner else {
        panic!("{}: binding 4 is not a struct", p.name);
    };
    let handles = params.operands.len() as u32 * 4;
    let mut want: Vec<(String, u32, u32)> = params
        .operands
        .iter()
        .enumerate()
        .map(|(i, o)| (o.clone(), i as u32 * 4, 4))
        .collect();
    for f in params.layout.fields.iter() {
        want.push((
            f.name.to_string(),
            handles + f.offset as u32,
            f.ty.bytes() as u32,
        ));
    }
    let size = |ty: naga::Handle<naga::Type>| match &module.types[ty].inner {
        naga::TypeInner::Scalar(s) => u32::from(s.width),
        naga::TypeInner::Array {
            size: naga::ArraySize::Constant(n),
            stride,
            ..
        } => n.get() * stride,
        other => panic!("{}: unexpected member type {other:?}", p.name),
    };
    let got: Vec<(String, u32, u32)> = members
        .iter()
        .map(|m| (m.name.clone().unwrap_or_default(), m.offset, size(m.ty)))
        .collect();
    if want.is_empty() {
        return;
    }
    assert_eq!(
        got, want,
        "{}: WGSL params differ from {}",
        p.name, params.layout.name
    );
    assert_eq!(
        *span,
        handles + params.layout.size as u32,
        "{}: struct size",
        p.name
    );
}

fn validate(s: &Schedule) {
    for p in &s.pipelines {
        let module = naga::front::wgsl::parse_str(&p.source)
            .unwrap_or_else(|e| panic!("{}: {}", p.name, e.emit_to_string(&p.source)));
        check_params(p, &module);
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            // pack2x16float and friends: core WGSL, which wgpu always allows.
            naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}: {e:?}", p.name));
    }
}

const GRAPHS: &[&str] = &[
    // rotary embeddings: 4-D with position ids, 3-D with per-position caches
    "  %0 = input \"x\" : f32[1,2,3,8]\n  %1 = input \"c\" : f32[5,4]\n  %2 = input \"s\" : f32[5,4]\n  %3 = input \"i\" : i64[1,3]\n  %4 = rotary_embedding(%0, %1, %2, %3) {interleaved=false, rotary_embedding_dim=0, num_heads=0} : f32[1,2,3,8]\n  output \"y\" = %4\n",
    // gather_nd of 4- and 8-byte elements with a batch dim
    "  %0 = input \"x\" : f32[2,3,4]\n  %1 = input \"i\" : i64[2,1,1]\n  %2 = gather_nd(%0, %1) {batch_dims=1} : f32[2,1,4]\n  %3 = input \"z\" : i64[2,3,4]\n  %4 = gather_nd(%3, %1) {batch_dims=1} : i64[2,1,4]\n  output \"a\" = %2\n  output \"b\" = %4\n",
    // gathers of 1- and 2-byte elements (packed in words)
    "  %0 = input \"m\" : bool[3,5]\n  %1 = input \"i\" : i64[4]\n  %2 = gather(%0, %1) {axis=0} : bool[4,5]\n  %3 = input \"h\" : f16[2,5]\n  %4 = gather(%3, %1) {axis=1} : f16[2,4]\n  output \"a\" = %2\n  output \"b\" = %4\n",
    // element-wise, compare, where, cast, region
    "  %0 = input \"x\" : f32[2,3]\n  %1 = input \"y\" : f32[3]\n  %2 = add(%0, %1) : f32[2,3]\n  %3 = greater(%0, %1) : bool[2,3]\n  %4 = where(%3, %0, %2) : f32[2,3]\n  %8 = cast(%4) {to=i32, saturate=true, round_mode=nearest} : i32[2,3]\n  %5 = cast(%8) {to=i64, saturate=true, round_mode=nearest} : i64[2,3]\n  %6 = elementwise_region(%0, %1) {program=[mul(x0, x1), add(t0, 0.5), tanh(t1), erf(t2)]} : f32[2,3]\n  %7 = cast(%0) {to=u8, saturate=true, round_mode=nearest} : u8[2,3]\n  output \"a\" = %5\n  output \"b\" = %6\n  output \"c\" = %7\n",
    // matmul, softmax, layer norm, reduce, argmax
    "  %0 = input \"x\" : f32[2,4,8]\n  %1 = input \"w\" : f32[8,5]\n  %2 = matmul(%0, %1) : f32[2,4,5]\n  %3 = softmax(%2) {axis=-1} : f32[2,4,5]\n  %4 = input \"s\" : f32[5]\n  %5 = layer_norm(%3, %4) {axis=-1, epsilon=1e-5, stats=false} : f32[2,4,5]\n  %6 = argmax(%5) {axis=1, keepdims=false, select_last_index=false} : i64[2,5]\n  output \"y\" = %5\n  output \"i\" = %6\n",
    // conv, pools, transpose, concat
    "  %0 = input \"x\" : f32[1,3,8,8]\n  %1 = input \"w\" : f32[4,3,3,3]\n  %2 = conv(%0, %1) {strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], auto_pad=notset, group=1} : f32[1,4,8,8]\n  %3 = max_pool(%2) {kernel_shape=[2, 2], strides=[2, 2], dilations=[1, 1], pads=[0, 0, 0, 0], auto_pad=notset, ceil_mode=false, count_include_pad=false, p=2, storage_order=0, with_indices=false} : f32[1,4,4,4]\n  %4 = global_avg_pool(%3) {p=2} : f32[1,4,1,1]\n  %5 = transpose(%3) {perm=[0, 2, 3, 1]} : f32[1,4,4,4]\n  %6 = concat(%5, %5) {axis=1} : f32[1,8,4,4]\n  output \"y\" = %4\n  output \"z\" = %6\n",
    // scatter (elements with a reduction, nd), quantize and dequantize per axis
    "  %0 = input \"x\" : f32[4,3]\n  %1 = input \"i\" : i64[2,3]\n  %2 = input \"u\" : f32[2,3]\n  %3 = scatter_elements(%0, %1, %2) {axis=0, reduction=add} : f32[4,3]\n  %4 = input \"j\" : i64[2,1]\n  %5 = scatter_nd(%3, %4, %2) {reduction=none} : f32[4,3]\n  %6 = input \"s\" : f32[3]\n  %7 = input \"z\" : u8[3]\n  %8 = quantize_linear(%5, %6, %7) {axis=1, block_size=0, saturate=true} : u8[4,3]\n  %9 = dequantize_linear(%8, %6, %7) {axis=1, block_size=0} : f32[4,3]\n  output \"y\" = %9\n",
    // attention: 3-D operands with grouped heads, a bool mask, causal and
    // softcap, a KV cache and the QK output
    "  %0 = input \"q\" : f32[2,4,16]\n  %1 = input \"k\" : f32[2,3,8]\n  %2 = input \"v\" : f32[2,3,8]\n  %3 = input \"m\" : bool[4,5]\n  %4 = input \"pk\" : f32[2,2,2,4]\n  %5 = input \"pv\" : f32[2,2,2,4]\n  %6:4 = attention(%0, %1, %2, %3, %4, %5) {q_num_heads=4, kv_num_heads=2, scale=none, is_causal=true, softcap=2.0, qk_matmul_output_mode=3, has_mask=true, has_past=true, has_nonpad=false, num_outputs=4, left_window_size=-1, right_window_size=-1, softmax_precision=none} : (f32[2,4,16], f32[2,2,5,4], f32[2,2,5,4], f32[2,4,4,5])\n  output \"y\" = %6.0\n  output \"pk2\" = %6.1\n  output \"pv2\" = %6.2\n  output \"qk\" = %6.3\n",
    // conv_transpose with an output shape beyond the full size
    "  %0 = input \"x\" : f32[1,1,3,3]\n  %1 = input \"w\" : f32[1,2,3,3]\n  %2 = conv_transpose(%0, %1) {strides=[3, 2], dilations=[1, 1], pads=[0, 0, 0, 0], auto_pad=notset, group=1, output_padding=[0, 0], output_shape=[10, 8]} : f32[1,2,10,8]\n  output \"y\" = %2\n",
    // 64-bit integer arithmetic (int64.wgsl): every i64 and u64 element-wise kind
    "  %0 = input \"a\" : i64[2,3]\n  %1 = input \"b\" : i64[3]\n  %2 = add(%0, %1) : i64[2,3]\n  %3 = sub(%2, %1) : i64[2,3]\n  %4 = mul(%3, %1) : i64[2,3]\n  %5 = div(%4, %1) : i64[2,3]\n  %6 = mod(%5, %1) : i64[2,3]\n  %7 = fmod(%6, %1) : i64[2,3]\n  %8 = min(%7, %1) : i64[2,3]\n  %9 = max(%8, %1) : i64[2,3]\n  %10 = bitwise_and(%9, %1) : i64[2,3]\n  %11 = bitwise_or(%10, %1) : i64[2,3]\n  %12 = bitwise_xor(%11, %1) : i64[2,3]\n  %13 = neg(%12) : i64[2,3]\n  %14 = abs(%13) : i64[2,3]\n  %15 = sign(%14) : i64[2,3]\n  %16 = relu(%15) : i64[2,3]\n  %17 = bitwise_not(%16) : i64[2,3]\n  %18 = less(%17, %1) : bool[2,3]\n  %19 = less_or_equal(%17, %1) : bool[2,3]\n  %20 = greater(%17, %1) : bool[2,3]\n  %21 = greater_or_equal(%17, %1) : bool[2,3]\n  %22 = equal(%17, %1) : bool[2,3]\n  %23 = clip(%17, %1, %1) : i64[2,3]\n  %24 = cast(%23) {to=f32, saturate=true, round_mode=nearest} : f32[2,3]\n  %25 = cast(%24) {to=i64, saturate=true, round_mode=nearest} : i64[2,3]\n  %26 = cast(%25) {to=u64, saturate=true, round_mode=nearest} : u64[2,3]\n  %27 = cast(%24) {to=u64, saturate=true, round_mode=nearest} : u64[2,3]\n  %28 = shift_left(%26, %27) : u64[2,3]\n  %29 = shift_right(%28, %27) : u64[2,3]\n  %30 = div(%29, %27) : u64[2,3]\n  %31 = mod(%30, %27) : u64[2,3]\n  %32 = min(%31, %27) : u64[2,3]\n  %33 = max(%32, %27) : u64[2,3]\n  %34 = sign(%33) : u64[2,3]\n  %35 = less(%34, %27) : bool[2,3]\n  %36 = cast(%34) {to=f32, saturate=true, round_mode=nearest} : f32[2,3]\n  %37 = where(%35, %0, %1) : i64[2,3]\n  output \"a\" = %18\n  output \"b\" = %19\n  output \"c\" = %20\n  output \"d\" = %21\n  output \"e\" = %22\n  output \"f\" = %36\n  output \"g\" = %37\n",
    // integer cumulative sums and products, integer reductions and arg reductions
    // a fused conv with its bias and SiLU in the GEMM epilogue
    "  %0 = input \"x\" : f32[1,3,8,8]\n  %1 = input \"w\" : f32[4,3,3,3]\n  %2 = input \"b\" : f32[4]\n  %3 = fused_conv(%0, %1, %2) {strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], auto_pad=notset, group=1, activation=silu} : f32[1,4,8,8]\n  output \"y\" = %3\n",
    // residual norms: a row held in registers, and one longer than 1024
    "  %0 = input \"x\" : f32[3,40]\n  %1 = input \"r\" : f32[3,40]\n  %2 = input \"s\" : f32[40]\n  %3 = input \"b\" : f32[40]\n  %4:2 = residual_norm(%0, %1, %2, %3) {axis=-1, epsilon=1e-5, rms=false} : (f32[3,40], f32[3,40])\n  %5 = input \"x2\" : f32[2,1100]\n  %6 = input \"s2\" : f32[1100]\n  %7:2 = residual_norm(%5, %5, %6) {axis=-1, epsilon=1e-5, rms=true} : (f32[2,1100], f32[2,1100])\n  output \"y\" = %4.0\n  output \"sum\" = %4.1\n  output \"y2\" = %7.0\n",
    // attention over 9 query rows (the 8-row kernel) with a bool mask; then
    // heads of 24 with key lengths and of 64, causal
    "  %0 = input \"q\" : f32[1,2,9,16]\n  %1 = input \"k\" : f32[1,2,21,16]\n  %2 = input \"v\" : f32[1,2,21,16]\n  %3 = input \"m\" : bool[9,21]\n  %4 = attention(%0, %1, %2, %3) {q_num_heads=0, kv_num_heads=0, scale=none, is_causal=true, softcap=0.0, qk_matmul_output_mode=0, has_mask=true, has_past=false, has_nonpad=false, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none} : f32[1,2,9,16]\n  output \"y\" = %4\n",
    "  %0 = input \"q\" : f32[2,3,20,24]\n  %1 = input \"k\" : f32[2,3,33,24]\n  %2 = input \"v\" : f32[2,3,33,24]\n  %3 = input \"n\" : i32[2]\n  %4 = attention(%0, %1, %2, %3) {q_num_heads=0, kv_num_heads=0, scale=none, is_causal=false, softcap=0.0, qk_matmul_output_mode=0, has_mask=false, has_past=false, has_nonpad=true, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none} : f32[2,3,20,24]\n  %5 = input \"q2\" : f32[1,2,40,64]\n  %6 = input \"k2\" : f32[1,2,40,64]\n  %7 = attention(%5, %6, %6) {q_num_heads=0, kv_num_heads=0, scale=none, is_causal=true, softcap=0.0, qk_matmul_output_mode=0, has_mask=false, has_past=false, has_nonpad=false, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none} : f32[1,2,40,64]\n  output \"y\" = %4\n  output \"y2\" = %7\n",
    "  %0 = input \"x\" : i64[2,4]\n  %1 = constant i64[] [1] : i64[]\n  %2 = cumsum(%0, %1) {exclusive=true, reverse=true} : i64[2,4]\n  %3 = cumprod(%0, %1) {exclusive=false, reverse=false} : i64[2,4]\n  %4 = input \"y\" : i32[2,4]\n  %5 = cumsum(%4, %1) {exclusive=false, reverse=false} : i32[2,4]\n  %6 = constant i64[1] [1] : i64[1]\n  %7 = reduce_sum(%0, %6) {keepdims=false, noop_with_empty_axes=false} : i64[2]\n  %8 = reduce_mean(%4, %6) {keepdims=true, noop_with_empty_axes=false} : i32[2,1]\n  %9 = argmin(%0) {axis=1, keepdims=false, select_last_index=true} : i64[2]\n  output \"a\" = %2\n  output \"b\" = %3\n  output \"c\" = %5\n  output \"d\" = %7\n  output \"e\" = %8\n  output \"f\" = %9\n",
];

#[test]
fn every_generated_pipeline_validates() {
    for g in GRAPHS {
        let s = planned(g);
        assert!(!s.dispatches.is_empty());
        validate(&s);
    }
}

/// A fused product of `x: f32[4, k]` and `w: f32[k, 8]` plus a bias row, with
/// `act` in the epilogue.
fn fused_product(k: usize, act: &str) -> String {
    format!(
        "  %0 = input \"x\" : f32[4,{k}]\n  %1 = input \"w\" : f32[{k},8]\n  %2 = input \"b\" : f32[8]\n  %3 = fused_matmul(%0, %1, %2) {{activation={act}}} : f32[4,8]\n  output \"y\" = %3\n"
    )
}

/// Bias and activation run in the GEMM's epilogue (one dispatch), or in the
/// split-K sum's when K is split; every activation's epilogue validates.
#[test]
fn fused_products_apply_bias_and_activation_in_the_epilogue() {
    for act in [
        "none",
        "relu",
        "sigmoid",
        "tanh",
        "gelu_erf",
        "gelu_tanh",
        "silu",
    ] {
        for k in [16, 512] {
            let s = planned(&fused_product(k, act));
            validate(&s);
            let names: Vec<&str> = s
                .dispatches
                .iter()
                .map(|d| s.pipelines[d.pipeline].name.as_str())
                .collect();
            let suffix = if act == "none" {
                String::new()
            } else {
                format!(".{act}")
            };
            // One output tile: the narrow kernel, whose workgroups suit
            // products of few tiles.
            let want: Vec<String> = if k == 16 {
                vec![format!("matmul.narrow64x64{suffix}")]
            } else {
                vec![
                    format!("matmul.narrow64x64{suffix}"),
                    format!("matmul.split_k_sum{suffix}"),
                ]
            };
            assert_eq!(names, want, "{act}, k = {k}");
            let flags = s.dispatches.last().unwrap().params.to_string();
            let want_flags = if act == "none" { "flags=1" } else { "flags=3" };
            assert!(flags.contains(want_flags), "{act}, k = {k}: {flags}");
        }
    }
}

/// Products of many output tiles take the wide kernel (64 invocations of
/// 8x8 outputs), those of few the narrow one (128 of 8x4).
#[test]
fn products_pick_the_kernel_by_their_workgroups() {
    let product = |m: usize, n: usize| {
        format!(
            "  %0 = input \"x\" : f32[{m},64]\n  %1 = input \"w\" : f32[64,{n}]\n  %2 = matmul(%0, %1) : f32[{m},{n}]\n  output \"y\" = %2\n"
        )
    };
    for (m, n, want) in [
        (2048, 2048, "matmul.tiled64x64"),
        (1024, 2049, "matmul.tiled64x64"),
        (1024, 2048, "matmul.narrow64x64"),
        (128, 768, "matmul.narrow64x64"),
    ] {
        let s = planned(&product(m, n));
        validate(&s);
        let names: Vec<&str> = s
            .dispatches
            .iter()
            .map(|d| s.pipelines[d.pipeline].name.as_str())
            .collect();
        assert_eq!(names, [want], "{m} x {n}");
    }
}

/// A loop whose body holds an If and stacks a bool per iteration: x = [1, -2]
/// gains 1 at i = 0 (i > 0.5 is false) and doubles at i = 1 and 2.
/// (Shared with the device crates' run tests.)
const NESTED_CONTROL: &str = include_str!("../tests/data/nested_control.ir");

#[test]
fn nested_control_flow_plans_and_validates() {
    let s = planned(NESTED_CONTROL);
    validate(&s);
    let text = s.to_string();
    assert!(text.contains("loop `"), "{text}");
    assert!(text.contains("if `"), "{text}");
}
