//! insta snapshots of the IR: after import and inference for every golden
//! model, and after the full `-O2` CPU pipeline for every golden model and the
//! light models. A change to a snapshot is reviewed (`cargo insta review`),
//! never bulk-accepted.

mod common;

use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::ir::text::print_graph;
use rlx_onnx::testdata::light_models;
use rlx_onnx::{Compiler, OptLevel, Target};

fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(common::root().join("golden/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings
}

#[test]
fn golden_import_snapshots() {
    let registry = Registry::standard();
    settings().bind(|| {
        for case in common::golden_cases() {
            let name = case.file_name().unwrap().to_string_lossy().to_string();
            let m = import_file(&case.join("model.onnx"), &registry)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            insta::assert_snapshot!(format!("import__{name}"), print_graph(&m.graph));
        }
    });
}

fn o2(path: &std::path::Path) -> String {
    let m = import_file(path, &Registry::standard())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let c = Compiler::new(Target::Cpu)
        .opt_level(OptLevel::O2)
        .verify(true)
        .compile(m, None)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    print_graph(&c.graph)
}

#[test]
fn golden_o2_snapshots() {
    settings().bind(|| {
        for case in common::golden_cases() {
            let name = case.file_name().unwrap().to_string_lossy().to_string();
            insta::assert_snapshot!(format!("o2__{name}"), o2(&case.join("model.onnx")));
        }
    });
}

#[test]
fn light_o2_snapshots() {
    let Some(data) = common::testdata() else {
        return;
    };
    settings().bind(|| {
        for m in light_models(&data.join("light")).unwrap() {
            insta::assert_snapshot!(format!("o2__{}", m.name), o2(&m.model));
        }
    });
}
