//! The toolbox's second round (issue 35): inputs given or asked for,
//! `--inputs DIR` layouts, SVG of large models, metadata, NVRTC-less
//! CUDA conversion, the device a run used, Chrome traces, one overwrite
//! rule, readable dims, edge errors, help, FIFOs and concurrent runs.

use std::process::{Command, Stdio};

use super::{cli_model, cnn, common, output, rlx, tmp};

/// Writes `t` as `dir/name.npy`.
fn npy(dir: &std::path::Path, name: &str, t: &rlx_onnx::ir::Tensor) -> std::path::PathBuf {
    let p = dir.join(format!("{name}.npy"));
    std::fs::write(&p, rlx_onnx::npy::to_bytes(t).unwrap()).unwrap();
    p
}

fn row(v: [f32; 4]) -> rlx_onnx::ir::Tensor {
    rlx_onnx::ir::Tensor::from_f32(&[1, 1, 4], &v).unwrap()
}

#[test]
fn a_forgotten_input_is_an_error_unless_generation_is_asked_for() {
    let dir = tmp("forgotten");
    let model = cli_model("three_inputs");
    let a = npy(&dir, "a", &row([1.0, 2.0, 3.0, 4.0]));
    let b = npy(&dir, "b", &row([2.0; 4]));
    let run = |extra: &[&str], out: &str| {
        output(
            rlx()
                .arg("run")
                .arg(&model)
                .arg("--input")
                .arg(format!("a={}", a.display()))
                .arg("--input")
                .arg(format!("b={}", b.display()))
                .args(extra)
                .arg("--output-dir")
                .arg(dir.join(out)),
        )
    };
    let (code, _, err) = run(&[], "o1");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("inputs not given: c: f32[1,1,4]"), "{err}");
    assert!(err.contains("--generate-missing"), "{err}");
    assert!(!dir.join("o1").exists(), "nothing written");
    for asked in [&["--generate-missing"][..], &["--seed", "3"]] {
        let (code, out, err) = run(asked, "o2");
        assert_eq!(code, Some(0), "{asked:?}: {err}");
        assert!(out.contains("input c: generated f32[1, 1, 4]"), "{out}");
        assert!(out.contains("input a: f32[1, 1, 4] from "), "{out}");
        let _ = std::fs::remove_dir_all(dir.join("o2"));
    }
    // `bench` measures whatever the data, so it generates a whole set
    // unasked, but not the rest of a partial one.
    let (code, _, err) = output(
        rlx()
            .arg("bench")
            .arg(&model)
            .arg("--input")
            .arg(format!("a={}", a.display()))
            .args(["--iters", "1"]),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("inputs not given: b: f32[1,1,4], c: f32[1,1,4]"),
        "{err}"
    );
    let (code, out, err) = output(rlx().arg("bench").arg(&model).args(["--iters", "1"]));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("input a: generated"), "{out}");
    // Inputs and outputs on the device: the CPU's is the host.
    let (code, out, err) = output(
        rlx()
            .arg("bench")
            .arg(&model)
            .args(["--iters", "2", "--io", "device"]),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("inputs and outputs on the device"), "{out}");
    assert!(out.contains("median: "), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inputs_dir_takes_both_layouts_and_refuses_a_folder_with_neither() {
    let dir = tmp("inputs-dir");
    let model = cli_model("three_inputs");
    let run = |inputs: &std::path::Path, out: &str| {
        output(
            rlx()
                .arg("run")
                .arg(&model)
                .arg("--inputs")
                .arg(inputs)
                .arg("--output-dir")
                .arg(dir.join(out)),
        )
    };
    // An empty folder.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, err) = run(&empty, "o");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("holds no inputs"), "{err}");
    assert!(err.contains("NAME.npy: a, b, c"), "{err}");
    // NAME.npy files: y = a + b * c.
    let named = dir.join("named");
    std::fs::create_dir_all(&named).unwrap();
    npy(&named, "a", &row([1.0, 2.0, 3.0, 4.0]));
    npy(&named, "b", &row([2.0; 4]));
    let (code, _, err) = run(&named, "o");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("inputs not given (not in "), "{err}");
    npy(&named, "c", &row([0.5, 1.0, 1.5, 2.0]));
    let (code, out, err) = run(&named, "o");
    assert_eq!(code, Some(0), "{out}{err}");
    let y = rlx_onnx::npy::read(&dir.join("o/y.npy")).unwrap();
    assert_eq!(y.values::<f32>().unwrap(), &[2.0, 4.0, 6.0, 8.0]);
    // A tensor file named for no input.
    npy(&named, "d", &row([0.0; 4]));
    let (code, _, err) = run(&named, "o3");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("d.npy` is named for no input of the model; its inputs: a, b, c"),
        "{err}"
    );
    // The backend-test layout, and a case folder given for its data set.
    let case = common::root().join("golden/cnn");
    let (code, out, err) = output(
        rlx()
            .arg("run")
            .arg(cnn())
            .arg("--inputs")
            .arg(case.join("test_data_set_0"))
            .arg("--output-dir")
            .arg(dir.join("o4")),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, _, err) = output(
        rlx()
            .arg("run")
            .arg(cnn())
            .arg("--inputs")
            .arg(&case)
            .arg("--output-dir")
            .arg(dir.join("o5")),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("give one of its data sets"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn graph_draws_svg_of_a_model_of_hundreds_of_nodes() {
    let dir = tmp("graph-large");
    // BERT as exported, before any fusion; Inception v2 (light, from the
    // ONNX test data) where it is here: hundreds of nodes.
    let mut models = vec![(
        common::root().join("tests/data/exported/bert_script/model.onnx"),
        100,
    )];
    if let Some(data) = common::testdata() {
        models.push((data.join("light/light_inception_v2.onnx"), 300));
    }
    for (model, boxes) in models {
        let svg = dir.join("g.svg");
        let (code, out, err) = output(
            rlx()
                .arg("graph")
                .arg(&model)
                .args(["--after", "import", "--force", "-o"])
                .arg(&svg),
        );
        assert_eq!(code, Some(0), "{out}{err}");
        let text = std::fs::read_to_string(&svg).unwrap();
        let drawn = text.matches("<rect x=").count();
        assert!(drawn > boxes, "{}: {drawn} boxes", model.display());
        assert!(text.ends_with("</svg>\n"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn metadata_is_shown_kept_in_artifacts_and_given_to_the_library() {
    let dir = tmp("metadata");
    let model = cli_model("three_inputs");
    let (code, out, err) = output(rlx().arg("inspect").arg(&model));
    assert_eq!(code, Some(0), "{err}");
    for want in [
        "model version: 3",
        "domain: ai.rlx.test",
        "description: A model with metadata.",
        "graph description: y = a + b * c",
        "metadata (2 entries):",
        "  names: {0: 'cat', 1: 'dog'}",
        "  imgsz: [640, 640]",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    let file = dir.join("m.rlx");
    let (code, _, err) = output(rlx().arg("convert").arg(&model).arg("-o").arg(&file));
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = output(rlx().arg("inspect").arg(&file));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("  imgsz: [640, 640]"), "{out}");
    let m = rlx_onnx::artifact::load(&file).unwrap();
    assert_eq!(m.metadata.get("names"), Some("{0: 'cat', 1: 'dog'}"));
    assert_eq!(m.metadata.version, Some(3));
    assert_eq!(m.metadata.producer_name, "make_models.py");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn convert_for_cuda_without_nvrtc_is_an_error_unless_allowed() {
    let dir = tmp("no-nvrtc");
    let convert = |extra: &[&str], out: &str| {
        output(
            rlx()
                .env_remove("LD_LIBRARY_PATH")
                .arg("convert")
                .arg(cnn())
                .args(["--bind", "N=1", "--target", "cuda", "-o"])
                .arg(dir.join(out))
                .args(extra),
        )
    };
    let (code, out, err) = convert(&[], "a.rlx");
    if code == Some(0) {
        // NVRTC is on this machine's library path: the kernels are built.
        assert!(out.contains("prebuilt"), "{out}");
        return;
    }
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot compile the CUDA kernels"), "{err}");
    assert!(err.contains("--allow-missing-kernels"), "{err}");
    assert!(!dir.join("a.rlx").exists());
    let (code, _, err) = convert(&["--allow-missing-kernels"], "b.rlx");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning: no CUDA kernels in the artifact"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_says_which_device_and_what_it_ran() {
    let (code, out, err) = output(rlx().arg("bench").arg(cnn()).args([
        "--bind",
        "N=1",
        "--iters",
        "2",
        "--threads",
        "1",
    ]));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("bench: target cpu, 1 thread, 2 timed runs after 3 warm-up"),
        "{out}"
    );
    assert!(
        out.find("bench: ") < out.find("input x: "),
        "settings first: {out}"
    );
    assert!(out.contains("device: cpu, 1 thread"), "{out}");
    assert!(
        out.contains("input x: generated f32[1, 3, 16, 16]"),
        "{out}"
    );
    let (code, _, err) = output(rlx().arg("bench").arg(cnn()).args(["--iters", "0"]));
    assert_eq!(code, Some(2), "{err}");
    if common::wgpu_devices().is_none() {
        return;
    }
    let (code, out, err) = output(
        rlx()
            .arg("bench")
            .arg(cnn())
            .args(["--bind", "N=1", "--iters", "1", "--target", "wgpu"]),
    );
    assert_eq!(code, Some(0), "{err}");
    let device = out
        .lines()
        .find(|l| l.starts_with("device: "))
        .unwrap_or("");
    assert!(device.contains("driver"), "{out}");
    if device.contains(": software (CPU) through Vulkan") {
        assert!(err.contains("is a software renderer"), "{err}");
    }
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
}

#[test]
fn bench_writes_a_chrome_trace_named_by_onnx_nodes() {
    let dir = tmp("trace");
    let trace = dir.join("t.json");
    let (code, out, err) = output(
        rlx()
            .arg("bench")
            .arg(cnn())
            .args(["--bind", "N=1", "--iters", "1", "--trace"])
            .arg(&trace),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(
        text.starts_with("{\"displayTimeUnit\": \"ms\", \"traceEvents\": ["),
        "{text}"
    );
    assert!(text.contains("\"ph\": \"X\""), "{text}");
    // Events are named by the ONNX nodes of the model.
    let onnx =
        rlx_onnx::importer::import_file(&cnn(), &rlx_onnx::importer::Registry::standard()).unwrap();
    let names: Vec<String> = onnx
        .graph
        .node_ids()
        .into_iter()
        .flat_map(|id| onnx.graph.node(id).origin.clone())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| text.contains(&format!("\"name\": \"{n}"))),
        "{text}"
    );
    // The one overwrite rule: an existing trace is kept without --force.
    let (code, _, err) = output(
        rlx()
            .arg("bench")
            .arg(cnn())
            .args(["--bind", "N=1", "--iters", "1", "--trace"])
            .arg(&trace),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("exists: --force replaces it"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_command_refuses_to_overwrite_without_force() {
    let dir = tmp("overwrite");
    let art = dir.join("m.rlx");
    let (code, _, err) = output(rlx().arg("convert").arg(cnn()).arg("-o").arg(&art));
    assert_eq!(code, Some(0), "{err}");
    let before = std::fs::read(&art).unwrap();
    let (code, _, err) = output(
        rlx()
            .arg("convert")
            .arg(cnn())
            .args(["-O", "0", "-o"])
            .arg(&art),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("exists: --force replaces it"), "{err}");
    assert_eq!(std::fs::read(&art).unwrap(), before, "kept as it was");
    let (code, _, err) = output(
        rlx()
            .arg("convert")
            .arg(cnn())
            .args(["-O", "0", "--force", "-o"])
            .arg(&art),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_ne!(std::fs::read(&art).unwrap(), before);
    // An artifact under an .onnx name is written, with a warning.
    let (code, _, err) = output(
        rlx()
            .arg("convert")
            .arg(cnn())
            .arg("-o")
            .arg(dir.join("m.onnx")),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning: ") && err.contains("name it .rlx"),
        "{err}"
    );
    // graph -o.
    let svg = dir.join("g.svg");
    std::fs::write(&svg, b"mine").unwrap();
    let (code, _, err) = output(rlx().arg("graph").arg(cnn()).arg("-o").arg(&svg));
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(std::fs::read(&svg).unwrap(), b"mine");
    let (code, _, err) = output(
        rlx()
            .arg("graph")
            .arg(cnn())
            .arg("--force")
            .arg("-o")
            .arg(&svg),
    );
    assert_eq!(code, Some(0), "{err}");
    // dump --out: one dump per folder.
    let dumps = dir.join("dumps");
    let dump = |extra: &[&str]| {
        output(
            rlx()
                .arg("dump")
                .arg(cnn())
                .args(["--after", "all", "--out"])
                .arg(&dumps)
                .args(extra),
        )
    };
    assert_eq!(dump(&[]).0, Some(0));
    let (code, _, err) = dump(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("holds an earlier dump"), "{err}");
    assert_eq!(dump(&["--force"]).0, Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn long_dims_are_simplified_named_and_cut() {
    let dir = tmp("long-dims");
    let file = dir.join("neck.rlx");
    let (code, _, err) = output(
        rlx()
            .arg("convert")
            .arg(cli_model("strided_neck"))
            .arg("-o")
            .arg(&file),
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = output(rlx().arg("inspect").arg(&file));
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.contains('$'), "no internal names: {out}");
    let longest = out.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(longest <= 200, "a line of {longest} characters: {out}");
    let (code, full, err) = output(rlx().arg("inspect").arg(&file).arg("-v"));
    assert_eq!(code, Some(0), "{err}");
    assert!(full.len() >= out.len(), "{full}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn edge_errors_say_what_to_do() {
    let dir = tmp("edges");
    // An empty file is a corrupt model: exit 2.
    let empty = dir.join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    for cmd in ["inspect", "dump"] {
        let (code, _, err) = output(rlx().arg(cmd).arg(&empty));
        assert_eq!(code, Some(2), "{cmd}: {err}");
        assert!(err.contains("empty"), "{cmd}: {err}");
    }
    // An artifact where an .onnx model is needed; `dump` prints its graph.
    let art = dir.join("m.rlx");
    assert_eq!(
        output(rlx().arg("convert").arg(cnn()).arg("-o").arg(&art)).0,
        Some(0)
    );
    let (code, _, err) = output(
        rlx()
            .arg("convert")
            .arg(&art)
            .arg("-o")
            .arg(dir.join("n.rlx")),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("this is an .rlx artifact"), "{err}");
    let (code, out, err) = output(rlx().arg("dump").arg(&art));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("rlx-ir "), "{out}");
    // `check` given a data set suggests its case.
    let set = common::root().join("golden/cnn/test_data_set_0");
    let (code, _, err) = output(rlx().arg("check").arg(&set));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("golden/cnn`"), "{err}");
    // A misspelt pass.
    let (code, _, err) = output(
        rlx()
            .arg("dump")
            .arg(cnn())
            .args(["--after", "fuse-atention"]),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("did you mean `fuse-attention`?"), "{err}");
    // A non-regular file is refused, not read forever.
    #[cfg(unix)]
    {
        let (code, _, err) = output(rlx().arg("inspect").arg("/dev/zero"));
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("not a regular file"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_groups_limits_and_shows_defaults() {
    let (_, run_help, _) = output(rlx().args(["run", "--help"]));
    assert!(
        run_help.contains("[default: this machine's cores]"),
        "{run_help}"
    );
    assert!(run_help.contains("Limits:\n"), "{run_help}");
    let limits = run_help.split("Limits:\n").nth(1).unwrap_or("");
    assert!(limits.contains("--max-tensor-elements"), "{run_help}");
    let (_, bench_help, _) = output(rlx().args(["bench", "--help"]));
    let cuda = bench_help
        .split("CUDA (--target cuda):\n")
        .nth(1)
        .unwrap_or("");
    assert!(cuda.contains("--cuda-attention"), "{bench_help}");
    // A fully bound artifact: no compilation when it runs.
    let dir = tmp("help");
    let art = dir.join("m.rlx");
    assert_eq!(
        output(
            rlx()
                .arg("convert")
                .arg(cnn())
                .args(["--bind", "N=1", "-o"])
                .arg(&art)
        )
        .0,
        Some(0)
    );
    let (code, out, err) = output(
        rlx()
            .arg("run")
            .arg(&art)
            .arg("--generate-missing")
            .arg("--output-dir")
            .arg(dir.join("o")),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.contains("compilation"), "{out}");
    assert!(out.contains("planning memory and loading kernels"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fifos_are_refused_and_concurrent_runs_leave_one_set() {
    let dir = tmp("fifo");
    #[cfg(unix)]
    {
        let fifo = dir.join("a.npy");
        let made = Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            // Nothing ever writes to it: reading would block for ever.
            let (code, _, err) = output(
                rlx()
                    .arg("run")
                    .arg(cli_model("three_inputs"))
                    .arg("--generate-missing")
                    .arg("--input")
                    .arg(format!("a={}", fifo.display()))
                    .arg("--output-dir")
                    .arg(dir.join("o")),
            );
            assert_eq!(code, Some(2), "{err}");
            assert!(err.contains("not a regular file"), "{err}");
        }
    }
    // Eight runs at once into one folder, each with its own inputs: the
    // three outputs (x, -x, |x|) that remain come from one run.
    let out = dir.join("shared");
    let children: Vec<_> = (0..8)
        .map(|seed| {
            rlx()
                .arg("run")
                .arg(cli_model("odd_output_names"))
                .args(["--seed", &seed.to_string(), "--force", "--output-dir"])
                .arg(&out)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let read = |f: &str| {
        rlx_onnx::npy::read(&out.join(f))
            .unwrap()
            .values::<f32>()
            .unwrap()
            .to_vec()
    };
    let (x, neg, abs) = (read("y_1.npy"), read("y_1_2.npy"), read("y_1_3.npy"));
    for i in 0..x.len() {
        assert_eq!(neg[i], -x[i], "a mix of runs: {x:?} {neg:?}");
        assert_eq!(abs[i], x[i].abs(), "a mix of runs: {x:?} {abs:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `generate` decodes the golden decoder greedily as ONNX Runtime does
/// (golden/decoder/greedy.npy), from ids or from text through a
/// tokenizer.json, and refuses a model without a key/value cache.
#[test]
fn generate_decodes_with_the_cache_from_ids_or_text() {
    let dir = common::root().join("golden/decoder");
    let model = dir.join("model.onnx");
    let greedy = rlx_onnx::npy::read(&dir.join("greedy.npy")).unwrap();
    let want: Vec<String> = greedy
        .to_i64_vec()
        .unwrap()
        .chunks(greedy.dims()[1])
        .map(|r| r.iter().map(i64::to_string).collect::<Vec<_>>().join(" "))
        .collect();
    let (code, out, err) = output(rlx().arg("generate").arg(&model).args([
        "--prompt-ids",
        "1,2,1,5,41",
        "--prompt-ids",
        "3,9,31,6,19",
        "--max-new-tokens",
        "12",
        "--threads",
        "1",
    ]));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("[0] {}\n", want[0])), "{out}");
    assert!(out.contains(&format!("[1] {}\n", want[1])), "{out}");
    assert!(
        err.contains("prefill: 5 positions x 2 rows") && err.contains("decode: 11 steps"),
        "{err}"
    );
    let (code, out, err) = output(
        rlx()
            .arg("generate")
            .arg(&model)
            .args(["--prompt", "t1 t2 t1 t5 t41", "--tokenizer"])
            .arg(dir.join("tokenizer.json"))
            .args(["--max-new-tokens", "3"]),
    );
    assert_eq!(code, Some(0), "{err}");
    let first: Vec<&str> = want[0].split(' ').take(3).collect();
    let text: Vec<String> = first.iter().map(|t| format!("t{t}")).collect();
    assert!(
        out.contains(&format!(
            "[0] {}\n[0] {}\n",
            first.join(" "),
            text.join(" ")
        )),
        "{out}"
    );
    let (code, _, err) = output(
        rlx()
            .arg("generate")
            .arg(cnn())
            .args(["--prompt-ids", "1,2"]),
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("no `input_ids` input"), "{err}");
    let (code, _, err) = output(rlx().arg("generate").arg(&model));
    assert_ne!(code, Some(0));
    assert!(err.contains("give the prompt"), "{err}");
}
