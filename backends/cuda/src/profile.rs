//! Per-launch GPU time for `bench --profile`: after one ordinary run (which
//! uploads the inputs), the steps run once more launch by launch, each
//! between two CUDA events, summed per launch over loop iterations.

use std::time::Duration;

use cudarc::driver::sys::CUevent_flags;
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
        let mut st = self.run.lock().unwrap_or_else(|p| p.into_inner());
        // A holder's step may have run since: its values leave the slots
        // before the steps below write them.
        self.spill_others(&mut st, None)?;
        let (cx, stream) = (&self.ctx.ctx, &self.ctx.stream);
        cx.bind_to_thread().map_err(dev)?;
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = cx.new_event(flags).map_err(dev)?;
        let end = cx.new_event(flags).map_err(dev)?;
        let mut times = vec![Duration::ZERO; self.schedule.launches.len()];
        self.walk(&self.schedule.steps, &mut |i| {
            start.record(stream).map_err(dev)?;
            self.launch(i)?;
            end.record(stream).map_err(dev)?;
            let ms = start.elapsed_ms(&end).map_err(dev)?;
            if let Some(t) = times.get_mut(i) {
                *t += Duration::from_secs_f64(f64::from(ms) / 1e3);
            }
            Ok(())
        })?;
        stream.synchronize().map_err(dev)?;
        Ok(times)
    }
}
