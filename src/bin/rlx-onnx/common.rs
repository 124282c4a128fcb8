//! What several commands share: loading a model or artifact, input files,
//! generated inputs.

use std::path::{Path, PathBuf};

use rlx_onnx::ir::{Bindings, DType, Tensor};
use rlx_onnx::{artifact, CompiledModel, Compiler, OptLevel, Precision, Target};

/// The `--target` values, as `--help` and errors list them.
pub const TARGETS: [&str; 3] = ["cpu", "cuda", "wgpu"];

/// Options that choose how a model is compiled.
#[derive(clap::Args, Clone)]
pub struct CompileArgs {
    /// The backend to compile for.
    #[arg(long, default_value = "cpu", value_parser = TARGETS)]
    pub target: String,
    /// Bind a symbolic dim: `--bind N=1` (repeatable).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub binds: Vec<String>,
    /// Optimization level: 0, 1 or 2.
    #[arg(short = 'O', long = "opt-level", default_value = "2")]
    pub opt_level: String,
    /// Arithmetic: exact (the model's dtypes, fp32 without TF32), tf32
    /// (CUDA: TF32 tensor cores for f32 GEMMs and convolutions) or fp16
    /// (f32 computation in f16 where the target runs it).
    #[arg(long, default_value = "exact", value_parser = ["exact", "tf32", "fp16"])]
    pub precision: String,
}

impl CompileArgs {
    pub fn compiler(&self) -> Result<Compiler, String> {
        let target = Target::parse(&self.target).map_err(|e| e.to_string())?;
        let opt_level = OptLevel::parse(&self.opt_level)
            .ok_or_else(|| format!("unknown opt level `{}`", self.opt_level))?;
        let bindings: Bindings = crate::parse_binds(&self.binds)?;
        let precision = Precision::parse(&self.precision).ok_or_else(|| {
            format!(
                "unknown precision `{}` (exact, tf32 or fp16)",
                self.precision
            )
        })?;
        Ok(Compiler {
            target,
            opt_level,
            bindings,
            verify: rlx_onnx::passes::verify_by_default(),
            precision,
        })
    }
}

/// True if `path` holds an `.rlx` artifact (by its magic bytes).
pub fn is_artifact(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"RLXONNX\0"
}

/// Loads an artifact or compiles an ONNX model.
pub fn load_model(
    path: &Path,
    args: &CompileArgs,
) -> Result<CompiledModel, Box<dyn std::error::Error>> {
    if is_artifact(path) {
        if !args.binds.is_empty() {
            return Err("--bind applies when compiling an .onnx model, not to an artifact".into());
        }
        return Ok(artifact::load(path)?);
    }
    Ok(args.compiler()?.compile_file(path)?)
}

/// Reads a tensor from `.npy` or `.pb` (by extension).
pub fn read_tensor(path: &Path) -> Result<Tensor, Box<dyn std::error::Error>> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => Ok(rlx_onnx::npy::read(path)?),
        Some("pb") => Ok(rlx_onnx::testdata::read_pb(path)?),
        _ => Err(format!("`{}`: expected a .npy or .pb file", path.display()).into()),
    }
}

/// Parses `--input name=path` arguments.
pub fn read_inputs(specs: &[String]) -> Result<Vec<(String, Tensor)>, Box<dyn std::error::Error>> {
    specs
        .iter()
        .map(|s| {
            let (name, path) = s
                .split_once('=')
                .ok_or_else(|| format!("`{s}`: expected NAME=FILE"))?;
            Ok((name.to_string(), read_tensor(&PathBuf::from(path))?))
        })
        .collect()
}

/// Deterministic pseudo-random inputs for every graph input (seeded xorshift):
/// floats in [-1, 1), integers in [0, 10), bools alternating by bit.
pub fn random_inputs(
    model: &CompiledModel,
    bindings: &Bindings,
) -> Result<Vec<(String, Tensor)>, Box<dyn std::error::Error>> {
    let g = &model.graph;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::new();
    for &id in g.inputs() {
        let node = g.node(id);
        let ty = &node.outputs[0];
        let shape = ty.shape.bind(bindings)?;
        let dims = shape.as_known().ok_or_else(|| {
            format!(
                "input `{}` has symbolic dims {}: give them with --bind NAME=VALUE or pass --input",
                node.name, ty.shape
            )
        })?;
        let n: usize = dims.iter().product();
        let vals: Vec<f64> = (0..n)
            .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64)
            .collect();
        let t = match ty.dtype {
            d if d.is_float() => rlx_onnx::ir::ops::values::float_tensor(
                d,
                &dims,
                &vals.iter().map(|v| v * 2.0 - 1.0).collect::<Vec<_>>(),
            ),
            DType::Bool => rlx_onnx::ir::ops::values::int_tensor(
                DType::Bool,
                &dims,
                &vals.iter().map(|v| i64::from(*v > 0.5)).collect::<Vec<_>>(),
            ),
            d => rlx_onnx::ir::ops::values::int_tensor(
                d,
                &dims,
                &vals.iter().map(|v| (v * 10.0) as i64).collect::<Vec<_>>(),
            ),
        }
        .ok_or_else(|| format!("input `{}`: cannot generate {} values", node.name, ty.dtype))?;
        out.push((node.name.clone(), t));
    }
    Ok(out)
}

/// The GPU devices of a command: CUDA kernels compiled by NVRTC are cached
/// under `$XDG_CACHE_HOME/rlx-onnx/cuda` (or `~/.cache/...`), so a model's
/// kernels compile once per machine, not once per process.
pub fn devices() -> std::sync::Arc<rlx_onnx::Devices> {
    devices_with(rlx_onnx::cuda::PlanOptions::default())
}

/// [`devices`] whose CUDA plans are made with `plan`.
pub fn devices_with(plan: rlx_onnx::cuda::PlanOptions) -> std::sync::Arc<rlx_onnx::Devices> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    let options = rlx_onnx::cuda::ContextOptions {
        compile: rlx_onnx::cuda::CompileOptions {
            cache_dir: base.map(|b| b.join("rlx-onnx/cuda")),
        },
        plan,
        ..Default::default()
    };
    std::sync::Arc::new(rlx_onnx::Devices::with_cuda_options(options))
}
