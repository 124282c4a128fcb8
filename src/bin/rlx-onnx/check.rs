//! `rlx-onnx check CASE_DIR [--target T] [--rtol R --atol A] [--threads N]`: runs a directory
//! in the ONNX backend-test layout and reports the error of every output.
//! An element passes when |got - expected| <= atol + rtol * |expected|.

use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::conformance::{compare, Tolerance};
use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::testdata::{data_set_dirs, read_data_set_for};
use rlx_onnx::{Session, SessionOptions};

use crate::common::CompileArgs;

#[derive(clap::Args)]
pub struct Args {
    /// A directory with model.onnx and test_data_set_*/.
    case: PathBuf,
    /// Relative tolerance (the ONNX backend tests' 1e-3; f16 and bf16
    /// outputs get at least two units in their last place).
    #[arg(long, default_value_t = 1e-3)]
    rtol: f64,
    /// Absolute tolerance: 1e-5, what ONNX Runtime's model tests allow, since
    /// fp32 models reproduce only to about that across libraries (the node
    /// tests' 1e-7 is for single ops).
    #[arg(long, default_value_t = 1e-5)]
    atol: f64,
    /// Worker threads of the CPU backend (its kernels split their work over
    /// them above one).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[command(flatten)]
    compile: CompileArgs,
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => crate::common::check_failed(),
        Err(e) => crate::common::error(e.as_ref()),
    }
}

fn go(a: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    let model = a.case.join("model.onnx");
    if !model.is_file() {
        let parent = a.case.parent().filter(|p| p.join("model.onnx").is_file());
        return Err(match parent {
            Some(p) => format!(
                "`{}` is a data set of the case `{}`: check takes the case directory",
                a.case.display(),
                p.display()
            ),
            None => format!(
                "`{}` has no model.onnx: check takes a directory in the ONNX backend-test \
                 layout (model.onnx and test_data_set_*/)",
                a.case.display()
            ),
        }
        .into());
    }
    let imported = import_file(&model, &Registry::standard())?;
    let model = crate::progress::compile(&a.compile.compiler()?, imported)?;
    let names = model.input_names();
    let out_names = model.output_names();
    let session = Session::with_devices(
        model,
        SessionOptions { threads: a.threads },
        crate::common::devices(),
    )?;
    let tol = Tolerance {
        rtol: a.rtol,
        atol: a.atol,
    };
    let mut ok = true;
    for dir in data_set_dirs(&a.case)? {
        // As the model's values: a sequence (of maps, as ZipMap gives) or an
        // optional decodes as what it is.
        let data = read_data_set_for(&dir, &session.model().graph)?;
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
                        "{set} {name}: {}: {}",
                        d.summary(w.dims()),
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
