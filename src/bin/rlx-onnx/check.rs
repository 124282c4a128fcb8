//! `rlx-onnx check CASE_DIR [--target T] [--rtol R --atol A]`: runs a directory
//! in the ONNX backend-test layout and reports the error of every output.

use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::conformance::{compare, Tolerance};
use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::testdata::{data_set_dirs, read_data_set};
use rlx_onnx::{Session, SessionOptions};

use crate::common::CompileArgs;

#[derive(clap::Args)]
pub struct Args {
    /// A directory with model.onnx and test_data_set_*/.
    case: PathBuf,
    #[arg(long, default_value_t = 1e-3)]
    rtol: f64,
    #[arg(long, default_value_t = 1e-7)]
    atol: f64,
    #[command(flatten)]
    compile: CompileArgs,
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            crate::report(e.as_ref());
            ExitCode::from(2)
        }
    }
}

fn go(a: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    let imported = import_file(&a.case.join("model.onnx"), &Registry::standard())?;
    let model = a.compile.compiler()?.compile(imported, None)?;
    let names = model.input_names();
    let out_names = model.output_names();
    let session = Session::with_devices(
        model,
        SessionOptions { threads: 1 },
        crate::common::devices(),
    )?;
    let tol = Tolerance {
        rtol: a.rtol,
        atol: a.atol,
    };
    let mut ok = true;
    for dir in data_set_dirs(&a.case)? {
        let data = read_data_set(&dir)?;
        let named: Vec<(&str, &rlx_onnx::ir::Tensor)> =
            names.iter().map(String::as_str).zip(&data.inputs).collect();
        let got = session.run(&named)?;
        let set = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        for ((g, w), name) in got.iter().zip(&data.outputs).zip(&out_names) {
            match compare(g, w, tol) {
                Ok(d) => {
                    let pass = d.mismatched == 0;
                    ok &= pass;
                    println!(
                        "{set} {name}: max abs {:.3e}, max rel {:.3e}, {} of {} outside tolerance: {}",
                        d.max_abs,
                        d.max_rel,
                        d.mismatched,
                        d.total,
                        if pass { "pass" } else { "FAIL" }
                    );
                }
                Err(e) => {
                    ok = false;
                    println!("{set} {name}: {e}: FAIL");
                }
            }
        }
    }
    println!("{}", if ok { "pass" } else { "FAIL" });
    Ok(ok)
}
