//! Values a caller's runs leave in an executable's memory for its next run
//! ([`Executable::run_kept`]): a decoder's key/value cache, written in place
//! by each step (the memory plan gives the cache update the cache input's
//! slot), stays in that slot from one step to the next, with no copy in or
//! out.
//!
//! An executable has one device buffer, so the slots are shared by every
//! caller. A [`Holder`] names the caller whose values are in them; any run
//! for someone else (an ordinary run, a profile, another holder's step)
//! first spills those values into device buffers of the holder, and the
//! holder's next run copies them back in. Exclusive use costs nothing; shared
//! use costs the copies the plain device-tensor path always makes. A run of
//! the holder that fails (a device error, an allocation) gives its values
//! up: the next kept run is refused rather than reading anything stale.

use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::result as dr;

use super::{Executable, RunState};
use crate::device::Buffer;
use crate::CudaError;

/// One caller's claim on the values its [`Executable::run_kept`] runs leave
/// in executables' memory. Dropping it gives the claim up.
#[derive(Default)]
pub struct Holder(Arc<Mutex<Spill>>);

impl Holder {
    pub fn new() -> Holder {
        Holder::default()
    }
}

/// What a holder's last run left, where it is not in the slots any more.
#[derive(Default)]
struct Spill {
    /// The executable of the holder's last run (an [`Executable::id`]).
    latest: Option<u64>,
    /// Input index and the value of its slot, copied out before another
    /// caller's run.
    values: Vec<(usize, Buffer)>,
}

/// Whose values an executable's input slots hold (its [`RunState`]).
pub(crate) struct HeldBy {
    holder: Weak<Mutex<Spill>>,
    /// Inputs whose slot holds a value the holder kept.
    pub(crate) inputs: Vec<usize>,
}

impl HeldBy {
    pub(crate) fn new(holder: &Holder, inputs: Vec<usize>) -> HeldBy {
        HeldBy {
            holder: Arc::downgrade(&holder.0),
            inputs,
        }
    }

    fn is(&self, holder: &Holder) -> bool {
        std::ptr::eq(self.holder.as_ptr(), Arc::as_ptr(&holder.0))
    }
}

fn lock(s: &Mutex<Spill>) -> std::sync::MutexGuard<'_, Spill> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where each kept input of a run comes from.
pub(crate) enum Source {
    /// Already in its slot.
    Slot,
    /// Copied in from a spilled buffer.
    Spilled(Buffer),
}

impl Executable {
    /// Whether `holder`'s last run on this executable left a value for input
    /// `input` (in its slot or spilled), so that its next run may keep it.
    pub fn holds(&self, holder: &Holder, input: usize) -> bool {
        let st = self.run.lock().unwrap_or_else(|p| p.into_inner());
        let spill = lock(&holder.0);
        if spill.latest != Some(self.id) {
            return false;
        }
        st.held
            .as_ref()
            .is_some_and(|h| h.is(holder) && h.inputs.contains(&input))
            || spill.values.iter().any(|(i, _)| *i == input)
    }

    /// Copies the values another caller left in the slots out to its own
    /// buffers, before a run of `holder` (`None`: an ordinary run) writes
    /// the slots. Queued on the stream ahead of the run.
    pub(super) fn spill_others(
        &self,
        st: &mut RunState,
        holder: Option<&Holder>,
    ) -> Result<(), CudaError> {
        let Some(held) = st.held.as_ref() else {
            return Ok(());
        };
        if holder.is_some_and(|h| held.is(h)) {
            return Ok(());
        }
        if let Some(other) = held.holder.upgrade() {
            let mut spill = lock(&other);
            if spill.latest == Some(self.id) {
                let cs = self.ctx.stream.cu_stream();
                let mut values = Vec::with_capacity(held.inputs.len());
                for &i in &held.inputs {
                    let slot = self.schedule.inputs.get(i).ok_or_else(|| {
                        CudaError::Internal(format!("a held input {i} past the inputs"))
                    })?;
                    let b = Buffer::alloc(&self.ctx, slot.bytes as usize)?;
                    // SAFETY: the slot lies in the executable's buffer and
                    // the new buffer holds its bytes; both on this stream.
                    unsafe {
                        dr::memcpy_dtod_async(
                            b.device_ptr(),
                            self.base + slot.offset,
                            slot.bytes as usize,
                            cs,
                        )
                    }
                    .map_err(|e| CudaError::Device(format!("spilling a kept value: {e:?}")))?;
                    values.push((i, b));
                }
                spill.values = values;
            }
        }
        st.held = None;
        Ok(())
    }

    /// Where each of `kept` (input indices) comes from for `holder`'s run,
    /// or the first that nothing holds. Changes nothing.
    pub(super) fn kept_sources(
        &self,
        st: &RunState,
        holder: &Holder,
        kept: &[usize],
    ) -> Result<Vec<(usize, Source)>, CudaError> {
        let spill = lock(&holder.0);
        // Values of this executable only: the holder's latest run was here.
        let latest = spill.latest == Some(self.id);
        kept.iter()
            .map(|&i| {
                let in_slot = st
                    .held
                    .as_ref()
                    .is_some_and(|h| h.is(holder) && h.inputs.contains(&i));
                if latest && in_slot {
                    return Ok((i, Source::Slot));
                }
                match spill.values.iter().find(|(j, _)| *j == i) {
                    Some((_, b)) if latest => Ok((i, Source::Spilled(b.clone()))),
                    _ => Err(CudaError::Input {
                        index: i,
                        reason: format!(
                            "`{}` is kept, but the last run of this holder left nothing for it",
                            self.schedule.inputs.get(i).map_or("?", |s| s.name.as_str())
                        ),
                    }),
                }
            })
            .collect()
    }

    /// Marks `holder`'s run as the latest on this executable: what it
    /// spilled before is stale now.
    pub(super) fn begin_held(&self, holder: &Holder) {
        let mut spill = lock(&holder.0);
        spill.latest = Some(self.id);
        spill.values.clear();
    }
}
