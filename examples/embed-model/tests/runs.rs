//! The example application runs: its embedded artifact loads and classifies
//! the test pattern (scripts/test.sh relies on this instead of `cargo run`,
//! which would resolve features anew and build the whole stack again).

use std::process::Command;

#[test]
fn the_application_classifies_its_test_pattern() {
    let out = Command::new(env!("CARGO_BIN_EXE_rlx-example-embed-model"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("model input"), "{stdout}");
    let class = stdout
        .lines()
        .find_map(|l| l.strip_prefix("class "))
        .unwrap_or_else(|| panic!("no class line: {stdout}"));
    class.trim().parse::<usize>().unwrap();
}

#[test]
fn a_wrong_image_is_an_error_not_a_panic() {
    let dir = std::env::temp_dir().join(format!("rlx-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.npy");
    std::fs::write(&path, b"not an npy file").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rlx-example-embed-model"))
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
}
