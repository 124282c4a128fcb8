//! `rlx-onnx bench MODEL|ARTIFACT [--input NAME=FILE | --inputs DIR] [--threads N] [--iters K]
//! [--io host|device]`: latency percentiles over repeated runs (after
//! warm-up runs, which also compile the plan for the input shapes), host
//! to host or with the inputs and outputs on the device.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use rlx_onnx::{Outputs, Value};
use rlx_onnx::{Session, SessionOptions};

use crate::common::{is_artifact, load_model, CompileArgs, Generate, InputArgs};
use crate::cuda_args::CudaArgs;

#[derive(clap::Args)]
pub struct Args {
    /// An .onnx model or an .rlx artifact.
    model: PathBuf,
    #[command(flatten)]
    inputs: InputArgs,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Timed runs.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Untimed runs first (at least one runs: it plans the input shapes).
    #[arg(long, default_value_t = 3)]
    warmup: u32,
    /// Also print the time per op kind and the slowest ONNX nodes.
    #[arg(long)]
    profile: bool,
    /// How many of the slowest ONNX nodes `--profile` lists.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Write the profile as a Chrome trace (chrome://tracing, Perfetto):
    /// one event per step, named by its ONNX nodes (implies --profile).
    #[arg(long, value_name = "FILE.json")]
    trace: Option<PathBuf>,
    /// Replace the --trace file if it exists.
    #[arg(long)]
    force: bool,
    /// Where a timed run's inputs and outputs are: host (each run copies
    /// the inputs to the target's device and its outputs back), or device
    /// (the inputs uploaded once before the runs, the outputs left on the
    /// device: ONNX Runtime's IOBinding, the peer of a framework's
    /// device-resident timing). The CPU target's device is the host.
    #[arg(long, value_enum, default_value = "host")]
    io: Io,
    #[command(flatten)]
    cuda: CudaArgs,
    #[command(flatten)]
    compile: CompileArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Io {
    Host,
    Device,
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::common::error(e.as_ref()),
    }
}

/// The `q` quantile (0..=1) of sorted samples, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn go(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(t) = &a.trace {
        crate::common::check_output(t, &[&a.model], a.force)?;
    }
    let model = load_model(&a.model, &a.compile)?;
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    println!(
        "bench: target {}, {} thread{}, {} timed run{} after {} warm-up{}",
        model.target,
        a.threads,
        plural(a.threads as u64),
        a.iters,
        plural(u64::from(a.iters)),
        a.warmup.max(1),
        match a.io {
            Io::Host => "",
            Io::Device => ", inputs and outputs on the device",
        }
    );
    let binds = crate::parse_binds(&a.compile.binds)?;
    let inputs = a.inputs.resolve(
        &model,
        &binds,
        is_artifact(&a.model),
        Generate::WhenNoneGiven,
        true,
    )?;
    let devices = crate::common::devices_with(a.cuda.plan());
    let session = Session::with_devices(
        model,
        SessionOptions { threads: a.threads },
        devices.clone(),
    )?;
    let named: Vec<(&str, &rlx_onnx::ir::Tensor)> =
        inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    crate::common::print_device(session.model().target, &devices, a.threads)?;
    // A run, host to host or on device values (uploaded here, once).
    let uploaded: Vec<(&str, Value)> = match a.io {
        Io::Host => Vec::new(),
        Io::Device => named
            .iter()
            .map(|&(n, t)| Ok((n, session.upload(t)?)))
            .collect::<rlx_onnx::Result<_>>()?,
    };
    let values: Vec<(&str, &Value)> = uploaded.iter().map(|(n, v)| (*n, v)).collect();
    let once = || -> rlx_onnx::Result<()> {
        match a.io {
            Io::Host => session.run(&named).map(drop),
            // Returns once the outputs are complete on the device.
            Io::Device => session.run_values(&values, Outputs::Device).map(drop),
        }
    };
    for _ in 0..a.warmup.max(1) {
        once()?;
    }
    let mut ms = Vec::with_capacity(a.iters as usize);
    for _ in 0..a.iters {
        let t = Instant::now();
        once()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    println!("min: {} ms", fmt_ms(ms[0]));
    println!("median: {} ms", fmt_ms(quantile(&ms, 0.5)));
    println!("p90: {} ms", fmt_ms(quantile(&ms, 0.9)));
    if a.profile || a.trace.is_some() {
        print_profile(&session, &named, a)?;
    }
    Ok(())
}

/// Milliseconds to three places, or to three significant digits below one
/// (a run of a few microseconds reads `0.00213`, not `0.002`).
fn fmt_ms(ms: f64) -> String {
    let places = if ms > 0.0 && ms < 1.0 {
        (2 - ms.log10().floor() as i32).clamp(3, 9) as usize
    } else {
        3
    };
    format!("{ms:.places$}")
}

fn print_profile(
    session: &Session,
    named: &[(&str, &rlx_onnx::ir::Tensor)],
    a: &Args,
) -> Result<(), Box<dyn std::error::Error>> {
    let plan = session.plan_for(named)?;
    if let Some(plan) = &plan {
        println!(
            "memory: arena {:.2} MiB, sum of all planned tensors {:.2} MiB ({:.1}%), scratch {:.2} MiB",
            plan.arena_bytes as f64 / 1048576.0,
            plan.total_bytes as f64 / 1048576.0,
            100.0 * plan.arena_bytes as f64 / plan.total_bytes.max(1) as f64,
            plan.scratch_bytes as f64 / 1048576.0
        );
    }
    let Some(steps) = session.profile(named)? else {
        println!(
            "profile: this graph runs node by node (data-dependent shapes); no per-step profile"
        );
        if let Some(t) = &a.trace {
            return Err(format!(
                "no trace written to `{}`: the graph has no per-step profile",
                t.display()
            )
            .into());
        }
        return Ok(());
    };
    if let Some(t) = &a.trace {
        let target = session.model().target.to_string();
        let json = rlx_onnx::trace::chrome_trace(&target, &steps);
        crate::common::write_output(t, json.as_bytes(), a.force)?;
        println!("trace: {} steps -> {}", steps.len(), t.display());
    }
    crate::common::print_steps(&steps, a.top);
    let stats = plan.map(|p| p.kernel_statistics).unwrap_or_default();
    if !stats.is_empty() {
        println!("kernels as the driver compiled them:");
        for k in stats {
            let list: Vec<String> = k.stats.iter().map(|(n, v)| format!("{n} {v}")).collect();
            println!("  {:<36} {}", k.pipeline, list.join(", "));
        }
    }
    Ok(())
}

#[cfg(test)]
mod fmt_tests {
    use super::fmt_ms;

    #[test]
    fn short_runs_keep_three_significant_digits() {
        assert_eq!(fmt_ms(12.34567), "12.346");
        assert_eq!(fmt_ms(1.0), "1.000");
        assert_eq!(fmt_ms(0.5), "0.500");
        assert_eq!(fmt_ms(0.0213), "0.0213");
        assert_eq!(fmt_ms(0.002134), "0.00213");
        assert_eq!(fmt_ms(0.0), "0.000");
    }
}
