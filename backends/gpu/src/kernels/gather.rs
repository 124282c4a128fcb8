//! The `gather` kernel family: gather along one axis over an
//! [outer, axis, inner] view, for elements of one or two words (and of one
//! or two bytes packed in words, where storage is words). The
//! parameter struct and the view geometry every GPU backend shares.

use super::movement::words;
use crate::geometry::{axis, u32_of, LResult};

crate::kernel_params! {
    /// `y[o, j, i] = data[o, idx[j], i]`, one invocation per output element.
    pub struct GatherParams {
        /// Output elements.
        pub n: u32,
        /// Words per element (1 or 2).
        pub words: u32,
        /// The gathered axis' size.
        pub axis_len: u32,
        /// Elements after the axis (the product of the later dims).
        pub inner: u32,
        /// Index elements (at least 1).
        pub n_idx: u32,
        /// 1: i64 indices, 0: i32.
        pub idx_wide: u32,
    }
}

crate::kernel_params! {
    /// Gather of 1- or 2-byte elements (bool, int8, f16) where storage is
    /// words: one invocation per output word, packing the `4 / size`
    /// elements it holds.
    pub struct GatherBytesParams {
        /// Output elements.
        pub n: u32,
        /// Bytes per element (1 or 2).
        pub size: u32,
        /// The gathered axis' size.
        pub axis_len: u32,
        /// Elements after the axis (the product of the later dims).
        pub inner: u32,
        /// Index elements (at least 1).
        pub n_idx: u32,
        /// 1: i64 indices, 0: i32.
        pub idx_wide: u32,
    }
}

/// The operand names of the gather kernel, in launch order.
pub const GATHER_OPERANDS: &[&str] = &["data", "idx", "y"];

/// Gathering `n_idx` indices (i64 when `wide`) along `ax` of data of
/// `dims` with `size`-byte elements into `n` outputs.
pub fn gather_params(
    dims: &[usize],
    ax: i64,
    size: usize,
    n_idx: usize,
    wide: bool,
    n: usize,
) -> LResult<GatherParams> {
    let b = gather_bytes_params(dims, ax, 1, n_idx, wide, n)?;
    Ok(GatherParams {
        n: b.n,
        words: words(size)?,
        axis_len: b.axis_len,
        inner: b.inner,
        n_idx: b.n_idx,
        idx_wide: b.idx_wide,
    })
}

/// [`gather_params`] for elements of `size` bytes (1 or 2) packed in words.
pub fn gather_bytes_params(
    dims: &[usize],
    ax: i64,
    size: usize,
    n_idx: usize,
    wide: bool,
    n: usize,
) -> LResult<GatherBytesParams> {
    if !matches!(size, 1 | 2) {
        return Err(format!("{size}-byte elements are not packed in words"));
    }
    let a = axis(ax, dims.len())?;
    Ok(GatherBytesParams {
        n: u32_of(n, "size")?,
        size: size as u32,
        axis_len: u32_of(dims.get(a).copied().unwrap_or(1), "axis size")?,
        inner: u32_of(
            dims.get(a + 1..).unwrap_or(&[]).iter().product(),
            "inner size",
        )?,
        n_idx: u32_of(n_idx.max(1), "index count")?,
        idx_wide: u32::from(wide),
    })
}

crate::kernel_params! {
    /// GatherND on CUDA: `y[t, e] = data[batch(t), idx[t, ..k], e]`, one
    /// thread per output element (any element size: the kernel is
    /// instantiated per size).
    pub struct GatherNdParams {
        /// Output elements.
        pub n: u32,
        /// Elements per gathered slice (the data dims after `b + k`).
        pub slice: u32,
        /// The length of an index tuple.
        pub k: u32,
        /// 1: i64 indices, 0: i32.
        pub idx_wide: u32,
        /// Index tuples per batch (at least 1).
        pub batch_tuples: u32,
        /// Data elements per batch (the product of the dims after `b`).
        pub batch_elems: u32,
        /// The data dims the tuple indexes (`b..b + k`).
        pub dims: [u32; 8],
        /// Their element strides.
        pub strides: [u32; 8],
    }
}

/// The operand names of the gather_nd kernel, in launch order.
pub const GATHER_ND_OPERANDS: &[&str] = &["data", "idx", "y"];

/// GatherND of data of `dims` by indices of `idx` dims after `b` batch dims.
pub fn gather_nd_params(
    dims: &[usize],
    idx: &[usize],
    b: usize,
    wide: bool,
) -> LResult<GatherNdParams> {
    let r = idx.len();
    let k = *idx.last().ok_or("gather_nd indices need rank 1 or more")?;
    if b + k > dims.len() || b >= r || dims[..b] != idx[..b] {
        return Err(format!(
            "gather_nd indices of shape {idx:?} do not address data of shape {dims:?} with {b} batch dims"
        ));
    }
    if k > 8 {
        return Err(format!(
            "gather_nd tuples of {k} have no GPU kernel (8 at most)"
        ));
    }
    let st = crate::geometry::strides(dims);
    let slice: usize = dims[b + k..].iter().product();
    let tuples: usize = idx[..r - 1].iter().product();
    let batches: usize = idx[..b].iter().product();
    let mut p = GatherNdParams {
        n: u32_of(tuples * slice, "size")?,
        slice: u32_of(slice.max(1), "slice size")?,
        k: k as u32,
        idx_wide: u32::from(wide),
        batch_tuples: u32_of((tuples / batches.max(1)).max(1), "index tuples")?,
        batch_elems: u32_of(dims[b..].iter().product(), "batch size")?,
        dims: [1; 8],
        strides: [0; 8],
    };
    for q in 0..k {
        p.dims[q] = u32_of(dims[b + q], "a dim")?;
        p.strides[q] = u32_of(st[b + q], "a stride")?;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_views_the_data_around_the_axis() {
        let p = gather_params(&[2, 5, 3], -2, 8, 4, true, 24).unwrap();
        assert_eq!((p.n, p.words, p.axis_len, p.inner), (24, 2, 5, 3));
        assert_eq!((p.n_idx, p.idx_wide), (4, 1));
        assert_eq!(gather_params(&[7], 0, 4, 0, false, 0).unwrap().n_idx, 1);
    }

    #[test]
    fn gather_nd_walks_batches_and_tuples() {
        let p = gather_nd_params(&[2, 3, 4, 5], &[2, 6, 2], 1, true).unwrap();
        assert_eq!(
            (p.n, p.slice, p.k, p.batch_tuples, p.batch_elems),
            (60, 5, 2, 6, 60)
        );
        assert_eq!((&p.dims[..2], &p.strides[..2]), (&[3, 4][..], &[20, 5][..]));
        assert!(gather_nd_params(&[2, 3], &[3, 1], 1, false).is_err());
    }
}
