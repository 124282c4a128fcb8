//! Runs ONNX backend-test cases and classifies each as passed, failed or unsupported.

use std::path::Path;

use rlx_importer::{import_file, ImportError, ImportedModel, MapError, Registry};
use rlx_ir::analysis::{bind_input_values, bind_shapes, specialize, value_inputs};
use rlx_ir::Tensor;

use crate::testdata::{data_set_dirs, read_data_set, read_data_set_for};

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
    s.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Imports the case, specializes it to the first data set's inputs, and checks
/// that the inferred output dtypes and shapes equal the expected outputs'.
pub fn check_import(case: &Path, registry: &Registry) -> Outcome {
    // Import first: a model of unsupported types is unsupported, whatever its data.
    let model = match import_file(&case.join("model.onnx"), registry) {
        Ok(m) => m,
        Err(e) if is_unsupported(&e) => return Outcome::Unsupported(one_line(&e.to_string())),
        Err(e) => return Outcome::Failed(one_line(&e.to_string())),
    };
    let dirs = match data_set_dirs(case) {
        Ok(d) => d,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let Some(first) = dirs.first() else {
        return Outcome::Failed("no test_data_set_*".into());
    };
    let data = match read_data_set(first) {
        Ok(d) => d,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    check_imported(&model, &data.inputs, &data.outputs)
}

/// Like [`check_import`] for a model file with given inputs and expected outputs.
pub fn check_import_with(
    model_path: &Path,
    registry: &Registry,
    inputs: &[Tensor],
    outputs: &[Tensor],
) -> Outcome {
    match import_file(model_path, registry) {
        Ok(m) => check_imported(&m, inputs, outputs),
        Err(e) if is_unsupported(&e) => Outcome::Unsupported(one_line(&e.to_string())),
        Err(e) => Outcome::Failed(one_line(&e.to_string())),
    }
}

/// Checks the inferred output types of an imported model against a data set.
fn check_imported(model: &ImportedModel, inputs: &[Tensor], outputs: &[Tensor]) -> Outcome {
    let mut g = model.graph.clone();
    if inputs.len() != g.inputs().len() {
        return Outcome::Failed(format!(
            "the model has {} inputs, the data set {}",
            g.inputs().len(),
            inputs.len()
        ));
    }
    let shapes: Vec<&[usize]> = inputs.iter().map(Tensor::dims).collect();
    let b = match bind_shapes(&g, &shapes) {
        Ok(b) => b,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let values: Vec<(usize, Tensor)> = value_inputs(&g)
        .into_iter()
        .map(|i| (i, inputs[i].clone()))
        .collect();
    if let Err(e) = bind_input_values(&mut g, &values) {
        return Outcome::Failed(e.to_string());
    }
    let g = match specialize(&g, &b, Some(&model.weights)) {
        Ok(g) => g,
        Err(e) => return Outcome::Failed(one_line(&e.to_string())),
    };
    if g.outputs().len() != outputs.len() {
        return Outcome::Failed(format!(
            "{} outputs, expected {}",
            g.outputs().len(),
            outputs.len()
        ));
    }
    for (o, want) in g.outputs().iter().zip(outputs) {
        let got = g.ty(o.value);
        if got.dtype != want.dtype() || !shape_matches(&got.shape, want.dims()) {
            return Outcome::Failed(format!(
                "output `{}`: inferred {got}, expected {}",
                o.name,
                want.ty()
            ));
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
            None => d
                .symbols()
                .iter()
                .all(|n| rlx_ir::ops::is_runtime_symbol(n)),
        })
}

/// Comparison tolerances: `|got - want| <= atol + rtol * |want|`.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

impl Default for Tolerance {
    /// The ONNX backend test runner's defaults.
    fn default() -> Tolerance {
        Tolerance {
            rtol: 1e-3,
            atol: 1e-7,
        }
    }
}

impl Tolerance {
    /// The tolerance for outputs of `dtype`: f16 and bf16 values are judged
    /// within two units in the last place of their own format (`rtol` at
    /// least 2^-9 for f16's 10 mantissa bits, 2^-6 for bf16's 7), since a
    /// reference rounded at every step differs from a wider computation by
    /// that much. Wider dtypes keep `self`.
    pub fn for_dtype(self, dtype: rlx_ir::DType) -> Tolerance {
        let mantissa_bits = match dtype {
            rlx_ir::DType::F16 => 10,
            rlx_ir::DType::BF16 => 7,
            _ => return self,
        };
        Tolerance {
            rtol: self.rtol.max(2.0 * 2f64.powi(-mantissa_bits)),
            atol: self.atol,
        }
    }
}

/// How one output compares with its reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    pub max_abs: f64,
    /// Over the elements whose reference exceeds `atol` in magnitude (a
    /// reference near 0 is judged by the absolute tolerance alone, and its
    /// relative error means nothing).
    pub max_rel: f64,
    /// Elements outside the tolerance.
    pub mismatched: usize,
    pub total: usize,
    /// The element farthest outside the tolerance (or nearest its edge),
    /// when any element differs.
    pub worst: Option<Worst>,
}

/// One element of a comparison: its flat index and both values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Worst {
    pub index: usize,
    pub got: f64,
    pub want: f64,
}

impl Diff {
    /// `max abs 1.2e-6, max rel 3.1e-5, 0 of 1000 outside tolerance`, and
    /// the worst element where one is outside.
    pub fn summary(&self, dims: &[usize]) -> String {
        let mut s = format!(
            "max abs {:.3e}, max rel {:.3e}, {} of {} outside tolerance",
            self.max_abs, self.max_rel, self.mismatched, self.total
        );
        if let (Some(w), true) = (self.worst, self.mismatched > 0) {
            s += &format!(
                "; worst at {:?}: got {}, expected {}",
                unravel(w.index, dims),
                w.got,
                w.want
            );
        }
        s
    }
}

/// The multi-index of flat index `i` in a row-major tensor of `dims`.
pub fn unravel(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for (k, &d) in dims.iter().enumerate().rev() {
        if d > 0 {
            idx[k] = i % d;
            i /= d;
        }
    }
    idx
}

/// Values of any dtype as f64 (for comparison).
pub fn values_f64(t: &Tensor) -> Vec<f64> {
    if let Some(v) = t.to_f64_vec() {
        return v;
    }
    if let Some(v) = t.to_i64_vec() {
        if t.dtype() == rlx_ir::DType::U64 {
            return t
                .as_slice::<u64>()
                .map(|s| s.iter().map(|&x| x as f64).collect())
                .unwrap_or_default();
        }
        return v.into_iter().map(|x| x as f64).collect();
    }
    (0..t.numel())
        .map(
            |i| match rlx_cpu::kernels::cast::read(t.dtype(), t.bytes(), i) {
                rlx_cpu::kernels::cast::Val::Float(f) => f,
                rlx_cpu::kernels::cast::Val::Int(x) => x as f64,
            },
        )
        .collect()
}

/// Compares values that are not byte tensors: strings exactly, sequences
/// element by element (the worst element's diff), absent optionals by kind.
fn compare_held(got: &Tensor, want: &Tensor, tol: Tolerance) -> Result<Diff, String> {
    let exact = |same: bool, total: usize| Diff {
        max_abs: 0.0,
        max_rel: 0.0,
        mismatched: usize::from(!same),
        total,
        worst: None,
    };
    if got.kind() != want.kind() || got.is_none() != want.is_none() {
        return Err(format!("{:?} differs from the expected {:?}", got, want));
    }
    if got.is_none() {
        return Ok(exact(got.dtype() == want.dtype(), 1));
    }
    if let (Some(g), Some(w)) = (got.strings(), want.strings()) {
        if got.dims() != want.dims() {
            return Err(format!(
                "shape {:?} differs from the expected {:?}",
                got.dims(),
                want.dims()
            ));
        }
        let bad = g.iter().zip(w).filter(|(a, b)| a != b).count();
        return Ok(Diff {
            mismatched: bad,
            ..exact(true, g.len())
        });
    }
    if let (Some((gk, gv)), Some((wk, wv))) = (got.map_entries(), want.map_entries()) {
        if !gk.bit_eq(wk) {
            return Err(format!("map keys {gk:?} differ from the expected {wk:?}"));
        }
        return compare(gv, wv, tol);
    }
    if let (Some(g), Some(w)) = (got.elements(), want.elements()) {
        if g.len() != w.len() {
            return Err(format!(
                "a sequence of {} elements, expected {}",
                g.len(),
                w.len()
            ));
        }
        let mut all = exact(true, 0);
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            let d = compare(a, b, tol).map_err(|e| format!("element {i}: {e}"))?;
            all.total += d.total;
            all.mismatched += d.mismatched;
            all.max_abs = all.max_abs.max(d.max_abs);
            all.max_rel = all.max_rel.max(d.max_rel);
        }
        return Ok(all);
    }
    Err(format!("{got:?} differs from the expected {want:?}"))
}

/// Compares `got` with `want`; `Err` when dtypes or shapes differ.
pub fn compare(got: &Tensor, want: &Tensor, tol: Tolerance) -> Result<Diff, String> {
    if !got.is_plain() || !want.is_plain() {
        return compare_held(got, want, tol);
    }
    if got.dtype() != want.dtype() {
        return Err(format!(
            "dtype {} differs from the expected {}",
            got.dtype(),
            want.dtype()
        ));
    }
    if got.dims() != want.dims() {
        return Err(format!(
            "shape {:?} differs from the expected {:?}",
            got.dims(),
            want.dims()
        ));
    }
    let exact = !got.dtype().is_float();
    let tol = tol.for_dtype(got.dtype());
    let (g, w) = (values_f64(got), values_f64(want));
    let mut d = Diff {
        max_abs: 0.0,
        max_rel: 0.0,
        mismatched: 0,
        total: g.len(),
        worst: None,
    };
    let mut worst_excess = f64::NEG_INFINITY;
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if a.is_nan() && b.is_nan() || a == b {
            continue;
        }
        let abs = (a - b).abs();
        let abs = if abs.is_nan() { f64::INFINITY } else { abs };
        d.max_abs = d.max_abs.max(abs);
        if b.abs() > tol.atol {
            d.max_rel = d.max_rel.max(abs / b.abs());
        }
        let allowed = tol.atol + tol.rtol * b.abs();
        let ok = !exact && abs <= allowed;
        if !ok {
            d.mismatched += 1;
        }
        let excess = if exact { f64::INFINITY } else { abs / allowed };
        if excess > worst_excess || d.worst.is_none() {
            worst_excess = excess;
            d.worst = Some(Worst {
                index: i,
                got: *a,
                want: *b,
            });
        }
    }
    Ok(d)
}

/// True if a run error means "this backend cannot do that" rather than "wrong".
pub fn run_error_unsupported(e: &crate::Error) -> bool {
    use rlx_cpu::KernelError as K;
    match e {
        crate::Error::Import(i) => is_unsupported(i),
        crate::Error::Pass(rlx_passes::PassError::Unsupported { .. }) => true,
        crate::Error::Wgpu(
            rlx_wgpu::WgpuError::Node { .. } | rlx_wgpu::WgpuError::Unsupported(_),
        ) => true,
        crate::Error::Cuda(
            rlx_cuda::CudaError::Node { .. } | rlx_cuda::CudaError::Unsupported(_),
        ) => true,
        crate::Error::Vulkan(
            rlx_vulkan::VulkanError::Node { .. } | rlx_vulkan::VulkanError::Unsupported(_),
        ) => true,
        crate::Error::Run(rlx_cpu::RunError::Node {
            source: K::Unsupported(_) | K::DType(_),
            ..
        }) => true,
        _ => false,
    }
}

/// Runs every data set of a backend-test case and compares the outputs.
pub fn run_case(
    case: &Path,
    registry: &Registry,
    target: crate::Target,
    tol: Tolerance,
) -> Outcome {
    run_case_on(case, registry, target, tol, None)
}

/// [`run_case`] on shared GPU devices (one per run of many cases) instead of
/// opening them per case.
pub fn run_case_on(
    case: &Path,
    registry: &Registry,
    target: crate::Target,
    tol: Tolerance,
    devices: Option<&std::sync::Arc<crate::Devices>>,
) -> Outcome {
    let model = match import_file(&case.join("model.onnx"), registry) {
        Ok(m) => m,
        Err(e) if is_unsupported(&e) => return Outcome::Unsupported(one_line(&e.to_string())),
        Err(e) => return Outcome::Failed(one_line(&e.to_string())),
    };
    let dirs = match data_set_dirs(case) {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => return Outcome::Failed("no test_data_set_*".into()),
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let mut sets = Vec::new();
    for d in &dirs {
        match read_data_set_for(d, &model.graph) {
            Ok(s) => sets.push(s),
            Err(e) => return Outcome::Failed(e.to_string()),
        }
    }
    let io: Vec<(Vec<Tensor>, Vec<Tensor>)> =
        sets.into_iter().map(|s| (s.inputs, s.outputs)).collect();
    run_model_cases_on(model, target, &io, tol, devices)
}

/// Compiles an imported model and checks it on (inputs, expected outputs) pairs.
pub fn run_model_cases(
    model: rlx_importer::ImportedModel,
    target: crate::Target,
    sets: &[(Vec<Tensor>, Vec<Tensor>)],
    tol: Tolerance,
) -> Outcome {
    run_model_cases_on(model, target, sets, tol, None)
}

/// [`run_model_cases`] on shared GPU devices.
pub fn run_model_cases_on(
    model: rlx_importer::ImportedModel,
    target: crate::Target,
    sets: &[(Vec<Tensor>, Vec<Tensor>)],
    tol: Tolerance,
    devices: Option<&std::sync::Arc<crate::Devices>>,
) -> Outcome {
    let outcome_of = |e: crate::Error| {
        if run_error_unsupported(&e) {
            Outcome::Unsupported(one_line(&e.to_string()))
        } else {
            Outcome::Failed(one_line(&e.to_string()))
        }
    };
    let compiled = match crate::Compiler::new(target).compile(model, None) {
        Ok(c) => c,
        Err(e) => return outcome_of(e),
    };
    let names = compiled.input_names();
    let out_names = compiled.output_names();
    let options = crate::SessionOptions { threads: 1 };
    let session = match devices {
        Some(d) => crate::Session::with_devices(compiled, options, d.clone()),
        None => crate::Session::new(compiled, options),
    };
    let session = match session {
        Ok(s) => s,
        Err(e) => return outcome_of(e),
    };
    for (inputs, expected) in sets {
        if inputs.len() != names.len() {
            return Outcome::Failed(format!(
                "{} inputs given, the model has {}",
                inputs.len(),
                names.len()
            ));
        }
        let named: Vec<(&str, &Tensor)> = names
            .iter()
            .map(String::as_str)
            .zip(inputs.iter())
            .collect();
        let got = match session.run(&named) {
            Ok(g) => g,
            Err(e) => return outcome_of(e),
        };
        if got.len() != expected.len() {
            return Outcome::Failed(format!(
                "{} outputs, expected {}",
                got.len(),
                expected.len()
            ));
        }
        for ((g, w), name) in got.iter().zip(expected).zip(&out_names) {
            match compare(g, w, tol) {
                Err(e) => return Outcome::Failed(format!("output `{name}`: {e}")),
                Ok(d) if d.mismatched > 0 => {
                    return Outcome::Failed(format!(
                    "output `{name}`: {} of {} elements differ (max abs {:.3e}, max rel {:.3e})",
                    d.mismatched, d.total, d.max_abs, d.max_rel
                ))
                }
                Ok(_) => {}
            }
        }
    }
    Outcome::Passed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expected_zero_counts_in_absolute_error_only() {
        let got = Tensor::from_f32(&[3], &[1e-6, 2.0, 4.002]).unwrap();
        let want = Tensor::from_f32(&[3], &[0.0, 2.0, 4.0]).unwrap();
        let tol = Tolerance {
            rtol: 1e-3,
            atol: 1e-7,
        };
        let d = compare(&got, &want, tol).unwrap();
        // 1e-6 against 0 fails the absolute tolerance but is no huge
        // relative error; 4.002 against 4 is a relative 5e-4, within.
        assert_eq!(d.mismatched, 1);
        assert!((d.max_rel - 5e-4).abs() < 1e-6, "{}", d.max_rel);
        assert!((d.max_abs - 0.002).abs() < 1e-6, "{}", d.max_abs);
    }
}
