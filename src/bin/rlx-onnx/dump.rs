//! `rlx-onnx dump MODEL [--bind N=1 ...]`.

use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::ir::analysis::specialize;
use rlx_onnx::ir::text::print_graph;

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx model.
    model: PathBuf,
    /// Bind a symbolic dim: `--bind N=1` (repeatable).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    binds: Vec<String>,
}

pub fn run(a: Args) -> ExitCode {
    let binds = match crate::parse_binds(&a.binds) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let model = match import_file(&a.model, &Registry::standard()) {
        Ok(m) => m,
        Err(e) => {
            crate::report(&e);
            return ExitCode::from(1);
        }
    };
    let g = if binds.is_empty() {
        model.graph
    } else {
        match specialize(&model.graph, &binds, Some(&model.weights)) {
            Ok(g) => g,
            Err(e) => {
                crate::report(&e);
                return ExitCode::from(1);
            }
        }
    };
    print!("{}", print_graph(&g));
    ExitCode::SUCCESS
}
