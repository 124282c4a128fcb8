//! The `tensor_scatter` kernel family (ONNX TensorScatter, a key/value
//! cache write): one output element per thread, the update's element where
//! the position along the axis lies in `[w, w + upd_len)` of its batch row's
//! write index `w` (modulo the axis length when circular), the cache's
//! element elsewhere. Update positions past the end of a linear cache are
//! not written (the CPU backend refuses them).

use crate::geometry::{axis, u32_of, LResult};

crate::kernel_params! {
    /// The cache is `batch` x `rows` x `len` x `inner` around its axis; the
    /// update has `upd_len` positions where the cache has `len`.
    pub struct TensorScatterParams {
        /// Cache (and output) elements.
        pub n: u32,
        /// Elements of one batch row of the cache.
        pub per_batch: u32,
        /// The cache's positions along the axis.
        pub len: u32,
        /// Elements of one position.
        pub inner: u32,
        /// The update's positions along the axis.
        pub upd_len: u32,
        /// 1: positions wrap modulo `len`.
        pub circular: u32,
        /// 1: read each batch row's write index (else 0).
        pub has_indices: u32,
        /// 32-bit words per element (WGSL, which moves 4- and 8-byte
        /// elements); 0 where the kernel moves elements whole (CUDA).
        pub words: u32,
    }
}

/// The operand names of the kernel, in launch order (without write
/// indices the cache stands in for them, unread).
pub const TENSOR_SCATTER_OPERANDS: &[&str] = &["past", "update", "write_indices", "y"];

/// The parameters of a write of `upd_len` positions along `ax` of a cache
/// of `dims`.
pub fn tensor_scatter_params(
    dims: &[usize],
    upd_len: usize,
    ax: i64,
    circular: bool,
    has_indices: bool,
) -> LResult<TensorScatterParams> {
    let a = axis(ax, dims.len())?;
    if a == 0 {
        return Err("tensor_scatter along the batch axis".into());
    }
    let n: usize = dims.iter().product();
    let batch = dims.first().copied().unwrap_or(1).max(1);
    Ok(TensorScatterParams {
        n: u32_of(n, "elements")?,
        per_batch: u32_of(n / batch, "elements per batch row")?,
        len: u32_of(dims[a], "cache length")?,
        inner: u32_of(dims[a + 1..].iter().product(), "inner size")?,
        upd_len: u32_of(upd_len, "update length")?,
        circular: u32::from(circular),
        has_indices: u32::from(has_indices),
        words: 0,
    })
}
