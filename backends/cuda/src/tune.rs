//! Timing of alternatives while an executable is built: cuBLASLt offers
//! several algorithms for a GEMM, and the fastest on this device and shape
//! is the one kept (cuDNN's convolutions time theirs in `cudnnFind*`).
//!
//! A candidate is timed as the executable runs it: captured in a CUDA graph
//! and replayed. Timed as separate launches, a transformer's GEMMs (5-10 us
//! of kernel each) measured the host's launch rate rather than the kernel:
//! a split-K algorithm's two launches lost to one slower kernel, and the
//! same shape chose differently layer to layer.

use std::sync::Arc;

use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaEvent, CudaGraph, CudaStream};

use crate::CudaError;

/// Runs of a candidate captured in one graph.
const REPS: usize = 8;
/// Timed replays of that graph, after one untimed.
const REPLAYS: usize = 3;

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

    /// Milliseconds a run of `f` takes, or `None` when `f` fails (a
    /// candidate the library refuses at run time). Replayed from a graph
    /// where `f` can be captured, else launched [`REPS`] times.
    pub(crate) fn time(
        &self,
        mut f: impl FnMut() -> Result<(), CudaError>,
    ) -> Result<Option<f32>, CudaError> {
        if f().is_err() {
            return Ok(None);
        }
        if let Some(g) = self.capture(&mut f) {
            g.launch().map_err(dev)?;
            self.start.record(&self.stream).map_err(dev)?;
            for _ in 0..REPLAYS {
                g.launch().map_err(dev)?;
            }
            self.end.record(&self.stream).map_err(dev)?;
            let ms = self.start.elapsed_ms(&self.end).map_err(dev)?;
            return Ok(Some(ms / (REPS * REPLAYS) as f32));
        }
        self.start.record(&self.stream).map_err(dev)?;
        for _ in 0..REPS {
            if f().is_err() {
                return Ok(None);
            }
        }
        self.end.record(&self.stream).map_err(dev)?;
        let ms = self.start.elapsed_ms(&self.end).map_err(dev)?;
        Ok(Some(ms / REPS as f32))
    }

    /// [`REPS`] runs of `f` as a graph; `None` where capturing fails (the
    /// capture is always ended, so the stream is usable after).
    fn capture(&self, f: &mut impl FnMut() -> Result<(), CudaError>) -> Option<CudaGraph> {
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .ok()?;
        let body = (0..REPS).try_for_each(|_| f());
        let end = self.stream.end_capture(CUgraphInstantiate_flags(0));
        body.ok()?;
        end.ok().flatten()
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
