//! The schedule tree every GPU backend executes: steps in order, each a
//! dispatch (an index into the backend's own list of launches) or a control
//! step (If, Loop) over nested steps, with the node and its ONNX origin. The
//! buffer's byte ranges, constants and input/output slots are shared too.

use std::fmt;

use rlx_ir::{DType, Tensor};

/// A byte range of the device buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Range {
    pub offset: u64,
    pub bytes: u64,
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}+{})", self.offset, self.bytes)
    }
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

impl IoSlot {
    pub fn range(&self) -> Range {
        Range {
            offset: self.offset,
            bytes: self.bytes,
        }
    }
}

/// How many times a loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trip {
    /// Known when planning.
    Count(u64),
    /// An i64 in the buffer, read before the loop (negative runs zero times).
    Read(Range),
}

/// What the device does next, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Launch `i` of the backend's list.
    Dispatch(usize),
    /// Reads the bool at `cond` and runs one branch.
    If {
        node: String,
        origin: Vec<String>,
        cond: Range,
        then: Vec<Step>,
        otherwise: Vec<Step>,
    },
    /// Runs `body` up to `trip` times; with `cond`, only while the bool there
    /// (read before each iteration) is true.
    Loop {
        node: String,
        origin: Vec<String>,
        trip: Trip,
        cond: Option<Range>,
        body: Vec<Step>,
    },
}

/// Prints `steps` indented by `depth`, each dispatch by `line` (which writes
/// one line without indentation or newline).
pub fn fmt_steps(
    f: &mut fmt::Formatter<'_>,
    steps: &[Step],
    depth: usize,
    line: &mut dyn FnMut(&mut fmt::Formatter<'_>, usize) -> fmt::Result,
) -> fmt::Result {
    let pad = "  ".repeat(depth);
    for step in steps {
        match step {
            Step::Dispatch(i) => {
                f.write_str(&pad)?;
                line(f, *i)?;
                writeln!(f)?;
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
                fmt_steps(f, then, depth + 1, line)?;
                writeln!(f, "{pad}else:")?;
                fmt_steps(f, otherwise, depth + 1, line)?;
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
                fmt_steps(f, body, depth + 1, line)?;
                writeln!(f, "{pad}end loop `{node}`")?;
            }
        }
    }
    Ok(())
}

/// `name dtype[dims] @offset` lines of inputs or outputs.
pub fn fmt_slots(f: &mut fmt::Formatter<'_>, what: &str, slots: &[IoSlot]) -> fmt::Result {
    for s in slots {
        let dims: Vec<String> = s.dims.iter().map(|d| d.to_string()).collect();
        writeln!(
            f,
            "  {what} {:?} {}[{}] @{}",
            s.name,
            s.dtype,
            dims.join(","),
            s.offset
        )?;
    }
    Ok(())
}

/// Every dispatch index in `steps`, in order (bodies included once).
pub fn dispatches_in(steps: &[Step], out: &mut Vec<usize>) {
    for s in steps {
        match s {
            Step::Dispatch(i) => out.push(*i),
            Step::If {
                then, otherwise, ..
            } => {
                dispatches_in(then, out);
                dispatches_in(otherwise, out);
            }
            Step::Loop { body, .. } => dispatches_in(body, out),
        }
    }
}

/// Checks run inputs (in graph-input order) against the schedule's input
/// slots: their number, dtypes and dims. `Err((index, reason))` names the
/// first input that does not fit.
pub fn check_inputs(slots: &[IoSlot], inputs: &[&Tensor]) -> Result<(), (usize, String)> {
    crate::io::check_shapes(slots, inputs.iter().map(|t| (t.dtype(), t.dims())))
}
