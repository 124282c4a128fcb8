//! The wgpu schedule: plain data that the device half executes. One storage
//! buffer holds the memory plan's arena, the constants and a scratch area; every
//! dispatch binds one window of it (byte range) and a params slice.
//!
//! Control flow (If, Loop, Scan) is a tree of [`Step`]s: the host reads a
//! condition or trip count back where it must and chooses which dispatches to
//! encode next. Subgraph bodies have their own arenas in the same buffer, and
//! values cross into and out of them by copy dispatches.

use std::fmt;

use rlx_ir::DType;

/// A compute pipeline: WGSL source and its name (kernel family and variant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    pub name: String,
    pub source: String,
}

/// A byte range of the storage buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub offset: u64,
    pub bytes: u64,
}

/// One compute dispatch.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    pub pipeline: usize,
    pub groups: [u32; 3],
    /// The windows of the storage buffer bound at bindings 0 to 3 (at least
    /// one; the device repeats the first for the rest).
    pub windows: Vec<Range>,
    /// Params (binding 4): operand handles (window index << 30 | byte offset
    /// in the window), then the kernel's own words.
    pub params: Vec<u32>,
    /// The ranges the dispatch touches (absolute), for windows and reports.
    pub operands: Vec<Range>,
    pub node: String,
    pub origin: Vec<String>,
}

/// Bytes uploaded once at load: a weight or constant.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstBlock {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// A graph input or output: where it lives and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct IoSlot {
    pub name: String,
    pub offset: u64,
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub bytes: u64,
}

/// How many times a loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trip {
    /// Known when planning.
    Count(u64),
    /// An i64 in the buffer, read back before the loop (negative runs zero times).
    Read(Range),
}

/// What the device does next, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Dispatch `i` of [`Schedule::dispatches`].
    Dispatch(usize),
    /// Reads the bool at `cond` back and runs one branch.
    If {
        node: String,
        origin: Vec<String>,
        cond: Range,
        then: Vec<Step>,
        otherwise: Vec<Step>,
    },
    /// Runs `body` up to `trip` times; with `cond`, only while the bool there
    /// (read back before each iteration) is true.
    Loop {
        node: String,
        origin: Vec<String>,
        trip: Trip,
        cond: Option<Range>,
        body: Vec<Step>,
    },
}

/// A complete wgpu schedule.
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
            at += ((d.params.len().max(1) * 4) as u64).next_multiple_of(PARAMS_ALIGN);
        }
        (offs, at.max(PARAMS_ALIGN))
    }
}

impl Schedule {
    fn fmt_steps(&self, f: &mut fmt::Formatter<'_>, steps: &[Step], depth: usize) -> fmt::Result {
        let pad = "  ".repeat(depth);
        for step in steps {
            match step {
                Step::Dispatch(i) => {
                    let d = &self.dispatches[*i];
                    let params: Vec<String> = d.params.iter().map(|p| p.to_string()).collect();
                    let windows: Vec<String> = d.windows.iter().map(|w| w.to_string()).collect();
                    let name = self
                        .pipelines
                        .get(d.pipeline)
                        .map_or("?", |p| p.name.as_str());
                    writeln!(
                        f,
                        "{pad}{i:>3} {name} groups={:?} windows={} params=[{}]  # {}",
                        d.groups,
                        windows.join(""),
                        params.join(","),
                        d.origin.join(", ")
                    )?;
                }
                Step::If {
                    node,
                    origin,
                    cond,
                    then,
                    otherwise,
                } => {
                    writeln!(f, "{pad}if `{node}` cond {cond}  # {}", origin.join(", "))?;
                    writeln!(f, "{pad}then:")?;
                    self.fmt_steps(f, then, depth + 1)?;
                    writeln!(f, "{pad}else:")?;
                    self.fmt_steps(f, otherwise, depth + 1)?;
                    writeln!(f, "{pad}end if `{node}`")?;
                }
                Step::Loop {
                    node,
                    origin,
                    trip,
                    cond,
                    body,
                } => {
                    let trip = match trip {
                        Trip::Count(n) => n.to_string(),
                        Trip::Read(r) => format!("read {r}"),
                    };
                    let cond = cond.map_or("none".to_string(), |c| format!("read {c}"));
                    writeln!(
                        f,
                        "{pad}loop `{node}` trip {trip} cond {cond}  # {}",
                        origin.join(", ")
                    )?;
                    self.fmt_steps(f, body, depth + 1)?;
                    writeln!(f, "{pad}end loop `{node}`")?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}+{})", self.offset, self.bytes)
    }
}

fn dims(d: &[usize]) -> String {
    d.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cbytes: u64 = self.consts.iter().map(|c| c.bytes.len() as u64).sum();
        writeln!(
            f,
            "wgpu schedule: {} dispatches, {} pipelines, buffer {} bytes (arena {}, constants {} in {} blocks), binding limit {}",
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
        for s in &self.inputs {
            writeln!(
                f,
                "  input {:?} {}[{}] @{}",
                s.name,
                s.dtype,
                dims(&s.dims),
                s.offset
            )?;
        }
        self.fmt_steps(f, &self.steps, 1)?;
        for s in &self.outputs {
            writeln!(
                f,
                "  output {:?} {}[{}] @{}",
                s.name,
                s.dtype,
                dims(&s.dims),
                s.offset
            )?;
        }
        Ok(())
    }
}
