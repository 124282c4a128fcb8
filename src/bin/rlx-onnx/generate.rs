//! `rlx-onnx generate MODEL (--prompt-ids 1,2,3 | --prompt-ids p.npy | --prompt TEXT
//! --tokenizer tokenizer.json) [--max-new-tokens N] [--top-k K --top-p P --seed S]`:
//! decodes with a decoder-only model exported with its key/value cache, the
//! cache kept on the device between steps, and prints the tokens (and their
//! text with a tokenizer) and the speed of the prompt and of each new token.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rlx_onnx::generate::{generate_on, CacheMode, Decoder, GenerateOptions, Sampling};
use rlx_onnx::{Session, SessionOptions};

use crate::common::{load_model, CompileArgs};
use crate::cuda_args::CudaArgs;

#[derive(clap::Args)]
pub struct Args {
    /// A decoder-only .onnx model (or .rlx artifact) with `input_ids`,
    /// `past_key_values.N.key/value` inputs and `present.N.key/value` outputs.
    model: PathBuf,
    /// The prompt's token ids: `1,2,3`, or an .npy of [batch, positions]
    /// (or [positions]) integers. Repeat the flag for a batch of prompts
    /// of one length.
    #[arg(long, value_name = "IDS|FILE.npy")]
    prompt_ids: Vec<String>,
    /// The prompt as text, encoded with --tokenizer.
    #[arg(long, value_name = "TEXT", conflicts_with = "prompt_ids")]
    prompt: Option<String>,
    /// A Hugging Face `tokenizer.json`: encodes --prompt and prints the
    /// generated text.
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// The prompt repeated as this many rows of a batch.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    batch: u32,
    /// Tokens to add to each prompt at most.
    #[arg(long, default_value_t = 32)]
    max_new_tokens: usize,
    /// A token id that ends a sequence.
    #[arg(long, value_name = "ID")]
    eos_id: Option<i64>,
    /// Sample among the K most likely tokens (0: all) instead of greedy
    /// decoding; with --top-p or --temperature, sampling too.
    #[arg(long, value_name = "K")]
    top_k: Option<usize>,
    /// Sample from the fewest most likely tokens holding P of the
    /// probability (nucleus sampling).
    #[arg(long, value_name = "P")]
    top_p: Option<f32>,
    /// Divides the logits before sampling.
    #[arg(long, value_name = "T")]
    temperature: Option<f32>,
    /// The seed of sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Let the cache grow a position a step (a new plan per length)
    /// instead of writing it in place in one buffer.
    #[arg(long)]
    growing_cache: bool,
    /// Untimed generations first (the first plans the prompt's and the
    /// decode step's shapes and loads their kernels).
    #[arg(long, default_value_t = 0)]
    warmup: u32,
    /// Also print the time of each step of one decode step (GPU
    /// timestamps on a GPU target), by kernel kind and ONNX node.
    #[arg(long)]
    profile: bool,
    /// How many of the slowest ONNX nodes `--profile` lists.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Worker threads (CPU target) [default: all cores].
    #[arg(long)]
    threads: Option<u32>,
    #[command(flatten)]
    cuda: CudaArgs,
    #[command(flatten)]
    compile: CompileArgs,
}

pub fn run(a: Args) -> ExitCode {
    match go(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::common::error(e.as_ref()),
    }
}

fn go(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let tokenizer = a.tokenizer.as_deref().map(load_tokenizer).transpose()?;
    let prompt = match (&a.prompt, &tokenizer) {
        (Some(text), Some(tok)) => vec![tok
            .encode(text.as_str(), false)
            .map_err(|e| format!("encoding the prompt: {e}"))?
            .get_ids()
            .iter()
            .map(|&i| i64::from(i))
            .collect()],
        (Some(_), None) => return Err("--prompt needs --tokenizer to encode it".into()),
        (None, _) if a.prompt_ids.is_empty() => {
            return Err(
                "give the prompt: --prompt-ids 1,2,3 (or FILE.npy), or --prompt TEXT \
                        with --tokenizer"
                    .into(),
            )
        }
        (None, _) => prompt_ids(&a.prompt_ids)?,
    };
    let prompts: Vec<Vec<i64>> = (0..a.batch).flat_map(|_| prompt.clone()).collect();
    let sampling = if a.top_k.is_some() || a.top_p.is_some() || a.temperature.is_some() {
        Sampling::Random {
            temperature: a.temperature.unwrap_or(1.0),
            top_k: a.top_k.unwrap_or(0),
            top_p: a.top_p.unwrap_or(1.0),
            seed: a.seed,
        }
    } else {
        Sampling::Greedy
    };
    let model = load_model(&a.model, &a.compile)?;
    let mut opts = SessionOptions::default();
    if let Some(t) = a.threads {
        opts.threads = usize::try_from(t)?;
    }
    let devices = crate::common::devices_with(a.cuda.plan());
    let session = Session::with_devices(model, opts, devices)?;
    let options = GenerateOptions {
        max_new_tokens: a.max_new_tokens,
        sampling,
        eos: a.eos_id,
        in_place: !a.growing_cache,
    };
    let width = prompts.first().map_or(0, Vec::len);
    let decoder = || match options.in_place {
        true => Decoder::with_capacity(&session, width + options.max_new_tokens),
        false => Decoder::new(&session),
    };
    for _ in 0..a.warmup {
        generate_on(&mut decoder()?, &prompts, &options)?;
    }
    let mut dec = decoder()?;
    let out = generate_on(&mut dec, &prompts, &options)?;
    for (row, tokens) in out.tokens.iter().enumerate() {
        let ids: Vec<String> = tokens.iter().map(i64::to_string).collect();
        println!("[{row}] {}", ids.join(" "));
        if let Some(tok) = &tokenizer {
            let ids: Vec<u32> = tokens
                .iter()
                .filter_map(|&t| u32::try_from(t).ok())
                .collect();
            let text = tok
                .decode(&ids, true)
                .map_err(|e| format!("decoding: {e}"))?;
            println!("[{row}] {text}");
        }
    }
    match &out.mode {
        CacheMode::InPlace { capacity } => {
            eprintln!("cache: written in place, {capacity} positions")
        }
        CacheMode::Growing { why: Some(why) } => eprintln!("cache: growing ({why})"),
        CacheMode::Growing { why: None } => eprintln!("cache: growing"),
    }
    let rows = prompts.len() as f64;
    let t = &out.timings;
    let prefill = t.prefill.as_secs_f64();
    eprintln!(
        "prefill: {width} positions x {rows} rows in {:.2} ms ({:.0} tokens/s)",
        prefill * 1e3,
        width as f64 * rows / prefill.max(1e-9)
    );
    if !t.steps.is_empty() {
        let mut steps: Vec<f64> = t.steps.iter().map(|d| d.as_secs_f64()).collect();
        let total: f64 = steps.iter().sum();
        steps.sort_by(f64::total_cmp);
        eprintln!(
            "decode: {} steps, {:.3} ms a step (median {:.3}), {:.0} tokens/s",
            steps.len(),
            total / steps.len() as f64 * 1e3,
            steps[steps.len() / 2] * 1e3,
            rows * steps.len() as f64 / total.max(1e-9)
        );
    }
    if a.profile {
        let last: Vec<i64> = out.tokens.iter().map(|t| *t.last().unwrap_or(&0)).collect();
        match dec.profile_step(&last)? {
            Some(steps) => crate::common::print_steps(&steps, a.top),
            None => println!("profile: the decode step runs node by node; no per-step profile"),
        }
    }
    Ok(())
}

/// The prompts of `--prompt-ids` flags: `1,2,3` or an .npy file each.
fn prompt_ids(flags: &[String]) -> Result<Vec<Vec<i64>>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    for f in flags {
        if f.ends_with(".npy") {
            let t = rlx_onnx::npy::read(Path::new(f))?;
            let v = t
                .to_i64_vec()
                .filter(|_| t.dtype().is_int())
                .ok_or_else(|| format!("`{f}`: token ids are integers, not {}", t.dtype()))?;
            match t.dims() {
                [n] => rows.push(v[..*n].to_vec()),
                [_, w] if *w > 0 => rows.extend(v.chunks(*w).map(<[i64]>::to_vec)),
                d => {
                    return Err(
                        format!("`{f}`: ids of shape {d:?}; expected [batch, positions]").into(),
                    )
                }
            }
        } else {
            let row = f
                .split(',')
                .map(|s| s.trim().parse::<i64>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| format!("`{f}`: expected token ids like 1,2,3 or an .npy file"))?;
            rows.push(row);
        }
    }
    Ok(rows)
}

fn load_tokenizer(path: &Path) -> Result<tokenizers::Tokenizer, Box<dyn std::error::Error>> {
    let bytes = rlx_onnx::files::read_regular(path)?;
    tokenizers::Tokenizer::from_bytes(&bytes)
        .map_err(|e| format!("`{}` is not a tokenizer.json: {e}", path.display()).into())
}
