//! `rlx-onnx convert MODEL -o OUT.rlx [--target T] [--bind N=1] [-O N]
//! [--precision P] [--cuda-arch SM] [--dump-ir-after PASS|all [--dump-dir DIR]]`.
//!
//! With `--target cuda` and static input shapes, the artifact also carries
//! the PTX of every kernel module (compiled by NVRTC for `--cuda-arch`, by
//! default this machine's GPU or else sm_80), so loading it compiles nothing.

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
    /// CUDA: the compute capability to compile kernels for (`90` for sm_90);
    /// default: this machine's GPU, else 80. The driver runs PTX on that
    /// architecture and newer ones.
    #[arg(long, value_name = "SM")]
    cuda_arch: Option<String>,
    /// Store every weight as the compiled graph holds it. By default,
    /// weights the model stored narrow (int8/uint8 and f16, widened by
    /// folding) are stored narrow again when that is exact, and decoded at
    /// load, so that the artifact is no larger than the model.
    #[arg(long)]
    wide_weights: bool,
    /// Replace the output if it exists.
    #[arg(long)]
    force: bool,
    /// CUDA: write the artifact even when its kernels cannot be compiled
    /// here (no NVRTC library); they then compile when it loads.
    #[arg(long)]
    allow_missing_kernels: bool,
}

/// The architecture to prebuild CUDA kernels for.
fn cuda_arch(arg: Option<&str>) -> Result<(i32, i32), String> {
    match arg {
        Some(s) => {
            let v: u32 = s
                .trim_start_matches("sm_")
                .parse()
                .map_err(|_| format!("--cuda-arch `{s}` is not a compute capability like 90"))?;
            if !(50..=199).contains(&v) {
                return Err(format!(
                    "--cuda-arch `{s}` is not a compute capability like 90"
                ));
            }
            Ok(((v / 10) as i32, (v % 10) as i32))
        }
        None => Ok(crate::common::devices()
            .cuda()
            .ok()
            .map_or((8, 0), |c| c.capability())),
    }
}

pub fn run(a: Args) -> ExitCode {
    if let Err(e) = crate::common::check_output(&a.output, &[&a.model], a.force) {
        return crate::common::error_msg(e);
    }
    crate::common::warn_extension(&a.output, "rlx", "an RLX artifact, not an ONNX model");
    let compiler = match a.compile.compiler() {
        Ok(c) => c,
        Err(e) => return crate::common::error_msg(e),
    };
    let spec = crate::dump::DumpSpec {
        after: a.dump_ir_after.clone(),
        out: a.dump_dir.clone(),
        force: a.force,
    };
    let compiled = if spec.after.is_empty() {
        crate::progress::compile_file(&compiler, &a.model)
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error>)
    } else {
        crate::dump::compile_dumping(&a.model, &compiler, &spec)
    };
    let model = match compiled {
        Ok(m) => m,
        Err(e) => return crate::common::error(e.as_ref()),
    };
    let mut model = model;
    if model.target == rlx_onnx::Target::Cuda {
        let arch = match cuda_arch(a.cuda_arch.as_deref()) {
            Ok(v) => v,
            Err(e) => return crate::common::error_msg(e),
        };
        let opts = rlx_onnx::cuda::CompileOptions::default();
        // Without NVRTC no artifact carries kernels: an error unless asked
        // for. A model whose kernels cannot be prebuilt (symbolic input
        // shapes) compiles them for each shape when it runs, as designed.
        if let Err(e) = rlx_onnx::cuda::compile::Compiler::new(arch, &opts) {
            if !a.allow_missing_kernels {
                return crate::common::error_msg(format!(
                    "cannot compile the CUDA kernels the artifact carries: {e}\n  \
                     NVRTC comes with the CUDA toolkit, or `pip install nvidia-cuda-nvrtc` (CUDA 13); \
                     --allow-missing-kernels writes the artifact without them (they then \
                     compile when it loads)"
                ));
            }
            eprintln!("warning: no CUDA kernels in the artifact (they compile when it loads): {e}");
        } else {
            match model.prebuild_cuda(arch, &opts) {
                Ok(n) => println!(
                    "prebuilt {n} CUDA kernel modules for sm_{}{}",
                    arch.0, arch.1
                ),
                Err(e) => eprintln!(
                    "note: no CUDA kernels in the artifact (they compile for each input shape \
                     when it runs): {e}"
                ),
            }
        }
    }
    let opts = artifact::SaveOptions {
        narrow_weights: !a.wide_weights,
        existing: crate::common::existing(a.force),
    };
    if let Err(e) = artifact::save_with(&model, &a.output, &opts) {
        if std::fs::symlink_metadata(&a.output).is_ok() && !a.force {
            return crate::common::error_msg(crate::common::exists_message(&a.output));
        }
        return crate::common::error(&e);
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
