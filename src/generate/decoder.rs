//! A decoder-only model with a key/value cache, as `transformers` and
//! Optimum export one: token ids in (`input_ids`), optionally an
//! `attention_mask` and `position_ids`, the cache of every layer in
//! (`past_key_values.N.key` / `.value`, `[batch, kv_heads, past, head_dim]`)
//! and out (`present.N.key` / `.value`, one position longer), and the
//! logits. [`Decoder`] runs it a step at a time with the cache left on the
//! session's device between steps; only the last position's logits come
//! back to the host.

use std::time::{Duration, Instant};

use rlx_ir::{DType, Tensor};

use crate::compile::CompiledModel;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::signature::{DimInfo, IoInfo};
use crate::value::{Outputs, Value};

/// The roles of a decoder's inputs and outputs.
#[derive(Debug, Clone)]
pub struct DecoderIo {
    /// Token ids, `[batch, positions]`.
    pub ids: IoInfo,
    /// Ones for every position of the cache and the new tokens.
    pub mask: Option<IoInfo>,
    /// The positions of the new tokens.
    pub positions: Option<IoInfo>,
    pub caches: Vec<Cache>,
    /// `[batch, positions, vocabulary]` (or the last position only).
    pub logits: String,
}

/// One cache tensor: the input that takes it and the output that returns
/// it one step longer.
#[derive(Debug, Clone)]
pub struct Cache {
    pub past: IoInfo,
    pub present: String,
    /// The axis of positions.
    pub axis: usize,
}

fn refuse(why: String) -> Error {
    Error::Generate(why)
}

impl DecoderIo {
    /// Finds the roles by the names exporters give them; an input it cannot
    /// fill, or a cache with no output to return it, is an error naming it.
    pub fn of(session: &Session) -> Result<DecoderIo> {
        DecoderIo::of_model(session.model())
    }

    /// [`DecoderIo::of`] a compiled model.
    pub fn of_model(model: &CompiledModel) -> Result<DecoderIo> {
        let inputs = model.inputs();
        let outputs = model.outputs();
        let find = |name: &str| inputs.iter().find(|i| i.name == name).cloned();
        let ids = find("input_ids").ok_or_else(|| {
            refuse(format!(
                "the model has no `input_ids` input (its inputs: {}); generate runs \
                 decoder-only models exported with their key/value cache",
                names(&inputs)
            ))
        })?;
        let mut caches = Vec::new();
        for i in &inputs {
            let Some(present) = present_name(&i.name) else {
                continue;
            };
            if !outputs.iter().any(|o| o.name == present) {
                return Err(refuse(format!(
                    "cache input `{}` has no output `{present}` to return it",
                    i.name
                )));
            }
            let axis = positions_axis(i)?;
            caches.push(Cache {
                past: i.clone(),
                present,
                axis,
            });
        }
        if caches.is_empty() {
            return Err(refuse(
                "the model takes no key/value cache (`past_key_values.N.key` inputs); \
                 export it with its cache (use_cache=True)"
                    .into(),
            ));
        }
        let known = ["input_ids", "attention_mask", "position_ids"];
        if let Some(other) = inputs
            .iter()
            .find(|i| !known.contains(&i.name.as_str()) && present_name(&i.name).is_none())
        {
            return Err(refuse(format!(
                "decoder input `{}` is none generate knows how to fill (it fills \
                 input_ids, attention_mask, position_ids and the past key/values)",
                other.name
            )));
        }
        let logits = outputs
            .iter()
            .find(|o| o.name == "logits")
            .or_else(|| outputs.iter().find(|o| is_not_cache(&o.name)))
            .map(|o| o.name.clone())
            .ok_or_else(|| refuse("the model has no `logits` output".into()))?;
        Ok(DecoderIo {
            ids,
            mask: find("attention_mask"),
            positions: find("position_ids"),
            caches,
            logits,
        })
    }
}

fn names(io: &[IoInfo]) -> String {
    io.iter()
        .map(|i| format!("`{}`", i.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The output that returns a cache input: `past_key_values.0.key` ->
/// `present.0.key`, `past.0.value` -> `present.0.value`.
fn present_name(input: &str) -> Option<String> {
    ["past_key_values", "past"]
        .iter()
        .find_map(|p| input.strip_prefix(p).map(|rest| format!("present{rest}")))
}

/// Whether an output is not a cache (the fallback choice of the logits).
fn is_not_cache(name: &str) -> bool {
    !name.starts_with("present")
}

/// The axis of positions of a cache input: its one symbolic dim after the
/// batch, or axis 2 of `[batch, heads, positions, head_dim]`.
fn positions_axis(past: &IoInfo) -> Result<usize> {
    let symbolic: Vec<usize> = (1..past.dims.len())
        .filter(|&a| !matches!(past.dims[a], DimInfo::Fixed(_)))
        .collect();
    match symbolic.as_slice() {
        [a] => Ok(*a),
        _ if past.dims.len() == 4 && !matches!(past.dims[2], DimInfo::Fixed(_)) => Ok(2),
        _ => Err(refuse(format!(
            "cache input `{}` has dims {:?}: generate needs one growing dim of \
             positions after the batch and fixed sizes elsewhere",
            past.name, past.dims
        ))),
    }
}

/// How a [`Decoder`] holds its cache between steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheMode {
    /// Each step returns a cache one position longer: a new plan per
    /// length. `why` says why the in-place cache was not used, when asked
    /// for.
    Growing { why: Option<String> },
    /// One buffer of `capacity` positions, written in place
    /// ([`rlx_passes::kv_cache`]): every decode step has the same shapes.
    InPlace { capacity: usize },
}

/// The in-place form of a decoder: its session and state.
struct InPlace {
    session: std::sync::Arc<Session>,
    capacity: usize,
    /// The cache, `capacity` positions long (while `kept`, as it was when
    /// the state took it: what a profile of the step runs on).
    cache: Vec<Value>,
    /// Whether a step has matched the growing graph's (the first step runs
    /// both and compares).
    checked: bool,
    /// On targets that hold values between runs (the CPU, CUDA), the
    /// memory the steps run in ([`Session::run_kept`]).
    state: Option<crate::RunState>,
    /// Whether the cache is in `state`'s memory, written there in place by
    /// the last step, and not in `cache`.
    kept: bool,
}

/// The model with its cache written in place ([`rlx_passes::kv_cache`]):
/// the form a [`Decoder::with_capacity`] runs its decode steps on, for
/// inspection (its plans and snapshots). Its inputs are the model's and
/// `cache_position`; the cache inputs and outputs hold the whole buffer.
pub fn in_place_model(model: &CompiledModel) -> Result<CompiledModel> {
    let io = DecoderIo::of_model(model)?;
    let pairs: Vec<(String, String)> = io
        .caches
        .iter()
        .map(|c| (c.past.name.clone(), c.present.clone()))
        .collect();
    rewrite_in_place(model, &pairs, &io.logits).map_err(Error::Generate)
}

/// `m` with its cache written in place and its greedy tokens an output
/// ([`super::greedy`]).
fn rewrite_in_place(
    m: &CompiledModel,
    pairs: &[(String, String)],
    logits: &str,
) -> std::result::Result<CompiledModel, String> {
    let mut model = m.clone();
    rlx_passes::kv_cache::kv_cache_in_place(&mut model.graph, &mut model.weights, pairs)
        .map_err(|e| e.to_string())?;
    super::greedy::add_output(&mut model, logits)?;
    Ok(model)
}

/// A decoder session stepping through one batch of sequences.
pub struct Decoder<'s> {
    session: &'s Session,
    io: DecoderIo,
    /// The growing cache, one value per [`DecoderIo::caches`] (on the
    /// device of a GPU session).
    cache: Vec<Value>,
    in_place: Option<InPlace>,
    /// Why the in-place cache is not used (when it was asked for).
    why_growing: Option<String>,
    /// Positions in the cache.
    len: usize,
    batch: usize,
    kept: Vec<String>,
}

impl<'s> Decoder<'s> {
    /// A decoder whose cache grows by a position each step.
    pub fn new(session: &'s Session) -> Result<Decoder<'s>> {
        let io = DecoderIo::of(session)?;
        let mut kept: Vec<String> = io.caches.iter().map(|c| c.present.clone()).collect();
        kept.push(io.logits.clone());
        Ok(Decoder {
            session,
            io,
            cache: Vec::new(),
            in_place: None,
            why_growing: None,
            len: 0,
            batch: 0,
            kept,
        })
    }

    /// A decoder whose cache is one buffer of `capacity` positions (the
    /// prompt and every new token) written in place, so that each decode
    /// step runs one plan; where the model's graph does not allow it (no
    /// `attention_mask` or `position_ids` input, a cache that is not a
    /// concatenation, a first step that differs from the growing graph's),
    /// the cache grows and [`Decoder::mode`] says why.
    pub fn with_capacity(session: &'s Session, capacity: usize) -> Result<Decoder<'s>> {
        let mut d = Decoder::new(session)?;
        match d.in_place_session() {
            Ok(s) => {
                let keeps = matches!(s.model().target, crate::Target::Cpu | crate::Target::Cuda);
                let state = keeps.then(crate::RunState::new);
                d.in_place = Some(InPlace {
                    session: s,
                    capacity,
                    cache: Vec::new(),
                    checked: false,
                    state,
                    kept: false,
                })
            }
            Err(why) => d.why_growing = Some(why),
        }
        Ok(d)
    }

    /// The session of the model with its cache written in place.
    fn in_place_session(&self) -> std::result::Result<std::sync::Arc<Session>, String> {
        if self.io.mask.is_none() || self.io.positions.is_none() {
            return Err(
                "the model takes no attention_mask or no position_ids, which an \
                        in-place cache needs to hide unwritten positions and place new ones"
                    .into(),
            );
        }
        let pairs: Vec<(String, String)> = self
            .io
            .caches
            .iter()
            .map(|c| (c.past.name.clone(), c.present.clone()))
            .collect();
        let logits = &self.io.logits;
        self.session
            .form("kv-cache-in-place", |m| rewrite_in_place(m, &pairs, logits))
    }

    /// How the cache is held.
    pub fn mode(&self) -> CacheMode {
        match &self.in_place {
            Some(p) => CacheMode::InPlace {
                capacity: p.capacity,
            },
            None => CacheMode::Growing {
                why: self.why_growing.clone(),
            },
        }
    }

    pub fn io(&self) -> &DecoderIo {
        &self.io
    }

    /// Positions held in the cache.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Runs the prompts (one row each, all of one length) from an empty
    /// cache; returns the last position's logits, `[batch, vocabulary]` f32.
    pub fn prefill(&mut self, prompts: &[Vec<i64>]) -> Result<Tensor> {
        let width = prompts.first().map_or(0, Vec::len);
        if width == 0 || prompts.iter().any(|p| p.len() != width) {
            return Err(refuse(
                "the prompts must be non-empty and of one length (pad them and pass a mask \
                 through the library's Session API for ragged batches)"
                    .into(),
            ));
        }
        self.batch = prompts.len();
        self.len = 0;
        self.cache = self
            .io
            .caches
            .iter()
            .map(|c| self.empty_cache(c).map(Value::Host))
            .collect::<Result<_>>()?;
        let ids: Vec<i64> = prompts.iter().flatten().copied().collect();
        let logits = self.advance(&ids, width)?;
        if let Some(p) = &self.in_place {
            if width >= p.capacity {
                let why = format!(
                    "the prompt's {width} positions leave no room in a cache of {}",
                    p.capacity
                );
                self.fall_back(why);
            } else {
                let cache = self.fill_in_place()?;
                if let Some(p) = &mut self.in_place {
                    p.cache = cache;
                    p.checked = false;
                    p.kept = false;
                }
            }
        }
        Ok(logits)
    }

    /// The in-place cache after a prefill: the growing cache's positions
    /// at the start of buffers of the capacity (copied on the device).
    fn fill_in_place(&self) -> Result<Vec<Value>> {
        let Some(p) = &self.in_place else {
            return Ok(Vec::new());
        };
        self.io
            .caches
            .iter()
            .zip(&self.cache)
            .map(|(c, v)| match v {
                Value::Device(d) => Ok(Value::Device(d.pad_axis(c.axis, p.capacity)?)),
                Value::Host(t) => Ok(Value::Host(pad_axis(t, c.axis, p.capacity)?)),
            })
            .collect()
    }

    /// Goes on with the growing cache, for `why`.
    fn fall_back(&mut self, why: String) {
        self.in_place = None;
        self.why_growing = Some(why);
    }

    /// Appends one token per row; returns the next logits, `[batch,
    /// vocabulary]` f32.
    pub fn step(&mut self, tokens: &[i64]) -> Result<Tensor> {
        if self.batch == 0 {
            return Err(refuse("step before prefill".into()));
        }
        if tokens.len() != self.batch {
            return Err(refuse(format!(
                "{} tokens for a batch of {}",
                tokens.len(),
                self.batch
            )));
        }
        if self.in_place.as_ref().is_some_and(|p| p.checked) {
            return self.advance_in_place(tokens);
        }
        if self.in_place.is_none() {
            return self.advance(tokens, 1);
        }
        // The first step runs both ways: the in-place graph is used only
        // where it gives the growing graph's logits.
        let len = self.len;
        let fixed = match self.advance_in_place(tokens) {
            Ok(l) => Some(l),
            Err(e) => {
                self.fall_back(format!("the in-place graph does not run: {e}"));
                None
            }
        };
        self.len = len;
        let grown = self.advance(tokens, 1)?;
        let Some(fixed) = fixed else {
            return Ok(grown);
        };
        let (a, b) = (fixed.as_slice::<f32>()?, grown.as_slice::<f32>()?);
        let scale = b.iter().fold(1f32, |m, v| m.max(v.abs()));
        let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        let tol = match self.session.model().precision {
            crate::Precision::Exact => 1e-4,
            // 8 bits of mantissa: two orders of summation differ more.
            crate::Precision::Bf16 => 6e-2,
            _ => 2e-2,
        };
        if diff.is_nan() || diff > tol * scale {
            self.fall_back(format!(
                "the in-place cache's first step differs from the growing cache's by {diff} \
                 (logits up to {scale}): the graph does not hide unwritten positions by its mask"
            ));
        } else if let Some(p) = &mut self.in_place {
            p.checked = true;
            self.cache.clear();
        }
        Ok(grown)
    }

    /// One decode step that chooses each row's next token greedily (the
    /// first largest logit, as [`super::argmax`]): where the cache is kept
    /// in place, on the step's device, so that only the tokens come back;
    /// else from the step's logits on the host.
    pub fn step_greedy(&mut self, tokens: &[i64]) -> Result<Vec<i64>> {
        let steady = self.in_place.as_ref().is_some_and(|p| p.checked && p.kept);
        if steady && self.batch > 0 && tokens.len() == self.batch {
            if let Chosen::Tokens(next) = self.advance_kept(tokens, true)? {
                return Ok(next);
            }
        }
        let logits = self.step(tokens)?;
        let rows = logits.as_slice::<f32>()?;
        let vocab = rows.len() / self.batch.max(1);
        Ok(rows
            .chunks(vocab.max(1))
            .map(|row| super::argmax(row) as i64)
            .collect())
    }

    /// The inputs of one decode step on the in-place cache.
    fn in_place_feed(&self, p: &InPlace, tokens: &[i64]) -> Result<Vec<(String, Value)>> {
        let (b, pos) = (self.batch, self.len);
        if pos >= p.capacity {
            return Err(refuse(format!(
                "the cache holds {} positions; the decoder was made for no more",
                p.capacity
            )));
        }
        let io = &self.io;
        let ids = ints(io.ids.dtype, &[b, 1], tokens.iter().copied())?;
        let mut feed: Vec<(String, Value)> = vec![(io.ids.name.clone(), ids.into())];
        if let Some(m) = &io.mask {
            let cap = p.capacity;
            let ones = (0..b).flat_map(|_| (0..cap).map(move |i| i64::from(i <= pos)));
            feed.push((m.name.clone(), ints(m.dtype, &[b, cap], ones)?.into()));
        }
        if let Some(q) = &io.positions {
            let at = std::iter::repeat_n(pos as i64, b);
            feed.push((q.name.clone(), ints(q.dtype, &[b, 1], at)?.into()));
        }
        let at = Tensor::from_i64(&[b], &vec![pos as i64; b])?;
        feed.push((rlx_passes::kv_cache::CACHE_POSITION.to_string(), at.into()));
        for (c, v) in io.caches.iter().zip(&p.cache) {
            feed.push((c.past.name.clone(), v.clone()));
        }
        Ok(feed)
    }

    /// One decode step on the in-place cache.
    fn advance_in_place(&mut self, tokens: &[i64]) -> Result<Tensor> {
        let Some(p) = &self.in_place else {
            return Err(refuse("no in-place cache".into()));
        };
        if p.state.is_some() {
            let first = !p.kept;
            match self.advance_kept(tokens, false).and_then(Chosen::logits) {
                Ok(logits) => return Ok(logits),
                // Until a step keeps the cache every input is a value, so a
                // plan that holds no state (a GPU graph split with the CPU)
                // runs on values from then on, as before.
                Err(_) if first => {
                    if let Some(p) = &mut self.in_place {
                        p.state = None;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let Some(p) = &self.in_place else {
            return Err(refuse("no in-place cache".into()));
        };
        let feed = self.in_place_feed(p, tokens)?;
        let named: Vec<(&str, &Value)> = feed.iter().map(|(n, v)| (n.as_str(), v)).collect();
        let kept: Vec<&str> = self.kept.iter().map(String::as_str).collect();
        let outs = p.session.run_values(&named, Outputs::OnDevice(&kept))?;
        let out_names = p.session.model().output_names();
        let at = |name: &str| {
            out_names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| Error::Generate(format!("no output `{name}`")))
        };
        let mut cache = Vec::with_capacity(self.io.caches.len());
        for c in &self.io.caches {
            cache.push(outs[at(&c.present)?].clone());
        }
        let logits = last_logits(&outs[at(&self.io.logits)?], self.batch)?;
        if let Some(p) = &mut self.in_place {
            p.cache = cache;
        }
        self.len += 1;
        Ok(logits)
    }

    /// One decode step on the in-place cache in the decoder's own memory
    /// (the CPU's run state, CUDA's executable held for the decoder): the
    /// cache goes in once and then stays where each step writes its new
    /// position, no copy in or out.
    /// With `greedy`, the logits stay on the device and the step's greedy
    /// tokens come back instead.
    fn advance_kept(&mut self, tokens: &[i64], greedy: bool) -> Result<Chosen> {
        let Some(p) = &self.in_place else {
            return Err(refuse("no in-place cache".into()));
        };
        let feed = self.in_place_feed(p, tokens)?;
        let caches: Vec<&str> = self
            .io
            .caches
            .iter()
            .map(|c| c.past.name.as_str())
            .collect();
        let named: Vec<(&str, Option<&Value>)> = feed
            .iter()
            .map(|(n, v)| {
                let kept = p.kept && caches.contains(&n.as_str());
                (n.as_str(), (!kept).then_some(v))
            })
            .collect();
        let presents: Vec<&str> = self.io.caches.iter().map(|c| c.present.as_str()).collect();
        // The first step copies the cache out as well: it stays in the
        // state's memory only where every cache input is written in place.
        let keep: &[&str] = if p.kept { &presents } else { &[] };
        // The logits of one position come down whole, straight to the host,
        // unless only the greedy tokens do.
        let mut on_device = presents.clone();
        if greedy {
            on_device.push(&self.io.logits);
        }
        let session = p.session.clone();
        let Some(p) = &mut self.in_place else {
            return Err(refuse("no in-place cache".into()));
        };
        let Some(state) = p.state.as_mut() else {
            return Err(refuse("no run state".into()));
        };
        let mut outs = session.run_kept(state, &named, keep, Outputs::OnDevice(&on_device))?;
        let out_names = session.model().output_names();
        let at = |name: &str| {
            out_names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| Error::Generate(format!("no output `{name}`")))
        };
        if !p.kept {
            let mut cache = Vec::with_capacity(self.io.caches.len());
            for c in &self.io.caches {
                let v = outs[at(&c.present)?]
                    .take()
                    .ok_or_else(|| Error::Generate(format!("no output `{}`", c.present)))?;
                cache.push(v);
            }
            p.cache = cache;
            p.kept = caches.iter().all(|c| session.holds_kept(state, c));
        }
        let wanted = if greedy {
            super::greedy::GREEDY_TOKENS
        } else {
            &self.io.logits
        };
        let out = outs[at(wanted)?]
            .take()
            .ok_or_else(|| Error::Generate(format!("no output `{wanted}`")))?;
        self.len += 1;
        Ok(match greedy {
            true => Chosen::Tokens(super::greedy::last(&out, self.batch)?),
            false => Chosen::Logits(last_logits(&out, self.batch)?),
        })
    }

    /// Times each planned step of a decode step on `tokens` (one per row)
    /// as [`Session::profile`] does, without taking the step: (kernel,
    /// ONNX nodes, time) on the graph the next step would run; `None` when
    /// it runs node by node.
    pub fn profile_step(&self, tokens: &[i64]) -> Result<Option<Vec<crate::session::Timed>>> {
        let b = self.batch;
        let (session, feed) = match &self.in_place {
            Some(p) => (&*p.session, self.in_place_feed(p, tokens)?),
            None => {
                let io = &self.io;
                let ids = ints(io.ids.dtype, &[b, 1], tokens.iter().copied())?;
                let mut feed: Vec<(String, Value)> = vec![(io.ids.name.clone(), ids.into())];
                if let Some(m) = &io.mask {
                    let ones = std::iter::repeat_n(1, b * (self.len + 1));
                    feed.push((
                        m.name.clone(),
                        ints(m.dtype, &[b, self.len + 1], ones)?.into(),
                    ));
                }
                if let Some(q) = &io.positions {
                    let at = std::iter::repeat_n(self.len as i64, b);
                    feed.push((q.name.clone(), ints(q.dtype, &[b, 1], at)?.into()));
                }
                for (c, v) in io.caches.iter().zip(&self.cache) {
                    feed.push((c.past.name.clone(), v.clone()));
                }
                (self.session, feed)
            }
        };
        let host: Vec<(String, Tensor)> = feed
            .into_iter()
            .map(|(n, v)| Ok((n, v.to_host()?)))
            .collect::<Result<_>>()?;
        let named: Vec<(&str, &Tensor)> = host.iter().map(|(n, t)| (n.as_str(), t)).collect();
        session.profile(&named)
    }

    /// One run over `width` new positions per row.
    fn advance(&mut self, ids: &[i64], width: usize) -> Result<Tensor> {
        let (b, past) = (self.batch, self.len);
        let ids = ints(self.io.ids.dtype, &[b, width], ids.iter().copied())?;
        let mut feed: Vec<(String, Value)> = vec![(self.io.ids.name.clone(), ids.into())];
        if let Some(m) = &self.io.mask {
            let ones = std::iter::repeat_n(1, b * (past + width));
            feed.push((
                m.name.clone(),
                ints(m.dtype, &[b, past + width], ones)?.into(),
            ));
        }
        if let Some(p) = &self.io.positions {
            let pos = (0..b).flat_map(|_| (past..past + width).map(|p| p as i64));
            feed.push((p.name.clone(), ints(p.dtype, &[b, width], pos)?.into()));
        }
        for (c, v) in self.io.caches.iter().zip(self.cache.drain(..)) {
            feed.push((c.past.name.clone(), v));
        }
        let named: Vec<(&str, &Value)> = feed.iter().map(|(n, v)| (n.as_str(), v)).collect();
        let kept: Vec<&str> = self.kept.iter().map(String::as_str).collect();
        let outs = self.session.run_values(&named, Outputs::OnDevice(&kept))?;
        let out_names = self.session.model().output_names();
        let at = |name: &str| {
            out_names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| Error::Generate(format!("no output `{name}`")))
        };
        for c in &self.io.caches {
            self.cache.push(outs[at(&c.present)?].clone());
        }
        self.len = past + width;
        let logits = &outs[at(&self.io.logits)?];
        last_logits(logits, b)
    }

    /// An empty cache tensor: the batch, no positions, the model's sizes.
    fn empty_cache(&self, c: &Cache) -> Result<Tensor> {
        let dims = c
            .past
            .dims
            .iter()
            .enumerate()
            .map(|(a, d)| match (a, d) {
                (a, _) if a == c.axis => Ok(0),
                (0, _) => Ok(self.batch),
                (_, DimInfo::Fixed(n)) => Ok(*n),
                (a, d) => Err(refuse(format!(
                    "dim {a} of cache input `{}` is {d:?}; generate needs it fixed \
                     (bind it with --bind)",
                    c.past.name
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::zeros(c.past.dtype, &dims)?)
    }
}

/// What a kept step returns: the last position's logits, or the greedy
/// tokens chosen from them on the step's device.
enum Chosen {
    Logits(Tensor),
    Tokens(Vec<i64>),
}

impl Chosen {
    fn logits(self) -> Result<Tensor> {
        match self {
            Chosen::Logits(t) => Ok(t),
            Chosen::Tokens(_) => Err(refuse("a step's tokens where its logits were asked".into())),
        }
    }
}

/// The last position's logits as `[batch, vocabulary]` f32, read back alone
/// from a device. One position's f32 logits are the output itself, not a
/// copy (a decode step's logits at batch 8 and a vocabulary of 50k are
/// 1.6 MB, copied three times over before).
fn last_logits(logits: &Value, batch: usize) -> Result<Tensor> {
    let d = logits.dims().to_vec();
    let t = match d.len() {
        3 if d[0] == batch && d[1] == 1 => logits.to_host()?,
        3 if d[0] == batch && d[1] > 1 => logits.slice_to_host(1, d[1] - 1..d[1])?,
        2 if d[0] == batch => logits.to_host()?,
        _ => {
            return Err(refuse(format!(
                "logits of shape {d:?} for a batch of {batch}: expected [batch, positions, \
                 vocabulary]"
            )))
        }
    };
    let vocab = *d.last().unwrap_or(&0);
    if t.dtype() == DType::F32 {
        return Ok(t.reshaped(vec![batch, vocab])?);
    }
    let values: Vec<f32> = t
        .to_f64_vec()
        .ok_or_else(|| refuse(format!("logits of dtype {}", t.dtype())))?
        .into_iter()
        .map(|v| v as f32)
        .collect();
    Ok(Tensor::from_f32(&[batch, vocab], &values)?)
}

/// `t` lengthened along `axis` to `len` with zeros after its elements.
pub(crate) fn pad_axis(t: &Tensor, axis: usize, len: usize) -> Result<Tensor> {
    let dims = t.dims();
    let have = match dims.get(axis) {
        Some(&h) if h <= len => h,
        _ => {
            return Err(refuse(format!(
                "a cache of {dims:?} does not fit {len} positions along axis {axis}"
            )))
        }
    };
    let size = t.dtype().size();
    let inner: usize = dims[axis + 1..].iter().product::<usize>() * size;
    let outer: usize = dims[..axis].iter().product();
    let mut out_dims = dims.to_vec();
    out_dims[axis] = len;
    let mut buf = rlx_ir::tensor::AlignedBuf::try_zeroed(outer * len * inner)
        .ok_or_else(|| refuse(format!("no memory for a cache of {out_dims:?}")))?;
    let (src, dst) = (t.bytes(), buf.as_mut_bytes());
    for o in 0..outer {
        let n = have * inner;
        dst[o * len * inner..o * len * inner + n].copy_from_slice(&src[o * n..o * n + n]);
    }
    Ok(Tensor::new(t.dtype(), out_dims, buf.freeze())?)
}

/// Integers as a tensor of `dtype` (the ids, mask or positions input's).
fn ints(dtype: DType, dims: &[usize], values: impl Iterator<Item = i64>) -> Result<Tensor> {
    Ok(match dtype {
        DType::I64 => Tensor::from_i64(dims, &values.collect::<Vec<_>>())?,
        DType::I32 => {
            Tensor::from_slice(dtype, dims, &values.map(|v| v as i32).collect::<Vec<_>>())?
        }
        DType::F32 => Tensor::from_f32(dims, &values.map(|v| v as f32).collect::<Vec<_>>())?,
        DType::Bool => Tensor::from_slice(
            dtype,
            dims,
            &values.map(|v| u8::from(v != 0)).collect::<Vec<_>>(),
        )?,
        other => {
            return Err(refuse(format!(
                "an ids, mask or positions input of dtype {other}"
            )))
        }
    })
}

/// What [`super::generate`] measured.
#[derive(Debug, Clone, Default)]
pub struct Timings {
    pub prefill: Duration,
    /// One per decode step.
    pub steps: Vec<Duration>,
}

impl Timings {
    pub(crate) fn time<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, Duration)> {
        let t = Instant::now();
        let r = f()?;
        Ok((r, t.elapsed()))
    }
}
