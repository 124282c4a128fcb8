//! The planned executor: runs a [`Schedule`] over one arena per run, taken from
//! a pool, and copies its outputs into buffers that come back to another
//! pool when their tensors go ([`crate::outputs`]), so that steady-state
//! runs allocate nothing large.

use std::sync::Mutex;

use rlx_ir::Tensor;
use rlx_passes::Slot;

use crate::outputs::OutputPool;
use crate::plan::{Schedule, Step, StepIo};
use crate::tensor::{TensorMut, TensorRef};
use crate::RunError;

/// 64-byte aligned arena storage.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

struct Arena {
    lines: Vec<Line>,
}

impl Arena {
    fn new(bytes: usize) -> Arena {
        Arena {
            lines: vec![Line([0; 64]); bytes.div_ceil(64)],
        }
    }

    fn ptr(&mut self) -> *mut u8 {
        self.lines.as_mut_ptr().cast()
    }

    fn len(&self) -> usize {
        self.lines.len() * 64
    }
}

/// Sees each step right after it ran, with its outputs (a debug run keeps
/// them; a test breaks a kernel on purpose by changing them).
pub type StepObserver<'a> = dyn FnMut(&Step, &mut [TensorMut]) + 'a;

/// A schedule ready to run, with its arena pool.
pub struct PlannedExecutable {
    pub schedule: Schedule,
    arenas: Mutex<Vec<Arena>>,
    /// Buffers of large outputs whose tensors are gone, for the next run's.
    outputs: OutputPool,
}

impl PlannedExecutable {
    pub fn new(schedule: Schedule) -> PlannedExecutable {
        PlannedExecutable {
            outputs: OutputPool::new(schedule.outputs.len()),
            schedule,
            arenas: Mutex::new(Vec::new()),
        }
    }

    fn take_arena(&self) -> Arena {
        let need = self.schedule.arena_bytes.next_multiple_of(64) + self.schedule.scratch_bytes;
        let mut pool = self.arenas.lock().unwrap_or_else(|p| p.into_inner());
        match pool.pop() {
            Some(a) if a.len() >= need => a,
            _ => Arena::new(need),
        }
    }

    fn give_arena(&self, a: Arena) {
        self.arenas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(a);
    }

    /// Runs the schedule. `inputs` are in graph-input order, already checked.
    pub fn run(&self, inputs: &[TensorRef]) -> Result<Vec<Tensor>, RunError> {
        self.run_timed(inputs, None)
    }

    /// Runs the schedule; with `times`, records each step's duration.
    pub fn run_timed(
        &self,
        inputs: &[TensorRef],
        times: Option<&mut Vec<std::time::Duration>>,
    ) -> Result<Vec<Tensor>, RunError> {
        let mut arena = self.take_arena();
        let result = self.run_in(&mut arena, inputs, times, None);
        self.give_arena(arena);
        result
    }

    /// Runs the schedule, showing every step's outputs to `observe`.
    pub fn run_observed(
        &self,
        inputs: &[TensorRef],
        observe: &mut StepObserver,
    ) -> Result<Vec<Tensor>, RunError> {
        let mut arena = self.take_arena();
        let result = self.run_in(&mut arena, inputs, None, Some(observe));
        self.give_arena(arena);
        result
    }

    fn run_in(
        &self,
        arena: &mut Arena,
        inputs: &[TensorRef],
        mut times: Option<&mut Vec<std::time::Duration>>,
        mut observe: Option<&mut StepObserver>,
    ) -> Result<Vec<Tensor>, RunError> {
        let s = &self.schedule;
        let base = arena.ptr();
        let total = arena.len();
        for (slot, t) in s.input_slots.iter().zip(inputs) {
            if let Some(Slot::Arena { offset, bytes }) = slot {
                if *bytes != t.bytes.len() || offset + bytes > total {
                    return Err(RunError::Internal(format!(
                        "input slot of {bytes} bytes for {} bytes",
                        t.bytes.len()
                    )));
                }
                // SAFETY: the slot lies inside the arena (checked above) and no
                // other reference into the arena exists yet.
                unsafe {
                    std::ptr::copy_nonoverlapping(t.bytes.as_ptr(), base.add(*offset), *bytes)
                };
            }
        }
        let scratch_at = s.arena_bytes.next_multiple_of(64);
        if scratch_at + s.scratch_bytes > total {
            return Err(RunError::Internal("scratch outside the arena".into()));
        }
        // Operand views, refilled per step (no allocation per step).
        let mut ins: Vec<TensorRef> = Vec::new();
        let mut outs: Vec<TensorMut> = Vec::new();
        let threads = crate::par::threads();
        for step in &s.steps {
            ins.clear();
            outs.clear();
            // SAFETY: the memory plan guarantees that a step's output buffers do
            // not overlap its input buffers or each other, and all lie in the
            // arena; scratch lies past every buffer. So the shared input slices
            // and the exclusive output/scratch slices never alias. The views of
            // the previous step were cleared above.
            for io in &step.inputs {
                ins.push(unsafe { view(io, base, total, s) }?);
            }
            for io in &step.outputs {
                outs.push(unsafe { view_mut(io, base, total) }?);
            }
            let scratch = unsafe {
                std::slice::from_raw_parts_mut(base.add(scratch_at), step.kernel.scratch_bytes())
            };
            let start = times.is_some().then(std::time::Instant::now);
            let ran = if threads > 1 && step.work.serial(threads) {
                crate::par::inline(|| step.kernel.run(&ins, &mut outs, scratch))
            } else {
                step.kernel.run(&ins, &mut outs, scratch)
            };
            ran.map_err(|source| RunError::Node {
                node: step.name.clone(),
                origin: step.origin.clone(),
                source,
            })?;
            if let (Some(t), Some(start)) = (times.as_deref_mut(), start) {
                t.push(start.elapsed());
            }
            if let Some(o) = observe.as_deref_mut() {
                o(step, &mut outs);
            }
        }
        // Copy the outputs while the arena is still ours.
        let mut outs = Vec::with_capacity(s.outputs.len());
        for io in &s.outputs {
            // SAFETY: as above; no step runs any more.
            let v = unsafe { view(io, base, total, s) }?;
            outs.push(
                Tensor::new(v.dtype, v.dims.to_vec(), self.outputs.copy(v.bytes))
                    .map_err(|e| RunError::Internal(e.to_string()))?,
            );
        }
        Ok(outs)
    }
}

/// A read view of a step operand.
///
/// # Safety
/// `base` must point to an arena of `total` bytes that outlives the view.
unsafe fn view<'a>(
    io: &'a StepIo,
    base: *mut u8,
    total: usize,
    s: &'a Schedule,
) -> Result<TensorRef<'a>, RunError> {
    let bytes: &[u8] = match io.slot {
        Slot::Arena { offset, bytes } => {
            if offset + bytes > total {
                return Err(RunError::Internal("operand outside the arena".into()));
            }
            std::slice::from_raw_parts(base.add(offset), bytes)
        }
        Slot::Const(id) => s
            .consts
            .get(&id)
            .ok_or_else(|| RunError::Internal("missing constant".into()))?
            .bytes(),
    };
    let len = io.ty_bytes;
    Ok(TensorRef {
        dtype: io.dtype,
        dims: &io.dims,
        bytes: &bytes[..len.min(bytes.len())],
    })
}

/// A write view of a step output.
///
/// # Safety
/// As [`view`]; the caller guarantees exclusivity of the range.
unsafe fn view_mut<'a>(
    io: &'a StepIo,
    base: *mut u8,
    total: usize,
) -> Result<TensorMut<'a>, RunError> {
    match io.slot {
        Slot::Arena { offset, bytes } if offset + bytes <= total => Ok(TensorMut {
            dtype: io.dtype,
            dims: &io.dims,
            bytes: std::slice::from_raw_parts_mut(base.add(offset), io.ty_bytes.min(bytes)),
        }),
        _ => Err(RunError::Internal("an output outside the arena".into())),
    }
}
