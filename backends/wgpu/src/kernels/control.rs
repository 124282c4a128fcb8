//! The dispatches control flow is made of: slab copies that move values into
//! and out of subgraph bodies (optionally at a slice picked by the loop
//! counter), and the loop counter itself (`wgsl/slab.wgsl`, `wgsl/counter.wgsl`).

use crate::plan::WG;
use crate::schedule::Range;

use super::{u32_of, Draft, LResult, Pipelines};

const SLAB: &str = include_str!("wgsl/slab.wgsl");
const COUNTER: &str = include_str!("wgsl/counter.wgsl");

/// Rows of bytes: row `r` of a side starts at `base + r * stride` (a stride
/// of 0 means rows follow each other), and an indexed side's base moves by
/// `step` bytes per loop iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Side {
    pub range: Range,
    pub stride: u64,
    /// `Some(step)`: offset by `step * index` (index from the loop counter).
    pub step: Option<u64>,
}

impl Side {
    /// A dense value: rows follow each other.
    pub fn dense(range: Range) -> Side {
        Side {
            range,
            stride: 0,
            step: None,
        }
    }

    /// Slice `index` along `axis` of a value of `dims` with `size`-byte
    /// elements, the index coming from the loop counter.
    pub fn sliced(range: Range, dims: &[usize], axis: usize, size: usize) -> Side {
        let inner = dims[axis + 1..].iter().product::<usize>() * size;
        Side {
            range,
            stride: (dims[axis] * inner) as u64,
            step: Some(inner as u64),
        }
    }
}

/// How the loop counter picks the slice of indexed sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Index {
    pub counter: Range,
    /// `Some(len)`: slice `len - 1 - counter` (a reversed scan direction).
    pub reverse: Option<u64>,
}

/// Copies `rows` rows of `inner` bytes from `src` to `dst`.
pub fn copy(
    pipelines: &mut Pipelines,
    dst: Side,
    src: Side,
    rows: u64,
    inner: u64,
    index: Option<Index>,
) -> LResult<Option<Draft>> {
    if rows == 0 || inner == 0 {
        return Ok(None);
    }
    if (dst.step.is_some() || src.step.is_some()) && index.is_none() {
        return Err("an indexed copy needs the loop counter".into());
    }
    let counter = index.map_or(dst.range, |i| i.counter);
    let mut flags = 0u32;
    if src.step.is_some() {
        flags |= 1;
    }
    if dst.step.is_some() {
        flags |= 2;
    }
    if index.is_some_and(|i| i.reverse.is_some()) {
        flags |= 4;
    }
    if index.is_some() {
        flags |= 8;
    }
    let span = (rows - 1) * dst.stride.max(inner) + inner;
    let word = |v: u64, what: &str| u32_of(v as usize, what);
    let params = vec![
        word(rows, "rows")?,
        word(inner, "row bytes")?,
        word(src.stride.max(inner), "a stride")?,
        word(dst.stride.max(inner), "a stride")?,
        word(src.step.unwrap_or(0), "a step")?,
        word(dst.step.unwrap_or(0), "a step")?,
        flags,
        word(index.and_then(|i| i.reverse).unwrap_or(0), "a length")?,
    ];
    let words = span / 4 + 2;
    Ok(Some(Draft {
        pipeline: pipelines.get("control.slab_copy", SLAB),
        operands: vec![dst.range, src.range, counter],
        params,
        groups: words.div_ceil(WG),
    }))
}

/// Copies a whole value of `bytes` bytes.
pub fn copy_value(pipelines: &mut Pipelines, dst: Range, src: Range) -> LResult<Option<Draft>> {
    let bytes = dst.bytes.min(src.bytes);
    copy(
        pipelines,
        Side::dense(dst),
        Side::dense(src),
        1,
        bytes,
        None,
    )
}

/// Sets the counter to zero (`increment == false`) or adds one.
pub fn counter(pipelines: &mut Pipelines, counter: Range, increment: bool) -> Draft {
    Draft {
        pipeline: pipelines.get("control.counter", COUNTER),
        operands: vec![counter],
        params: vec![u32::from(increment)],
        groups: 1,
    }
}
