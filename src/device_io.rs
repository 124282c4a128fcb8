//! Runs whose inputs and outputs may stay on the device: [`Session::upload`]
//! and [`Session::run_values`], the library's counterpart of ONNX Runtime's
//! IOBinding. A GPU executable takes device tensors of its context in place
//! of host inputs and leaves the outputs asked for on the device; a CPU
//! session's device is the host; a graph split with the CPU reads device
//! inputs back and uploads device outputs at its edges.

use rlx_gpu::io::Place;
use rlx_ir::Tensor;

use crate::backend::ValueRun;
use crate::compile::Target;
use crate::error::{InputError, Result};
use crate::session::{Executable, Session};
use crate::value::{DeviceTensor, Outputs, Value};

impl Session {
    /// Copies `t` to the device of the session's target (once, for inputs
    /// that several runs take); on the CPU target the value is `t` itself.
    pub fn upload(&self, t: &Tensor) -> Result<Value> {
        crate::backend::upload(self.model().target, self.devices(), t)
    }

    /// Runs on named inputs, host or device values, and returns the outputs
    /// in graph order, left where `outputs` says. Device inputs must be of
    /// this session's device context (its [`crate::Devices`], which
    /// sessions can share); an output left on the device can be the input
    /// of the next run without passing through the host.
    pub fn run_values(
        &self,
        inputs: &[(&str, &Value)],
        outputs: Outputs<'_>,
    ) -> Result<Vec<Value>> {
        let ordered = self.order_by(inputs, Value::dtype)?;
        let places = self.places(outputs)?;
        let shapes: Vec<&[usize]> = ordered.iter().map(|v| v.dims()).collect();
        let values = self
            .value_input_indices()
            .iter()
            .map(|&i| Ok((i, ordered[i].to_host()?)))
            .collect::<Result<Vec<_>>>()?;
        let exec = self.executable_of(&shapes, values)?;
        let names = self.model().input_names();
        match &*exec {
            Executable::Gpu(e) => e.run_values(&ValueRun {
                ordered: &ordered,
                names: &names,
                places: &places,
            }),
            _ => self.run_on_host(&exec, &ordered, &names, &places),
        }
    }

    /// A run of an executable that takes host tensors: device inputs of a
    /// GPU target's session are read back (a graph split with the CPU), and
    /// outputs asked for on the device are uploaded after.
    fn run_on_host(
        &self,
        exec: &Executable,
        ordered: &[&Value],
        names: &[String],
        places: &[Place],
    ) -> Result<Vec<Value>> {
        let target = self.model().target;
        let host = ordered
            .iter()
            .zip(names)
            .map(|(v, name)| match v {
                Value::Host(t) => Ok(t.clone()),
                Value::Device(d) if target == d.target() => d.to_host(),
                Value::Device(d) => Err(elsewhere(name, d, target)),
            })
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = host.iter().collect();
        let outs = self.run_ordered(exec, &refs)?;
        outs.into_iter()
            .zip(places)
            .map(|(t, place)| match place {
                // A CPU session's upload is the host value itself.
                Place::Device => self.upload(&t),
                Place::Host => Ok(Value::Host(t)),
            })
            .collect()
    }

    /// Where each output goes, in graph order.
    pub(crate) fn places(&self, outputs: Outputs<'_>) -> Result<Vec<Place>> {
        let names = self.model().output_names();
        Ok(match outputs {
            Outputs::Host => vec![Place::Host; names.len()],
            Outputs::Device => vec![Place::Device; names.len()],
            Outputs::OnDevice(kept) => {
                if let Some(unknown) = kept.iter().find(|k| !names.iter().any(|n| n == *k)) {
                    return Err(InputError::UnknownOutput {
                        name: unknown.to_string(),
                        expected: names,
                    }
                    .into());
                }
                names
                    .iter()
                    .map(|n| {
                        if kept.contains(&n.as_str()) {
                            Place::Device
                        } else {
                            Place::Host
                        }
                    })
                    .collect()
            }
        })
    }
}

/// The error of a device tensor given to a session of another target or
/// device context.
pub(crate) fn elsewhere(name: &str, d: &DeviceTensor, target: Target) -> crate::Error {
    let reason = if d.target() == target {
        format!(
            "is a tensor of another {target} device context ({}); sessions that pass \
             device tensors between them share one (Session::with_devices)",
            d.device()
        )
    } else {
        format!(
            "is a tensor on {}; this session runs on the {target} target (read it back with \
             to_host, or upload it with this session)",
            d.device()
        )
    };
    InputError::Device {
        name: name.to_string(),
        reason,
    }
    .into()
}
