//! The WGSL schedule: plain data that a device half (wgpu, Vulkan) executes. One storage
//! buffer holds the memory plan's arena, the constants and a scratch area
//! (laid out by rlx-gpu's planner); every dispatch binds up to four windows
//! of it (byte ranges) and its parameters: one handle per operand, then the
//! kernel's typed parameter struct.
//!
//! Control flow is rlx-gpu's [`Step`] tree: the host reads a condition or
//! trip count back where it must and chooses which dispatches to encode next.

use std::fmt;

use rlx_gpu::schedule::{fmt_slots, fmt_steps};
use rlx_gpu::ParamBlock;

pub use rlx_gpu::{ConstBlock, IoSlot, Range, Step, Trip};

/// A compute pipeline: WGSL source and its name (kernel family and variant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    pub name: String,
    pub source: String,
    /// The operand handles and parameter struct the source declares at
    /// binding 4 (`None` for kernels still reading positional words).
    pub params: Option<PipelineParams>,
}

/// What a pipeline's `p` holds: one handle per operand, then `layout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineParams {
    pub operands: Vec<String>,
    pub layout: rlx_gpu::Layout,
}

/// One compute dispatch.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    pub pipeline: usize,
    pub groups: [u32; 3],
    /// The windows of the storage buffer bound at bindings 0 to 3 (at least
    /// one; the device repeats the first for the rest).
    pub windows: Vec<Range>,
    /// One handle per operand (window index << 30 | byte offset in the window).
    pub handles: Vec<u32>,
    /// The kernel's parameter struct.
    pub params: ParamBlock,
    /// The ranges the dispatch touches (absolute), for windows and reports.
    pub operands: Vec<Range>,
    /// Which of `operands` it may write.
    pub writes: Vec<bool>,
    /// Whether it waits for the dispatches before it (a memory barrier on
    /// Vulkan; see [`crate::sync`]).
    pub barrier: bool,
    pub node: String,
    pub origin: Vec<String>,
}

impl Dispatch {
    /// The bytes of binding 4: the handles, then the parameter struct.
    pub fn param_bytes(&self) -> Vec<u8> {
        let mut b: Vec<u8> = bytemuck::cast_slice(&self.handles).to_vec();
        b.extend_from_slice(&self.params.bytes);
        if b.is_empty() {
            b.resize(4, 0);
        }
        b
    }
}

/// A complete WGSL schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub pipelines: Vec<Pipeline>,
    /// Every dispatch, top level and bodies; [`Schedule::steps`] orders them.
    pub dispatches: Vec<Dispatch>,
    pub steps: Vec<Step>,
    pub consts: Vec<ConstBlock>,
    pub inputs: Vec<IoSlot>,
    pub outputs: Vec<IoSlot>,
    /// Bytes of the memory plan's arena (at offset 0 of the buffer).
    pub arena_bytes: u64,
    /// Bytes of the whole storage buffer: arena, constants, scratch.
    pub buffer_bytes: u64,
    /// The binding limit the windows were computed for.
    pub max_binding: u64,
}

/// Params slices start at multiples of this (storage offset alignment).
pub const PARAMS_ALIGN: u64 = 256;

impl Schedule {
    /// Byte offset of dispatch `i`'s params in the params buffer, and its size.
    pub fn params_layout(&self) -> (Vec<u64>, u64) {
        let mut at = 0;
        let mut offs = Vec::with_capacity(self.dispatches.len());
        for d in &self.dispatches {
            offs.push(at);
            at += (d.param_bytes().len() as u64).next_multiple_of(PARAMS_ALIGN);
        }
        (offs, at.max(PARAMS_ALIGN))
    }

    fn fmt_dispatch(&self, f: &mut fmt::Formatter<'_>, i: usize) -> fmt::Result {
        let d = &self.dispatches[i];
        let windows: Vec<String> = d.windows.iter().map(|w| w.to_string()).collect();
        let pipeline = self.pipelines.get(d.pipeline);
        let names = pipeline
            .and_then(|p| p.params.as_ref())
            .map(|p| &p.operands);
        let operands: Vec<String> = d
            .operands
            .iter()
            .enumerate()
            .map(|(k, r)| match names.and_then(|n| n.get(k)) {
                Some(n) => format!("{n}={r}"),
                None => r.to_string(),
            })
            .collect();
        let name = pipeline.map_or("?", |p| p.name.as_str());
        let wait = if d.barrier { '|' } else { ' ' };
        write!(
            f,
            "{i:>3} {wait} {name} groups={:?} windows={} {} {{{}}}  # {}",
            d.groups,
            windows.join(""),
            operands.join(" "),
            d.params,
            d.origin.join(", ")
        )
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cbytes: u64 = self.consts.iter().map(|c| c.bytes.len() as u64).sum();
        writeln!(
            f,
            "WGSL schedule: {} dispatches, {} pipelines, buffer {} bytes (arena {}, constants {} in {} blocks), binding limit {}; `|`: waits for the dispatches before it",
            self.dispatches.len(),
            self.pipelines.len(),
            self.buffer_bytes,
            self.arena_bytes,
            cbytes,
            self.consts.len(),
            self.max_binding
        )?;
        for (i, p) in self.pipelines.iter().enumerate() {
            writeln!(
                f,
                "  pipeline {i} {} ({} bytes of WGSL)",
                p.name,
                p.source.len()
            )?;
        }
        fmt_slots(f, "input", &self.inputs)?;
        fmt_steps(f, &self.steps, 1, &mut |f, i| self.fmt_dispatch(f, i))?;
        fmt_slots(f, "output", &self.outputs)
    }
}
