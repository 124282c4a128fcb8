//! Device-free checks of the convolution, pooling, fused-GEMM and attention
//! families: small IR graphs over every dtype and mode they take, planned
//! (snapshots of a ResNet-style block), and every module they generate
//! compiled by NVRTC.

use crate::schedule::{ConvKind, GemmAct, Launch};
use crate::tests::{cublaslt, nvrtc_or_skip, planned, planned_with};
use crate::{ConvGemm, PlanOptions, Schedule, SmallGemm};

fn conv_gemm(g: ConvGemm) -> PlanOptions {
    PlanOptions {
        conv_gemm: g,
        ..PlanOptions::default()
    }
}

/// The entry points (kernels), "gemm" and "conv" of a schedule, in order.
pub(crate) fn names(s: &Schedule) -> Vec<String> {
    s.launches
        .iter()
        .map(|l| match l {
            Launch::Kernel(k) => k.entry.clone(),
            Launch::Conv(_) => "conv".into(),
            Launch::Gemm(_) => "gemm".into(),
        })
        .collect()
}

/// A ResNet bottleneck's shapes: a 7x7/2 stem conv with ReLU, max pool, a
/// 1x1 conv with bias, the average pool and the classifier.
const RESNET: &str = "  %0 = input \"x\" : f32[1,3,32,32]
  %1 = input \"w\" : f32[8,3,7,7]
  %2 = input \"b\" : f32[8]
  %3 = fused_conv(%0, %1, %2) {strides=[2, 2], dilations=[1, 1], pads=[3, 3, 3, 3], auto_pad=notset, group=1, activation=relu} : f32[1,8,16,16]
  %4 = max_pool(%3) {kernel_shape=[3, 3], strides=[2, 2], dilations=[1, 1], pads=[1, 1, 1, 1], auto_pad=notset, ceil_mode=false, count_include_pad=false, p=0, storage_order=0, with_indices=false} : f32[1,8,8,8]
  %5 = input \"w2\" : f32[16,8,1,1]
  %6 = input \"b2\" : f32[16]
  %7 = conv(%4, %5, %6) {strides=[1, 1], dilations=[1, 1], pads=[0, 0, 0, 0], auto_pad=notset, group=1} : f32[1,16,8,8]
  %8 = avg_pool(%7) {kernel_shape=[8, 8], strides=[1, 1], dilations=[1, 1], pads=[0, 0, 0, 0], auto_pad=notset, ceil_mode=false, count_include_pad=false, p=0, storage_order=0, with_indices=false} : f32[1,16,1,1]
  %13 = constant i64[2] [1, 16] : i64[2]
  %9 = reshape(%8, %13) {allowzero=false} : f32[1,16]
  %10 = input \"fc\" : f32[16,10]
  %11 = input \"fb\" : f32[10]
  %12 = fused_matmul(%9, %10, %11) {activation=none} : f32[1,10]
  output \"y\" = %12
";

/// Convolutions: 1-D with asymmetric pads and sigmoid, grouped and dilated
/// 2-D without bias, 3-D, f64 and f16 with a bias, transposed ones.
fn convs() -> Vec<String> {
    let mut v = vec![
        "  %0 = input \"x\" : f32[2,4,10]
  %1 = input \"w\" : f32[6,4,3]
  %2 = input \"b\" : f32[6]
  %3 = fused_conv(%0, %1, %2) {strides=[1], dilations=[1], pads=[2, 1], auto_pad=notset, group=1, activation=sigmoid} : f32[2,6,11]
  output \"y\" = %3
"
        .to_string(),
        "  %0 = input \"x\" : f32[1,4,9,9]
  %1 = input \"w\" : f32[6,2,3,3]
  %2 = fused_conv(%0, %1) {strides=[1, 2], dilations=[2, 1], pads=[1, 1, 1, 1], auto_pad=notset, group=2, activation=relu} : f32[1,6,7,5]
  output \"y\" = %2
"
        .to_string(),
        "  %0 = input \"x\" : f32[1,2,4,5,6]
  %1 = input \"w\" : f32[3,2,3,3,3]
  %2 = conv(%0, %1) {strides=[1, 1, 1], dilations=[1, 1, 1], pads=[1, 1, 1, 1, 1, 1], auto_pad=notset, group=1} : f32[1,3,4,5,6]
  output \"y\" = %2
"
        .to_string(),
        "  %0 = input \"x\" : f32[1,2,4,4]
  %1 = input \"w\" : f32[2,3,3,3]
  %2 = input \"b\" : f32[3]
  %3 = conv_transpose(%0, %1, %2) {strides=[2, 2], dilations=[1, 1], pads=[1, 0, 0, 0], auto_pad=notset, group=1, output_padding=[0, 0], output_shape=[]} : f32[1,3,8,9]
  output \"y\" = %3
"
        .to_string(),
        "  %0 = input \"x\" : f32[1,2,4]
  %1 = input \"w\" : f32[2,3,3]
  %2 = conv_transpose(%0, %1) {strides=[2], dilations=[1], pads=[1, 1], auto_pad=notset, group=1, output_padding=[1], output_shape=[]} : f32[1,3,8]
  output \"y\" = %2
"
        .to_string(),
    ];
    for (d, act) in [("f64", "gelu_erf"), ("f16", "silu"), ("bf16", "tanh")] {
        v.push(format!(
            "  %0 = input \"x\" : {d}[1,3,6,6]
  %1 = input \"w\" : {d}[4,3,3,3]
  %2 = input \"b\" : {d}[4]
  %3 = fused_conv(%0, %1, %2) {{strides=[1, 1], dilations=[1, 1], pads=[0, 0, 1, 1], auto_pad=notset, group=1, activation={act}}} : {d}[1,4,5,5]
  output \"y\" = %3
"
        ));
    }
    v
}

/// Pools over every dtype they take, and LRN.
fn pools() -> Vec<String> {
    let mut v = Vec::new();
    for d in ["f32", "f64", "f16", "bf16", "i8", "u8"] {
        v.push(format!(
            "  %0 = input \"x\" : {d}[1,2,5,5]
  %1 = max_pool(%0) {{kernel_shape=[2, 2], strides=[2, 2], dilations=[1, 1], pads=[0, 0, 0, 0], auto_pad=notset, ceil_mode=true, count_include_pad=false, p=0, storage_order=0, with_indices=false}} : {d}[1,2,3,3]
  output \"y\" = %1
"
        ));
    }
    for d in ["f32", "f64", "f16", "bf16"] {
        v.push(format!(
            "  %0 = input \"x\" : {d}[1,2,4,5,6]
  %1 = avg_pool(%0) {{kernel_shape=[2, 3, 3], strides=[1, 1, 1], dilations=[1, 1, 1], pads=[0, 1, 1, 0, 1, 1], auto_pad=notset, ceil_mode=false, count_include_pad=true, p=0, storage_order=0, with_indices=false}} : {d}[1,2,3,5,6]
  %2 = lp_pool(%0) {{kernel_shape=[2, 2, 2], strides=[2, 2, 2], dilations=[1, 1, 1], pads=[0, 0, 0, 0, 0, 0], auto_pad=notset, ceil_mode=false, count_include_pad=false, p=3, storage_order=0, with_indices=false}} : {d}[1,2,2,2,3]
  %3 = lrn(%0) {{size=3, alpha=0.0001, beta=0.75, bias=1.0}} : {d}[1,2,4,5,6]
  output \"a\" = %1
  output \"b\" = %2
  output \"c\" = %3
"
        ));
    }
    v
}

const FUSED_MATMULS: &str = "  %0 = input \"x\" : f32[2,3,8]
  %1 = input \"w\" : f32[8,5]
  %2 = input \"b\" : f32[5]
  %3 = fused_matmul(%0, %1, %2) {activation=gelu_tanh} : f32[2,3,5]
  %4 = input \"c\" : f32[3,1]
  %5 = fused_matmul(%0, %1, %4) {activation=silu} : f32[2,3,5]
  %6 = fused_matmul(%0, %1) {activation=relu} : f32[2,3,5]
  output \"a\" = %3
  output \"b\" = %5
  output \"c\" = %6
";

/// Attention with GQA, a bool mask, causality, softcap, a KV cache and the
/// QK output; a float mask with i64 key lengths; per float dtype.
fn attentions() -> Vec<String> {
    let mut v = vec!["  %0 = input \"q\" : f32[2,4,16]
  %1 = input \"k\" : f32[2,3,8]
  %2 = input \"v\" : f32[2,3,8]
  %3 = input \"m\" : bool[4,5]
  %4 = input \"pk\" : f32[2,2,2,4]
  %5 = input \"pv\" : f32[2,2,2,4]
  %6:4 = attention(%0, %1, %2, %3, %4, %5) {q_num_heads=4, kv_num_heads=2, scale=none, is_causal=true, softcap=2.0, qk_matmul_output_mode=3, has_mask=true, has_past=true, has_nonpad=false, num_outputs=4, left_window_size=-1, right_window_size=-1, softmax_precision=none} : (f32[2,4,16], f32[2,2,5,4], f32[2,2,5,4], f32[2,4,4,5])
  output \"y\" = %6.0
  output \"pk2\" = %6.1
  output \"pv2\" = %6.2
  output \"qk\" = %6.3
"
    .to_string()];
    for d in ["f32", "f64", "f16", "bf16"] {
        v.push(format!(
            "  %0 = input \"q\" : {d}[2,3,4,8]
  %1 = input \"k\" : {d}[2,3,6,8]
  %2 = input \"v\" : {d}[2,3,6,8]
  %3 = input \"m\" : {d}[2,1,4,6]
  %4 = input \"n\" : i64[2]
  %5 = attention(%0, %1, %2, %3, %4) {{q_num_heads=0, kv_num_heads=0, scale=0.5, is_causal=false, softcap=0.0, qk_matmul_output_mode=0, has_mask=true, has_past=false, has_nonpad=true, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none}} : {d}[2,3,4,8]
  output \"y\" = %5
"
        ));
    }
    v
}

fn all() -> Vec<(String, Schedule)> {
    let mut graphs = vec![RESNET.to_string(), FUSED_MATMULS.to_string()];
    graphs.extend(convs());
    graphs.extend(pools());
    graphs.extend(attentions());
    let mut all: Vec<(String, Schedule)> = graphs
        .into_iter()
        .map(|g| (g.clone(), planned(&g)))
        .collect();
    // Every convolution through cuDNN (explicit pads included).
    for g in std::iter::once(RESNET.to_string()).chain(convs()) {
        let s = planned_with(&g, &conv_gemm(ConvGemm::Never));
        all.push((g, s));
    }
    all
}

#[test]
fn resnet_block_schedule() {
    insta::assert_snapshot!(planned(RESNET).to_string());
}

#[test]
fn fused_matmul_schedule() {
    insta::assert_snapshot!(planned_with(FUSED_MATMULS, &cublaslt()).to_string());
}

#[test]
fn convolutions_plan_cudnn_launches() {
    // The classifier through cuBLASLt, not the tile kernel.
    let cudnn = PlanOptions {
        small_gemm: SmallGemm::Cublaslt,
        ..conv_gemm(ConvGemm::Never)
    };
    let s = planned_with(RESNET, &cudnn);
    let found: Vec<_> = s
        .launches
        .iter()
        .filter_map(|l| match l {
            Launch::Conv(c) => Some(&c.conv),
            _ => None,
        })
        .collect();
    assert_eq!(found.len(), 2);
    // The stem: bias + ReLU fused in cuDNN, no epilogue kernel.
    assert!(found[0].relu && found[0].bias.is_some());
    assert_eq!(found[0].kind, ConvKind::Forward);
    assert!(found[1].bias.is_some() && !found[1].relu);
    // The classifier's bias goes to cuBLASLt's epilogue.
    assert!(s.launches.iter().any(
        |l| matches!(l, Launch::Gemm(g) if g.gemm.bias.is_some() && g.gemm.act == GemmAct::None)
    ));
    assert!(!s.modules.iter().any(|m| m.name == "epilogue"));
    // 1-D, asymmetric pads: a pad kernel, the conv, a sigmoid epilogue
    // adding no bias (cuDNN added it), in vectors.
    let s = planned_with(&convs()[0], &cudnn);
    assert_eq!(names(&s), ["conv_pad_4", "conv", "channel_epilogue_f32"]);
    // f64: the bias in the epilogue kernel, not in cuDNN.
    let s = planned_with(&convs()[5], &cudnn);
    assert!(s
        .launches
        .iter()
        .any(|l| matches!(l, Launch::Conv(c) if c.conv.bias.is_none())));
    assert!(s
        .launches
        .iter()
        .any(|l| matches!(l, Launch::Kernel(k) if k.entry == "channel_epilogue_f64")));
}

#[test]
fn convolutions_plan_gemms() {
    // Pointwise: the 1x1 conv is one GEMM, then the bias along the
    // channels in the epilogue kernel (in vectors: 64 positions per
    // channel); the 7x7 stem stays with cuDNN.
    let s = planned_with(RESNET, &conv_gemm(ConvGemm::Pointwise));
    assert_eq!(
        names(&s)[..4],
        ["conv", "pool_max_f32", "gemm", "channel_epilogue_f32"]
    );
    let Some(Launch::Gemm(g)) = s.launches.get(2) else {
        panic!("no GEMM")
    };
    let g = &g.gemm;
    assert_eq!((g.m, g.n, g.k, g.batch), (16, 64, 8, 1));
    assert_eq!((g.lda, g.ldb, g.ldc, g.stride_a), (8, 64, 64, 0));
    assert!(g.bias.is_none() && g.act == GemmAct::None);
    // All (the default): the stem unfolds (3 * 7 * 7 rows of 16 * 16
    // columns), then one GEMM, bias and ReLU.
    let s = planned(RESNET);
    assert_eq!(
        names(&s)[..4],
        [
            "conv_im2col_4",
            "gemm",
            "channel_epilogue_f32",
            "pool_max_f32"
        ]
    );
    let Some(Launch::Gemm(g)) = s.launches.get(1) else {
        panic!("no GEMM")
    };
    assert_eq!((g.gemm.m, g.gemm.n, g.gemm.k), (8, 256, 147));
    // Profiles report 2 flops per multiply-add, and a kernel's operand bytes.
    assert_eq!(s.launches[1].work(), crate::Work::Flops(2 * 8 * 256 * 147));
    assert_eq!(
        s.launches[0].work(),
        crate::Work::Bytes((3 * 32 * 32 + 147 * 256) * 4)
    );
    // Grouped (2 channels per group): one GEMM batched over the groups.
    let grouped = planned_with(&convs()[1], &conv_gemm(ConvGemm::All));
    assert_eq!(names(&grouped), ["conv_im2col_4", "gemm", "epilogue_f32"]);
    let Some(Launch::Gemm(g)) = grouped.launches.get(1) else {
        panic!("no GEMM")
    };
    let g = &g.gemm;
    assert_eq!((g.m, g.n, g.k, g.batch), (3, 35, 18, 2));
    assert_eq!((g.stride_a, g.stride_b, g.stride_c), (54, 630, 105));
    // 1-D with asymmetric pads and two images: im2col reads the pads
    // itself, one launch per image, one batched GEMM, then the sigmoid.
    let s = planned_with(&convs()[0], &conv_gemm(ConvGemm::All));
    assert_eq!(
        names(&s),
        [
            "conv_im2col_4",
            "conv_im2col_4",
            "gemm",
            "channel_epilogue_f32"
        ]
    );
    // f64: cuBLASLt multiplies, the bias goes to the epilogue kernel.
    let s = planned_with(&convs()[5], &conv_gemm(ConvGemm::All));
    assert!(names(&s).ends_with(&["gemm".to_string(), "channel_epilogue_f64".to_string()]));
}

#[test]
fn every_family_module_compiles_with_nvrtc() {
    if !nvrtc_or_skip("the NVRTC compile test") {
        return;
    }
    let c = crate::tests::test_compiler();
    let mut modules = Vec::new();
    let mut entries = std::collections::HashSet::new();
    for (_, s) in all() {
        for l in &s.launches {
            if let Launch::Kernel(k) = l {
                entries.insert(k.entry.clone());
            }
        }
        modules.extend(s.modules.into_iter().map(|m| (m.name, m.source)));
    }
    crate::tests::compile_once(&c, modules);
    for e in [
        "pool_max_i8",
        "pool_avg_bf16",
        "lrn_f16",
        "attention_f64",
        "conv_crop_4",
        "conv_im2col_4",
        "slab_copy",
    ] {
        assert!(entries.contains(e), "{e} is never planned");
    }
}

/// Plans `body` with `opts` and runs it on the device, every input f32
/// filled with a repeating pattern of eighths.
pub(crate) fn run_on_device(
    ctx: &std::sync::Arc<crate::Context>,
    body: &str,
    opts: &PlanOptions,
) -> Vec<rlx_ir::Tensor> {
    let s = planned_with(body, opts);
    let inputs: Vec<rlx_ir::Tensor> = s
        .inputs
        .iter()
        .enumerate()
        .map(|(j, slot)| {
            let n: usize = slot.dims.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|i| (((i * 7 + j * 3) % 11) as f32 - 5.0) * 0.125)
                .collect();
            rlx_ir::Tensor::from_f32(&slot.dims, &v).unwrap()
        })
        .collect();
    let exe = crate::Executable::new(ctx.clone(), s).unwrap();
    let refs: Vec<&rlx_ir::Tensor> = inputs.iter().collect();
    exe.run(&refs).unwrap()
}

#[test]
fn conv_gemms_match_cudnn_on_the_device() {
    let ctx = match crate::Context::new() {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) => {
            eprintln!("skipping: {e}");
            return;
        }
    };
    // The ResNet stem (im2col) and pointwise conv, a batched 1-D conv with
    // asymmetric pads, a grouped and dilated conv: GEMM forms against
    // cuDNN's, same inputs.
    for g in [RESNET.to_string(), convs()[0].clone(), convs()[1].clone()] {
        let run = |mode: ConvGemm| run_on_device(&ctx, &g, &conv_gemm(mode));
        let want = run(ConvGemm::Never);
        for mode in [ConvGemm::Pointwise, ConvGemm::All] {
            let got = run(mode);
            for (a, b) in got.iter().zip(&want) {
                let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
                assert_eq!(a.len(), b.len());
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    assert!(
                        (x - y).abs() <= 1e-4 * y.abs().max(1.0),
                        "{mode:?} [{i}] {x} vs cuDNN {y}\n{g}"
                    );
                }
            }
        }
    }
}

/// MatMuls in the tile kernel's range: a bias along N with each fused
/// activation, a bias along M (the epilogue kernel after the tiles),
/// broadcast batches, a product of more than one tile each way.
const SMALL_MATMULS: &str = "  %0 = input \"x\" : f32[2,3,20]
  %1 = input \"w\" : f32[20,5]
  %2 = input \"b\" : f32[5]
  %3 = fused_matmul(%0, %1, %2) {activation=gelu_erf} : f32[2,3,5]
  %4 = fused_matmul(%0, %1, %2) {activation=gelu_tanh} : f32[2,3,5]
  %5 = input \"bm\" : f32[3,1]
  %6 = fused_matmul(%0, %1, %5) {activation=sigmoid} : f32[2,3,5]
  %7 = input \"y\" : f32[1,5,40]
  %8 = matmul(%3, %7) : f32[2,3,40]
  %9 = input \"z\" : f32[40,33]
  %10 = input \"zb\" : f32[33]
  %11 = fused_matmul(%8, %9, %10) {activation=relu} : f32[2,3,33]
  %12 = input \"p\" : f32[37,40]
  %13 = matmul(%12, %9) : f32[37,33]
  output \"a\" = %4
  output \"b\" = %6
  output \"c\" = %11
  output \"d\" = %13
";

#[test]
fn small_matmuls_run_in_tile_kernels() {
    let tiles = planned(SMALL_MATMULS);
    let entries = names(&tiles);
    assert!(!entries.contains(&"gemm".to_string()), "{entries:?}");
    assert_eq!(entries.iter().filter(|e| *e == "tile_gemm_f32").count(), 6);
    // The bias along M goes to the epilogue kernel, with the sigmoid.
    assert_eq!(entries.iter().filter(|e| e.contains("epilogue")).count(), 1);
    let lt = planned_with(SMALL_MATMULS, &cublaslt());
    assert!(!names(&lt).iter().any(|e| e.starts_with("tile_gemm")));
    insta::assert_snapshot!(tiles.to_string());
}

#[test]
fn tile_gemms_match_cublaslt_on_the_device() {
    let ctx = match crate::Context::new() {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) => {
            eprintln!("skipping: {e}");
            return;
        }
    };
    let run = |small_gemm: SmallGemm| {
        let opts = PlanOptions {
            small_gemm,
            ..PlanOptions::default()
        };
        run_on_device(&ctx, SMALL_MATMULS, &opts)
    };
    let want = run(SmallGemm::Cublaslt);
    let got = run(SmallGemm::Tile);
    for (o, (a, b)) in got.iter().zip(&want).enumerate() {
        let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-4 * y.abs().max(1.0),
                "output {o} [{i}]: tile {x} vs cuBLASLt {y}"
            );
        }
    }
}
