//! insta snapshots of the IR after import and inference for every golden model.
//! A change to a snapshot is reviewed (`cargo insta review`), never bulk-accepted.

mod common;

use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::ir::text::print_graph;

#[test]
fn golden_import_snapshots() {
    let registry = Registry::standard();
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(common::root().join("golden/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        for case in common::golden_cases() {
            let name = case.file_name().unwrap().to_string_lossy().to_string();
            let m = import_file(&case.join("model.onnx"), &registry)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            insta::assert_snapshot!(format!("import__{name}"), print_graph(&m.graph));
        }
    });
}
