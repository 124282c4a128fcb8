//! `rlx-onnx conformance --data DIR --import-only [--report FILE]`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::conformance::{check_import, Outcome};
use rlx_onnx::importer::Registry;
use rlx_onnx::testdata::case_dirs;

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
}

pub fn run(a: Args) -> ExitCode {
    if !a.import_only {
        eprintln!("error: running cases needs a backend; use --import-only");
        return ExitCode::from(2);
    }
    let cases = match case_dirs(&a.data) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let registry = Registry::standard();
    let mut rows = Vec::new();
    for case in cases {
        let name = case.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if a.filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let outcome = check_import(&case, &registry);
        rows.push((name, outcome));
    }
    let count = |f: fn(&Outcome) -> bool| rows.iter().filter(|(_, o)| f(o)).count();
    let passed = count(|o| matches!(o, Outcome::Passed));
    let failed = count(|o| matches!(o, Outcome::Failed(_)));
    let unsupported = count(|o| matches!(o, Outcome::Unsupported(_)));
    if let Some(path) = &a.report {
        let mut t = String::from("| case | import | reason |\n|---|---|---|\n");
        for (name, o) in &rows {
            let _ = writeln!(t, "| {name} | {} | {} |", o.label(), o.reason().replace('|', "\\|"));
        }
        if let Err(e) = std::fs::write(path, t) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    println!("import: {passed} passed, {failed} failed, {unsupported} unsupported, of {}", rows.len());
    ExitCode::SUCCESS
}
