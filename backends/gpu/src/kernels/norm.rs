//! The `norm` kernel family: layer_norm and rms_norm over trailing axes, one
//! workgroup tree reduction per row. The parameter struct and the row and
//! scale/bias geometry every GPU backend shares.

use crate::geometry::{axis, u32_of, LResult};

crate::kernel_params! {
    /// One workgroup per row of `len` contiguous elements.
    pub struct NormParams {
        /// Rows (workgroups).
        pub rows: u32,
        /// Elements per row (the product of the dims from the axis on).
        pub len: u32,
        /// Added to the variance.
        pub eps: f32,
        /// 1: rms_norm (no mean subtracted), 0: layer_norm.
        pub rms: u32,
        /// 1: a bias is added.
        pub has_bias: u32,
        /// The scale repeats every `scale_len` elements of a row.
        pub scale_len: u32,
        /// The bias repeats every `bias_len` elements of a row.
        pub bias_len: u32,
        /// 1: write the per-row mean and inverse standard deviation.
        pub stats: u32,
    }
}

/// The operand names of the norm kernel, in launch order (an absent bias,
/// mean or inv_std binds another operand, never accessed).
pub const NORM_OPERANDS: &[&str] = &["x", "scale", "bias", "y", "mean", "inv_std"];

/// The operand names of the fused residual norm kernel, in launch order
/// (an absent bias binds the scale, never accessed).
pub const RESIDUAL_NORM_OPERANDS: &[&str] = &["x", "residual", "scale", "bias", "y", "sum"];

/// Elements per row of an input of `dims` normalized from `axis` on.
pub fn row_len(dims: &[usize], ax: i64) -> LResult<usize> {
    let a = axis(ax, dims.len())?;
    Ok(dims.get(a..).unwrap_or(&[]).iter().product())
}

/// The period with which a scale or bias of `dims` repeats along rows of
/// `len` of an input of `x`: it must broadcast as a trailing block.
pub fn period(x: &[usize], len: usize, dims: &[usize]) -> LResult<usize> {
    let n: usize = dims.iter().product();
    let tail: usize = x[x.len().saturating_sub(dims.len())..].iter().product();
    let dense = dims.iter().skip_while(|&&d| d == 1).count();
    let tail_dense: usize = x[x.len().saturating_sub(dense)..].iter().product();
    if n == 0 || !len.is_multiple_of(n) || (n != tail_dense && n != 1 && n != tail) {
        return Err("scale/bias that do not broadcast as a suffix have no GPU kernel".into());
    }
    Ok(n)
}

/// A norm of `x` from `axis` on, with a scale of `scale` dims, a bias of
/// `bias` dims if any, and whether it writes the row statistics.
pub fn norm_params(
    x: &[usize],
    ax: i64,
    eps: f32,
    rms: bool,
    scale: &[usize],
    bias: Option<&[usize]>,
    stats: bool,
) -> LResult<NormParams> {
    let len = row_len(x, ax)?;
    let sl = period(x, len, scale)?;
    let bl = match bias {
        Some(b) => period(x, len, b)?,
        None => 1,
    };
    let rows = x.iter().product::<usize>() / len.max(1);
    Ok(NormParams {
        rows: u32_of(rows, "rows")?,
        len: u32_of(len, "row length")?,
        eps,
        rms: u32::from(rms),
        has_bias: u32::from(bias.is_some()),
        scale_len: u32_of(sl, "scale size")?,
        bias_len: u32_of(bl, "bias size")?,
        stats: u32::from(stats),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_and_bias_repeat_as_suffixes() {
        let p = norm_params(&[2, 3, 4], -1, 1e-5, false, &[4], Some(&[1, 4]), true).unwrap();
        assert_eq!((p.rows, p.len, p.scale_len, p.bias_len), (6, 4, 4, 4));
        assert_eq!((p.has_bias, p.stats, p.rms), (1, 1, 0));
        let p = norm_params(&[2, 3, 4], 1, 1e-5, true, &[1], None, false).unwrap();
        assert_eq!((p.rows, p.len, p.scale_len, p.bias_len), (2, 12, 1, 1));
        assert!(period(&[2, 3, 4], 12, &[3, 1]).is_err());
    }
}
