//! Which arena buffers a plain run can keep in the caller's memory instead:
//! a graph input's buffer read where the caller's tensor lies (no copy in),
//! and a graph output's buffer written straight into the memory the
//! returned tensor will own (no copy out).
//!
//! A detector at 640² copies a 4.9 MB image in and its feature maps out:
//! on a memory-bound model that was 45% of a run (a 16->16 pointwise
//! convolution over 256², 0.6 of its 1.4 ms). ONNX Runtime reads inputs in
//! place too.
//!
//! The memory plan says which values share a buffer
//! ([`MemoryPlan::places`]); a whole buffer moves or none of it:
//! - an input's buffer, when it is the input's own and no step writes into
//!   it (a cache update written over its cache input does): views and split
//!   pieces of the input read the caller's bytes at their offsets;
//! - an output's buffer, when the output is all of it (not a piece of a
//!   concatenation or a split) and no graph input lives in it (an output
//!   that is an input, or a concatenation with an input for a piece): every
//!   step that writes a value of the buffer (the producer, a concatenation's
//!   pieces, a cache update) writes the output's memory, and every step
//!   that reads one reads it there.
//!
//! Whether a run uses a home is decided per run ([`crate::exec`]): an input
//! whose bytes are not aligned to [`INPUT_ALIGN`] is copied as before, an
//! output too small for the output pool is copied out, and runs that keep
//! state between them use the arena alone.

use std::collections::HashMap;

use rlx_ir::{Graph, Op, Value};
use rlx_passes::memory::MemoryPlan;
use rlx_passes::Slot;

/// Alignment a caller's input must have to be read in place: every
/// element type's (kernels view operands as slices of their elements).
pub const INPUT_ALIGN: usize = 8;

/// The caller's memory a buffer can live in for a plain run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// Graph input `i`'s tensor.
    Input(usize),
    /// The memory of graph output `i`'s tensor.
    Output(usize),
}

/// An operand whose buffer has a home: where it is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub home: Home,
    /// Byte offset of the operand in its buffer.
    pub offset: usize,
}

/// The homes of `g`'s buffers under `mem`, by buffer (see
/// [`MemoryPlan::places`]); `written` says whether a step writes a value.
pub fn homes(g: &Graph, mem: &MemoryPlan, written: impl Fn(Value) -> bool) -> HashMap<Value, Home> {
    // The values of every buffer.
    let mut members: HashMap<Value, Vec<Value>> = HashMap::new();
    for (&v, &(buffer, _)) in &mem.places {
        members.entry(buffer).or_default().push(v);
    }
    let bytes = |v: Value| match mem.slots.get(&v) {
        Some(Slot::Arena { bytes, .. }) => Some(*bytes),
        _ => None,
    };
    let is_input = |v: Value| matches!(g.node(v.node).op, Op::Input(_));
    let mut homes = HashMap::new();
    for (i, &id) in g.inputs().iter().enumerate() {
        let v = Value::of(id);
        let own = mem.places.get(&v) == Some(&(v, 0));
        let read_only = members
            .get(&v)
            .is_some_and(|m| !m.iter().any(|&u| written(u)));
        if own && read_only && bytes(v).is_some() {
            homes.insert(v, Home::Input(i));
        }
    }
    for (i, o) in g.outputs().iter().enumerate() {
        let Some(&(buffer, 0)) = mem.places.get(&o.value) else {
            continue;
        };
        let whole = bytes(o.value).is_some() && bytes(o.value) == bytes(buffer);
        let no_input = members
            .get(&buffer)
            .is_some_and(|m| !m.iter().any(|&u| is_input(u)));
        if whole && no_input && !homes.contains_key(&buffer) {
            homes.insert(buffer, Home::Output(i));
        }
    }
    homes
}

/// Where `v` lies in its buffer's home, if the buffer has one.
pub fn bound(mem: &MemoryPlan, homes: &HashMap<Value, Home>, v: Value) -> Option<Bound> {
    let &(buffer, offset) = mem.places.get(&v)?;
    homes.get(&buffer).map(|&home| Bound { home, offset })
}
