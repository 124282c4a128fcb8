//! Every seed of `fuzz/corpus/<target>` and every input that once crashed
//! a target (`fuzz/regressions/<target>`) runs through the target's body:
//! the fuzzers' findings stay fixed without a fuzzer.

use std::path::Path;

type Body = fn(&[u8]);

const TARGETS: &[(&str, Body)] = &[
    ("import", rlx_fuzz::import),
    ("ir_text", rlx_fuzz::ir_text),
    ("artifact", rlx_fuzz::artifact),
    ("tensor_files", rlx_fuzz::tensor_files),
    ("structured", rlx_fuzz::structured),
    ("gpu_plans", rlx_fuzz::gpu_plans),
    ("text_ops", rlx_fuzz::text_ops),
];

fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<_> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

fn run_all(kind: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(kind);
    let mut count = 0;
    for (target, body) in TARGETS {
        for f in files(&root.join(target)) {
            let data = std::fs::read(&f).unwrap();
            let run = std::panic::catch_unwind(|| body(&data));
            assert!(run.is_ok(), "{target}: {} panics", f.display());
            count += 1;
        }
    }
    count
}

#[test]
fn seeds_run_through_every_target() {
    assert!(run_all("corpus") > 0, "fuzz/corpus is empty");
}

#[test]
fn past_crashes_stay_fixed() {
    run_all("regressions");
}
