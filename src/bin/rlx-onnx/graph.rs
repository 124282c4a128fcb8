//! `rlx-onnx graph MODEL [--after PASS] [--target T] [-O N] [--bind N=1] [-o FILE.svg|FILE.dot]`:
//! the graph at any stage of the pipeline as DOT or SVG (laid out in Rust;
//! no Graphviz needed). With `--target`, nodes the target decomposes or
//! cannot run are shaded, with the reason.

use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::dot::{to_dot, to_svg, DotOptions, SupportTable};
use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::ir::Graph;
use rlx_onnx::passes::legalize::classify;

use crate::common::CompileArgs;

#[derive(clap::Args)]
pub struct Args {
    /// An .onnx model or an .rlx artifact (drawn as compiled).
    model: PathBuf,
    /// The stage: `import`, or a pass of the pipeline (see `dump
    /// --list-passes`) [default: the end of the pipeline].
    #[arg(long, value_name = "PASS")]
    after: Option<String>,
    #[command(flatten)]
    compile: CompileArgs,
    /// Write here: `.svg` or `.dot` by extension [default: DOT on standard
    /// output].
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Replace the output file if it exists.
    #[arg(long)]
    force: bool,
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::common::error(e.as_ref()),
    }
}

/// The graph after `after` (or the compiled graph), and its weights.
fn stage(a: &Args) -> Result<(Graph, rlx_onnx::ir::Weights), Box<dyn std::error::Error>> {
    if crate::common::is_artifact(&a.model) {
        if a.after.is_some() {
            return Err(
                "--after needs the .onnx model: an artifact holds only the compiled graph".into(),
            );
        }
        let m = crate::common::load_model(&a.model, &a.compile)?;
        return Ok((m.graph, m.weights));
    }
    let compiler = a.compile.compiler()?;
    let imported = import_file(&a.model, &Registry::standard())?;
    match a.after.as_deref() {
        Some("import") => Ok((imported.graph, imported.weights)),
        None => {
            let m = crate::progress::compile(&compiler, imported)?;
            Ok((m.graph, m.weights))
        }
        Some(pass) => {
            let passes = compiler.passes();
            if !passes.contains(&pass) {
                return Err(format!(
                    "pass `{pass}` is not in the pipeline{}: import, {}",
                    crate::common::did_you_mean(pass, passes.iter().copied()),
                    passes.join(", ")
                )
                .into());
            }
            let mut seen: Option<Graph> = None;
            let mut hook = |_: usize, name: &str, g: &Graph| {
                if name == pass && seen.is_none() {
                    seen = Some(g.clone());
                }
            };
            let m = compiler.compile(imported, Some(&mut hook))?;
            let g = seen.ok_or_else(|| format!("pass `{pass}` did not run"))?;
            Ok((g, m.weights))
        }
    }
}

fn go(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let svg = match &a.output {
        None => false,
        Some(p) => {
            let svg = p.extension().is_some_and(|e| e == "svg");
            if !svg && p.extension().is_none_or(|e| e != "dot") {
                return Err(format!("`{}`: write a .svg or a .dot file", p.display()).into());
            }
            crate::common::check_output(p, &[&a.model], a.force)?;
            svg
        }
    };
    let (g, weights) = stage(a)?;
    let support: Option<SupportTable> = a.compile.target.map(|_| {
        classify(&g, &weights, a.compile.target().backend())
            .into_iter()
            .map(|(name, _, _, s)| (name, s))
            .collect()
    });
    let text = if svg {
        to_svg(&g, support)?
    } else {
        to_dot(
            &g,
            &DotOptions {
                support,
                clusters: true,
            },
        )
    };
    match &a.output {
        None => print!("{text}"),
        Some(p) => {
            crate::common::write_output(p, text.as_bytes(), a.force)?;
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}
