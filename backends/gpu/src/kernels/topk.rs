//! The `topk` kernel family: the `k` largest or smallest elements along an
//! axis and their indices, sorted, ties to the lower index (as the CPU
//! backend sorts). One workgroup per row sorts the row's (key, index)
//! pairs, padded to a power of two.

use crate::geometry::{axis, u32_of, LResult};

crate::kernel_params! {
    /// One workgroup per row; a row is `len` elements `inner` apart.
    pub struct TopKParams {
        /// Rows (outer * inner).
        pub rows: u32,
        /// Elements per row (the axis size).
        pub len: u32,
        /// The stride of a row's elements (the product of the dims after the axis).
        pub inner: u32,
        /// Elements kept per row.
        pub k: u32,
        /// `len` rounded up to a power of two (the sorted length).
        pub pow2: u32,
        /// 1: the largest elements, 0: the smallest.
        pub largest: u32,
    }
}

/// The operand names of the topk kernels, in launch order (`scratch` holds
/// rows too long for a workgroup's shared memory).
pub const TOPK_OPERANDS: &[&str] = &["x", "values", "indices", "scratch"];

/// The rows of a topk over an input of `dims` keeping `k` along `axis`.
pub fn topk_params(dims: &[usize], ax: i64, k: usize, largest: bool) -> LResult<TopKParams> {
    let a = axis(ax, dims.len())?;
    let len = dims.get(a).copied().unwrap_or(1);
    if k > len {
        return Err(format!("topk of k = {k} over an axis of {len}"));
    }
    let inner: usize = dims.get(a + 1..).unwrap_or(&[]).iter().product();
    let outer: usize = dims.get(..a).unwrap_or(&[]).iter().product();
    Ok(TopKParams {
        rows: u32_of(outer * inner, "rows")?,
        len: u32_of(len, "row length")?,
        inner: u32_of(inner.max(1), "inner size")?,
        k: u32_of(k, "k")?,
        pow2: u32_of(len.max(1).next_power_of_two(), "row length")?,
        largest: u32::from(largest),
    })
}
