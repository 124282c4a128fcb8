//! `rlx-onnx dump MODEL [--bind N=1] [--after PASS|all] [--target T] [-O N] [--out DIR]`
//! and `rlx-onnx dump --list-passes [--target T] [-O N]`.
//!
//! Without `--after`, prints the IR after import and inference. With it, runs
//! the pipeline and writes the IR after each chosen pass as numbered files
//! `NN-<pass>.rlxir` in DIR (`00-import.rlxir` is the imported graph), or to
//! standard output, each graph after a `# NN-<pass>` line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::ir::analysis::specialize;
use rlx_onnx::ir::text::print_graph;
use rlx_onnx::ir::Graph;
use rlx_onnx::passes::pipeline;
use rlx_onnx::{Compiler, OptLevel, Target};

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx model.
    model: Option<PathBuf>,
    /// Bind a symbolic dim: `--bind N=1` (repeatable).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    binds: Vec<String>,
    /// Dump the IR after these passes (`all`, or names; repeatable or comma-separated).
    #[arg(long = "after", value_name = "PASS|all", value_delimiter = ',')]
    after: Vec<String>,
    /// The target whose pipeline runs.
    #[arg(long, default_value = "cpu", value_parser = crate::common::TARGETS)]
    target: String,
    /// Optimization level: 0, 1 or 2.
    #[arg(short = 'O', long = "opt-level", default_value = "2")]
    opt_level: String,
    /// Write numbered `.rlxir` files here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the pipeline of --target and -O, and every pass.
    #[arg(long)]
    list_passes: bool,
}

/// Which passes to dump, and where.
pub struct DumpSpec {
    pub after: Vec<String>,
    pub out: Option<PathBuf>,
}

impl DumpSpec {
    /// Checks the chosen names against the pipeline.
    pub fn check(&self, passes: &[&str]) -> Result<(), String> {
        for a in &self.after {
            if a != "all" && !passes.contains(&a.as_str()) {
                return Err(format!(
                    "pass `{a}` is not in the pipeline: {}",
                    passes.join(", ")
                ));
            }
        }
        if let Some(d) = &self.out {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create `{}`: {e}", d.display()))?;
        }
        Ok(())
    }

    fn wants(&self, pass: &str) -> bool {
        self.after.iter().any(|a| a == "all" || a == pass)
    }

    /// Writes one dump; errors are reported and remembered in `failed`.
    pub fn write(&self, step: usize, pass: &str, g: &Graph, failed: &mut Option<String>) {
        if !self.wants(pass) && !(step == 0 && self.wants("all")) {
            return;
        }
        let label = format!("{step:02}-{pass}");
        let text = print_graph(g);
        match &self.out {
            None => print!("# {label}\n{text}"),
            Some(dir) => {
                let path = dir.join(format!("{label}.rlxir"));
                if let Err(e) = std::fs::write(&path, text) {
                    failed.get_or_insert(format!("cannot write `{}`: {e}", path.display()));
                }
            }
        }
    }
}

fn level(s: &str) -> Result<OptLevel, String> {
    OptLevel::parse(s).ok_or_else(|| format!("unknown opt level `{s}`"))
}

fn list(target: &str, level: OptLevel) {
    println!("pipeline `{target}` at -{}:", level.name());
    for (i, p) in pipeline::names(target, level).iter().enumerate() {
        println!("  {:02}  {p:<22} {}", i + 1, pipeline::about(p));
    }
    println!("all passes:");
    for p in pipeline::PASSES {
        println!("  {:<26} {}", p.name, p.about);
    }
}

/// Imports `model` and compiles it, dumping after the chosen passes.
pub fn compile_dumping(
    model: &Path,
    compiler: &Compiler,
    spec: &DumpSpec,
) -> Result<rlx_onnx::CompiledModel, Box<dyn std::error::Error>> {
    let passes = compiler.passes();
    spec.check(&passes)?;
    let imported = import_file(model, &Registry::standard())?;
    let mut failed = None;
    spec.write(0, "import", &imported.graph, &mut failed);
    let mut hook = |step: usize, pass: &str, g: &Graph| spec.write(step, pass, g, &mut failed);
    let compiled = compiler.compile(imported, Some(&mut hook))?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    Ok(compiled)
}

pub fn run(a: Args) -> ExitCode {
    let (target, lvl) = match (Target::parse(&a.target), level(&a.opt_level)) {
        (Ok(t), Ok(l)) => (t, l),
        (Err(e), _) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if a.list_passes {
        list(target.name(), lvl);
        return ExitCode::SUCCESS;
    }
    let Some(model) = a.model else {
        eprintln!("error: give a model (or --list-passes)");
        return ExitCode::from(2);
    };
    let binds = match crate::parse_binds(&a.binds) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if !a.after.is_empty() {
        let compiler = Compiler {
            target,
            opt_level: lvl,
            bindings: binds,
            verify: true,
            precision: rlx_onnx::Precision::Exact,
        };
        let spec = DumpSpec {
            after: a.after,
            out: a.out,
        };
        return match compile_dumping(&model, &compiler, &spec) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                crate::report(e.as_ref());
                ExitCode::from(1)
            }
        };
    }
    let model = match import_file(&model, &Registry::standard()) {
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
