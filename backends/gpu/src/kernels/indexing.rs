//! The `indexing` kernel family beyond plain gather: gather_elements, trilu,
//! and cumulative sums and products along an axis (f32, and 32/64-bit
//! integers on u32 pairs). Parameter structs and the geometry every GPU
//! backend shares.

use super::movement::words;
use crate::geometry::{axis, strides, u32_of, LResult};

/// The most dims gather_elements handles.
pub const MAX_RANK: usize = 8;

crate::kernel_params! {
    /// `y[c] = data[c with c[axis] = idx[c]]`, one invocation per output.
    pub struct GatherElementsParams {
        /// Output elements.
        pub n: u32,
        /// Words per element (1 or 2).
        pub words: u32,
        /// Dims used of `out_dims` and `data_strides`.
        pub rank: u32,
        /// The indexed axis.
        pub axis: u32,
        /// 1: i64 indices, 0: i32.
        pub idx_wide: u32,
        /// The data's size along the axis.
        pub axis_len: u32,
        /// Output (and index) dims.
        pub out_dims: [u32; 8],
        /// The data's element strides.
        pub data_strides: [u32; 8],
    }
}

crate::kernel_params! {
    /// Keeps the upper (`j - i >= k`) or lower (`j - i <= k`) triangle of
    /// the last two dims, one invocation per element.
    pub struct TriluParams {
        /// Elements.
        pub n: u32,
        /// Words per element (1 or 2).
        pub words: u32,
        /// The second-to-last dim.
        pub rows: u32,
        /// The last dim.
        pub cols: u32,
        /// The diagonal offset.
        pub k: i32,
        /// 1: keep the upper triangle, 0: the lower.
        pub upper: u32,
    }
}

crate::kernel_params! {
    /// An f32 cumulative sum or product, one invocation per line of `len`
    /// elements `inner` apart.
    pub struct CumulativeParams {
        /// Lines (outer x inner).
        pub lines: u32,
        /// The axis size.
        pub len: u32,
        /// Elements after the axis (at least 1).
        pub inner: u32,
        /// 1: each output excludes its own element.
        pub exclusive: u32,
        /// 1: accumulate from the end of the axis.
        pub reverse: u32,
        /// 1: product, 0: sum.
        pub prod: u32,
    }
}

crate::kernel_params! {
    /// An integer cumulative sum or product: [`CumulativeParams`] plus the
    /// element width.
    pub struct CumulativeIntParams {
        /// Lines (outer x inner).
        pub lines: u32,
        /// The axis size.
        pub len: u32,
        /// Elements after the axis (at least 1).
        pub inner: u32,
        /// 1: each output excludes its own element.
        pub exclusive: u32,
        /// 1: accumulate from the end of the axis.
        pub reverse: u32,
        /// 1: product, 0: sum.
        pub prod: u32,
        /// 1: two words per element (64-bit), 0: one.
        pub wide: u32,
    }
}

/// The operand names of the kernels, in launch order.
pub const GATHER_ELEMENTS_OPERANDS: &[&str] = &["data", "idx", "y"];
pub const TRILU_OPERANDS: &[&str] = &["x", "y"];
pub const CUMULATIVE_OPERANDS: &[&str] = &["x", "y"];

/// gather_elements along `ax` of data of `dims` (`size`-byte elements) by
/// indices of `idx` dims (i64 when `wide`).
pub fn gather_elements_params(
    dims: &[usize],
    idx: &[usize],
    ax: i64,
    size: usize,
    wide: bool,
) -> LResult<GatherElementsParams> {
    let rank = dims.len();
    if rank > MAX_RANK || idx.len() != rank {
        return Err("gather_elements of rank over 8 has no GPU kernel".into());
    }
    let a = axis(ax, rank)?;
    let (mut od, mut xs) = ([1u32; MAX_RANK], [0u32; MAX_RANK]);
    let st = strides(dims);
    for i in 0..rank {
        od[i] = u32_of(idx[i], "a dim")?;
        xs[i] = u32_of(st[i], "a stride")?;
    }
    Ok(GatherElementsParams {
        n: u32_of(idx.iter().product(), "size")?,
        words: words(size)?,
        rank: rank as u32,
        axis: a as u32,
        idx_wide: u32::from(wide),
        axis_len: u32_of(dims[a], "axis size")?,
        out_dims: od,
        data_strides: xs,
    })
}

/// trilu of `dims` (`size`-byte elements) at diagonal `k` (clamped to i32).
pub fn trilu_params(dims: &[usize], size: usize, k: i64, upper: bool) -> LResult<TriluParams> {
    let rank = dims.len();
    if rank < 2 {
        return Err("trilu needs rank 2 or more".into());
    }
    Ok(TriluParams {
        n: u32_of(dims.iter().product(), "size")?,
        words: words(size)?,
        rows: u32_of(dims[rank - 2], "rows")?,
        cols: u32_of(dims[rank - 1], "cols")?,
        k: k.clamp(i32::MIN as i64 + 1, i32::MAX as i64) as i32,
        upper: u32::from(upper),
    })
}

/// Lines along `ax` of an input of `dims`.
pub fn cumulative_params(
    dims: &[usize],
    ax: i64,
    exclusive: bool,
    reverse: bool,
    prod: bool,
) -> LResult<CumulativeParams> {
    let a = axis(ax, dims.len())?;
    let len = dims.get(a).copied().unwrap_or(1);
    let inner: usize = dims.get(a + 1..).unwrap_or(&[]).iter().product();
    let lines = dims.iter().product::<usize>() / len.max(1);
    Ok(CumulativeParams {
        lines: u32_of(lines, "lines")?,
        len: u32_of(len, "axis size")?,
        inner: u32_of(inner.max(1), "inner size")?,
        exclusive: u32::from(exclusive),
        reverse: u32::from(reverse),
        prod: u32::from(prod),
    })
}

impl CumulativeIntParams {
    /// `p` over elements of two words (`wide`) or one.
    pub fn of(p: CumulativeParams, wide: bool) -> CumulativeIntParams {
        CumulativeIntParams {
            lines: p.lines,
            len: p.len,
            inner: p.inner,
            exclusive: p.exclusive,
            reverse: p.reverse,
            prod: p.prod,
            wide: u32::from(wide),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_elements_reads_data_strides() {
        let p = gather_elements_params(&[3, 4], &[2, 4], 0, 4, true).unwrap();
        assert_eq!(
            (p.n, p.rank, p.axis, p.axis_len, p.idx_wide),
            (8, 2, 0, 3, 1)
        );
        assert_eq!(p.out_dims[..3], [2, 4, 1]);
        assert_eq!(p.data_strides[..3], [4, 1, 0]);
        assert!(gather_elements_params(&[3, 4], &[3], 0, 4, false).is_err());
    }

    #[test]
    fn trilu_and_cumulative_geometry() {
        let t = trilu_params(&[2, 3, 5], 8, i64::MIN, true).unwrap();
        assert_eq!((t.n, t.words, t.rows, t.cols), (30, 2, 3, 5));
        assert_eq!(t.k, i32::MIN + 1);
        assert!(trilu_params(&[3], 4, 0, false).is_err());
        let c = cumulative_params(&[2, 3, 4], 1, true, false, false).unwrap();
        assert_eq!((c.lines, c.len, c.inner, c.exclusive), (8, 3, 4, 1));
        assert_eq!(CumulativeIntParams::of(c, true).wide, 1);
    }
}
