//! `rlx-onnx run MODEL|ARTIFACT [--input name=file.npy|file.pb ...]`: runs the
//! model (on generated inputs where none are given) and writes outputs as `.npy`
//! (strings as numpy unicode arrays), sequences as `.npz` of their elements.

use rlx_onnx::ir::ValueKind;
use std::path::PathBuf;
use std::process::ExitCode;

use rlx_onnx::{Session, SessionOptions};

use crate::common::{is_artifact, load_model, CompileArgs, Generate, InputArgs};

#[derive(clap::Args)]
pub struct Args {
    /// An .onnx model or an .rlx artifact.
    model: PathBuf,
    #[command(flatten)]
    inputs: InputArgs,
    /// Where the outputs go, one `<name>.npy` each.
    #[arg(short, long, default_value = "rlx-outputs")]
    output_dir: PathBuf,
    /// Worker threads [default: this machine's cores].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    threads: Option<u64>,
    /// Replace output files that exist (without it, an existing file, or a
    /// symlink, at an output's path is an error).
    #[arg(long)]
    force: bool,
    /// Also say which device runs the model (the wgpu adapter, the GPU).
    #[arg(short, long)]
    verbose: bool,
    #[command(flatten)]
    compile: CompileArgs,
}

/// Distinct file names for output names: [`file_name`], with `_2`, `_3`,
/// ... added where two names map to the same file (`y/1` and `y_1`).
pub fn file_names(names: &[String]) -> Vec<String> {
    let mut used = std::collections::HashSet::new();
    names
        .iter()
        .map(|n| {
            let base = file_name(n);
            let mut name = base.clone();
            let mut k = 2;
            while !used.insert(name.to_ascii_lowercase()) {
                name = format!("{base}_{k}");
                k += 1;
            }
            name
        })
        .collect()
}

/// A file name for an output name (path separators and odd characters replaced).
pub fn file_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("output{s}")
    } else {
        s
    }
}

/// An exclusive lock on a directory (`flock` on its descriptor), held
/// until the returned file is dropped. Other platforms write unlocked.
fn lock_dir(dir: &std::path::Path) -> Result<Option<std::fs::File>, String> {
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        let f = std::fs::File::open(dir)
            .map_err(|e| format!("cannot open `{}`: {e}", dir.display()))?;
        // SAFETY: `f` is an open descriptor for the duration of the call.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!(
                "cannot lock `{}`: {}",
                dir.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(Some(f))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(None)
    }
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::common::error(e.as_ref()),
    }
}

/// The extension of an output of kind `kind`: `.npy` for a tensor, `.npz`
/// (its elements) for a sequence, `.json` for a sequence of maps.
fn extension(kind: ValueKind) -> &'static str {
    match kind.unwrapped() {
        ValueKind::MapSequence { .. } => "json",
        ValueKind::Sequence => "npz",
        _ => "npy",
    }
}

fn go(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let model = load_model(&a.model, &a.compile)?;
    let out_names = model.output_names();
    let files = file_names(&out_names);
    // Before running: an output that exists is refused without --force.
    let g = &model.graph;
    for (o, file) in g.outputs().iter().zip(&files) {
        let path = a
            .output_dir
            .join(format!("{file}.{}", extension(g.ty(o.value).kind)));
        crate::common::check_output(&path, &[&a.model], a.force)?;
    }
    let binds = crate::parse_binds(&a.compile.binds)?;
    let inputs = a.inputs.resolve(
        &model,
        &binds,
        is_artifact(&a.model),
        Generate::WhenAsked,
        true,
    )?;
    let mut opts = SessionOptions::default();
    if let Some(t) = a.threads {
        opts.threads = usize::try_from(t)?;
    }
    let threads = opts.threads;
    let devices = crate::common::devices();
    let session = Session::with_devices(model, opts, devices.clone())?;
    if a.verbose {
        crate::common::print_device(session.model().target, &devices, threads)?;
    }
    let named: Vec<(&str, &rlx_onnx::ir::Tensor)> =
        inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let start = std::time::Instant::now();
    session.warm_up(&named)?;
    let plan_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = std::time::Instant::now();
    let outputs = session.run(&named)?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    std::fs::create_dir_all(&a.output_dir)
        .map_err(|e| format!("cannot create `{}`: {e}", a.output_dir.display()))?;
    // Runs writing into one folder at once write their sets one after
    // another: the folder ends with one run's outputs, not a mix.
    let _lock = lock_dir(&a.output_dir)?;
    for ((name, t), file) in out_names.iter().zip(&outputs).zip(files) {
        if t.is_none() {
            println!("output {name}: an optional without a value (no file)");
            continue;
        }
        // A sequence is an .npz of its elements (arr_0, arr_1, ...); a
        // sequence of maps a JSON list of objects.
        let (path, bytes) = match t.elements() {
            Some(elems) if matches!(t.kind(), ValueKind::MapSequence { .. }) => (
                a.output_dir.join(format!("{file}.json")),
                rlx_onnx::npy::maps_to_json(elems)?.into_bytes(),
            ),
            Some(elems) => (
                a.output_dir.join(format!("{file}.npz")),
                rlx_onnx::npy::sequence_to_npz(elems)?,
            ),
            None => (
                a.output_dir.join(format!("{file}.npy")),
                rlx_onnx::npy::to_bytes(t)?,
            ),
        };
        crate::common::write_output(&path, &bytes, a.force)?;
        match t.elements() {
            Some(e) if matches!(t.kind(), ValueKind::MapSequence { .. }) => println!(
                "output {name}: a sequence of {} maps to {} -> {}",
                e.len(),
                t.dtype(),
                path.display()
            ),
            Some(e) => println!(
                "output {name}: a sequence of {} {} tensors -> {}",
                e.len(),
                t.dtype(),
                path.display()
            ),
            None => println!(
                "output {name}: {}{:?} -> {}",
                t.dtype(),
                t.dims(),
                path.display()
            ),
        }
    }
    println!("ran in {ms:.2} ms, after {plan_ms:.2} ms planning memory and loading kernels for these shapes");
    Ok(())
}
