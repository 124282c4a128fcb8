//! The launches control flow is made of, planned the same way on every GPU
//! backend: slab copies that move values into and out of subgraph bodies
//! (optionally at a slice picked by the loop counter), and the loop counter
//! itself. A backend supplies one kernel for each ([`crate::Lowering`]).

use crate::geometry::{u32_of, LResult};
use crate::schedule::Range;

crate::kernel_params! {
    /// Copies `rows` rows of `inner` bytes. Row `r` of the source starts at
    /// `src + r * src_stride` (+ `src_step * index` when flag 1 is set), of
    /// the destination likewise (flag 2); flag 8: the index is the i64 loop
    /// counter, flag 4: it is `len - 1 - counter` (a reversed scan).
    pub struct SlabCopyParams {
        pub rows: u32,
        pub inner: u32,
        pub src_stride: u32,
        pub dst_stride: u32,
        pub src_step: u32,
        pub dst_step: u32,
        pub flags: u32,
        pub len: u32,
    }
}

crate::kernel_params! {
    /// Sets the i64 loop counter to zero (`increment == 0`) or adds one.
    pub struct CounterParams {
        pub increment: u32,
    }
}

/// The operand names of the slab copy, in launch order.
pub const SLAB_OPERANDS: &[&str] = &["dst", "src", "counter"];
/// The operand name of the counter kernel.
pub const COUNTER_OPERANDS: &[&str] = &["counter"];

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

/// A planned slab copy: operands (dst, src, counter), parameters, and the
/// bytes its destination rows span (what a kernel covers).
#[derive(Debug, Clone, PartialEq)]
pub struct SlabCopy {
    pub operands: [Range; 3],
    pub params: SlabCopyParams,
    pub span: u64,
}

/// Plans a copy of `rows` rows of `inner` bytes from `src` to `dst`; `None`
/// when there is nothing to copy.
pub fn slab_copy(
    dst: Side,
    src: Side,
    rows: u64,
    inner: u64,
    index: Option<Index>,
) -> LResult<Option<SlabCopy>> {
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
    let params = SlabCopyParams {
        rows: word(rows, "rows")?,
        inner: word(inner, "row bytes")?,
        src_stride: word(src.stride.max(inner), "a stride")?,
        dst_stride: word(dst.stride.max(inner), "a stride")?,
        src_step: word(src.step.unwrap_or(0), "a step")?,
        dst_step: word(dst.step.unwrap_or(0), "a step")?,
        flags,
        len: word(index.and_then(|i| i.reverse).unwrap_or(0), "a length")?,
    };
    Ok(Some(SlabCopy {
        operands: [dst.range, src.range, counter],
        params,
        span,
    }))
}
