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
    if a.output
        .canonicalize()
        .ok()
        .is_some_and(|o| a.model.canonicalize().ok() == Some(o))
    {
        return crate::common::error_msg(format!(
            "the output `{}` is the input model; refusing to overwrite it",
            a.output.display()
        ));
    }
    let compiler = match a.compile.compiler() {
        Ok(c) => c,
        Err(e) => return crate::common::error_msg(e),
    };
    let spec = crate::dump::DumpSpec {
        after: a.dump_ir_after.clone(),
        out: a.dump_dir.clone(),
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
        match model.prebuild_cuda(arch, &opts) {
            Ok(n) => println!(
                "prebuilt {n} CUDA kernel modules for sm_{}{}",
                arch.0, arch.1
            ),
            Err(e) => {
                eprintln!("note: no CUDA kernels in the artifact (they compile when it loads): {e}")
            }
        }
    }
    let opts = artifact::SaveOptions {
        narrow_weights: !a.wide_weights,
    };
    if let Err(e) = artifact::save_with(&model, &a.output, &opts) {
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
