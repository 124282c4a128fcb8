//! The `rlx-onnx` command as a user meets it: a closed pipe ends it quietly,
//! `conformance` fails when a case fails (and says which), `--bind` refuses a
//! name that is no symbol of the model, `--target` lists the valid targets,
//! `inspect` names the dims `--bind` takes.

mod common;

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
            "run", "--bind", "x.0=1", "--bind", "x.2=48", "--bind", "x.3=192",
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
