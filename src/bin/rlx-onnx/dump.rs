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

use crate::common::{error, error_msg, OptArg, TargetArg};

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
    #[arg(long, value_enum, default_value = "cpu")]
    target: TargetArg,
    /// Optimization level.
    #[arg(short = 'O', long = "opt-level", value_enum, default_value = "2")]
    opt_level: OptArg,
    /// Write numbered `.rlxir` files here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace an earlier dump's `.rlxir` files in --out.
    #[arg(long)]
    force: bool,
    /// Print the pipeline of --target and -O, and every pass.
    #[arg(long)]
    list_passes: bool,
}

/// Which passes to dump, and where.
pub struct DumpSpec {
    pub after: Vec<String>,
    pub out: Option<PathBuf>,
    /// Replace the `.rlxir` files of an earlier dump in `out`.
    pub force: bool,
}

impl DumpSpec {
    /// Checks the chosen names against the pipeline.
    pub fn check(&self, passes: &[&str]) -> Result<(), String> {
        for a in &self.after {
            if a != "all" && !passes.contains(&a.as_str()) {
                return Err(format!(
                    "pass `{a}` is not in the pipeline{}: {}",
                    crate::common::did_you_mean(a, passes.iter().copied()),
                    passes.join(", ")
                ));
            }
        }
        if let Some(d) = &self.out {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create `{}`: {e}", d.display()))?;
            // One dump per folder: an earlier one is replaced only when told.
            let earlier: Vec<PathBuf> = std::fs::read_dir(d)
                .map_err(|e| format!("cannot read `{}`: {e}", d.display()))?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "rlxir"))
                .collect();
            if let Some(first) = earlier.first() {
                if !self.force {
                    return Err(format!(
                        "`{}` holds an earlier dump (`{}`): --force replaces it",
                        d.display(),
                        first.display()
                    ));
                }
                for p in &earlier {
                    std::fs::remove_file(p)
                        .map_err(|e| format!("cannot remove `{}`: {e}", p.display()))?;
                }
            }
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
    let (target, lvl) = (Target::from(a.target), OptLevel::from(a.opt_level));
    if a.list_passes {
        list(target.name(), lvl);
        return ExitCode::SUCCESS;
    }
    let Some(model) = a.model else {
        return error_msg("give a model (or --list-passes)");
    };
    if crate::common::is_artifact(&model) {
        // An artifact holds one graph, the compiled one: that is its dump.
        if !a.after.is_empty() || !a.binds.is_empty() {
            return error_msg(format!(
                "`{}` is an .rlx artifact, compiled already: `dump` prints its graph; \
                 --after and --bind need the .onnx model",
                model.display()
            ));
        }
        return match rlx_onnx::artifact::load(&model) {
            Ok(m) => {
                print!("{}", print_graph(&m.graph));
                ExitCode::SUCCESS
            }
            Err(e) => error(&e),
        };
    }
    let binds = match crate::parse_binds(&a.binds) {
        Ok(b) => b,
        Err(e) => return error_msg(e),
    };
    if !a.after.is_empty() {
        let compiler = Compiler {
            target,
            opt_level: lvl,
            bindings: binds,
            verify: true,
            precision: rlx_onnx::Precision::Exact,
            fallback: rlx_onnx::Fallback::Refuse,
            limits: rlx_onnx::Limits::default(),
        };
        let spec = DumpSpec {
            after: a.after,
            out: a.out,
            force: a.force,
        };
        return match compile_dumping(&model, &compiler, &spec) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => error(e.as_ref()),
        };
    }
    let model = match import_file(&model, &Registry::standard()) {
        Ok(m) => m,
        Err(e) => return error(&e),
    };
    let symbols = rlx_onnx::compile::input_symbols(&model.graph);
    if let Some(name) = binds.keys().find(|k| !symbols.contains(*k)) {
        return error(&rlx_onnx::InputError::UnknownSymbol {
            name: name.clone(),
            symbols: symbols.into_iter().collect(),
        });
    }
    let g = if binds.is_empty() {
        model.graph
    } else {
        match specialize(&model.graph, &binds, Some(&model.weights)) {
            Ok(g) => g,
            Err(e) => return error(&e),
        }
    };
    print!("{}", print_graph(&g));
    ExitCode::SUCCESS
}
