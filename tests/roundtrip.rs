//! Print -> parse -> print is identical, and `verify` accepts the imported
//! graph, for every golden model and every importable node-suite case.

mod common;

use std::path::Path;

use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::ir::text::{parse_graph, print_graph};
use rlx_onnx::ir::verify;

/// Returns an error message if the model imports but does not round-trip.
fn check(model: &Path, registry: &Registry) -> Result<bool, String> {
    let Ok(m) = import_file(model, registry) else {
        return Ok(false);
    };
    verify(&m.graph, Some(&m.weights)).map_err(|e| format!("{}: verify: {e}", model.display()))?;
    let text = print_graph(&m.graph);
    let parsed =
        parse_graph(&text).map_err(|e| format!("{}: parse: {e}\n{text}", model.display()))?;
    let again = print_graph(&parsed);
    if again != text {
        return Err(format!(
            "{}: print -> parse -> print differs",
            model.display()
        ));
    }
    Ok(true)
}

#[test]
fn golden_models_round_trip() {
    let registry = Registry::standard();
    let models = common::golden_models();
    assert!(!models.is_empty(), "no golden models found");
    for m in models {
        assert_eq!(check(&m, &registry), Ok(true), "{}", m.display());
    }
}

#[test]
fn node_cases_round_trip() {
    let Some(data) = common::testdata() else {
        return;
    };
    let registry = Registry::standard();
    let mut imported = 0;
    let mut errors = Vec::new();
    for case in rlx_onnx::testdata::case_dirs(&data.join("node")).unwrap() {
        match check(&case.join("model.onnx"), &registry) {
            Ok(true) => imported += 1,
            Ok(false) => {}
            Err(e) => errors.push(e),
        }
    }
    assert!(
        errors.is_empty(),
        "{} cases fail:\n{}",
        errors.len(),
        errors.join("\n")
    );
    assert!(imported > 1500, "only {imported} node cases imported");
}
