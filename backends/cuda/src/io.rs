//! Device tensors on CUDA: buffers on a [`Context`]'s device, uploads and
//! (partial) reads, and runs whose inputs and outputs stay on the device.
//!
//! A device input is copied device to device into its slot of the
//! executable's buffer, and a device output out of its slot into a buffer
//! of its own (the next run reuses the slot): memory-speed copies on the
//! context's stream, no host round trip. Every run ends with the stream
//! synchronized, so a run's errors are its own.

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{result as dr, sys as ds, CudaSlice, DevicePtr, DriverError};
use rlx_gpu::io::{DeviceMemory, Input, Output, Place, Spans};
use rlx_ir::tensor::{AlignedBuf, Bytes};
use rlx_ir::Tensor;

use super::held::{HeldBy, Holder, Source};
use super::{Context, Executable};
use crate::pinned_out;
use crate::CudaError;

/// Where a run's output came down.
enum Landed {
    /// The staging, copied out after the run.
    Staging,
    /// A pinned buffer of the pool, lent to the tensor.
    Lent(rlx_ir::lend::Taken<pinned_out::Pinned>),
    /// Ordinary host memory (the pool out of buffers).
    Host(AlignedBuf),
    Device(Buffer),
}

/// A tensor in the device memory of a CUDA [`Context`].
pub type DeviceTensor = rlx_gpu::io::DeviceTensor<Buffer>;

/// Device memory of one [`Context`], shared by the tensors that hold it
/// (cloning shares it) and freed when the last of them goes.
#[derive(Clone)]
pub struct Buffer(Arc<Held>);

struct Held {
    /// Kept alive: the memory `ptr` points into.
    _memory: Memory,
    ptr: CUdeviceptr,
    bytes: usize,
    ctx: Arc<Context>,
}

/// What keeps a buffer's memory allocated.
enum Memory {
    /// Allocated here, freed with the buffer.
    Own { _slice: CudaSlice<u8> },
    /// Another library's, lent (a DLPack tensor): dropping the owner hands
    /// it back.
    Lent { _owner: Box<dyn Send + Sync> },
}

fn dev(what: &str) -> impl Fn(DriverError) -> CudaError + '_ {
    move |e| CudaError::Device(format!("{what}: {e:?}"))
}

/// Copies between strided spans wider than this go span by span (the
/// driver's 2D copies limit their pitch).
const MAX_PITCH: usize = 1 << 30;

impl Buffer {
    /// `bytes` bytes (one at least) of uninitialized memory on `ctx`'s device.
    pub(crate) fn alloc(ctx: &Arc<Context>, bytes: usize) -> Result<Buffer, CudaError> {
        ctx.ctx
            .bind_to_thread()
            .map_err(dev("binding the context"))?;
        // SAFETY: every byte a reader can see is written by a copy first.
        let slice = unsafe { ctx.stream.alloc::<u8>(bytes.max(1)) }
            .map_err(|e| CudaError::Device(format!("allocating {bytes} bytes: {e:?}")))?;
        let ptr = slice.device_ptr(&ctx.stream).0;
        Ok(Buffer(Arc::new(Held {
            _memory: Memory::Own { _slice: slice },
            ptr,
            bytes,
            ctx: ctx.clone(),
        })))
    }

    /// `bytes` bytes of device memory at `ptr` that another library
    /// allocated (a tensor it lends through DLPack), held until `owner`
    /// (whose drop gives the memory back) goes with the last clone.
    ///
    /// # Safety
    /// `ptr .. ptr + bytes` must be memory of `ctx`'s device, readable in its
    /// primary context, and stay allocated and unwritten until `owner` is
    /// dropped; writes made before the call must be ordered before work on
    /// `ctx`'s stream ([`Context::stream_handle`], DLPack's `stream`).
    pub unsafe fn lend(
        ctx: &Arc<Context>,
        ptr: u64,
        bytes: usize,
        owner: Box<dyn Send + Sync>,
    ) -> Buffer {
        Buffer(Arc::new(Held {
            _memory: Memory::Lent { _owner: owner },
            ptr,
            bytes,
            ctx: ctx.clone(),
        }))
    }

    /// Copies the buffer's first `bytes` bytes to `dst`, device memory of
    /// the same context (a caller's output buffer), and waits for the copy.
    ///
    /// # Safety
    /// `dst .. dst + bytes` must be writable memory of this buffer's device,
    /// not overlapping the buffer.
    pub unsafe fn copy_to(&self, dst: u64, bytes: usize) -> Result<(), CudaError> {
        let h = &self.0;
        if bytes > h.bytes {
            return Err(CudaError::Internal(format!(
                "copying {bytes} bytes out of a {} byte buffer",
                h.bytes
            )));
        }
        if bytes == 0 {
            return Ok(());
        }
        h.ctx
            .ctx
            .bind_to_thread()
            .map_err(dev("binding the context"))?;
        let cs = h.ctx.stream.cu_stream();
        // SAFETY: the source lies in the buffer (checked); the caller
        // vouches for the destination.
        unsafe { dr::memcpy_dtod_async(dst, h.ptr, bytes, cs) }.map_err(dev("copying out"))?;
        h.ctx
            .stream
            .synchronize()
            .map_err(|e| CudaError::Device(format!("copying out: {e:?}")))
    }

    /// Copies `t` to the device of `ctx`.
    pub fn upload(ctx: &Arc<Context>, t: &Tensor) -> Result<DeviceTensor, CudaError> {
        let b = Buffer::alloc(ctx, t.bytes().len())?;
        if !t.bytes().is_empty() {
            let cs = ctx.stream.cu_stream();
            // SAFETY: the buffer holds the tensor's bytes; the stream is
            // synchronized before `t` could go away.
            unsafe { dr::memcpy_htod_async(b.0.ptr, t.bytes(), cs) }
                .map_err(dev("uploading a tensor"))?;
            ctx.stream
                .synchronize()
                .map_err(|e| CudaError::Device(format!("uploading a tensor: {e:?}")))?;
        }
        Ok(DeviceTensor::new(t.dtype(), t.dims().to_vec(), b))
    }

    /// `t` lengthened along `axis` to `len` positions, zeros after its own
    /// (a prompt's cache moved into a buffer of a decoder's capacity): one
    /// 2D copy on the device.
    pub fn pad_axis(t: &DeviceTensor, axis: usize, len: usize) -> Result<DeviceTensor, CudaError> {
        let dims = t.dims();
        let have = *dims
            .get(axis)
            .ok_or_else(|| CudaError::Unsupported(format!("axis {axis} of {dims:?}")))?;
        if have > len {
            return Err(CudaError::Unsupported(format!(
                "padding {dims:?} along axis {axis} to {len}"
            )));
        }
        let inner: usize = dims[axis + 1..].iter().product::<usize>() * t.dtype().size();
        let outer: usize = dims[..axis].iter().product();
        let mut out_dims = dims.to_vec();
        out_dims[axis] = len;
        let ctx = t.buffer().context();
        let bytes = outer * len * inner;
        let b = Buffer::alloc(ctx, bytes)?;
        let cs = ctx.stream.cu_stream();
        // SAFETY: the buffer holds `bytes` bytes; the copy's rows lie in
        // both buffers (`have <= len` positions of `inner` bytes each).
        unsafe {
            dr::memset_d8_async(b.0.ptr, 0, bytes, cs).map_err(dev("clearing"))?;
            if outer > 0 && have > 0 {
                let copy = ds::CUDA_MEMCPY2D {
                    srcXInBytes: 0,
                    srcY: 0,
                    srcMemoryType: ds::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                    srcHost: std::ptr::null(),
                    srcDevice: t.buffer().0.ptr,
                    srcArray: std::ptr::null_mut(),
                    srcPitch: have * inner,
                    dstXInBytes: 0,
                    dstY: 0,
                    dstMemoryType: ds::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                    dstHost: std::ptr::null_mut(),
                    dstDevice: b.0.ptr,
                    dstArray: std::ptr::null_mut(),
                    dstPitch: len * inner,
                    WidthInBytes: have * inner,
                    Height: outer,
                };
                ds::cuMemcpy2DAsync_v2(&copy, cs)
                    .result()
                    .map_err(dev("padding"))?;
            }
        }
        Ok(DeviceTensor::new(t.dtype(), out_dims, b))
    }

    /// The context whose device holds the buffer.
    pub fn context(&self) -> &Arc<Context> {
        &self.0.ctx
    }

    /// Bytes the buffer holds.
    pub fn len(&self) -> usize {
        self.0.bytes
    }

    /// The device address of the first byte, for handing the memory to
    /// another library (DLPack) while this buffer (or a clone) lives.
    pub fn device_ptr(&self) -> u64 {
        self.0.ptr
    }

    pub fn is_empty(&self) -> bool {
        self.0.bytes == 0
    }
}

impl DeviceMemory for Buffer {
    type Error = CudaError;

    fn read(&self, spans: &Spans, out: &mut [u8]) -> Result<(), CudaError> {
        let h = &self.0;
        let end = spans
            .count
            .checked_sub(1)
            .and_then(|c| c.checked_mul(spans.pitch))
            .and_then(|p| p.checked_add(spans.offset)?.checked_add(spans.width));
        if out.len() != spans.bytes() || spans.count > 0 && end.is_none_or(|e| e > h.bytes) {
            return Err(CudaError::Internal(format!(
                "reading {spans:?} of a {} byte buffer into {} bytes",
                h.bytes,
                out.len()
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        h.ctx
            .ctx
            .bind_to_thread()
            .map_err(dev("binding the context"))?;
        let cs = h.ctx.stream.cu_stream();
        let src = h.ptr + spans.offset as u64;
        if spans.count == 1 {
            // SAFETY: the span lies in the buffer (checked above); `out`
            // outlives the synchronization below.
            unsafe { dr::memcpy_dtoh_async(out, src, cs) }.map_err(dev("reading"))?;
        } else if spans.pitch <= MAX_PITCH {
            let copy = ds::CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: ds::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: src,
                srcArray: std::ptr::null_mut(),
                srcPitch: spans.pitch,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: ds::CUmemorytype::CU_MEMORYTYPE_HOST,
                dstHost: out.as_mut_ptr().cast(),
                dstDevice: 0,
                dstArray: std::ptr::null_mut(),
                dstPitch: spans.width,
                WidthInBytes: spans.width,
                Height: spans.count,
            };
            // SAFETY: as above, each row of the copy lies in the buffer.
            unsafe { ds::cuMemcpy2DAsync_v2(&copy, cs) }
                .result()
                .map_err(dev("reading"))?;
        } else {
            for (i, row) in out.chunks_mut(spans.width).enumerate() {
                // SAFETY: as above.
                unsafe { dr::memcpy_dtoh_async(row, src + (i * spans.pitch) as u64, cs) }
                    .map_err(dev("reading"))?;
            }
        }
        h.ctx
            .stream
            .synchronize()
            .map_err(|e| CudaError::Device(format!("reading: {e:?}")))
    }

    fn refused(why: String) -> CudaError {
        CudaError::Unsupported(why)
    }
}

impl Executable {
    /// Runs on inputs in graph-input order, host tensors or device tensors
    /// of this executable's context, and leaves output `i` at `places[i]`.
    pub fn run_io(
        &self,
        inputs: &[Input<'_, Buffer>],
        places: &[Place],
    ) -> Result<Vec<Output<Buffer>>, CudaError> {
        let inputs: Vec<Option<Input<'_, Buffer>>> = inputs.iter().copied().map(Some).collect();
        let places: Vec<Option<Place>> = places.iter().copied().map(Some).collect();
        self.run_held(None, &inputs, &places)?
            .into_iter()
            .map(|o| o.ok_or_else(|| CudaError::Internal("an output was kept".into())))
            .collect()
    }

    /// [`Executable::run_io`] for `holder`, where a `None` input is the value
    /// the holder's last run on this executable left for it (an output
    /// written over its slot, [`Executable::holds`]), and a `None` place
    /// keeps that output in its slot only (its result is `None`). Another
    /// caller's runs in between cost the holder a copy out and back in, not
    /// its values.
    pub fn run_kept(
        &self,
        holder: &Holder,
        inputs: &[Option<Input<'_, Buffer>>],
        places: &[Option<Place>],
    ) -> Result<Vec<Option<Output<Buffer>>>, CudaError> {
        self.run_held(Some(holder), inputs, places)
    }

    fn run_held(
        &self,
        holder: Option<&Holder>,
        inputs: &[Option<Input<'_, Buffer>>],
        places: &[Option<Place>],
    ) -> Result<Vec<Option<Output<Buffer>>>, CudaError> {
        let s = &self.schedule;
        if inputs.len() != s.inputs.len() {
            return Err(CudaError::Internal(format!(
                "{} inputs for {}",
                inputs.len(),
                s.inputs.len()
            )));
        }
        rlx_gpu::io::check_shapes(
            &s.inputs,
            inputs.iter().zip(&s.inputs).map(|(i, slot)| match i {
                Some(i) => (i.dtype(), i.dims()),
                None => (slot.dtype, slot.dims.as_slice()),
            }),
        )
        .map_err(|(index, reason)| CudaError::Input { index, reason })?;
        for (index, i) in inputs.iter().enumerate() {
            if let Some(Input::Device(t)) = i {
                if !Arc::ptr_eq(t.buffer().context(), &self.ctx) {
                    return Err(CudaError::Input {
                        index,
                        reason: format!(
                            "`{}` is a tensor of another CUDA context; sessions that pass \
                             device tensors between them share one (Session::with_devices)",
                            s.inputs[index].name
                        ),
                    });
                }
            }
        }
        if places.len() != s.outputs.len() {
            return Err(CudaError::Internal(format!(
                "{} output places for {} outputs",
                places.len(),
                s.outputs.len()
            )));
        }
        let kept: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].is_none()).collect();
        if holder.is_none() && (!kept.is_empty() || places.iter().any(Option::is_none)) {
            return Err(CudaError::Internal("a run keeps values for nobody".into()));
        }
        let mut st = self.run.lock().unwrap_or_else(|p| p.into_inner());
        let (cx, stream) = (&self.ctx.ctx, &self.ctx.stream);
        cx.bind_to_thread().map_err(dev("binding the context"))?;
        let cs = stream.cu_stream();
        self.spill_others(&mut st, holder)?;
        // Spilled buffers stay alive (here) until the stream is synchronized.
        let sources = match holder {
            Some(h) => {
                let sources = self.kept_sources(&st, h, &kept)?;
                self.begin_held(h);
                sources
            }
            None => Vec::new(),
        };
        st.held = None;
        for (i, source) in &sources {
            if let Source::Spilled(b) = source {
                let slot = &s.inputs[*i];
                // SAFETY: the spilled buffer holds the slot's bytes (copied
                // out of it); both on this stream.
                unsafe {
                    dr::memcpy_dtod_async(self.base + slot.offset, b.0.ptr, slot.bytes as usize, cs)
                }
                .map_err(dev("copying a kept value back"))?;
            }
        }
        let n_in = s.inputs.len();
        {
            let staging = st.staging.as_mut_slice().map_err(dev("staging"))?;
            for ((input, slot), &at) in inputs.iter().zip(&s.inputs).zip(&self.staging_at) {
                let dst = self.base + slot.offset;
                match input {
                    Some(Input::Host(t)) => {
                        let b = t.bytes();
                        staging[at..at + b.len()].copy_from_slice(b);
                        // SAFETY: the slot lies in the buffer (planned); the
                        // staging stays untouched until the stream is
                        // synchronized below.
                        unsafe { dr::memcpy_htod_async(dst, &staging[at..at + b.len()], cs) }
                            .map_err(dev("copying inputs"))?;
                    }
                    Some(Input::Device(t)) if t.bytes() > 0 => {
                        // SAFETY: both ranges are the tensor's bytes (shapes
                        // checked above) on one device and stream.
                        unsafe { dr::memcpy_dtod_async(dst, t.buffer().0.ptr, t.bytes(), cs) }
                            .map_err(dev("copying device inputs"))?;
                    }
                    Some(Input::Device(_)) | None => {}
                }
            }
        }
        self.execute(&mut st)?;
        let mut landed = Vec::with_capacity(places.len());
        {
            let staging = st.staging.as_mut_slice().map_err(dev("staging"))?;
            for ((o, &at), place) in s.outputs.iter().zip(&self.staging_at[n_in..]).zip(places) {
                let n = o.bytes as usize;
                let src = self.base + o.offset;
                landed.push(match place {
                    None => None,
                    Some(Place::Host) if n >= pinned_out::LENT_BYTES => Some(
                        match self.lent.take(n, |n| pinned_out::Pinned::alloc(cx, n)) {
                            Some(mut buf) => {
                                let dst = buf
                                    .memory_mut()
                                    .as_mut_slice()
                                    .map_err(dev("an output buffer"))?;
                                // SAFETY: as above; the buffer is this run's until lent.
                                unsafe { dr::memcpy_dtoh_async(&mut dst[..n], src, cs) }
                                    .map_err(dev("copying outputs"))?;
                                Landed::Lent(buf)
                            }
                            None => {
                                let mut b = AlignedBuf::try_zeroed(n).ok_or_else(|| {
                                    CudaError::Device(format!(
                                        "no host memory for {n} output bytes"
                                    ))
                                })?;
                                // SAFETY: `b` holds `n` bytes and lives past the
                                // synchronize below.
                                unsafe { dr::memcpy_dtoh_async(b.as_mut_bytes(), src, cs) }
                                    .map_err(dev("copying outputs"))?;
                                Landed::Host(b)
                            }
                        },
                    ),
                    Some(Place::Host) => {
                        // SAFETY: as above; synchronized before the staging is read.
                        unsafe { dr::memcpy_dtoh_async(&mut staging[at..at + n], src, cs) }
                            .map_err(dev("copying outputs"))?;
                        Some(Landed::Staging)
                    }
                    Some(Place::Device) => {
                        let b = Buffer::alloc(&self.ctx, n)?;
                        if n > 0 {
                            // SAFETY: both ranges hold the output's bytes.
                            unsafe { dr::memcpy_dtod_async(b.0.ptr, src, n, cs) }
                                .map_err(dev("keeping outputs"))?;
                        }
                        Some(Landed::Device(b))
                    }
                });
            }
        }
        stream
            .synchronize()
            .map_err(|e| CudaError::Device(format!("running the schedule: {e:?}")))?;
        drop(sources);
        if let Some(h) = holder {
            // An input whose slot an output was written over (kept or copied
            // out: it is in its slot either way) holds that output for the
            // next run.
            let inputs: Vec<usize> = s
                .inputs
                .iter()
                .enumerate()
                .filter(|(_, i)| {
                    s.outputs
                        .iter()
                        .any(|o| o.offset == i.offset && o.bytes == i.bytes)
                })
                .map(|(i, _)| i)
                .collect();
            st.held = Some(HeldBy::new(h, inputs));
        }
        let staging = st.staging.as_slice().map_err(dev("staging"))?;
        let host = |o: &crate::schedule::IoSlot, bytes: Bytes| {
            Tensor::new(o.dtype, o.dims.clone(), bytes)
                .map(Output::Host)
                .map_err(|e| CudaError::Internal(e.to_string()))
        };
        s.outputs
            .iter()
            .zip(&self.staging_at[n_in..])
            .zip(landed)
            .map(|((o, &at), landed)| {
                let Some(landed) = landed else {
                    return Ok(None);
                };
                match landed {
                    Landed::Device(b) => Ok(Output::Device(DeviceTensor::new(
                        o.dtype,
                        o.dims.clone(),
                        b,
                    ))),
                    Landed::Lent(buf) => {
                        let bytes = buf.lend(o.bytes as usize).ok_or_else(|| {
                            CudaError::Internal("an output buffer too small".into())
                        })?;
                        host(o, bytes)
                    }
                    Landed::Host(b) => host(o, b.freeze()),
                    Landed::Staging => {
                        host(o, Bytes::copy_from(&staging[at..at + o.bytes as usize]))
                    }
                }
                .map(Some)
            })
            .collect()
    }
}
