//! Runs that leave state where the next run reads it: [`Session::run_kept`],
//! for a caller that runs one model again and again on values it carries
//! (a decoder's key/value cache). The state owns the memory its runs use;
//! outputs whose memory is an input's (the memory plan writes a cache
//! update over the cache) stay there, and the next run takes them without a
//! copy either way. The CPU target's planned schedules only; other targets
//! (and schedules run node by node) are an error the caller falls back
//! from.

use std::sync::Arc;

use rlx_cpu::tensor::TensorRef;
use rlx_ir::Tensor;

use crate::error::{Error, InputError, Result};
use crate::session::{Executable, Session};

/// The memory of one caller's [`Session::run_kept`] runs and what the last
/// of them left in it. One state per caller: runs on a state are not
/// concurrent (it is `&mut`).
#[derive(Default)]
pub struct RunState {
    cpu: rlx_cpu::RunState,
    /// The last run's executable and its input shapes (graph order).
    last: Option<(Arc<Executable>, Vec<Vec<usize>>)>,
}

impl RunState {
    pub fn new() -> RunState {
        RunState::default()
    }
}

impl Session {
    /// Runs in `state` on named inputs, where `None` is "the value the last
    /// run in `state` left in this input's memory" (see
    /// [`Session::holds_kept`]), and returns the outputs in graph order,
    /// `None` for those named in `keep` (left in the state's memory only).
    /// The CPU target's planned schedules only: anything else is an error
    /// before the run, for the caller to run as usual instead.
    pub fn run_kept(
        &self,
        state: &mut RunState,
        inputs: &[(&str, Option<&Tensor>)],
        keep: &[&str],
    ) -> Result<Vec<Option<Tensor>>> {
        let refuse = |why: &str| Error::Pipeline(format!("a run that keeps its state: {why}"));
        let names = self.model().input_names();
        let refs: Vec<(&str, &Option<&Tensor>)> = inputs.iter().map(|(n, t)| (*n, t)).collect();
        // Outer None: not given; inner None: kept.
        let given: Vec<Option<Option<&Tensor>>> = self
            .place_by(&refs, |t| t.map(Tensor::dtype))?
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
                Some(Some(t)) => values.push((i, t.clone())),
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
        let Executable::Planned(p) = &*exec else {
            return Err(refuse("only the cpu target's planned schedules keep state"));
        };
        for (i, t) in given.iter().enumerate() {
            let same = state
                .last
                .as_ref()
                .is_some_and(|(e, _)| Arc::ptr_eq(e, &exec));
            if t.is_some_and(|t| t.is_none()) && !(same && state.cpu.holds(p, i)) {
                return Err(refuse(&format!(
                    "`{}` is kept, but the last run left nothing in its memory",
                    names[i]
                )));
            }
        }
        let outputs = self.model().output_names();
        if let Some(unknown) = keep.iter().find(|k| !outputs.iter().any(|n| n == *k)) {
            return Err(InputError::UnknownOutput {
                name: unknown.to_string(),
                expected: outputs,
            }
            .into());
        }
        let mask: Vec<bool> = outputs.iter().map(|n| keep.contains(&n.as_str())).collect();
        let ins: Vec<Option<TensorRef>> = given
            .iter()
            .map(|t| t.flatten().map(TensorRef::of))
            .collect();
        state.last = None;
        let cpu = &mut state.cpu;
        let outs = self.threads.run(|| p.run_kept(cpu, &ins, &mask))?;
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
        match &state.last {
            Some((e, _)) => match &**e {
                Executable::Planned(p) => state.cpu.holds(p, i),
                _ => false,
            },
            None => false,
        }
    }
}
