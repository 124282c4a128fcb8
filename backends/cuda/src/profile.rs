//! Per-launch GPU time for `bench --profile`: after one ordinary run (which
//! uploads the inputs), the steps run once more with an event between every
//! two launches, summed per launch over loop iterations.
//!
//! The steps run as the executable runs them: captured with their events in
//! one CUDA graph and replayed (twice: the first replay warms up), so a
//! launch's time is its kernel's and the gap to the next, not the host's
//! launch latency. (Timed one launch at a time, with the host waiting on
//! each, BERT-base's 101 steps summed to 1.45 ms in a 0.54 ms run.) Steps
//! whose control flow reads values back on the host cannot be captured:
//! they are enqueued as they come, without waiting between launches.

use std::time::Duration;

use cudarc::driver::sys::{
    self as ds, CUevent_flags, CUevent_record_flags, CUgraphInstantiate_flags, CUstreamCaptureMode,
};
use cudarc::driver::{CudaEvent, CudaStream};
use rlx_ir::Tensor;

use super::Executable;
use crate::CudaError;

fn dev(e: impl std::fmt::Debug) -> CudaError {
    CudaError::Device(format!("profiling: {e:?}"))
}

impl Executable {
    /// Device time of each launch, indexed as [`crate::Schedule::launches`].
    pub fn profile(&self, inputs: &[&Tensor]) -> Result<Vec<Duration>, CudaError> {
        self.run(inputs)?;
        // Held to the end: no other run between these launches.
        let mut st = self.run.lock().unwrap_or_else(|p| p.into_inner());
        // A holder's step may have run since: its values leave the slots
        // before the steps below write them.
        self.spill_others(&mut st, None)?;
        let (marks, first) = if !st.no_graph {
            match self.profile_graph() {
                Ok(m) => m,
                Err(_) => self.profile_steps()?,
            }
        } else {
            self.profile_steps()?
        };
        self.ctx.stream.synchronize().map_err(dev)?;
        let mut times = vec![Duration::ZERO; self.schedule.launches.len()];
        let mut before = &first;
        for (i, ev) in &marks {
            let ms = before.elapsed_ms(ev).map_err(dev)?;
            if let Some(t) = times.get_mut(*i) {
                *t += Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3);
            }
            before = ev;
        }
        Ok(times)
    }

    /// Records `ev` on `stream`; inside a capture, as a node of the graph
    /// (a plain record there only orders streams, and times nothing).
    fn mark(ev: &CudaEvent, stream: &CudaStream) -> Result<(), CudaError> {
        let flags = CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32;
        // SAFETY: both handles are live for the call.
        unsafe { ds::cuEventRecordWithFlags(ev.cu_event(), stream.cu_stream(), flags) }
            .result()
            .map_err(dev)
    }

    /// Records an event, launches the steps with an event after each, and
    /// returns (launch index, the event after it) in order with the first.
    fn marked_steps(&self) -> Result<(Vec<(usize, CudaEvent)>, CudaEvent), CudaError> {
        let (cx, stream) = (&self.ctx.ctx, &self.ctx.stream);
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let first = cx.new_event(flags).map_err(dev)?;
        Self::mark(&first, stream)?;
        let mut marks = Vec::new();
        self.walk(&self.schedule.steps, &mut |i| {
            self.launch(i)?;
            let ev = cx.new_event(flags).map_err(dev)?;
            Self::mark(&ev, stream)?;
            marks.push((i, ev));
            Ok(())
        })?;
        Ok((marks, first))
    }

    /// The marked steps captured as a graph and replayed twice.
    fn profile_graph(&self) -> Result<(Vec<(usize, CudaEvent)>, CudaEvent), CudaError> {
        let stream = &self.ctx.stream;
        self.ctx.ctx.bind_to_thread().map_err(dev)?;
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(dev)?;
        let body = self.marked_steps();
        let end = stream.end_capture(CUgraphInstantiate_flags(0));
        let marked = body?;
        let graph = end.map_err(dev)?.ok_or_else(|| dev("an empty capture"))?;
        graph.launch().map_err(dev)?;
        graph.launch().map_err(dev)?;
        stream.synchronize().map_err(dev)?;
        Ok(marked)
    }

    /// The marked steps enqueued as they come (control flow that reads
    /// values back waits there).
    fn profile_steps(&self) -> Result<(Vec<(usize, CudaEvent)>, CudaEvent), CudaError> {
        self.ctx.ctx.bind_to_thread().map_err(dev)?;
        self.marked_steps()
    }
}
