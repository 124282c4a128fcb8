//! The `softmax` kernel family: softmax, log-softmax and hardmax over one
//! axis, one workgroup tree reduction per row. The parameter struct and the
//! row geometry every GPU backend shares.

use rlx_ir::ops::{Softmax, SoftmaxKind};

use crate::geometry::{axis, u32_of, LResult};

crate::kernel_params! {
    /// One workgroup per row; a row is `len` elements `inner` apart.
    pub struct SoftmaxParams {
        /// Rows (workgroups).
        pub rows: u32,
        /// Elements per row (the axis size).
        pub len: u32,
        /// The stride of a row's elements (the product of the dims after the axis).
        pub inner: u32,
        /// 0 softmax, 1 log_softmax, 2 hardmax (1 at the first maximum).
        pub kind: u32,
    }
}

/// The operand names of the softmax kernel, in launch order.
pub const SOFTMAX_OPERANDS: &[&str] = &["x", "y"];

/// Rows of `s` over an input of `dims`.
pub fn softmax_params(s: &Softmax, dims: &[usize]) -> LResult<SoftmaxParams> {
    let kind = match s.kind {
        SoftmaxKind::Softmax => 0,
        SoftmaxKind::LogSoftmax => 1,
        SoftmaxKind::Hardmax => 2,
    };
    let a = axis(s.axis, dims.len())?;
    let len = dims.get(a).copied().unwrap_or(1);
    let inner: usize = dims.get(a + 1..).unwrap_or(&[]).iter().product();
    let rows = dims.iter().product::<usize>() / len.max(1);
    Ok(SoftmaxParams {
        rows: u32_of(rows, "rows")?,
        len: u32_of(len, "row length")?,
        inner: u32_of(inner.max(1), "inner size")?,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_run_along_the_axis() {
        let s = Softmax {
            kind: SoftmaxKind::LogSoftmax,
            axis: -2,
        };
        let p = softmax_params(&s, &[2, 3, 4]).unwrap();
        assert_eq!((p.rows, p.len, p.inner, p.kind), (8, 3, 4, 1));
        let s = Softmax {
            kind: SoftmaxKind::Softmax,
            axis: 0,
        };
        assert!(softmax_params(&s, &[]).is_ok());
    }
}
