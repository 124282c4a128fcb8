//! `rlx-onnx conformance --data DIR [--target T | --import-only] [--report FILE]`:
//! prints each failed case with its reason and a summary line; exits 1 when
//! a case failed (unsupported ones do not fail the run), 2 on bad arguments.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::conformance::{check_import, run_case_on, Outcome, Tolerance};
use rlx_onnx::importer::Registry;
use rlx_onnx::testdata::case_dirs;
use rlx_onnx::Target;

#[derive(clap::Args)]
pub struct Args {
    /// A directory of ONNX backend-test cases (`*/model.onnx`, `test_data_set_*`).
    #[arg(long)]
    data: PathBuf,
    /// Only import each case and check the inferred output types.
    #[arg(long)]
    import_only: bool,
    /// Write the per-case table (with reasons) to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Only cases whose name contains this text.
    #[arg(long)]
    filter: Option<String>,
    /// The backend that runs the cases.
    #[arg(long, value_enum, default_value = "cpu")]
    target: crate::common::TargetArg,
    /// Relative tolerance (default: the ONNX runner's 1e-3).
    #[arg(long, default_value_t = 1e-3)]
    rtol: f64,
    /// Absolute tolerance (default: the ONNX runner's 1e-7).
    #[arg(long, default_value_t = 1e-7)]
    atol: f64,
}

pub fn run(a: Args) -> ExitCode {
    let target = Target::from(a.target);
    let tol = Tolerance {
        rtol: a.rtol,
        atol: a.atol,
    };
    let cases = match case_dirs(&a.data) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let registry = Registry::standard();
    // One device for the whole run (each case would otherwise open its own);
    // a GPU target without its device is an error, not 1765 failed cases.
    let devices = crate::common::devices();
    let opened = match target {
        Target::Wgpu if !a.import_only => devices.wgpu().map(drop),
        Target::Cuda if !a.import_only => devices.cuda().map(drop),
        Target::Vulkan if !a.import_only => devices.vulkan().map(drop),
        _ => Ok(()),
    };
    if let Err(e) = opened {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let mut rows = Vec::new();
    let bar = crate::progress::bar(cases.len(), "conformance");
    for case in cases {
        bar.inc(1);
        let name = case
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        if a.filter
            .as_ref()
            .is_some_and(|f| !name.contains(f.as_str()))
        {
            continue;
        }
        let outcome = if a.import_only {
            check_import(&case, &registry)
        } else {
            // A panic is a bug, but one case must not take the whole run down.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_case_on(&case, &registry, target, tol, Some(&devices))
            }))
            .unwrap_or_else(|_| Outcome::Failed("panicked (a bug in rlx-onnx)".into()))
        };
        if let Outcome::Failed(why) = &outcome {
            bar.suspend(|| println!("FAILED {name}: {why}"));
        }
        rows.push((name, outcome));
    }
    bar.finish_and_clear();
    let count = |f: fn(&Outcome) -> bool| rows.iter().filter(|(_, o)| f(o)).count();
    let passed = count(|o| matches!(o, Outcome::Passed));
    let failed = count(|o| matches!(o, Outcome::Failed(_)));
    let unsupported = count(|o| matches!(o, Outcome::Unsupported(_)));
    if let Some(path) = &a.report {
        let mut t = format!(
            "| case | {} | reason |\n|---|---|---|\n",
            if a.import_only {
                "import"
            } else {
                target.name()
            }
        );
        for (name, o) in &rows {
            let _ = writeln!(
                t,
                "| {name} | {} | {} |",
                o.label(),
                o.reason().replace('|', "\\|")
            );
        }
        if let Err(e) = std::fs::write(path, t) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    let label = if a.import_only {
        "import"
    } else {
        target.name()
    };
    println!(
        "{label}: {passed} passed, {failed} failed, {unsupported} unsupported, of {}",
        rows.len()
    );
    if unsupported > 0 && a.report.is_none() {
        println!("(--report FILE lists every case with its reason)");
    }
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
