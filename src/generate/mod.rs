//! Text generation with a decoder-only model and its key/value cache:
//! [`Decoder`] steps a batch through the model with the cache kept on the
//! session's device, and [`generate`] is the loop around it (greedy or
//! seeded sampling, stopping at an end token). An application with its own
//! sampler drives [`Decoder::prefill`] and [`Decoder::step`] itself.
//!
//! ```no_run
//! # fn main() -> rlx_onnx::Result<()> {
//! use rlx_onnx::generate::{generate, GenerateOptions, Sampling};
//! use rlx_onnx::{Compiler, Session, SessionOptions, Target};
//! let model = Compiler::new(Target::Cpu).compile_file("decoder.onnx".as_ref())?;
//! let session = Session::new(model, SessionOptions::default())?;
//! let options = GenerateOptions {
//!     max_new_tokens: 32,
//!     sampling: Sampling::Greedy,
//!     eos: None,
//!     in_place: true,
//! };
//! let out = generate(&session, &[vec![464, 3290, 318]], &options)?;
//! println!("{:?}", out.tokens[0]);
//! # Ok(()) }
//! ```

mod decoder;
mod sampling;

pub(crate) use decoder::pad_axis;
pub use decoder::{in_place_model, Cache, CacheMode, Decoder, DecoderIo, Timings};
pub use sampling::{argmax, choose, Rng, Sampling};

use crate::error::{Error, Result};
use crate::session::Session;

/// What [`generate`] does.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// Tokens to add to each prompt at most.
    pub max_new_tokens: usize,
    pub sampling: Sampling,
    /// A token that ends a sequence (kept as its last token); generation
    /// stops when every sequence has ended.
    pub eos: Option<i64>,
    /// Keep the cache in one buffer of the prompt's and the new tokens'
    /// length, written in place ([`Decoder::with_capacity`]); else it grows
    /// a position a step.
    pub in_place: bool,
}

/// The new tokens of each prompt, and the time of each run.
#[derive(Debug, Clone)]
pub struct Generation {
    pub tokens: Vec<Vec<i64>>,
    pub timings: Timings,
    /// How the cache was held, at the end.
    pub mode: CacheMode,
}

/// Generates up to `max_new_tokens` tokens after each prompt (one row of
/// the batch each, all of one length).
pub fn generate(
    session: &Session,
    prompts: &[Vec<i64>],
    options: &GenerateOptions,
) -> Result<Generation> {
    let width = prompts.first().map_or(0, Vec::len);
    let mut decoder = if options.in_place {
        Decoder::with_capacity(session, width + options.max_new_tokens)?
    } else {
        Decoder::new(session)?
    };
    generate_on(&mut decoder, prompts, options)
}

/// [`generate`] on a decoder of the caller's (to profile or reuse it
/// after); the in-place cache's capacity must hold the prompt and the new
/// tokens.
pub fn generate_on(
    decoder: &mut Decoder<'_>,
    prompts: &[Vec<i64>],
    options: &GenerateOptions,
) -> Result<Generation> {
    options.sampling.check().map_err(Error::Generate)?;
    let mut rng = Rng::new(match options.sampling {
        Sampling::Random { seed, .. } => seed,
        Sampling::Greedy => 0,
    });
    let batch = prompts.len();
    let mut tokens: Vec<Vec<i64>> = vec![Vec::new(); batch];
    let mut timings = Timings::default();
    if options.max_new_tokens == 0 {
        let mode = decoder.mode();
        return Ok(Generation {
            tokens,
            timings,
            mode,
        });
    }
    let (mut logits, t) = Timings::time(|| decoder.prefill(prompts))?;
    timings.prefill = t;
    let mut done = vec![false; batch];
    loop {
        // A decode step's time is a token's as the caller sees it: choosing
        // the tokens from the last logits, then the step on them.
        let started = std::time::Instant::now();
        let rows = logits.as_slice::<f32>()?;
        let vocab = rows.len() / batch.max(1);
        let mut next = Vec::with_capacity(batch);
        for (b, row) in rows.chunks(vocab.max(1)).enumerate() {
            // A finished sequence repeats its end token (its logits unread).
            let token = match (done[b], options.eos) {
                (true, Some(eos)) => eos,
                _ => choose(row, &options.sampling, &mut rng) as i64,
            };
            if !done[b] {
                tokens[b].push(token);
                done[b] = options.eos == Some(token);
            }
            next.push(token);
        }
        let produced = timings.steps.len() + 1;
        if done.iter().all(|&d| d) || produced >= options.max_new_tokens {
            break;
        }
        logits = decoder.step(&next)?;
        timings.steps.push(started.elapsed());
    }
    Ok(Generation {
        tokens,
        timings,
        mode: decoder.mode(),
    })
}
