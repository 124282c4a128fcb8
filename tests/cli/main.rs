//! The `rlx-onnx` command as a user meets it: a closed pipe ends it quietly,
//! `conformance` fails when a case fails (and says which), `--bind` refuses a
//! name that is no symbol of the model, `--target` lists the valid targets,
//! `inspect` names the dims `--bind` takes, an artifact refuses options it
//! was not compiled with, generated inputs are asked for, seeded and stay
//! inside the tables they index, a forgotten input is an error, `--inputs
//! DIR` takes both layouts, `check` reports errors sensibly, every command
//! keeps one exit-status convention and one overwrite rule, progress stays
//! off pipes, long dims are named in dumps and cut in `inspect`, SVG of
//! hundreds of nodes comes out, metadata is kept, `bench` says what ran and
//! writes Chrome traces, and edge errors say what to do. Models: golden/ and
//! tests/data/cli (make_models.py).

#[path = "../common/mod.rs"]
mod common;
mod toolbox;

use std::io::Read;
use std::process::{Command, Stdio};

fn rlx() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rlx-onnx"))
}

fn cnn() -> std::path::PathBuf {
    common::root().join("golden/cnn/model.onnx")
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let Some(data) = common::testdata() else {
        return;
    };
    // The IR after every pass of ResNet-50: far more than a pipe buffers.
    let mut child = rlx()
        .args(["dump", "--after", "all"])
        .arg(data.join("light/light_resnet50.onnx"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 8];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The reading end is closed here, long before the dump is written out.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(13), "ends by SIGPIPE: {err}");
    }
}

#[test]
fn conformance_fails_when_a_case_fails_and_names_it() {
    let dir = std::env::temp_dir().join(format!("rlx-cli-conformance-{}", std::process::id()));
    let case = dir.join("test_cnn_wrong");
    let set = case.join("test_data_set_0");
    std::fs::create_dir_all(&set).unwrap();
    let src = common::root().join("golden/cnn");
    std::fs::copy(src.join("model.onnx"), case.join("model.onnx")).unwrap();
    std::fs::copy(
        src.join("test_data_set_0/input_0.pb"),
        set.join("input_0.pb"),
    )
    .unwrap();
    // The expected output's last float changed: the case must fail.
    let mut out = std::fs::read(src.join("test_data_set_0/output_0.pb")).unwrap();
    let n = out.len();
    out[n - 2] ^= 0x40;
    std::fs::write(set.join("output_0.pb"), out).unwrap();
    let r = rlx()
        .args(["conformance", "--data"])
        .arg(&dir)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert_eq!(r.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAILED test_cnn_wrong: "), "{stdout}");
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");
}

#[test]
fn an_unknown_bind_is_refused_with_the_models_symbols() {
    let r = rlx()
        .args(["run"])
        .arg(cnn())
        .args(["--bind", "widht=320", "--output-dir"])
        .arg(std::env::temp_dir().join("rlx-cli-never-written"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_ne!(r.status.code(), Some(0), "{err}");
    assert!(err.contains("`widht` is not a symbolic dim"), "{err}");
    assert!(err.contains("[\"N\"]"), "{err}");
}

#[test]
fn unbound_dims_are_named_as_the_flags_that_bind_them_and_run_takes_o() {
    // golden/cnn's input is [N, 3, 8, 8]: generating it needs N.
    let dir = tmp("run-short-o");
    let (code, _, err) = output(rlx().arg("run").arg(cnn()).arg("--generate-missing"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("give their sizes (--bind N=SIZE)"), "{err}");
    let (code, _, err) = output(
        rlx()
            .arg("run")
            .arg(cnn())
            .args(["--generate-missing", "--bind", "N=2", "-o"])
            .arg(&dir),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        dir.join("y.npy").is_file(),
        "-o did not name the output directory"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_target_lists_the_valid_ones() {
    let r = rlx()
        .args(["run"])
        .arg(cnn())
        .args(["--target", "gpu"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    for t in ["cpu", "cuda", "wgpu"] {
        assert!(err.contains(t), "{err}");
    }
}

#[test]
fn inspect_names_the_dims_bind_accepts() {
    let model = common::root().join("golden/placeholder_dims/model.onnx");
    let out = rlx().arg("inspect").arg(&model).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("bindable dims (--bind NAME=SIZE): x.0, x.2, x.3, bias.0, scale.0"),
        "{text}"
    );
    // And `run` takes them: x.2 and x.3 bind to different sizes.
    let dir = std::env::temp_dir().join(format!("rlx-cli-bind-{}", std::process::id()));
    let out = rlx()
        .args([
            "run",
            "--generate-missing",
            "--bind",
            "x.0=1",
            "--bind",
            "x.2=48",
            "--bind",
            "x.3=192",
        ])
        .args(["--bind", "bias.0=2", "--bind", "scale.0=1", "--output-dir"])
        .arg(&dir)
        .arg(&model)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rlx-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cli_model(name: &str) -> std::path::PathBuf {
    common::root().join(format!("tests/data/cli/{name}.onnx"))
}

/// (exit code, stdout, stderr)
fn output(cmd: &mut Command) -> (Option<i32>, String, String) {
    let o = cmd.output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn an_artifact_refuses_options_it_was_not_compiled_with() {
    let dir = tmp("artifact-options");
    let rlx_file = dir.join("cnn.rlx");
    let (code, _, err) = output(
        rlx()
            .arg("convert")
            .arg(cnn())
            .args(["--bind", "N=1", "-o"])
            .arg(&rlx_file),
    );
    assert_eq!(code, Some(0), "{err}");
    for (flag, value, said) in [
        ("--target", "wgpu", "`--target wgpu` conflicts"),
        ("-O", "1", "`-O 1` conflicts"),
        ("--precision", "fp16", "`--precision fp16` conflicts"),
        (
            "--bind",
            "N=2",
            "--bind applies when compiling an .onnx model",
        ),
    ] {
        let (code, _, err) = output(
            rlx()
                .arg("run")
                .arg(&rlx_file)
                .arg("--generate-missing")
                .args([flag, value, "--output-dir"])
                .arg(dir.join("out")),
        );
        assert_eq!(code, Some(2), "{flag} {value}: {err}");
        assert!(err.contains(said), "{flag} {value}: {err}");
    }
    // Options that agree with the artifact are accepted.
    let (code, out, err) = output(
        rlx()
            .arg("run")
            .arg(&rlx_file)
            .args([
                "--generate-missing",
                "--target",
                "cpu",
                "-O",
                "2",
                "--output-dir",
            ])
            .arg(dir.join("out")),
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_takes_inputs_from_files_and_advises_them_for_an_unbound_artifact() {
    let dir = tmp("bench-inputs");
    let unbound = dir.join("cnn.rlx");
    let (code, _, err) = output(rlx().arg("convert").arg(cnn()).arg("-o").arg(&unbound));
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = output(rlx().arg("bench").arg(&unbound).args(["--iters", "1"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--input"), "{err}");
    assert!(
        !err.contains("--bind"),
        "advises what artifacts refuse: {err}"
    );
    let x = common::root().join("golden/cnn/test_data_set_0/input_0.pb");
    let (code, out, err) = output(
        rlx()
            .arg("bench")
            .arg(&unbound)
            .arg("--input")
            .arg(format!("x={}", x.display()))
            .args(["--iters", "2", "--warmup", "1"]),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("median:"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inspect_takes_bind_and_agrees_with_convert() {
    let model = common::root().join("golden/if_rank/model.onnx");
    // The unbound model converts for wgpu; inspect must not call its shape
    // arithmetic unsupported.
    let (code, out, err) = output(rlx().arg("inspect").arg(&model).args(["--target", "wgpu"]));
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(" 0 unsupported"), "{out}");
    assert!(
        out.contains("folded to a constant once input shapes are known"),
        "{out}"
    );
    let (code, _, err) = output(rlx().arg("inspect").arg(cnn()).args(["--bind", "widht=3"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`widht` is not a symbolic dim"), "{err}");
    let (code, out, err) = output(
        rlx()
            .arg("inspect")
            .arg(cnn())
            .args(["--bind", "N=1", "--target", "cpu"]),
    );
    assert_eq!(code, Some(0), "{out}{err}");
}

#[test]
fn generated_inputs_are_seeded_ranged_and_inside_the_tables_they_index() {
    let dir = tmp("generated");
    let run = |seed: &str, extra: &[&str], out: &str| {
        output(
            rlx()
                .arg("run")
                .arg(cli_model("token_table"))
                .args(["--seed", seed])
                .args(extra)
                .arg("--output-dir")
                .arg(dir.join(out)),
        )
    };
    // Token ids index a 5-row table: the default range must stay below 5.
    for seed in ["0", "1", "2", "3"] {
        let (code, out, err) = run(seed, &[], seed);
        assert_eq!(code, Some(0), "seed {seed}: {out}{err}");
    }
    let read = |out: &str| std::fs::read(dir.join(out).join("y.npy")).unwrap();
    assert_eq!(read("0"), {
        let (code, _, err) = run("0", &[], "0b");
        assert_eq!(code, Some(0), "{err}");
        read("0b")
    });
    assert_ne!(
        read("0"),
        read("1"),
        "different seeds give different inputs"
    );
    // A range the user gives is used as given: ids 5.. are out of the table.
    let (code, _, err) = run("0", &["--range", "ids=5..9"], "bad");
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = run("0", &["--range", "ids=9..5"], "bad");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("LO < HI"), "{err}");
    let (code, _, err) = run("0", &["--range", "nope=0..1"], "bad");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no input `nope`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_reports_the_worst_element_and_a_sensible_relative_error() {
    let dir = tmp("check");
    let case = dir.join("cnn");
    let set = case.join("test_data_set_0");
    std::fs::create_dir_all(&set).unwrap();
    let src = common::root().join("golden/cnn");
    std::fs::copy(src.join("model.onnx"), case.join("model.onnx")).unwrap();
    std::fs::copy(
        src.join("test_data_set_0/input_0.pb"),
        set.join("input_0.pb"),
    )
    .unwrap();
    std::fs::copy(
        src.join("test_data_set_0/output_0.pb"),
        set.join("output_0.pb"),
    )
    .unwrap();
    let (code, out, err) = output(rlx().arg("check").arg(&case));
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("max rel"), "{out}");
    assert!(!out.contains("e300"), "{out}");
    // Flip a bit high in the last float: the check fails and shows where.
    let mut bytes = std::fs::read(set.join("output_0.pb")).unwrap();
    let n = bytes.len();
    bytes[n - 2] ^= 0x40;
    std::fs::write(set.join("output_0.pb"), bytes).unwrap();
    let (code, out, err) = output(rlx().arg("check").arg(&case));
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("worst at ["), "{out}");
    assert!(out.contains("1 of"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_command_exits_2_on_a_corrupt_model() {
    let dir = tmp("corrupt");
    let bad = dir.join("bad.onnx");
    std::fs::write(&bad, b"\x08\x07\x12\xff\xff\xff\xff\x0fnot a model").unwrap();
    let case = dir.join("case");
    std::fs::create_dir_all(case.join("test_data_set_0")).unwrap();
    std::fs::copy(&bad, case.join("model.onnx")).unwrap();
    let runs: Vec<Vec<std::ffi::OsString>> = vec![
        vec!["inspect".into(), bad.clone().into()],
        vec!["dump".into(), bad.clone().into()],
        vec![
            "convert".into(),
            bad.clone().into(),
            "-o".into(),
            dir.join("x.rlx").into(),
        ],
        vec![
            "run".into(),
            bad.clone().into(),
            "--output-dir".into(),
            dir.join("o").into(),
        ],
        vec!["bench".into(), bad.clone().into()],
        vec!["check".into(), case.clone().into()],
    ];
    for args in runs {
        let (code, _, err) = output(rlx().args(&args));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert!(!dir.join("x.rlx").exists());
    let (_, out, _) = output(rlx().arg("--help"));
    assert!(out.contains("Exit status: 0 when"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn progress_stays_off_a_pipe() {
    // Standard error is a pipe here: no bar, no carriage returns.
    let (code, out, err) = output(
        rlx()
            .args(["conformance", "--data"])
            .arg(common::root().join("golden")),
    );
    assert!(code == Some(0) || code == Some(1), "{out}{err}");
    assert!(!err.contains('\r') && !out.contains('\r'), "{err}");
    assert!(!err.contains("[="), "{err}");
}

#[test]
fn dumps_name_long_dims() {
    let (code, out, err) = output(rlx().arg("dump").arg(cli_model("strided_neck")));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("rlx-ir 3\ndims {\n  $0 = max("), "{out}");
    let longest = out.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 400, "a line of {longest} characters: {out}");
    // The dump parses back to the graph it printed.
    let g = rlx_onnx::ir::text::parse_graph(&out).unwrap();
    assert_eq!(rlx_onnx::ir::text::print_graph(&g), out);
}

#[test]
fn compare_names_the_broken_node_and_reads_reference_npz() {
    let (code, out, err) = output(
        rlx()
            .arg("compare")
            .arg(cnn())
            .args(["--bind", "N=1", "-O", "0", "--against-opt", "0"])
            .args(["--inject-fault", "pool1"]),
    );
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("first divergence: node `pool1` (MaxPool)"),
        "{out}"
    );
    assert!(out.contains("the sides agree"), "{out}");
    let (code, out, err) =
        output(
            rlx()
                .arg("compare")
                .arg(cnn())
                .args(["--bind", "N=1", "--against-opt", "0"]),
        );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("no divergence"), "{out}");
    // Reference tensors from an .npz, as numpy.savez writes them.
    let dir = tmp("compare-npz");
    let case = common::root().join("golden/cnn");
    let data = rlx_onnx::testdata::read_data_set(&case.join("test_data_set_0")).unwrap();
    let npz = dir.join("ref.npz");
    let write_npz = |y: &rlx_onnx::ir::Tensor| {
        let npy = dir.join("y.npy");
        rlx_onnx::npy::write(&npy, y).unwrap();
        let mut z = zip::ZipWriter::new(std::fs::File::create(&npz).unwrap());
        z.start_file("y.npy", zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut z, &std::fs::read(&npy).unwrap()).unwrap();
        z.finish().unwrap();
    };
    write_npz(&data.outputs[0]);
    let x = case.join("test_data_set_0/input_0.pb");
    let compare_npz = || {
        output(
            rlx()
                .arg("compare")
                .arg(cnn())
                .arg("--against")
                .arg(&npz)
                .arg("--input")
                .arg(format!("x={}", x.display())),
        )
    };
    let (code, out, err) = compare_npz();
    assert_eq!(code, Some(0), "{out}{err}");
    let wrong = rlx_onnx::ir::ops::values::float_tensor(
        rlx_onnx::ir::DType::F32,
        data.outputs[0].dims(),
        &vec![0.5; data.outputs[0].numel()],
    )
    .unwrap();
    write_npz(&wrong);
    let (code, out, err) = compare_npz();
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("first divergence: node `fc` (Gemm), output `y`"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn graph_writes_svg_and_dot() {
    let dir = tmp("graph");
    for (file, head) in [("g.svg", "<?xml"), ("g.dot", "digraph rlx {")] {
        let path = dir.join(file);
        let (code, out, err) = output(
            rlx()
                .arg("graph")
                .arg(cnn())
                .args(["--after", "fuse-conv", "--target", "wgpu", "-o"])
                .arg(&path),
        );
        assert_eq!(code, Some(0), "{out}{err}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(head), "{text}");
    }
    let (code, _, err) = output(rlx().arg("graph").arg(cnn()).args(["--after", "nope"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not in the pipeline"), "{err}");
    let (code, _, err) = output(
        rlx()
            .arg("graph")
            .arg(cnn())
            .arg("-o")
            .arg(dir.join("g.png")),
    );
    assert_eq!(code, Some(2), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inspect_tells_what_an_artifact_takes_and_gives() {
    let dir = tmp("inspect-artifact");
    let file = dir.join("t.rlx");
    let model = common::root().join("golden/transformer/model.onnx");
    let (code, _, err) = output(
        rlx()
            .arg("convert")
            .arg(&model)
            .args(["--bind", "batch=1", "-o"])
            .arg(&file),
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = output(rlx().arg("inspect").arg(&file));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("compiled for cpu at -O2"), "{out}");
    assert!(out.contains("bound dims: batch=1"), "{out}");
    assert!(out.contains("  x: f32[1,seq,16]"), "{out}");
    assert!(out.contains("  y: f32[1,seq,16]"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_keeps_outputs_apart_and_overwrites_only_when_told() {
    let dir = tmp("run-files");
    let out = dir.join("out");
    let run = |extra: &[&str]| {
        output(
            rlx()
                .arg("run")
                .arg(cli_model("odd_output_names"))
                .arg("--generate-missing")
                .arg("--output-dir")
                .arg(&out)
                .args(extra),
        )
    };
    let (code, stdout, err) = run(&[]);
    assert_eq!(code, Some(0), "{err}");
    // `y/1`, `y_1` and `y:1` clean to the same name: three distinct files.
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["y_1.npy", "y_1_2.npy", "y_1_3.npy"], "{stdout}");
    // A second run refuses to overwrite, and --force replaces.
    let (code, _, err) = run(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("exists: --force replaces it"), "{err}");
    // A symlink planted at an output path is replaced, never followed.
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, b"keep").unwrap();
    std::fs::remove_file(out.join("y_1.npy")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&victim, out.join("y_1.npy")).unwrap();
    let (code, _, err) = run(&["--force"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn huge_inputs_are_errors_not_aborts() {
    let dir = tmp("huge");
    // Two billion elements pass the tensor limit but are not generated.
    let (code, _, err) = output(
        rlx()
            .arg("run")
            .arg(cli_model("strided_neck"))
            .args([
                "--generate-missing",
                "--bind",
                "height=100000",
                "--bind",
                "width=20000",
                "--output-dir",
            ])
            .arg(dir.join("o")),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("are not generated"), "{err}");
    // A .npy header claiming 4 GB over 100 bytes of data.
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let mut header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 32768, 32768), }".to_string();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    npy.extend((header.len() as u16).to_le_bytes());
    npy.extend(header.as_bytes());
    npy.extend([0u8; 100]);
    let x = dir.join("x.npy");
    std::fs::write(&x, npy).unwrap();
    let (code, _, err) = output(
        rlx()
            .arg("run")
            .arg(cli_model("strided_neck"))
            .arg("--input")
            .arg(format!("x={}", x.display()))
            .arg("--output-dir")
            .arg(dir.join("o")),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("does not fit the file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Strings in `.npy`, a sequence in `.npz`, through an artifact that stores
/// a string weight: `run` reads them, and writes the outputs of both kinds.
#[test]
fn run_reads_and_writes_strings_and_sequences_through_an_artifact() {
    use rlx_onnx::ir::{DType, Tensor};
    let dir = tmp("strings");
    let words: Vec<String> = (0..100)
        .map(|i| {
            if i == 7 {
                "seven".into()
            } else {
                format!("w{i}")
            }
        })
        .collect();
    let x = Tensor::from_strings(&[100], words).unwrap();
    std::fs::write(dir.join("x.npy"), rlx_onnx::npy::to_bytes(&x).unwrap()).unwrap();
    let elems = vec![
        Tensor::from_i64(&[3], &[1, 2, 3]).unwrap(),
        Tensor::from_i64(&[1], &[4]).unwrap(),
    ];
    std::fs::write(
        dir.join("s.npz"),
        rlx_onnx::npy::sequence_to_npz(&elems).unwrap(),
    )
    .unwrap();
    let t = Tensor::from_i64(&[2], &[5, 6]).unwrap();
    std::fs::write(dir.join("t.npy"), rlx_onnx::npy::to_bytes(&t).unwrap()).unwrap();
    let artifact = dir.join("m.rlx");
    let (code, _, err) = output(
        rlx()
            .arg("convert")
            .arg(cli_model("words_and_sequence"))
            .arg("-o")
            .arg(&artifact),
    );
    assert_eq!(code, Some(0), "{err}");
    let out = dir.join("out");
    let input = |name: &str, file: &str| format!("{name}={}", dir.join(file).display());
    let (code, stdout, err) = output(
        rlx()
            .arg("run")
            .arg(&artifact)
            .args(["--input", &input("x", "x.npy")])
            .args(["--input", &input("s", "s.npz")])
            .args(["--input", &input("t", "t.npy")])
            .arg("--output-dir")
            .arg(&out),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(stdout.contains("a sequence of 3 i64 tensors"), "{stdout}");
    let same = rlx_onnx::npy::read(&out.join("same.npy")).unwrap();
    let want: Vec<u8> = (0..100).map(|i| u8::from(i != 7)).collect();
    assert_eq!(same.dtype(), DType::Bool);
    assert_eq!(same.bytes(), &want[..]);
    let seq = rlx_onnx::npy::read_npz(&out.join("s2.npz")).unwrap();
    let got: Vec<Vec<i64>> = seq.iter().map(|(_, t)| t.to_i64_vec().unwrap()).collect();
    assert_eq!(got, vec![vec![1, 2, 3], vec![4], vec![5, 6]]);
    let n = rlx_onnx::npy::read(&out.join("n.npy")).unwrap();
    assert_eq!(n.to_i64_vec().unwrap(), vec![3]);
    // Strings survive the .npy round trip, unicode included.
    let u = Tensor::from_strings(&[2], vec!["héllo".into(), "日本".into()]).unwrap();
    let back = rlx_onnx::npy::from_bytes(&rlx_onnx::npy::to_bytes(&u).unwrap(), "u").unwrap();
    assert!(back.bit_eq(&u), "{back:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
