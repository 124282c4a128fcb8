//! Run values: a tensor in host memory or in a device's, as
//! [`Session::run_values`](crate::Session::run_values) takes and returns
//! them. A device tensor stays where it is until it is read back, whole
//! ([`DeviceTensor::to_host`]) or a slice of it
//! ([`DeviceTensor::slice_to_host`]), and can be the input of a later run
//! on the same device without a host round trip.

use std::ops::Range;

use rlx_ir::{DType, Tensor};

use crate::error::Result;
use crate::Target;

/// A tensor a run takes or returns: on the host or on a device.
#[derive(Clone, Debug)]
pub enum Value {
    Host(Tensor),
    Device(DeviceTensor),
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Host(t)
    }
}

impl From<DeviceTensor> for Value {
    fn from(t: DeviceTensor) -> Value {
        Value::Device(t)
    }
}

impl Value {
    pub fn dtype(&self) -> DType {
        match self {
            Value::Host(t) => t.dtype(),
            Value::Device(t) => t.dtype(),
        }
    }

    pub fn dims(&self) -> &[usize] {
        match self {
            Value::Host(t) => t.dims(),
            Value::Device(t) => t.dims(),
        }
    }

    /// The host tensor, read back from the device when it is there.
    pub fn to_host(&self) -> Result<Tensor> {
        match self {
            Value::Host(t) => Ok(t.clone()),
            Value::Device(t) => t.to_host(),
        }
    }

    /// Indices `range` along `axis`, read back alone when on a device.
    pub fn slice_to_host(&self, axis: usize, range: Range<usize>) -> Result<Tensor> {
        match self {
            Value::Host(t) => Ok(t.slice_axis(axis, range)?),
            Value::Device(t) => t.slice_to_host(axis, range),
        }
    }

    /// The host tensor, when the value is one.
    pub fn as_host(&self) -> Option<&Tensor> {
        match self {
            Value::Host(t) => Some(t),
            Value::Device(_) => None,
        }
    }

    pub fn is_on_device(&self) -> bool {
        matches!(self, Value::Device(_))
    }
}

/// A tensor in a GPU's memory, made by a session of that GPU's target
/// ([`Session::upload`](crate::Session::upload), or an output left on the
/// device). Cloning shares the memory; it is freed with the last clone.
#[derive(Clone)]
pub struct DeviceTensor(pub(crate) OnDevice);

#[derive(Clone)]
pub(crate) enum OnDevice {
    Cuda(rlx_cuda::DeviceTensor),
    Wgpu(rlx_wgpu::DeviceTensor),
    Vulkan(rlx_vulkan::DeviceTensor),
}

impl std::fmt::Debug for DeviceTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTensor")
            .field("device", &self.device())
            .field("dtype", &self.dtype())
            .field("dims", &self.dims())
            .finish()
    }
}

impl DeviceTensor {
    pub fn dtype(&self) -> DType {
        match &self.0 {
            OnDevice::Cuda(t) => t.dtype(),
            OnDevice::Wgpu(t) => t.dtype(),
            OnDevice::Vulkan(t) => t.dtype(),
        }
    }

    pub fn dims(&self) -> &[usize] {
        match &self.0 {
            OnDevice::Cuda(t) => t.dims(),
            OnDevice::Wgpu(t) => t.dims(),
            OnDevice::Vulkan(t) => t.dims(),
        }
    }

    /// The target whose device holds the tensor.
    pub fn target(&self) -> Target {
        match &self.0 {
            OnDevice::Cuda(_) => Target::Cuda,
            OnDevice::Wgpu(_) => Target::Wgpu,
            OnDevice::Vulkan(_) => Target::Vulkan,
        }
    }

    /// The device, in words (`cuda: NVIDIA H200`).
    pub fn device(&self) -> String {
        match &self.0 {
            OnDevice::Cuda(t) => format!("cuda: {}", t.buffer().context().name()),
            OnDevice::Wgpu(t) => format!("wgpu: {}", t.buffer().context().adapter),
            OnDevice::Vulkan(t) => format!("vulkan: {}", t.buffer().context().info.name),
        }
    }

    /// Reads the whole tensor back.
    pub fn to_host(&self) -> Result<Tensor> {
        Ok(match &self.0 {
            OnDevice::Cuda(t) => t.download()?,
            OnDevice::Wgpu(t) => t.download()?,
            OnDevice::Vulkan(t) => t.download()?,
        })
    }

    /// Reads indices `range` along `axis` back, without the rest (the last
    /// position's logits of `[batch, positions, vocabulary]`: axis 1).
    pub fn slice_to_host(&self, axis: usize, range: Range<usize>) -> Result<Tensor> {
        Ok(match &self.0 {
            OnDevice::Cuda(t) => t.download_slice(axis, range.start, range.end)?,
            OnDevice::Wgpu(t) => t.download_slice(axis, range.start, range.end)?,
            OnDevice::Vulkan(t) => t.download_slice(axis, range.start, range.end)?,
        })
    }

    /// The tensor lengthened along `axis` to `len` positions, zeros after
    /// its own, on its device (CUDA: one copy on the device; wgpu and
    /// Vulkan: through the host).
    pub fn pad_axis(&self, axis: usize, len: usize) -> Result<DeviceTensor> {
        Ok(match &self.0 {
            OnDevice::Cuda(t) => {
                DeviceTensor(OnDevice::Cuda(rlx_cuda::Buffer::pad_axis(t, axis, len)?))
            }
            OnDevice::Wgpu(t) => {
                let host = crate::generate::pad_axis(&t.download()?, axis, len)?;
                DeviceTensor(OnDevice::Wgpu(rlx_wgpu::Buffer::upload(
                    t.buffer().context(),
                    &host,
                )?))
            }
            OnDevice::Vulkan(t) => {
                let host = crate::generate::pad_axis(&t.download()?, axis, len)?;
                DeviceTensor(OnDevice::Vulkan(rlx_vulkan::Buffer::upload(
                    t.buffer().context(),
                    &host,
                )?))
            }
        })
    }

    /// A value of a CUDA tensor made outside a session (memory another
    /// library lends, [`rlx_cuda::Buffer::lend`]); an input of any session
    /// on its context.
    pub fn from_cuda(t: rlx_cuda::DeviceTensor) -> DeviceTensor {
        DeviceTensor(OnDevice::Cuda(t))
    }

    /// The CUDA tensor (its buffer, for DLPack and other interop).
    pub fn as_cuda(&self) -> Option<&rlx_cuda::DeviceTensor> {
        match &self.0 {
            OnDevice::Cuda(t) => Some(t),
            OnDevice::Wgpu(_) | OnDevice::Vulkan(_) => None,
        }
    }
}

/// Where [`Session::run_values`](crate::Session::run_values) leaves the
/// model's outputs. A CPU session's device is the host: its outputs are
/// host values whatever is asked.
#[derive(Debug, Clone, Copy)]
pub enum Outputs<'a> {
    /// Every output read back to the host.
    Host,
    /// Every output left on the device.
    Device,
    /// These outputs left on the device, the others read back.
    OnDevice(&'a [&'a str]),
}
