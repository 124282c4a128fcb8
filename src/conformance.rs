//! Runs ONNX backend-test cases and classifies each as passed, failed or unsupported.

use std::path::Path;

use rlx_importer::{import_file, ImportError, MapError, Registry};
use rlx_ir::analysis::{bind_input_values, bind_shapes, specialize, value_inputs};
use rlx_ir::Tensor;

use crate::testdata::{data_set_dirs, read_data_set};

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Passed,
    Failed(String),
    Unsupported(String),
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed(_) => "failed",
            Outcome::Unsupported(_) => "unsupported",
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            Outcome::Passed => "",
            Outcome::Failed(r) | Outcome::Unsupported(r) => r,
        }
    }
}

/// True if an import error means "not supported" rather than "wrong".
pub fn is_unsupported(e: &ImportError) -> bool {
    match e {
        ImportError::Nodes(issues) => issues.iter().all(|i| map_error_unsupported(&i.error)),
        ImportError::Value { reason, .. } => reason.contains("not supported"),
        ImportError::Tensor(rlx_importer::TensorError::DType { .. }) => true,
        _ => false,
    }
}

fn map_error_unsupported(e: &MapError) -> bool {
    match e {
        MapError::UnknownOp { .. } | MapError::Unsupported(_) | MapError::UnhandledAttr(_) => true,
        MapError::Subgraph { source, .. } => is_unsupported(source),
        MapError::Attr { reason, .. } => reason.contains("not supported"),
        _ => false,
    }
}

/// One line per error, for tables.
pub fn one_line(s: &str) -> String {
    s.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" | ")
}

/// Imports the case, specializes it to the first data set's inputs, and checks
/// that the inferred output dtypes and shapes equal the expected outputs'.
pub fn check_import(case: &Path, registry: &Registry) -> Outcome {
    let dirs = match data_set_dirs(case) {
        Ok(d) => d,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let Some(first) = dirs.first() else { return Outcome::Failed("no test_data_set_*".into()) };
    let data = match read_data_set(first) {
        Ok(d) => d,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    check_import_with(&case.join("model.onnx"), registry, &data.inputs, &data.outputs)
}

/// Like [`check_import`] for a model file with given inputs and expected outputs.
pub fn check_import_with(model_path: &Path, registry: &Registry, inputs: &[Tensor], outputs: &[Tensor]) -> Outcome {
    let model = match import_file(model_path, registry) {
        Ok(m) => m,
        Err(e) if is_unsupported(&e) => return Outcome::Unsupported(one_line(&e.to_string())),
        Err(e) => return Outcome::Failed(one_line(&e.to_string())),
    };
    let mut g = model.graph.clone();
    if inputs.len() != g.inputs().len() {
        return Outcome::Failed(format!("the model has {} inputs, the data set {}", g.inputs().len(), inputs.len()));
    }
    let shapes: Vec<&[usize]> = inputs.iter().map(Tensor::dims).collect();
    let b = match bind_shapes(&g, &shapes) {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let values: Vec<(usize, Tensor)> = value_inputs(&g).into_iter().map(|i| (i, inputs[i].clone())).collect();
    if let Err(e) = bind_input_values(&mut g, &values) {
        return Outcome::Failed(e.to_string());
    }
    let g = match specialize(&g, &b, Some(&model.weights)) {
        Ok(g) => g,
        Err(e) => return Outcome::Failed(one_line(&e.to_string())),
    };
    if g.outputs().len() != outputs.len() {
        return Outcome::Failed(format!("{} outputs, expected {}", g.outputs().len(), outputs.len()));
    }
    for (o, want) in g.outputs().iter().zip(outputs) {
        let got = g.ty(o.value);
        if got.dtype != want.dtype() || !shape_matches(&got.shape, want.dims()) {
            return Outcome::Failed(format!("output `{}`: inferred {got}, expected {}", o.name, want.ty()));
        }
    }
    Outcome::Passed
}

/// A known dim must equal the expected size; a dim of run-time symbols only
/// (data-dependent sizes) matches any size.
fn shape_matches(s: &rlx_ir::Shape, want: &[usize]) -> bool {
    s.rank() == want.len()
        && s.0.iter().zip(want).all(|(d, &w)| match d.known() {
            Some(k) => k == w as i64,
            None => d.symbols().iter().all(|n| rlx_ir::ops::is_runtime_symbol(n)),
        })
}
