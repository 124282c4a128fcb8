//! `rlx-onnx convert MODEL -o OUT.rlx [--target T] [--bind N=1] [-O N]
//! [--dump-ir-after PASS|all [--dump-dir DIR]]`.

use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::artifact;

use crate::common::CompileArgs;

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx model.
    model: PathBuf,
    /// The artifact to write.
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    compile: CompileArgs,
    /// Dump the IR after these passes (`all`, or names; repeatable or comma-separated).
    #[arg(long = "dump-ir-after", value_name = "PASS|all", value_delimiter = ',')]
    dump_ir_after: Vec<String>,
    /// Where the dumps go as numbered `.rlxir` files (standard output without it).
    #[arg(long = "dump-dir")]
    dump_dir: Option<PathBuf>,
}

pub fn run(a: Args) -> ExitCode {
    if a.output
        .canonicalize()
        .ok()
        .is_some_and(|o| a.model.canonicalize().ok() == Some(o))
    {
        eprintln!(
            "error: the output `{}` is the input model; refusing to overwrite it",
            a.output.display()
        );
        return ExitCode::from(2);
    }
    let compiler = match a.compile.compiler() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let spec = crate::dump::DumpSpec {
        after: a.dump_ir_after.clone(),
        out: a.dump_dir.clone(),
    };
    let compiled = if spec.after.is_empty() {
        compiler
            .compile_file(&a.model)
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error>)
    } else {
        crate::dump::compile_dumping(&a.model, &compiler, &spec)
    };
    let model = match compiled {
        Ok(m) => m,
        Err(e) => {
            crate::report(e.as_ref());
            return ExitCode::from(1);
        }
    };
    if let Err(e) = artifact::save(&model, &a.output) {
        crate::report(&e);
        return ExitCode::from(1);
    }
    let size = std::fs::metadata(&a.output).map(|m| m.len()).unwrap_or(0);
    println!(
        "wrote {} ({} bytes): target {}, {} nodes, {} weights",
        a.output.display(),
        size,
        model.target,
        model.graph.node_count(),
        model.weights.len()
    );
    ExitCode::SUCCESS
}
