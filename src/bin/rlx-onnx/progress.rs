//! Progress for long work (compiling a large model, a conformance folder):
//! drawn on standard error when it is a terminal, nothing when piped.

use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use rlx_onnx::importer::{import_file, ImportedModel, Registry};
use rlx_onnx::{CompiledModel, Compiler};

/// A bar over `len` items, `what` before it; hidden unless standard error
/// is a terminal.
pub fn bar(len: usize, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{prefix} [{bar:32}] {pos}/{len} {elapsed} {wide_msg}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(what.to_string());
    pb
}

/// Compiles an imported model, naming each pass on a spinner.
pub fn compile(compiler: &Compiler, model: ImportedModel) -> rlx_onnx::Result<CompiledModel> {
    let passes = compiler.passes();
    let pb = ProgressBar::new(passes.len() as u64);
    if let Ok(style) = ProgressStyle::with_template("compiling [{bar:24}] {pos}/{len} {msg}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.enable_steady_tick(Duration::from_millis(200));
    let mut tick = |step: usize, pass: &str, _: &rlx_onnx::ir::Graph| {
        pb.set_position(step as u64);
        pb.set_message(format!("after {pass}"));
    };
    let out = compiler.compile(model, Some(&mut tick));
    pb.finish_and_clear();
    out
}

/// Imports and compiles an `.onnx` file with [`compile`]'s progress.
pub fn compile_file(compiler: &Compiler, path: &Path) -> rlx_onnx::Result<CompiledModel> {
    let model = import_file(path, &Registry::standard())?;
    compile(compiler, model)
}
