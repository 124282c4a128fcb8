//! `rlx-onnx compare MODEL [--target T] [-O N] [--against cpu|cuda|wgpu|vulkan|FILE.npz|CASE_DIR]
//! [--against-opt N] [--input NAME=FILE ... | --inputs DIR] [--dump DIR]`: runs
//! the model twice (two targets, two opt levels, or once against reference
//! tensors), keeps every intermediate, and reports the first ONNX node whose
//! output diverges. Exit status 1 when one does.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rlx_onnx::compare::{first_divergence, name_intermediates, onnx_nodes, Named};
use rlx_onnx::conformance::Tolerance;
use rlx_onnx::importer::{decode_model, import_model, Registry};
use rlx_onnx::ir::Tensor;
use rlx_onnx::{CompiledModel, DebugOptions, OptLevel, Session, SessionOptions, Target};

use crate::common::{CompileArgs, Generate, InputArgs, OptArg};

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx model (intermediates are named by its tensors).
    model: PathBuf,
    /// What to compare with: a target (`cpu`, `cuda`, `wgpu`), reference
    /// tensors in an `.npz` (graph outputs or any intermediate, by ONNX
    /// tensor name: onnxruntime's outputs saved with numpy.savez), or a
    /// directory in the ONNX backend-test layout (its test_data_set_0).
    #[arg(long, default_value = "cpu", value_name = "TARGET|FILE.npz|CASE_DIR")]
    against: String,
    /// The opt level of the `--against` target [default: the -O of the
    /// first run].
    #[arg(long, value_enum, value_name = "N")]
    against_opt: Option<OptArg>,
    #[command(flatten)]
    compile: CompileArgs,
    #[command(flatten)]
    inputs: InputArgs,
    /// Relative tolerance.
    #[arg(long, default_value_t = 1e-3)]
    rtol: f64,
    /// Absolute tolerance.
    #[arg(long, default_value_t = 1e-5)]
    atol: f64,
    /// Write both sides' intermediates here as `.npy`, named by ONNX tensor
    /// name (`DIR/left/`, `DIR/right/`).
    #[arg(long, value_name = "DIR")]
    dump: Option<PathBuf>,
    /// Test hook: break the kernel of this ONNX node in the first run (adds
    /// one to its output's first element).
    #[arg(long, hide = true, value_name = "NODE")]
    inject_fault: Option<String>,
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => crate::common::check_failed(),
        Err(e) => crate::common::error(e.as_ref()),
    }
}

/// What the first run is compared with.
enum Against {
    Target(Target, OptLevel),
    Tensors(Named, String),
}

fn go(a: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    if crate::common::is_artifact(&a.model) {
        return Err(
            "compare needs the .onnx model (intermediates are named by its tensors), \
                    not an .rlx artifact"
                .into(),
        );
    }
    let bytes = rlx_onnx::files::read_regular(&a.model)
        .map_err(|e| format!("cannot read `{}`: {e}", a.model.display()))?;
    let proto = decode_model(&bytes)?;
    let nodes = onnx_nodes(&proto);
    let dir = a.model.parent().map(Path::to_path_buf);
    let compile =
        |target: Target, level: OptLevel| -> Result<CompiledModel, Box<dyn std::error::Error>> {
            let mut c = a.compile.compiler()?;
            c.target = target;
            c.opt_level = level;
            let imported = import_model(&proto, dir.clone(), &Registry::standard())?;
            Ok(crate::progress::compile(&c, imported)?)
        };
    let (target, level) = (a.compile.target(), a.compile.opt_level());
    let against = match a.against.as_str() {
        t @ ("cpu" | "cuda" | "wgpu" | "vulkan") => {
            let other = Target::parse(t)?;
            let other_level = a.against_opt.map_or(level, OptLevel::from);
            if other == target && other_level == level && a.inject_fault.is_none() {
                return Err(format!(
                    "both runs would be {target} -{}: give --target, -O or --against-opt \
                     so that they differ",
                    level.name()
                )
                .into());
            }
            Against::Target(other, other_level)
        }
        path => {
            let path = Path::new(path);
            if path.is_dir() {
                let set = path.join("test_data_set_0");
                let data = rlx_onnx::testdata::read_data_set(&set)?;
                let names: Vec<String> = proto
                    .graph
                    .as_ref()
                    .map(|g| g.output.iter().filter_map(|o| o.name.clone()).collect())
                    .unwrap_or_default();
                let refs = names.into_iter().zip(data.outputs).collect();
                Against::Tensors(refs, format!("{}", set.display()))
            } else if path.extension().is_some_and(|e| e == "npz") {
                let refs = rlx_onnx::npy::read_npz(path)?.into_iter().collect();
                Against::Tensors(refs, path.display().to_string())
            } else {
                return Err(format!(
                    "--against `{}`: expected cpu, cuda, wgpu, vulkan, an .npz file or a case directory",
                    path.display()
                )
                .into());
            }
        }
    };
    let left_model = compile(target, level)?;
    let mut input_args = a.inputs.clone();
    if let (Against::Tensors(..), true, true) = (
        &against,
        input_args.files.is_empty() && input_args.data_set.is_none(),
        Path::new(&a.against).is_dir(),
    ) {
        input_args.data_set = Some(Path::new(&a.against).join("test_data_set_0"));
    }
    let binds = crate::parse_binds(&a.compile.binds)?;
    // Against reference tensors, the inputs must be the ones they were made
    // from: generated values are asked for or refused.
    let generate = match against {
        Against::Tensors(..) => Generate::WhenAsked,
        Against::Target(..) => Generate::WhenNoneGiven,
    };
    let inputs = input_args.resolve(&left_model, &binds, false, generate, false)?;
    let named_inputs: Named = inputs.iter().cloned().collect();
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let run = |model: CompiledModel,
               fault: Option<String>|
     -> Result<(Named, bool), Box<dyn std::error::Error>> {
        let out_names = model.output_names();
        let session = Session::with_devices(
            model,
            SessionOptions { threads: 1 },
            crate::common::devices(),
        )?;
        let opts = DebugOptions {
            capture: true,
            fault,
        };
        let r = session.run_debug(&refs, &opts)?;
        let outputs: Vec<(String, Tensor)> = out_names.into_iter().zip(r.outputs).collect();
        Ok((
            name_intermediates(&nodes, &r.intermediates, &outputs),
            r.captured,
        ))
    };
    let left_label = format!("{target} -{}", level.name());
    let (left, left_captured) = run(left_model, a.inject_fault.clone())?;
    let (right, right_label, right_captured) = match against {
        Against::Target(t, l) => {
            let (named, captured) = run(compile(t, l)?, None)?;
            (named, format!("{t} -{}", l.name()), captured)
        }
        Against::Tensors(named, label) => (named, label, true),
    };
    for (label, captured) in [(&left_label, left_captured), (&right_label, right_captured)] {
        if !captured {
            println!("note: {label} exposes no intermediates; its graph outputs are compared");
        }
    }
    if let Some(d) = &a.dump {
        dump(&d.join("left"), &left)?;
        dump(&d.join("right"), &right)?;
    }
    let tol = Tolerance {
        rtol: a.rtol,
        atol: a.atol,
    };
    let c = first_divergence(&nodes, &left, &right, &named_inputs, tol);
    println!(
        "{left_label} against {right_label}: {} ONNX tensors compared (rtol {:e}, atol {:e})",
        c.compared, a.rtol, a.atol
    );
    let Some(d) = c.first else {
        if c.compared == 0 {
            return Err("no ONNX tensor is present on both sides".into());
        }
        println!("no divergence");
        return Ok(true);
    };
    println!(
        "first divergence: node `{}` ({}), output `{}`",
        d.node, d.op_type, d.output
    );
    match &d.diff {
        Ok(diff) => println!("  {}", diff.summary(&d.dims)),
        Err(e) => println!("  {e}"),
    }
    println!("  inputs:");
    for i in &d.inputs {
        let show = |s: &Option<rlx_onnx::compare::Stats>| {
            s.as_ref().map_or_else(
                || "(not captured: a weight or fused away)".into(),
                |s| s.to_string(),
            )
        };
        println!("    `{}`", i.name);
        println!("      {left_label}: {}", show(&i.left));
        println!("      {right_label}: {}", show(&i.right));
        match &i.diff {
            Some(Ok(diff)) if diff.mismatched == 0 => println!("      the sides agree"),
            Some(Ok(diff)) => println!("      the sides differ already: {}", diff.summary(&[])),
            Some(Err(e)) => println!("      {e}"),
            None => {}
        }
    }
    Ok(false)
}

fn dump(dir: &Path, named: &Named) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    let mut names: Vec<String> = named.keys().cloned().collect();
    names.sort();
    for (name, file) in names.iter().zip(crate::run::file_names(&names)) {
        let (path, t) = (dir.join(format!("{file}.npy")), &named[name]);
        if let Err(e) = rlx_onnx::npy::write(&path, t) {
            eprintln!("note: `{name}` not dumped: {e}");
        }
    }
    Ok(())
}
