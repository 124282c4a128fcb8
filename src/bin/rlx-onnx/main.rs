//! The `rlx-onnx` command: inspect, dump, conformance (and more as backends land).

mod bench;
mod check;
mod common;
mod compare;
mod conformance;
mod convert;
mod cuda_args;
mod dump;
mod generate;
mod graph;
mod inspect;
mod progress;
mod report;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "rlx-onnx",
    version,
    about = "An ONNX compiler toolchain",
    after_help = common::EXIT_STATUS_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a model's opsets, inputs, outputs, op histogram and unsupported nodes.
    Inspect(inspect::Args),
    /// Print the IR of a model after import, or after chosen passes; list the passes.
    Dump(dump::Args),
    /// The pass table of docs/passes.md: op counts and fusions per model.
    PassReport(report::Args),
    /// Draw the graph at any stage as DOT or SVG.
    Graph(graph::Args),
    /// Compile a model to an .rlx artifact.
    Convert(convert::Args),
    /// Run a model or artifact and write its outputs as .npy files.
    Run(run::Args),
    /// Run a directory in the ONNX backend-test layout and compare with its outputs.
    Check(check::Args),
    /// Run every case of an ONNX backend-test directory.
    Conformance(conformance::Args),
    /// Measure latency: min, median and p90 over repeated runs.
    Bench(bench::Args),
    /// Generate tokens with a decoder-only model and its key/value cache.
    Generate(generate::Args),
    /// Find the first ONNX node whose output differs between two runs (two
    /// targets, two opt levels, or against reference tensors).
    Compare(compare::Args),
}

/// Prints an error with its `source()` chain.
/// A cause whose text its effect already printed is left out.
pub fn report(e: &dyn std::error::Error) {
    let mut shown = e.to_string();
    eprintln!("error: {shown}");
    let mut s = e.source();
    while let Some(c) = s {
        let text = c.to_string();
        if !shown.contains(&text) {
            eprintln!("  caused by: {text}");
            shown = text;
        }
        s = c.source();
    }
}

/// Parses `NAME=VALUE` dim bindings.
pub fn parse_binds(binds: &[String]) -> Result<rlx_onnx::ir::Bindings, String> {
    let mut b = rlx_onnx::ir::Bindings::new();
    for s in binds {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}`: expected NAME=VALUE"))?;
        let v: i64 = v
            .trim()
            .parse()
            .map_err(|_| format!("`{s}`: the value must be an integer"))?;
        if v < 0 {
            return Err(format!("`{s}`: dims are non-negative"));
        }
        b.insert(k.trim().to_string(), v);
    }
    Ok(b)
}

/// Mesa's device-select layer, an implicit Vulkan layer, connects to a
/// Wayland compositor at instance creation to learn the default GPU, and
/// prints "XDG_RUNTIME_DIR is invalid or not set" when there is none (a
/// server, a container, CI). rlx-onnx picks its adapter itself, so where no
/// compositor can be reached the layer is switched off (the variable is
/// Mesa's; a value the user set is kept). Called before any thread starts.
fn quiet_vulkan_layers() {
    let compositor =
        std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| std::path::Path::new(&d).is_dir());
    if !compositor && std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

fn main() -> ExitCode {
    // A closed pipe (`rlx-onnx dump M | head`) ends the process quietly,
    // as it does for other Unix tools, instead of a panic on the next print.
    #[cfg(unix)]
    // SAFETY: restores the default action of one signal before any thread
    // starts; no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    quiet_vulkan_layers();
    let cli = Cli::parse();
    match cli.command {
        Command::Inspect(a) => inspect::run(a),
        Command::Dump(a) => dump::run(a),
        Command::PassReport(a) => report::run(a),
        Command::Conformance(a) => conformance::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Graph(a) => graph::run(a),
        Command::Run(a) => run::run(a),
        Command::Check(a) => check::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Generate(a) => generate::run(a),
    }
}
