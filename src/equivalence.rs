//! `-O0` against `-O2`: the optimizing pipeline must not change what a model
//! computes. Both compile with verification after every pass; outputs agree
//! within [`eq_tol`]: f32/f64 relative 1e-4; f16 and bf16 two units in the
//! last place (a fused op rounds once where the unfused chain rounds per op);
//! integers and bools exactly.

use std::path::Path;

use rlx_importer::{import_file, ImportedModel, Registry};
use rlx_ir::{DType, Tensor};

use crate::conformance::{
    compare, is_unsupported, one_line, run_error_unsupported, Outcome, Tolerance,
};
use crate::testdata::{data_set_dirs, read_data_set};
use crate::{Compiler, OptLevel, Session, SessionOptions, Target};

/// How closely `-O0` and `-O2` outputs agree.
pub const EQ_TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-6,
};

/// The `-O0`/`-O2` tolerance for outputs of `dtype`.
pub fn eq_tol(dtype: DType) -> Tolerance {
    match dtype {
        // 2 ulp: f16 has 10 mantissa bits, bf16 7.
        DType::F16 => Tolerance {
            rtol: 2.0 * 2f64.powi(-10),
            atol: 1e-6,
        },
        DType::BF16 => Tolerance {
            rtol: 2.0 * 2f64.powi(-7),
            atol: 1e-6,
        },
        _ => EQ_TOL,
    }
}

/// Outputs of `model` compiled at `level` for each input set (inputs in the
/// graph's order).
pub fn outputs_at(
    model: &ImportedModel,
    level: OptLevel,
    sets: &[Vec<Tensor>],
) -> crate::Result<Vec<Vec<Tensor>>> {
    let compiled = Compiler::new(Target::Cpu)
        .opt_level(level)
        .verify(true)
        .compile(model.clone(), None)?;
    let names = compiled.input_names();
    let session = Session::new(compiled, SessionOptions { threads: 1 })?;
    sets.iter()
        .map(|inputs| {
            let named: Vec<(&str, &Tensor)> =
                names.iter().map(String::as_str).zip(inputs).collect();
            session.run(&named)
        })
        .collect()
}

/// Checks that two runs agree output by output, within `tol` of each output's dtype.
pub fn agree(
    a: &[Vec<Tensor>],
    b: &[Vec<Tensor>],
    tol: impl Fn(DType) -> Tolerance,
) -> Result<(), String> {
    for (set, (x, y)) in a.iter().zip(b).enumerate() {
        if x.len() != y.len() {
            return Err(format!(
                "set {set}: {} outputs against {}",
                x.len(),
                y.len()
            ));
        }
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            let d =
                compare(p, q, tol(q.dtype())).map_err(|e| format!("set {set} output {i}: {e}"))?;
            if d.mismatched > 0 {
                return Err(format!(
                    "set {set} output {i}: {} of {} elements differ (max abs {:.3e}, max rel {:.3e})",
                    d.mismatched, d.total, d.max_abs, d.max_rel
                ));
            }
        }
    }
    Ok(())
}

/// One backend-test case: `Passed` when `-O2` matches the reference and `-O0`
/// agrees with `-O2`; `Unsupported` when `-O2` does not pass on the CPU (the
/// case then says nothing about the passes).
pub fn equivalence_case(case: &Path, registry: &Registry) -> Outcome {
    let model = match import_file(&case.join("model.onnx"), registry) {
        Ok(m) => m,
        Err(e) if is_unsupported(&e) => return Outcome::Unsupported(one_line(&e.to_string())),
        Err(e) => return Outcome::Unsupported(format!("import: {}", one_line(&e.to_string()))),
    };
    let mut inputs = Vec::new();
    let mut expected = Vec::new();
    for d in data_set_dirs(case).unwrap_or_default() {
        match read_data_set(&d) {
            Ok(s) => {
                inputs.push(s.inputs);
                expected.push(s.outputs);
            }
            Err(e) => return Outcome::Unsupported(e.to_string()),
        }
    }
    let o2 = match outputs_at(&model, OptLevel::O2, &inputs) {
        Ok(o) => o,
        Err(e) if run_error_unsupported(&e) => {
            return Outcome::Unsupported(one_line(&e.to_string()))
        }
        Err(e) => return Outcome::Failed(format!("-O2: {}", one_line(&e.to_string()))),
    };
    if agree(&o2, &expected, |_| Tolerance::default()).is_err() {
        return Outcome::Unsupported("-O2 does not match the reference".into());
    }
    match outputs_at(&model, OptLevel::O0, &inputs) {
        Err(e) => Outcome::Failed(format!("-O0: {}", one_line(&e.to_string()))),
        Ok(o0) => match agree(&o0, &o2, eq_tol) {
            Ok(()) => Outcome::Passed,
            Err(e) => Outcome::Failed(format!("-O0 vs -O2: {e}")),
        },
    }
}
