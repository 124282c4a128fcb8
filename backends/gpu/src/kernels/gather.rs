//! The `gather` kernel family: gather along one axis over an
//! [outer, axis, inner] view, for elements of one or two words. The
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
    let a = axis(ax, dims.len())?;
    Ok(GatherParams {
        n: u32_of(n, "size")?,
        words: words(size)?,
        axis_len: u32_of(dims.get(a).copied().unwrap_or(1), "axis size")?,
        inner: u32_of(
            dims.get(a + 1..).unwrap_or(&[]).iter().product(),
            "inner size",
        )?,
        n_idx: u32_of(n_idx.max(1), "index count")?,
        idx_wide: u32::from(wide),
    })
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
}
