//! The planned executor: runs a [`Schedule`] over one arena per run, taken from
//! a pool, and copies its outputs into buffers that come back to another
//! pool when their tensors go ([`crate::outputs`]), so that steady-state
//! runs allocate nothing large. A plain run reads the inputs it can where
//! the caller's tensors lie and writes the outputs it can straight into
//! those buffers ([`crate::homes`]): no copy in or out for them.
//!
//! A caller that runs one executable again and again on state it carries (a
//! decoder's key/value cache) owns a [`RunState`] instead: its runs use the
//! state's arena, outputs it keeps stay in their slots, and the next run
//! takes them as inputs where a slot is an input's too (the memory plan
//! writes a cache update over the cache), with no copy either way.

use std::sync::Arc;

use rlx_ir::lend::Taken;
use rlx_ir::tensor::AlignedBuf;
use rlx_ir::Tensor;
use rlx_passes::Slot;

use crate::arena::{Arena, Arenas};
use crate::homes::{Bound, Home, INPUT_ALIGN};
use crate::outputs::OutputPool;
use crate::plan::{Schedule, Step, StepIo};
use crate::tensor::{TensorMut, TensorRef};
use crate::RunError;

/// Sees each step right after it ran, with its outputs (a debug run keeps
/// them; a test breaks a kernel on purpose by changing them).
pub type StepObserver<'a> = dyn FnMut(&Step, &mut [TensorMut]) + 'a;

/// The arena one caller's runs use ([`PlannedExecutable::run_kept`]), and
/// what the last of them left in it.
#[derive(Default)]
pub struct RunState {
    arena: Option<Arena>,
    /// The executable of the last run and the arena ranges (offset, bytes)
    /// of its outputs, which the arena still holds; none after a failed run.
    kept: Option<(u64, Vec<(usize, usize)>)>,
}

impl RunState {
    pub fn new() -> RunState {
        RunState::default()
    }

    /// Whether the last run in this state was of `exec` and left an output
    /// in graph input `input`'s slot (a cache written in place): the next
    /// run of `exec` can take that input as kept.
    pub fn holds(&self, exec: &PlannedExecutable, input: usize) -> bool {
        match (&self.kept, exec.schedule.input_slots.get(input)) {
            (Some((id, ranges)), Some(Some(Slot::Arena { offset, bytes }))) => {
                *id == exec.id && ranges.contains(&(*offset, *bytes))
            }
            _ => false,
        }
    }
}

/// A source of executable identities, so that a [`RunState`] knows whose
/// values it holds.
static EXECUTABLES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A schedule ready to run, with the arena pool its runs take from.
pub struct PlannedExecutable {
    pub schedule: Schedule,
    id: u64,
    arenas: Arc<Arenas>,
    /// Buffers of large outputs whose tensors are gone, for the next run's.
    outputs: OutputPool,
}

impl PlannedExecutable {
    /// An executable with an arena pool of its own.
    pub fn new(schedule: Schedule) -> PlannedExecutable {
        PlannedExecutable::with_arenas(schedule, Arc::new(Arenas::new()))
    }

    /// An executable whose runs take their arenas from `arenas`, shared
    /// with other executables (a session's plans for other input shapes).
    pub fn with_arenas(schedule: Schedule, arenas: Arc<Arenas>) -> PlannedExecutable {
        PlannedExecutable {
            outputs: OutputPool::new(schedule.outputs.len()),
            id: EXECUTABLES.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            schedule,
            arenas,
        }
    }

    /// Bytes of a run's arena on the current threads: the planned values,
    /// the steps' scratch, then each thread's region ([`crate::scratch`]).
    fn arena_need(&self) -> usize {
        let s = &self.schedule;
        regions_at(s) + s.per_thread.total(crate::par::threads())
    }

    fn take_arena(&self) -> Arena {
        self.arenas.take(self.arena_need())
    }

    fn give_arena(&self, a: Arena) {
        self.arenas.give(a);
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
        let ins: Vec<Option<TensorRef>> = inputs.iter().map(|t| Some(*t)).collect();
        let mut homes = self.homes(inputs);
        let result = self.run_in(&mut arena, &ins, None, &mut homes, times, None);
        self.give_arena(arena);
        all(result)
    }

    /// The homes a plain run with `inputs` uses: each input the plan lets
    /// live in the caller's memory whose bytes are aligned for it, and an
    /// output buffer for each output the plan lets be written in place that
    /// the output pool has one for.
    fn homes<'a>(&self, inputs: &[TensorRef<'a>]) -> Homes<'a> {
        let s = &self.schedule;
        let inputs = inputs
            .iter()
            .zip(&s.inputs_in_place)
            .map(|(t, &ok)| {
                let aligned = (t.bytes.as_ptr() as usize).is_multiple_of(INPUT_ALIGN);
                (ok && aligned).then_some(t.bytes)
            })
            .collect();
        let outputs = s
            .outputs
            .iter()
            .enumerate()
            .map(|(i, io)| {
                let own = io.bound
                    == Some(Bound {
                        home: Home::Output(i),
                        offset: 0,
                    });
                let mut taken = self.outputs.take(io.ty_bytes).filter(|_| own)?;
                let at = taken.memory_mut().as_mut_bytes();
                let (ptr, len) = (at.as_mut_ptr(), at.len());
                Some(OutputHome { taken, ptr, len })
            })
            .collect();
        Homes { inputs, outputs }
    }

    /// Runs in `state`'s arena. An input given as `None` is the value the
    /// last run in `state` left in that input's slot (an output of this
    /// executable whose slot is the input's: a cache written in place,
    /// [`RunState::holds`]); outputs with `keep` stay in their slots only
    /// (`None` in the result). Anything else is an error before the run
    /// starts.
    pub fn run_kept(
        &self,
        state: &mut RunState,
        inputs: &[Option<TensorRef>],
        keep: &[bool],
    ) -> Result<Vec<Option<Tensor>>, RunError> {
        let s = &self.schedule;
        if inputs.len() != s.input_slots.len() || keep.len() != s.outputs.len() {
            return Err(RunError::Internal(format!(
                "{} inputs and {} output choices for {} inputs and {} outputs",
                inputs.len(),
                keep.len(),
                s.input_slots.len(),
                s.outputs.len()
            )));
        }
        let need = self.arena_need();
        let mut arena = match state.arena.take() {
            Some(a) if a.len() >= need => a,
            _ => {
                state.kept = None;
                Arena::new(need)
            }
        };
        let held = match &state.kept {
            Some((id, ranges)) if *id == self.id => ranges.as_slice(),
            _ => &[],
        };
        for (i, (input, slot)) in inputs.iter().zip(&s.input_slots).enumerate() {
            let in_place = match slot {
                Some(Slot::Arena { offset, bytes }) => held.contains(&(*offset, *bytes)),
                _ => false,
            };
            if input.is_none() && !in_place {
                state.arena = Some(arena);
                return Err(RunError::Internal(format!(
                    "input {i} was given as kept, but the last run in this state left                      nothing in its slot"
                )));
            }
        }
        state.kept = None;
        let mut homes = Homes::default();
        let result = self.run_in(&mut arena, inputs, Some(keep), &mut homes, None, None);
        if result.is_ok() {
            // Every output is in its slot after the run, kept or copied.
            let ranges = s
                .outputs
                .iter()
                .filter_map(|o| match o.slot {
                    Slot::Arena { offset, bytes } => Some((offset, bytes)),
                    Slot::Const(_) => None,
                })
                .collect();
            state.kept = Some((self.id, ranges));
        }
        state.arena = Some(arena);
        result
    }

    /// Runs the schedule, showing every step's outputs to `observe`.
    pub fn run_observed(
        &self,
        inputs: &[TensorRef],
        observe: &mut StepObserver,
    ) -> Result<Vec<Tensor>, RunError> {
        let mut arena = self.take_arena();
        let ins: Vec<Option<TensorRef>> = inputs.iter().map(|t| Some(*t)).collect();
        let mut homes = self.homes(inputs);
        let result = self.run_in(&mut arena, &ins, None, &mut homes, None, Some(observe));
        self.give_arena(arena);
        all(result)
    }

    /// Runs the schedule in `arena`: `None` inputs are already in their
    /// slots; outputs `keep` marks stay there (`None`); buffers with a home
    /// in `homes` live there instead.
    fn run_in(
        &self,
        arena: &mut Arena,
        inputs: &[Option<TensorRef>],
        keep: Option<&[bool]>,
        homes: &mut Homes,
        times: Option<&mut Vec<std::time::Duration>>,
        observe: Option<&mut StepObserver>,
    ) -> Result<Vec<Option<Tensor>>, RunError> {
        let s = &self.schedule;
        let base = arena.ptr();
        let total = arena.len();
        for (i, (slot, t)) in s.input_slots.iter().zip(inputs).enumerate() {
            let Some(t) = t else { continue };
            if let Some(Slot::Arena { offset, bytes }) = slot {
                if let Some(Some(at)) = homes.inputs.get(i) {
                    if at.len() != *bytes {
                        return Err(RunError::Internal(format!(
                            "input slot of {bytes} bytes for {} bytes",
                            at.len()
                        )));
                    }
                    continue;
                }
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
        let threads = crate::par::threads();
        let regions_at = regions_at(s);
        if regions_at + s.per_thread.total(threads) > total {
            return Err(RunError::Internal("scratch outside the arena".into()));
        }
        // SAFETY: the regions lie past the steps' scratch, inside the arena
        // (checked above), which this run holds until it returns.
        let regions =
            unsafe { crate::scratch::Regions::new(base.add(regions_at), s.per_thread, threads) };
        crate::scratch::enter(regions, 0, || {
            self.run_steps(base, total, scratch_at, homes, times, observe)
        })?;
        // Copy the outputs while the arena is still ours; then lend those
        // written in place (another output may be copied from one).
        let mut outs = Vec::with_capacity(s.outputs.len());
        for (i, io) in s.outputs.iter().enumerate() {
            let kept = keep.is_some_and(|k| k.get(i).copied().unwrap_or(false));
            if kept || homes.outputs.get(i).is_some_and(Option::is_some) {
                outs.push(None);
                continue;
            }
            // SAFETY: as above; no step runs any more.
            let v = unsafe { view(io, base, total, s, homes) }?;
            outs.push(Some(
                Tensor::new(v.dtype, v.dims.to_vec(), self.outputs.copy(v.bytes))
                    .map_err(|e| RunError::Internal(e.to_string()))?,
            ));
        }
        for (i, home) in homes.outputs.iter_mut().enumerate() {
            let (Some(home), Some(io)) = (home.take(), s.outputs.get(i)) else {
                continue;
            };
            let bytes = home
                .taken
                .lend(io.ty_bytes)
                .ok_or_else(|| RunError::Internal("an output larger than its buffer".into()))?;
            outs[i] = Some(
                Tensor::new(io.dtype, io.dims.clone(), bytes)
                    .map_err(|e| RunError::Internal(e.to_string()))?,
            );
        }
        Ok(outs)
    }

    /// The steps of a run over the arena at `base` (`total` bytes), the
    /// steps' scratch at `scratch_at`.
    fn run_steps(
        &self,
        base: *mut u8,
        total: usize,
        scratch_at: usize,
        homes: &mut Homes,
        mut times: Option<&mut Vec<std::time::Duration>>,
        mut observe: Option<&mut StepObserver>,
    ) -> Result<(), RunError> {
        let s = &self.schedule;
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
                ins.push(unsafe { view(io, base, total, s, homes) }?);
            }
            for io in &step.outputs {
                outs.push(unsafe { view_mut(io, base, total, homes) }?);
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
        Ok(())
    }
}

/// Where a run's buffers that live outside its arena are ([`crate::homes`]).
#[derive(Default)]
struct Homes<'a> {
    /// Per graph input: the caller's bytes, read in place.
    inputs: Vec<Option<&'a [u8]>>,
    /// Per graph output: the memory its tensor will own.
    outputs: Vec<Option<OutputHome>>,
}

/// An output buffer taken from the pool for one run, and its bytes (the
/// steps write them through views made from the pointer).
struct OutputHome {
    taken: Taken<AlignedBuf>,
    ptr: *mut u8,
    len: usize,
}

impl Homes<'_> {
    /// `io`'s bytes in its home, if its buffer has one this run.
    fn find(&self, io: &StepIo) -> Option<(*const u8, usize)> {
        let Bound { home, offset } = io.bound?;
        let (ptr, len) = match home {
            Home::Input(i) => self
                .inputs
                .get(i)
                .copied()
                .flatten()
                .map(|b| (b.as_ptr(), b.len()))?,
            Home::Output(i) => {
                let h = self.outputs.get(i)?.as_ref()?;
                (h.ptr.cast_const(), h.len)
            }
        };
        (offset + io.ty_bytes <= len).then(|| (ptr.wrapping_add(offset), io.ty_bytes))
    }

    /// `io`'s bytes in an output's home, if its buffer has one this run.
    fn find_mut(&self, io: &StepIo) -> Option<(*mut u8, usize)> {
        let Bound {
            home: Home::Output(i),
            offset,
        } = io.bound?
        else {
            return None;
        };
        let h = self.outputs.get(i)?.as_ref()?;
        (offset + io.ty_bytes <= h.len).then(|| (h.ptr.wrapping_add(offset), io.ty_bytes))
    }
}

/// Every output of a run that kept none.
fn all(outs: Result<Vec<Option<Tensor>>, RunError>) -> Result<Vec<Tensor>, RunError> {
    outs?
        .into_iter()
        .map(|o| o.ok_or_else(|| RunError::Internal("an output was kept".into())))
        .collect()
}

/// A read view of a step operand.
///
/// # Safety
/// `base` must point to an arena of `total` bytes that outlives the view,
/// and `homes`' buffers must outlive it too.
unsafe fn view<'a>(
    io: &'a StepIo,
    base: *mut u8,
    total: usize,
    s: &'a Schedule,
    homes: &Homes,
) -> Result<TensorRef<'a>, RunError> {
    if let Some((ptr, len)) = homes.find(io) {
        return Ok(TensorRef {
            dtype: io.dtype,
            dims: &io.dims,
            bytes: std::slice::from_raw_parts(ptr, len),
        });
    }
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
    homes: &Homes,
) -> Result<TensorMut<'a>, RunError> {
    if let Some((ptr, len)) = homes.find_mut(io) {
        return Ok(TensorMut {
            dtype: io.dtype,
            dims: &io.dims,
            bytes: std::slice::from_raw_parts_mut(ptr, len),
        });
    }
    match io.slot {
        Slot::Arena { offset, bytes } if offset + bytes <= total => Ok(TensorMut {
            dtype: io.dtype,
            dims: &io.dims,
            bytes: std::slice::from_raw_parts_mut(base.add(offset), io.ty_bytes.min(bytes)),
        }),
        _ => Err(RunError::Internal("an output outside the arena".into())),
    }
}

/// Where a run's per-thread regions start in its arena: past the planned
/// values and the steps' scratch, aligned.
fn regions_at(s: &Schedule) -> usize {
    (s.arena_bytes.next_multiple_of(64) + s.scratch_bytes).next_multiple_of(crate::scratch::ALIGN)
}
