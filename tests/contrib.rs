//! Ops outside the default domain: ONNX Runtime's contrib ops (`com.microsoft`
//! and the default-domain forms its tools write; tests/data/contrib) and
//! `ai.onnx.ml` (tests/data/ml). Each one-node model runs on the CPU and
//! matches the outputs ONNX Runtime gave (tests/data/contrib/make_cases.py
//! writes both; make_gqa_cases.py the GroupQueryAttention cases, prompt,
//! decode with static and growing caches, rotary, packed QKV, local window,
//! softcap, sink and bias); so do scikit-learn models converted by skl2onnx
//! (tests/data/sklearn).

mod common;

use rlx_onnx::conformance::{run_case, Outcome, Tolerance};
use rlx_onnx::importer::Registry;
use rlx_onnx::Target;

/// f32 outputs match ORT's this closely; integer outputs match exactly.
const TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

/// Runs every case under `tests/data/<dir>`; there must be at least `min`.
fn all_pass(dir: &str, min: usize) {
    all_pass_within(dir, min, TOL)
}

fn all_pass_within(dir: &str, min: usize, tol: Tolerance) {
    let registry = Registry::standard();
    let cases =
        rlx_onnx::testdata::case_dirs(&common::root().join("tests/data").join(dir)).unwrap();
    assert!(cases.len() >= min, "{} cases in {dir}", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| match run_case(case, &registry, Target::Cpu, tol) {
            Outcome::Passed => None,
            Outcome::Failed(m) | Outcome::Unsupported(m) => Some(format!(
                "{}: {m}",
                case.file_name().unwrap_or_default().to_string_lossy()
            )),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn contrib_ops_match_onnxruntime() {
    all_pass("contrib", 67);
}

#[test]
fn ml_ops_match_onnxruntime() {
    all_pass("ml", 36);
}

/// scikit-learn estimators converted by skl2onnx (tests/data/sklearn/make_cases.py):
/// labels exactly, probabilities and predictions within 1e-5 (relative for
/// regressions in the hundreds).
#[test]
fn sklearn_models_match_onnxruntime() {
    all_pass_within(
        "sklearn",
        25,
        Tolerance {
            rtol: 1e-5,
            atol: 1e-5,
        },
    );
}

/// A small BERT-style encoder as ORT's transformer optimizer fuses it
/// (EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu),
/// and two int8 forms of it from `quantize_dynamic` (QAttention and
/// QEmbedLayerNormalization by default; MatMuls only)
/// (tests/data/transformers/make_cases.py).
#[test]
fn optimized_and_quantized_transformers_match_onnxruntime() {
    all_pass("transformers", 3);
}
