//! Device-resident run I/O, the same for every GPU backend: a run's inputs
//! are host tensors or tensors already in device memory, and each output
//! comes back to the host or stays on the device ([`Place`]). A backend
//! supplies its buffer handle `B`; these types carry dtype and dims beside it.

pub use rlx_ir::slice::{slice_spans, Spans};
use rlx_ir::{DType, Tensor};

/// A tensor in device memory: a backend's buffer with its dtype and dims.
#[derive(Clone)]
pub struct DeviceTensor<B> {
    dtype: DType,
    dims: Vec<usize>,
    buffer: B,
}

impl<B> DeviceTensor<B> {
    /// `buffer` must hold at least `dims`' elements of `dtype` (the
    /// backends make these; users get them from runs and uploads).
    pub fn new(dtype: DType, dims: Vec<usize>, buffer: B) -> DeviceTensor<B> {
        DeviceTensor {
            dtype,
            dims,
            buffer,
        }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    pub fn buffer(&self) -> &B {
        &self.buffer
    }

    /// Bytes of the tensor's elements.
    pub fn bytes(&self) -> usize {
        self.dims.iter().product::<usize>() * self.dtype.size()
    }
}

/// Device memory a backend can read back.
pub trait DeviceMemory {
    type Error;
    /// Copies `spans` into `out` (`spans.bytes()` long), after the work
    /// queued on the device before.
    fn read(&self, spans: &Spans, out: &mut [u8]) -> Result<(), Self::Error>;
    /// The backend's error for a read that cannot be made.
    fn refused(why: String) -> Self::Error;
}

impl<B: DeviceMemory> DeviceTensor<B> {
    /// Reads the whole tensor back to the host.
    pub fn download(&self) -> Result<Tensor, B::Error> {
        let n = self.bytes();
        let spans = Spans {
            offset: 0,
            width: n,
            pitch: n,
            count: usize::from(n > 0),
        };
        self.read(&spans, self.dims.clone())
    }

    /// Reads indices `start..end` along `axis` back (one row of logits, one
    /// position of a cache), without the rest.
    pub fn download_slice(
        &self,
        axis: usize,
        start: usize,
        end: usize,
    ) -> Result<Tensor, B::Error> {
        let (spans, dims) =
            slice_spans(self.dtype, &self.dims, axis, start, end).map_err(B::refused)?;
        self.read(&spans, dims)
    }

    fn read(&self, spans: &Spans, dims: Vec<usize>) -> Result<Tensor, B::Error> {
        let mut buf = rlx_ir::tensor::AlignedBuf::try_zeroed(spans.bytes())
            .ok_or_else(|| B::refused(format!("no host memory for {} bytes", spans.bytes())))?;
        self.buffer.read(spans, buf.as_mut_bytes())?;
        Tensor::new(self.dtype, dims, buf.freeze()).map_err(|e| B::refused(e.to_string()))
    }
}

/// One input of a run.
pub enum Input<'a, B> {
    Host(&'a Tensor),
    Device(&'a DeviceTensor<B>),
}

// Not derived: a derive would ask `B: Clone`, where only references are copied.
impl<B> Clone for Input<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for Input<'_, B> {}

impl<B> Input<'_, B> {
    pub fn dtype(&self) -> DType {
        match self {
            Input::Host(t) => t.dtype(),
            Input::Device(t) => t.dtype(),
        }
    }

    pub fn dims(&self) -> &[usize] {
        match self {
            Input::Host(t) => t.dims(),
            Input::Device(t) => t.dims(),
        }
    }
}

/// One output of a run, where it was asked to be.
pub enum Output<B> {
    Host(Tensor),
    Device(DeviceTensor<B>),
}

/// Where a run leaves an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Copied back into a host tensor.
    Host,
    /// Left in device memory of its own (a later run may take it as input).
    Device,
}

/// Checks run inputs (in graph-input order) against input slots: their
/// number, dtypes and dims. `Err((index, reason))` names the first input
/// that does not fit.
pub fn check_shapes<'a>(
    slots: &[crate::IoSlot],
    inputs: impl ExactSizeIterator<Item = (DType, &'a [usize])>,
) -> Result<(), (usize, String)> {
    if inputs.len() != slots.len() {
        return Err((
            inputs.len(),
            format!(
                "{} inputs given, the model takes {}",
                inputs.len(),
                slots.len()
            ),
        ));
    }
    for (i, ((dtype, dims), slot)) in inputs.zip(slots).enumerate() {
        if dtype != slot.dtype || dims != slot.dims.as_slice() {
            return Err((
                i,
                format!(
                    "`{}` is {}{:?}, the schedule expects {}{:?}",
                    slot.name, dtype, dims, slot.dtype, slot.dims
                ),
            ));
        }
    }
    Ok(())
}

/// Why a run's inputs or output places do not fit its schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunMismatch {
    /// Input `index`, with the reason.
    Input { index: usize, reason: String },
    /// The caller's places do not match the outputs (a bug, not bad input).
    Places(String),
}

/// Checks a run before it starts: the inputs against the input slots
/// ([`check_shapes`]), each device input against `mine` (whether its buffer
/// is of the executable's device context; `device` names the backend in the
/// reason), and one place per output.
pub fn check_run<B>(
    slots: &[crate::IoSlot],
    outputs: usize,
    inputs: &[Input<'_, B>],
    places: &[Place],
    device: &str,
    mine: impl Fn(&B) -> bool,
) -> Result<(), RunMismatch> {
    check_shapes(slots, inputs.iter().map(|i| (i.dtype(), i.dims())))
        .map_err(|(index, reason)| RunMismatch::Input { index, reason })?;
    for (index, i) in inputs.iter().enumerate() {
        if let Input::Device(t) = i {
            if !mine(t.buffer()) {
                return Err(RunMismatch::Input {
                    index,
                    reason: format!(
                        "`{}` is a tensor of another {device} device context; sessions that \
                         pass device tensors between them share one (Session::with_devices)",
                        slots[index].name
                    ),
                });
            }
        }
    }
    if places.len() != outputs {
        return Err(RunMismatch::Places(format!(
            "{} output places for {outputs} outputs",
            places.len()
        )));
    }
    Ok(())
}

/// Host tensors as a run's inputs.
pub fn host_inputs<'a, B>(inputs: &[&'a Tensor]) -> Vec<Input<'a, B>> {
    inputs.iter().map(|t| Input::Host(t)).collect()
}

/// The tensors of a run whose outputs were all asked for on the host;
/// `None` when one stayed on the device.
pub fn host_outputs<B>(outs: Vec<Output<B>>) -> Option<Vec<Tensor>> {
    outs.into_iter()
        .map(|o| match o {
            Output::Host(t) => Some(t),
            Output::Device(_) => None,
        })
        .collect()
}
