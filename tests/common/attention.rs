//! Attention cases shared by the device tests (`cuda_attention.rs`,
//! `wgsl_parity.rs`): the cases a tiled kernel can get wrong (query and key
//! counts that are not multiples of a tile, a single query row and
//! 520-key sequences among them, head sizes 16 to 128, 3-D and 4-D
//! operands, grouped-query heads, float and bool masks that broadcast,
//! causality, key windows, per-batch key lengths, softcap, rows whose every
//! key is masked), each as IR text in a float dtype and its inputs (uniform
//! in [-1, 1) from a fixed seed per case).

use half::{bf16, f16};
use rlx_onnx::importer::ImportedModel;
use rlx_onnx::ir::{DType, Tensor};
use rlx_onnx::{CompiledModel, Compiler, Target};

/// One attention: operand dims, heads (0: 4-D operands), flags.
#[derive(Clone)]
pub struct Case {
    pub name: &'static str,
    q: Vec<usize>,
    k: Vec<usize>,
    v: Vec<usize>,
    y: Vec<usize>,
    heads: (usize, usize),
    /// `Some((dims, bool))`: a mask of these dims, bool or float.
    mask: Option<(Vec<usize>, bool)>,
    /// The mask is causality written out (as exporters write a decoder's:
    /// -3.4e38 or false past the diagonal), with the first `n` keys
    /// padding in the bool form; else random.
    written_causal: Option<usize>,
    /// Per-batch key lengths (i64).
    nonpad: Option<Vec<i64>>,
    causal: bool,
    window: (i64, i64),
    softcap: f32,
    scale: Option<f32>,
}

fn case(name: &'static str, q: &[usize], k: &[usize], y: &[usize]) -> Case {
    Case {
        name,
        q: q.to_vec(),
        k: k.to_vec(),
        v: k.to_vec(),
        y: y.to_vec(),
        heads: (0, 0),
        mask: None,
        written_causal: None,
        nonpad: None,
        causal: false,
        window: (-1, -1),
        softcap: 0.0,
        scale: None,
    }
}

pub fn cases() -> Vec<Case> {
    let mut v = vec![
        case(
            "gqa_4d_d64",
            &[2, 4, 70, 64],
            &[2, 2, 133, 64],
            &[2, 4, 70, 64],
        ),
        case(
            "single_query_d64",
            &[1, 2, 1, 64],
            &[1, 2, 300, 64],
            &[1, 2, 1, 64],
        ),
        case(
            "long_d64",
            &[1, 2, 520, 64],
            &[1, 2, 520, 64],
            &[1, 2, 520, 64],
        ),
        case("head16", &[2, 3, 9, 16], &[2, 3, 21, 16], &[2, 3, 9, 16]),
    ];
    let mut c = case("3d_causal_d80", &[2, 37, 320], &[2, 37, 320], &[2, 37, 320]);
    c.heads = (4, 4);
    c.causal = true;
    v.push(c);
    let mut c = case("3d_gqa_d128", &[1, 65, 512], &[1, 65, 256], &[1, 65, 512]);
    c.heads = (4, 2);
    c.causal = true;
    v.push(c);
    let mut c = case(
        "float_mask_nonpad",
        &[2, 2, 70, 64],
        &[2, 2, 90, 64],
        &[2, 2, 70, 64],
    );
    c.mask = Some((vec![2, 1, 70, 90], false));
    c.nonpad = Some(vec![90, 41]);
    c.scale = Some(0.3);
    v.push(c);
    let mut c = case(
        "bool_mask_rows_masked",
        &[2, 2, 33, 64],
        &[2, 2, 47, 64],
        &[2, 2, 33, 64],
    );
    c.mask = Some((vec![33, 47], true));
    v.push(c);
    let mut c = case(
        "padding_mask_d128",
        &[2, 2, 40, 128],
        &[2, 2, 40, 128],
        &[2, 2, 40, 128],
    );
    c.mask = Some((vec![2, 1, 1, 40], false));
    v.push(c);
    // A padding mask (the same for every query row: one bias per key) over
    // key and query counts no tile size divides.
    let mut c = case(
        "padding_mask_d64",
        &[2, 3, 130, 64],
        &[2, 3, 150, 64],
        &[2, 3, 130, 64],
    );
    c.mask = Some((vec![2, 1, 1, 150], false));
    v.push(c);
    // Causal with a per-row mask over query rows that end mid-tile at
    // every tile size (16, 64, 128).
    let mut c = case(
        "causal_row_mask_d64",
        &[1, 3, 300, 64],
        &[1, 3, 300, 64],
        &[1, 3, 300, 64],
    );
    c.mask = Some((vec![1, 1, 300, 300], false));
    c.causal = true;
    v.push(c);
    // Causality as a mask tensor (not the flag), whose key tiles past the
    // diagonal a kernel may skip: float (-3.4e38, every row keeps its
    // diagonal) and bool with three padding keys (the first rows then
    // attend nothing: zeros).
    let mut c = case(
        "causal_as_float_mask_d64",
        &[1, 2, 300, 64],
        &[1, 2, 300, 64],
        &[1, 2, 300, 64],
    );
    c.mask = Some((vec![1, 1, 300, 300], false));
    c.written_causal = Some(0);
    v.push(c);
    let mut c = case(
        "causal_as_bool_mask_d128",
        &[2, 2, 200, 128],
        &[2, 2, 200, 128],
        &[2, 2, 200, 128],
    );
    c.mask = Some((vec![2, 1, 200, 200], true));
    c.written_causal = Some(3);
    v.push(c);
    // Causal with a per-key padding mask (`causal-mask` makes this of a
    // decoder's written mask): staged biases below the diagonal, the rules
    // on it.
    let mut c = case(
        "causal_padding_mask_d64",
        &[2, 3, 130, 64],
        &[2, 3, 130, 64],
        &[2, 3, 130, 64],
    );
    c.mask = Some((vec![2, 1, 1, 130], false));
    c.causal = true;
    v.push(c);
    let mut c = case(
        "window_softcap",
        &[1, 2, 80, 64],
        &[1, 2, 80, 64],
        &[1, 2, 80, 64],
    );
    c.window = (9, 4);
    c.softcap = 2.0;
    v.push(c);
    let mut c = case(
        "short_mask",
        &[1, 2, 20, 32],
        &[1, 2, 50, 32],
        &[1, 2, 20, 32],
    );
    c.mask = Some((vec![1, 2, 20, 30], false));
    c.causal = true;
    v.push(c);
    // Decode steps over a cache (split by keys): grouped heads, a padding
    // mask hiding the unwritten end, per-row key lengths, two query rows.
    let mut c = case(
        "decode_gqa_mask",
        &[2, 4, 1, 64],
        &[2, 2, 384, 64],
        &[2, 4, 1, 64],
    );
    c.mask = Some((vec![2, 1, 1, 384], false));
    c.nonpad = Some(vec![384, 200]);
    v.push(c);
    let mut c = case(
        "decode_two_rows_causal",
        &[1, 2, 2, 80],
        &[1, 2, 257, 80],
        &[1, 2, 2, 80],
    );
    c.causal = true;
    v.push(c);
    v
}

fn dims(d: &[usize]) -> String {
    d.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// The case as an IR graph with operands of dtype `d` (its IR name).
pub fn graph(c: &Case, d: &str) -> String {
    let mut s = format!(
        "rlx-ir 2\ngraph {{\n  %0 = input \"q\" : {d}[{}]\n  %1 = input \"k\" : {d}[{}]\n  %2 = input \"v\" : {d}[{}]\n",
        dims(&c.q),
        dims(&c.k),
        dims(&c.v)
    );
    let mut ins = vec!["%0", "%1", "%2"];
    if let Some((m, b)) = &c.mask {
        let md = if *b { "bool" } else { d };
        s += &format!("  %3 = input \"m\" : {md}[{}]\n", dims(m));
        ins.push("%3");
    }
    if let Some(n) = &c.nonpad {
        s += &format!("  %4 = input \"n\" : i64[{}]\n", n.len());
        ins.push("%4");
    }
    let scale = c.scale.map_or("none".into(), |s| format!("{s:?}"));
    s += &format!(
        "  %5 = attention({}) {{q_num_heads={}, kv_num_heads={}, scale={scale}, is_causal={}, softcap={:?}, qk_matmul_output_mode=0, has_mask={}, has_past=false, has_nonpad={}, num_outputs=1, left_window_size={}, right_window_size={}, softmax_precision=none}} : {d}[{}]\n  output \"y\" = %5\n}}\n",
        ins.join(", "),
        c.heads.0,
        c.heads.1,
        c.causal,
        c.softcap,
        c.mask.is_some(),
        c.nonpad.is_some(),
        c.window.0,
        c.window.1,
        dims(&c.y)
    );
    s
}

/// Uniform values in [-1, 1) from a 64-bit LCG.
fn uniform(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn float_tensor(d: DType, dims: &[usize], v: &[f32]) -> Tensor {
    match d {
        DType::F32 => Tensor::from_values(dims, v),
        DType::F16 => Tensor::from_values(
            dims,
            &v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>(),
        ),
        DType::BF16 => Tensor::from_values(
            dims,
            &v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>(),
        ),
        d => panic!("no {d} inputs here"),
    }
    .unwrap()
}

/// The case's inputs in dtype `d` (masks bool or `d`), from `seed`.
pub fn inputs(c: &Case, d: DType, seed: u64) -> Vec<(&'static str, Tensor)> {
    let n = |x: &[usize]| x.iter().product::<usize>();
    let mut v = vec![
        ("q", float_tensor(d, &c.q, &uniform(n(&c.q), seed))),
        ("k", float_tensor(d, &c.k, &uniform(n(&c.k), seed + 1))),
        ("v", float_tensor(d, &c.v, &uniform(n(&c.v), seed + 2))),
    ];
    if let Some((m, b)) = &c.mask {
        let u = uniform(n(m), seed + 3);
        let keys = *m.last().unwrap();
        let rows = m[m.len() - 2];
        // Whether the written-out causal mask lets row i see key j.
        let sees = |at: usize, pad: usize| {
            let (i, j) = ((at / keys) % rows, at % keys);
            j <= i && j >= pad
        };
        let t = if let Some(pad) = c.written_causal {
            if *b {
                let bits: Vec<u8> = (0..n(m)).map(|at| u8::from(sees(at, pad))).collect();
                Tensor::from_slice(DType::Bool, m, &bits).unwrap()
            } else {
                let f: Vec<f32> = (0..n(m))
                    .map(|at| {
                        if sees(at, pad) {
                            u[at]
                        } else {
                            -3.402_823_5e38
                        }
                    })
                    .collect();
                float_tensor(d, m, &f)
            }
        } else if *b {
            // About a third masked; the first row entirely, so a row with no
            // key left gives zeros.
            let bits: Vec<u8> = u
                .iter()
                .enumerate()
                .map(|(i, &x)| u8::from(i >= keys && x > -0.33))
                .collect();
            Tensor::from_slice(DType::Bool, m, &bits).unwrap()
        } else {
            // Mostly small biases, some large negative ones (padding).
            let f: Vec<f32> = u
                .iter()
                .map(|&x| if x < -0.8 { -1.0e4 } else { x })
                .collect();
            float_tensor(d, m, &f)
        };
        v.push(("m", t));
    }
    if let Some(np) = &c.nonpad {
        v.push(("n", Tensor::from_values(&[np.len()], np).unwrap()));
    }
    v
}

/// The graph `text` compiled for `target` (opset 23).
pub fn compiled(text: &str, target: Target) -> CompiledModel {
    let graph = rlx_onnx::ir::text::parse_graph(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Compiler::new(target)
        .compile(
            ImportedModel {
                graph,
                weights: Default::default(),
                ir_version: 10,
                opsets: vec![(String::new(), 23)],
                producer: String::new(),
                metadata: Default::default(),
            },
            None,
        )
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}
