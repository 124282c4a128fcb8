//! The `one_hot` kernel family: one output element per thread, `on` where
//! the index (negative counts from the end) names the position along the
//! axis, `off` elsewhere (an index out of range gives a row of `off`).

use crate::geometry::{axis, u32_of, LResult};

crate::kernel_params! {
    /// The output is `outer` x `depth` x `inner`; index element
    /// `o * inner + r` picks position k of row (o, r).
    pub struct OneHotParams {
        /// Output elements.
        pub n: u32,
        /// The axis size.
        pub depth: u32,
        /// Elements after the axis.
        pub inner: u32,
    }
}

/// The operand names of the one-hot kernel, in launch order.
pub const ONE_HOT_OPERANDS: &[&str] = &["indices", "values", "y"];

/// The parameters of a one-hot along `ax` into an output of `out` dims.
pub fn one_hot_params(out: &[usize], ax: i64) -> LResult<OneHotParams> {
    let a = axis(ax, out.len())?;
    let inner: usize = out.get(a + 1..).unwrap_or(&[]).iter().product();
    Ok(OneHotParams {
        n: u32_of(out.iter().product(), "elements")?,
        depth: u32_of(out.get(a).copied().unwrap_or(1), "depth")?,
        inner: u32_of(inner, "inner size")?,
    })
}
