//! Whole models on the CPU backend: golden and light models against their
//! reference outputs, `.rlx` artifacts, memory-plan invariants, bad inputs.

mod common;

use rlx_onnx::conformance::{compare, run_case, Outcome, Tolerance};
use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::ir::analysis::{bind_input_values, bind_shapes, specialize, value_inputs};
use rlx_onnx::ir::{DType, Tensor};
use rlx_onnx::testdata::{arange_input, data_set_dirs, light_models, read_data_set, read_pb};
use rlx_onnx::{artifact, Compiler, Error, InputError, Session, SessionOptions, Target};

/// f32 outputs must match the reference this closely.
const TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

#[test]
fn golden_models_match_reference_outputs() {
    let registry = Registry::standard();
    for case in common::golden_cases() {
        assert_eq!(
            run_case(&case, &registry, Target::Cpu, TOL),
            Outcome::Passed,
            "{}",
            case.display()
        );
    }
}

/// Models rlx-onnx once got silently wrong or refused where ONNX Runtime
/// runs them (tests/data/fidelity, made by its make_cases.py): ONNX
/// Runtime's outputs, f32 within 1e-4 relative, the rest exactly.
#[test]
fn fidelity_cases_match_onnx_runtime() {
    let registry = Registry::standard();
    let dir = common::root().join("tests/data/fidelity");
    let cases = rlx_onnx::testdata::case_dirs(&dir).unwrap();
    assert!(cases.len() >= 8, "{} cases", cases.len());
    for case in cases {
        assert_eq!(
            run_case(&case, &registry, Target::Cpu, TOL),
            Outcome::Passed,
            "{}",
            case.display()
        );
    }
}

/// The branch rlx-onnx could not type at import (if_untypable_branch) fails
/// when a run takes it, naming the ONNX node, and only then; the artifact
/// keeps the deferred error.
#[test]
fn an_untypable_branch_fails_when_taken() {
    let dir = common::root().join("tests/data/fidelity/if_untypable_branch");
    let model = Compiler::new(Target::Cpu)
        .compile_file(&dir.join("model.onnx"))
        .unwrap();
    let bytes = artifact::to_bytes(&model);
    let model = artifact::from_bytes(&bytes).unwrap();
    let session = Session::new(model, SessionOptions { threads: 1 }).unwrap();
    let x = Tensor::from_f32(&[5, 1, 8], &[0.5; 40]).unwrap();
    let take = |rate: i64| session.run(&[("x", &x), ("sr", &Tensor::scalar_i64(rate))]);
    assert!(take(16000).is_ok());
    let err = take(8000).unwrap_err().to_string();
    assert!(
        err.contains("by_rate") && err.contains("else_lstm") && err.contains("rank 4"),
        "{err}"
    );
}

#[test]
fn light_models_match_reference_outputs() {
    let Some(data) = common::testdata() else {
        return;
    };
    for m in light_models(&data.join("light")).unwrap() {
        let model = Compiler::new(Target::Cpu)
            .compile_file(&m.model)
            .unwrap_or_else(|e| panic!("{}: {e}", m.name));
        let g = &model.graph;
        let name = model.input_names()[0].clone();
        let dims = g.node(g.inputs()[0]).outputs[0].shape.as_known().unwrap();
        let x = arange_input(&dims).unwrap();
        let session = Session::new(model, SessionOptions { threads: 2 }).unwrap();
        let got = session
            .run(&[(name.as_str(), &x)])
            .unwrap_or_else(|e| panic!("{}: {e}", m.name));
        let want = read_pb(&m.output).unwrap();
        let d = compare(&got[0], &want, TOL).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        assert_eq!(d.mismatched, 0, "{}: {d:?}", m.name);
        assert_eq!(
            rlx_cpu::scratch::overflows(),
            0,
            "{}: a kernel took more scratch on a thread than its plan declared",
            m.name
        );
    }
}

fn golden_inputs(case: &str) -> (Vec<String>, Vec<Tensor>) {
    let dir = common::root().join("golden").join(case);
    let set = read_data_set(&data_set_dirs(&dir).unwrap()[0]).unwrap();
    let model = Compiler::new(Target::Cpu)
        .compile_file(&dir.join("model.onnx"))
        .unwrap();
    (model.input_names(), set.inputs)
}

#[test]
fn artifacts_give_bit_identical_outputs() {
    for case in [
        "mlp",
        "cnn",
        "transformer",
        "shapes",
        "if_branches",
        "loop_counter",
        "external_data",
    ] {
        let path = common::root().join("golden").join(case).join("model.onnx");
        let compiled = Compiler::new(Target::Cpu).compile_file(&path).unwrap();
        let bytes = artifact::to_bytes(&compiled);
        let loaded = artifact::from_bytes(&bytes).unwrap();
        assert_eq!(
            loaded.graph, compiled.graph,
            "{case}: graph changed through the artifact"
        );
        let file = std::env::temp_dir().join(format!("rlx-test-{}-{case}.rlx", std::process::id()));
        artifact::save(&compiled, &file).unwrap();
        let mapped = artifact::load(&file).unwrap();
        let (names, inputs) = golden_inputs(case);
        let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&inputs).collect();
        let run = |m| {
            Session::new(m, SessionOptions { threads: 1 })
                .unwrap()
                .run(&named)
                .unwrap()
        };
        let a = run(compiled);
        for other in [run(loaded), run(mapped)] {
            assert_eq!(a.len(), other.len());
            for (x, y) in a.iter().zip(&other) {
                assert!(
                    x.bit_eq(y),
                    "{case}: outputs differ after the artifact round trip"
                );
            }
        }
        let _ = std::fs::remove_file(&file);
    }
}

#[test]
fn corrupt_artifacts_are_errors() {
    let path = common::root().join("golden/cnn/model.onnx");
    let bytes = artifact::to_bytes(&Compiler::new(Target::Cpu).compile_file(&path).unwrap());
    assert!(matches!(
        artifact::from_bytes(b"nope"),
        Err(artifact::ArtifactError::Magic)
    ));
    for cut in [0, 8, 31, 40, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            artifact::from_bytes(&bytes[..cut]).is_err(),
            "truncated at {cut} loads"
        );
    }
    for i in (40..bytes.len()).step_by(bytes.len() / 50) {
        let mut b = bytes.clone();
        b[i] ^= 0x5a;
        assert!(
            matches!(
                artifact::from_bytes(&b),
                Err(artifact::ArtifactError::Checksum)
            ),
            "flipping byte {i} went unnoticed"
        );
    }
    let mut b = bytes.clone();
    b[8] = 99;
    assert!(matches!(
        artifact::from_bytes(&b),
        Err(artifact::ArtifactError::Version(99))
    ));
    // Saving over a directory fails without touching it.
    let dir = std::env::temp_dir();
    let compiled = Compiler::new(Target::Cpu).compile_file(&path).unwrap();
    assert!(artifact::save(&compiled, &dir).is_err());
}

#[test]
fn wrong_inputs_are_errors() {
    let (names, inputs) = golden_inputs("transformer");
    let model = Compiler::new(Target::Cpu)
        .compile_file(&common::root().join("golden/transformer/model.onnx"))
        .unwrap();
    let s = Session::new(model, SessionOptions { threads: 1 }).unwrap();
    let (x, mask) = (&inputs[0], &inputs[1]);
    assert_eq!(names, ["x", "mask"]);
    let err = |r: Result<Vec<Tensor>, Error>| match r {
        Err(Error::Input(e)) => e,
        other => panic!("expected an input error, got {other:?}"),
    };
    assert!(matches!(err(s.run(&[("x", x)])), InputError::Missing(n) if n == "mask"));
    assert!(matches!(
        err(s.run(&[("x", x), ("mask", mask), ("y", x)])),
        InputError::Unknown { .. }
    ));
    assert!(matches!(
        err(s.run(&[("x", x), ("x", x)])),
        InputError::Duplicate(_)
    ));
    let xi = Tensor::zeros(DType::I64, x.dims()).unwrap();
    assert!(matches!(
        err(s.run(&[("x", &xi), ("mask", mask)])),
        InputError::DType { .. }
    ));
    let wrong_rank = Tensor::zeros(DType::F32, &[2, 5]).unwrap();
    assert!(matches!(
        err(s.run(&[("x", &wrong_rank), ("mask", mask)])),
        InputError::Shape(_)
    ));
    let wrong_dim = Tensor::zeros(DType::F32, &[2, 5, 8]).unwrap();
    assert!(matches!(
        err(s.run(&[("x", &wrong_dim), ("mask", mask)])),
        InputError::Shape(_)
    ));
    // batch bound to 2 by x, then 3 by the mask.
    let conflict = Tensor::zeros(DType::F32, &[3, 1, 1, 5]).unwrap();
    let e = err(s.run(&[("x", x), ("mask", &conflict)]));
    assert!(e.to_string().contains("batch"), "{e}");
    // The session still works afterwards, and other shapes get their own plan.
    assert!(s.run(&[("x", x), ("mask", mask)]).is_ok());
    let x1 = Tensor::zeros(DType::F32, &[1, 3, 16]).unwrap();
    let m1 = Tensor::zeros(DType::F32, &[1, 1, 1, 3]).unwrap();
    assert_eq!(
        s.run(&[("x", &x1), ("mask", &m1)]).unwrap()[0].dims(),
        &[1, 3, 16]
    );
}

#[test]
fn memory_plans_never_overlap_live_tensors() {
    let registry = Registry::standard();
    for case in common::golden_cases() {
        let m = import_file(&case.join("model.onnx"), &registry).unwrap();
        let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
        let shapes: Vec<&[usize]> = set.inputs.iter().map(Tensor::dims).collect();
        let b = bind_shapes(&m.graph, &shapes).unwrap();
        // As a session does: shape-determining inputs become constants.
        let mut g = m.graph.clone();
        let values: Vec<(usize, Tensor)> = value_inputs(&g)
            .into_iter()
            .map(|i| (i, set.inputs[i].clone()))
            .collect();
        bind_input_values(&mut g, &values).unwrap();
        let mut g = specialize(&g, &b, Some(&m.weights)).unwrap();
        let mut w = m.weights.clone();
        rlx_onnx::compile::optimize(&mut g, &mut w, rlx_onnx::OptLevel::O2, None).unwrap();
        let concrete = g
            .node_ids()
            .into_iter()
            .all(|id| g.node(id).outputs.iter().all(|t| t.shape.is_known()));
        if !concrete {
            // Data-dependent shapes (if_rank's `by_sign`): the interpreter
            // runs such a graph, without a memory plan.
            continue;
        }
        // As the GPU backends plan (splits in place), and as the CPU one
        // does (concatenations too), and with neither.
        for (concat_in_place, split_in_place) in [(false, false), (false, true), (true, true)] {
            let opts = rlx_onnx::passes::MemoryOptions {
                concat_in_place,
                split_in_place,
                scatter_in_place: false,
            };
            let plan = rlx_onnx::passes::plan_memory_with(&g, &opts).unwrap();
            plan.check_no_overlap()
                .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
            // Every buffer starts 64-byte aligned: a graph of tiny tensors
            // (an unrolled loop over f32[3]) needs a line each.
            let aligned: usize = plan
                .buffers
                .iter()
                .map(|b| b.bytes.next_multiple_of(rlx_onnx::passes::ALIGN))
                .sum();
            assert!(
                plan.arena_bytes <= aligned * 2,
                "{}: arena {} bytes for {} bytes of buffers",
                case.display(),
                plan.arena_bytes,
                aligned
            );
        }
    }
}

#[test]
fn placeholder_dims_are_each_their_own_symbol() {
    let path = common::root().join("golden/placeholder_dims/model.onnx");
    let model = Compiler::new(Target::Cpu).compile_file(&path).unwrap();
    let g = &model.graph;
    let types: Vec<String> = g
        .inputs()
        .iter()
        .map(|&i| g.node(i).outputs[0].to_string())
        .collect();
    assert_eq!(
        types,
        [
            r#"f32["x.0",3,"x.2","x.3"]"#,
            r#"f32["bias.0"]"#,
            r#"f32["scale.0"]"#
        ]
    );
    let session = Session::new(model, SessionOptions { threads: 1 }).unwrap();
    let x = Tensor::from_f32(&[1, 3, 48, 192], &vec![0.5; 3 * 48 * 192]).unwrap();
    let (bias, scale) = (
        Tensor::from_f32(&[2], &[0.1, -0.1]).unwrap(),
        Tensor::from_f32(&[1], &[2.0]).unwrap(),
    );
    let y = session
        .run(&[("x", &x), ("bias", &bias), ("scale", &scale)])
        .unwrap();
    assert_eq!(y[0].dims(), [1, 2]);
}

#[test]
fn an_if_of_varying_rank_follows_the_branch_taken() {
    let path = common::root().join("golden/if_rank/model.onnx");
    let session = Session::new(
        Compiler::new(Target::Cpu).compile_file(&path).unwrap(),
        SessionOptions { threads: 1 },
    )
    .unwrap();
    let rate = |r: i64| Tensor::from_slice(DType::I64, &[], &[r]).unwrap();
    // `a` is x unsqueezed at 16 kHz, halved otherwise; `d` has x's rank when
    // x sums to a negative number, one more otherwise.
    for (x, sr, a, d) in [
        (
            vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0],
            16000,
            vec![1, 6],
            vec![1, 6],
        ),
        (
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            8000,
            vec![6],
            vec![1, 6],
        ),
        (vec![-1.0, -2.0], 16000, vec![1, 2], vec![2]),
        (vec![-1.0, -2.0], 8000, vec![2], vec![2]),
    ] {
        let x = Tensor::from_f32(&[x.len()], &x).unwrap();
        let sr = rate(sr);
        let y = session.run(&[("x", &x), ("sr", &sr)]).unwrap();
        assert_eq!((y[0].dims(), y[3].dims()), (a.as_slice(), d.as_slice()));
    }
}

/// Weights the model stores narrow (int8 behind DequantizeLinear with
/// per-column scales, f16 behind a Cast, int8 of a MatMulInteger) are wide
/// in the compiled graph and narrow again in the artifact, which loads to
/// the same graph, weights and outputs, bit for bit.
#[test]
fn artifacts_store_narrow_weights_narrow() {
    let path = common::root().join("tests/data/cli/narrow_weights.onnx");
    let compiled = Compiler::new(Target::Cpu).compile_file(&path).unwrap();
    let narrow = artifact::to_bytes(&compiled);
    let wide = artifact::to_bytes_with(
        &compiled,
        &artifact::SaveOptions {
            narrow_weights: false,
            ..Default::default()
        },
    );
    let model_len = std::fs::metadata(&path).unwrap().len() as usize;
    assert!(
        narrow.len() * 5 < model_len * 6 && wide.len() > 2 * narrow.len(),
        "model {model_len} bytes, artifact {} narrow and {} wide",
        narrow.len(),
        wide.len()
    );
    let x: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
    let x = Tensor::from_values(&[4, 64], &x).unwrap();
    let run = |m| {
        Session::new(m, SessionOptions { threads: 1 })
            .unwrap()
            .run(&[("x", &x)])
            .unwrap()
    };
    let loaded = artifact::from_bytes(&narrow).unwrap();
    for (name, t) in compiled.weights.iter() {
        assert!(loaded.weights.get(name).unwrap().bit_eq(t), "weight {name}");
    }
    let (a, b) = (run(compiled), run(loaded));
    assert!(a[0].bit_eq(&b[0]));
}

/// An artifact is untrusted: a weight stored with another type than the
/// graph reads, a missing weight, or a non-zero reserved header field is a
/// typed error even with a valid checksum.
#[test]
fn crafted_artifacts_are_refused() {
    let path = common::root().join("golden/mlp/model.onnx");
    let compiled = Compiler::new(Target::Cpu).compile_file(&path).unwrap();
    let (name, t) = compiled
        .weights
        .iter()
        .find(|(_, t)| t.dims().len() > 1)
        .map(|(n, t)| (n.to_string(), t.clone()))
        .unwrap();
    let mut wrong_dims = compiled.clone();
    wrong_dims
        .weights
        .insert(name.clone(), t.reshaped(vec![t.numel()]).unwrap());
    let mut wrong_dtype = compiled.clone();
    let bytes = t.bytes().to_vec();
    wrong_dtype.weights.insert(
        name.clone(),
        Tensor::new(
            rlx_onnx::ir::DType::I32,
            t.dims().to_vec(),
            rlx_onnx::ir::Bytes::copy_from(&bytes),
        )
        .unwrap(),
    );
    let mut missing = compiled.clone();
    missing.weights.remove(&name);
    for (what, m) in [
        ("dims", wrong_dims),
        ("dtype", wrong_dtype),
        ("missing", missing),
    ] {
        match artifact::from_bytes(&artifact::to_bytes(&m)) {
            Err(artifact::ArtifactError::Malformed(why)) => {
                assert!(why.contains(&name), "{what}: {why}")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    let mut b = artifact::to_bytes(&compiled);
    b[29] = 1;
    assert!(matches!(
        artifact::from_bytes(&b),
        Err(artifact::ArtifactError::Malformed(_))
    ));
}

/// A loaded artifact owns its bytes by default: truncating or rewriting the
/// file while a session runs changes nothing (a mapped file would kill the
/// process with SIGBUS). `LoadMode::Map` still maps, as documented.
#[test]
fn a_loaded_artifact_survives_its_file_being_truncated() {
    let path = common::root().join("golden/cnn/model.onnx");
    let compiled = Compiler::new(Target::Cpu).compile_file(&path).unwrap();
    let file = std::env::temp_dir().join(format!("rlx-test-{}-truncate.rlx", std::process::id()));
    artifact::save(&compiled, &file).unwrap();
    let loaded = artifact::load(&file).unwrap();
    let mapped = artifact::load_with(&file, artifact::LoadMode::Map).unwrap();
    drop(mapped);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(40)
        .unwrap();
    let (names, inputs) = golden_inputs("cnn");
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&inputs).collect();
    let run = |m| {
        Session::new(m, SessionOptions { threads: 1 })
            .unwrap()
            .run(&named)
            .unwrap()
    };
    let (a, b) = (run(compiled), run(loaded));
    assert!(a[0].bit_eq(&b[0]));
    let _ = std::fs::remove_file(&file);
}

/// Greedy generation with the cache kept between steps gives ONNX
/// Runtime's tokens, on one thread and on several; an end token stops a
/// row (kept as its last token) while the other goes on.
#[test]
fn the_golden_decoder_generates_onnx_runtimes_greedy_tokens() {
    use rlx_onnx::generate::{generate, CacheMode, GenerateOptions, Sampling};
    let (prompts, want) = common::decoder_reference();
    let model = Compiler::new(Target::Cpu)
        .compile_file(&common::root().join("golden/decoder/model.onnx"))
        .unwrap();
    for (threads, in_place) in [(1, true), (2, true), (1, false)] {
        let session = Session::new(model.clone(), SessionOptions { threads }).unwrap();
        let options = GenerateOptions {
            max_new_tokens: want[0].len(),
            sampling: Sampling::Greedy,
            eos: None,
            in_place,
        };
        let out = generate(&session, &prompts, &options).unwrap();
        assert_eq!(out.tokens, want, "{threads} threads");
        let capacity = prompts[0].len() + want[0].len();
        let mode = match in_place {
            true => CacheMode::InPlace { capacity },
            false => CacheMode::Growing { why: None },
        };
        assert_eq!(out.mode, mode);
        assert_eq!(out.timings.steps.len(), want[0].len() - 1);
        // Row 0's third token as the end token: each row stops at its
        // first (row 1 has none of it and goes on).
        let eos = want[0][2];
        let upto = |row: &[i64]| {
            row.iter()
                .position(|&t| t == eos)
                .map_or(row.len(), |p| p + 1)
        };
        let out = generate(
            &session,
            &prompts,
            &GenerateOptions {
                eos: Some(eos),
                ..options
            },
        )
        .unwrap();
        for (got, want) in out.tokens.iter().zip(&want) {
            assert_eq!(got, &want[..upto(want)]);
        }
    }
}

/// A greedy step chooses where it runs (the in-place graph's argmax
/// output) the tokens a host argmax of the same step's logits picks.
#[test]
fn greedy_steps_choose_the_host_argmax_tokens() {
    use rlx_onnx::generate::{argmax, Decoder};
    let (prompts, want) = common::decoder_reference();
    let model = Compiler::new(Target::Cpu)
        .compile_file(&common::root().join("golden/decoder/model.onnx"))
        .unwrap();
    let session = Session::new(model, SessionOptions { threads: 1 }).unwrap();
    let steps = want[0].len();
    let capacity = prompts[0].len() + steps;
    let mut host = Decoder::with_capacity(&session, capacity).unwrap();
    let mut device = Decoder::with_capacity(&session, capacity).unwrap();
    let pick = |logits: &Tensor| -> Vec<i64> {
        let rows = logits.as_slice::<f32>().unwrap();
        let vocab = rows.len() / prompts.len();
        rows.chunks(vocab).map(|r| argmax(r) as i64).collect()
    };
    let mut a = pick(&host.prefill(&prompts).unwrap());
    let mut b = pick(&device.prefill(&prompts).unwrap());
    for _ in 1..steps {
        assert_eq!(a, b);
        a = pick(&host.step(&a).unwrap());
        b = device.step_greedy(&b).unwrap();
    }
    assert_eq!(a, b);
}
