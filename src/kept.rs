//! Runs that leave state where the next run reads it: [`Session::run_kept`],
//! for a caller that runs one model again and again on values it carries
//! (a decoder's key/value cache). Outputs whose memory is an input's (the
//! memory plan writes a cache update over the cache) stay there, and the
//! next run takes them without a copy either way.
//!
//! On the CPU the state owns the memory its runs use. On CUDA the memory is
//! the executable's, and the state is a claim on it (`rlx_cuda::Holder`):
//! another caller's run in between copies the held values out and the next
//! run of the state copies them back, so sharing costs copies, not values.
//! A run that fails gives the state's values up (its next kept run is
//! refused, never served stale values).
//! Other targets (wgpu, Vulkan), graphs split with the CPU and schedules
//! run node by node are an error before the run, for the caller to run as
//! usual instead.

use std::sync::Arc;

use rlx_cpu::tensor::TensorRef;
use rlx_gpu::io::Place;
use rlx_ir::Tensor;

use crate::backend::{Holders, KeptRun};
use crate::error::{Error, InputError, Result};
use crate::session::{Executable, Session};
use crate::value::{Outputs, Value};

/// The memory of one caller's [`Session::run_kept`] runs and what the last
/// of them left in it. One state per caller: runs on a state are not
/// concurrent (it is `&mut`).
#[derive(Default)]
pub struct RunState {
    cpu: rlx_cpu::RunState,
    gpu: Holders,
    /// The last run's executable and its input shapes (graph order).
    last: Option<(Arc<Executable>, Vec<Vec<usize>>)>,
}

impl RunState {
    pub fn new() -> RunState {
        RunState::default()
    }
}

fn refuse(why: &str) -> Error {
    Error::Pipeline(format!("a run that keeps its state: {why}"))
}

impl Session {
    /// Runs in `state` on named inputs, host or device values, where `None`
    /// is "the value the last run in `state` left in this input's memory"
    /// (see [`Session::holds_kept`]), and returns the outputs in graph
    /// order: `None` for those named in `keep` (left in the state's memory
    /// only), the others where `outputs` says. The CPU target's planned
    /// schedules and CUDA's; anything else is an error before the run, for
    /// the caller to run as usual instead.
    pub fn run_kept(
        &self,
        state: &mut RunState,
        inputs: &[(&str, Option<&Value>)],
        keep: &[&str],
        outputs: Outputs<'_>,
    ) -> Result<Vec<Option<Value>>> {
        let names = self.model().input_names();
        let refs: Vec<(&str, &Option<&Value>)> = inputs.iter().map(|(n, t)| (*n, t)).collect();
        // Outer None: not given; inner None: kept.
        let given: Vec<Option<Option<&Value>>> = self
            .place_by(&refs, |t| t.map(Value::dtype))?
            .into_iter()
            .map(|t| t.copied())
            .collect();
        let mut shapes: Vec<Vec<usize>> = Vec::with_capacity(names.len());
        for (i, t) in given.iter().enumerate() {
            shapes.push(match t {
                Some(Some(t)) => t.dims().to_vec(),
                Some(None) => match state.last.as_ref().and_then(|(_, d)| d.get(i)) {
                    Some(dims) => dims.clone(),
                    None => {
                        return Err(refuse(&format!("`{}` is kept, but nothing ran", names[i])))
                    }
                },
                None => return Err(InputError::Missing(names[i].clone()).into()),
            });
        }
        let mut values = Vec::new();
        for &i in self.value_input_indices() {
            match given[i] {
                Some(Some(t)) => values.push((i, t.to_host()?)),
                _ => {
                    return Err(refuse(&format!(
                        "`{}` decides shapes and cannot be kept",
                        names[i]
                    )))
                }
            }
        }
        let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
        let exec = self.executable_of(&refs, values)?;
        let same = state
            .last
            .as_ref()
            .is_some_and(|(e, _)| Arc::ptr_eq(e, &exec));
        for (i, t) in given.iter().enumerate() {
            if t.is_some_and(|t| t.is_none()) && !(same && holds(state, &exec, i)) {
                return Err(refuse(&format!(
                    "`{}` is kept, but the last run left nothing in its memory",
                    names[i]
                )));
            }
        }
        let out_names = self.model().output_names();
        if let Some(unknown) = keep.iter().find(|k| !out_names.iter().any(|n| n == *k)) {
            return Err(InputError::UnknownOutput {
                name: unknown.to_string(),
                expected: out_names,
            }
            .into());
        }
        let places: Vec<Option<Place>> = self
            .places(outputs)?
            .into_iter()
            .zip(&out_names)
            .map(|(p, n)| (!keep.contains(&n.as_str())).then_some(p))
            .collect();
        let ordered: Vec<Option<&Value>> = given.iter().map(|t| t.flatten()).collect();
        state.last = None;
        let outs = match &*exec {
            Executable::Planned(p) => {
                let ins = ordered
                    .iter()
                    .zip(&names)
                    .map(|(v, name)| match v {
                        None => Ok(None),
                        Some(Value::Host(t)) => Ok(Some(TensorRef::of(t))),
                        Some(Value::Device(d)) => {
                            Err(crate::device_io::elsewhere(name, d, self.model().target))
                        }
                    })
                    .collect::<Result<Vec<_>>>()?;
                let mask: Vec<bool> = places.iter().map(Option::is_none).collect();
                let cpu = &mut state.cpu;
                let outs: Vec<Option<Tensor>> =
                    self.threads.run(|| p.run_kept(cpu, &ins, &mask))?;
                outs.into_iter().map(|o| o.map(Value::Host)).collect()
            }
            Executable::Gpu(e) => e.run_kept(
                &state.gpu,
                &KeptRun {
                    ordered: &ordered,
                    names: &names,
                    places: &places,
                },
            )?,
            _ => {
                return Err(refuse(
                    "only the cpu target's planned schedules and CUDA's keep state",
                ))
            }
        };
        state.last = Some((exec.clone(), shapes));
        Ok(outs)
    }

    /// Whether the last run in `state` left a value in the memory of input
    /// `name` (an output written over it: a cache written in place), so that
    /// the next [`Session::run_kept`] on inputs of the same shapes may pass
    /// it as kept.
    pub fn holds_kept(&self, state: &RunState, name: &str) -> bool {
        let Some(i) = self.model().input_names().iter().position(|n| n == name) else {
            return false;
        };
        state.last.as_ref().is_some_and(|(e, _)| holds(state, e, i))
    }
}

/// Whether `state`'s last run on `exec` left a value for input `i`.
fn holds(state: &RunState, exec: &Executable, i: usize) -> bool {
    match exec {
        Executable::Planned(p) => state.cpu.holds(p, i),
        Executable::Gpu(e) => e.holds(&state.gpu, i),
        _ => false,
    }
}
