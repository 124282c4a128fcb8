//! Timing of alternatives while an executable is built: cuBLASLt offers
//! several algorithms for a GEMM, and the fastest on this device and shape
//! is the one kept (cuDNN's convolutions time theirs in `cudnnFind*`).

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

use crate::CudaError;

/// Timed runs per candidate, after one untimed run.
const REPS: usize = 3;

fn dev(e: impl std::fmt::Debug) -> CudaError {
    CudaError::Device(format!("timing candidates: {e:?}"))
}

/// Two events on the executable's stream.
pub(crate) struct Timer {
    stream: Arc<CudaStream>,
    start: CudaEvent,
    end: CudaEvent,
}

impl Timer {
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
    ) -> Result<Timer, CudaError> {
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        Ok(Timer {
            stream: stream.clone(),
            start: ctx.new_event(flags).map_err(dev)?,
            end: ctx.new_event(flags).map_err(dev)?,
        })
    }

    /// Milliseconds of [`REPS`] runs of `f`, or `None` when `f` fails (a
    /// candidate the library refuses at run time).
    pub(crate) fn time(
        &self,
        mut f: impl FnMut() -> Result<(), CudaError>,
    ) -> Result<Option<f32>, CudaError> {
        if f().is_err() {
            return Ok(None);
        }
        self.start.record(&self.stream).map_err(dev)?;
        for _ in 0..REPS {
            if f().is_err() {
                return Ok(None);
            }
        }
        self.end.record(&self.stream).map_err(dev)?;
        self.start.elapsed_ms(&self.end).map(Some).map_err(dev)
    }

    /// The index of the fastest of `n` candidates run by `f(i)`; `None`
    /// when every one fails.
    pub(crate) fn fastest(
        &self,
        n: usize,
        mut f: impl FnMut(usize) -> Result<(), CudaError>,
    ) -> Result<Option<usize>, CudaError> {
        if n == 1 {
            return Ok(Some(0));
        }
        let mut best: Option<(usize, f32)> = None;
        for i in 0..n {
            if let Some(ms) = self.time(|| f(i))? {
                if best.is_none_or(|(_, b)| ms < b) {
                    best = Some((i, ms));
                }
            }
        }
        Ok(best.map(|(i, _)| i))
    }
}
