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
mod greedy;
mod sampling;

pub(crate) use decoder::pad_axis;
pub use decoder::{in_place_model, Cache, CacheMode, Decoder, DecoderIo, Timings};
pub use greedy::GREEDY_TOKENS;
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
    let (logits, t) = Timings::time(|| decoder.prefill(prompts))?;
    timings.prefill = t;
    // Greedy steps choose on the step's device (`Decoder::step_greedy`);
    // the prompt's tokens, and sampled ones, come from logits here.
    let greedy = matches!(options.sampling, Sampling::Greedy);
    let mut chosen = Next::Logits(logits);
    let mut done = vec![false; batch];
    loop {
        // A decode step's time is a token's as the caller sees it: choosing
        // the tokens from the last logits, then the step on them.
        let started = std::time::Instant::now();
        let rows = match &chosen {
            Next::Tokens(_) => &[][..],
            Next::Logits(logits) => logits.as_slice::<f32>()?,
        };
        let vocab = (rows.len() / batch.max(1)).max(1);
        let mut next = Vec::with_capacity(batch);
        for b in 0..batch {
            // A finished sequence repeats its end token (its logits unread).
            let token = match (done[b], options.eos, &chosen) {
                (true, Some(eos), _) => eos,
                (_, _, Next::Tokens(t)) => *t.get(b).ok_or_else(|| {
                    Error::Generate(format!("{} tokens for a batch of {batch}", t.len()))
                })?,
                (_, _, Next::Logits(_)) => {
                    let row = rows.get(b * vocab..(b + 1) * vocab).ok_or_else(|| {
                        Error::Generate(format!("{} logits for a batch of {batch}", rows.len()))
                    })?;
                    choose(row, &options.sampling, &mut rng) as i64
                }
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
        chosen = match greedy {
            true => Next::Tokens(decoder.step_greedy(&next)?),
            false => Next::Logits(decoder.step(&next)?),
        };
        timings.steps.push(started.elapsed());
    }
    Ok(Generation {
        tokens,
        timings,
        mode: decoder.mode(),
    })
}

/// What the next tokens are chosen from.
enum Next {
    Logits(rlx_ir::Tensor),
    /// Chosen already, greedily, where the step ran.
    Tokens(Vec<i64>),
}
