//! The `loss` kernel family: negative log-likelihood, per target element or
//! summed / averaged by one workgroup tree reduction. The parameter struct
//! and the class geometry every GPU backend shares.

use rlx_ir::ops::{LossReduction, NllLoss};

use crate::geometry::{u32_of, LResult};

crate::kernel_params! {
    /// NllLoss over input (N, C, d...) and targets (N, d...).
    pub struct NllLossParams {
        /// Target elements.
        pub count: u32,
        /// Classes (dim 1 of the input).
        pub classes: u32,
        /// Elements per class of one sample (the product of the dims after 1).
        pub inner: u32,
        /// 1: i64 targets, 0: i32.
        pub idx_wide: u32,
        /// 1: per-class weights are given.
        pub has_weight: u32,
        /// 0 none (one invocation per target), 1 sum, 2 mean (one workgroup).
        pub mode: u32,
        /// 1: targets equal to `ignore` count as zero.
        pub has_ignore: u32,
        /// The ignored target.
        pub ignore: i32,
    }
}

/// The operand names of the loss kernel, in launch order (an absent weight
/// binds the input, never read).
pub const NLL_OPERANDS: &[&str] = &["x", "targets", "weight", "y"];

/// The parameters of `l` over an input of `x` dims and `targets` target
/// elements (i64 when `wide`), with or without weights of `weights` classes.
pub fn nll_params(
    l: &NllLoss,
    x: &[usize],
    targets: usize,
    wide: bool,
    weights: Option<usize>,
) -> LResult<NllLossParams> {
    if x.len() < 2 {
        return Err("nll_loss needs an input of rank 2 or more".into());
    }
    let c = x[1];
    if weights.is_some_and(|w| w != c) {
        return Err("nll_loss weights do not match the classes".into());
    }
    let inner: usize = x[2..].iter().product();
    let mode = match l.reduction {
        LossReduction::None => 0,
        LossReduction::Sum => 1,
        LossReduction::Mean => 2,
    };
    let ignore = l.ignore_index.and_then(|v| i32::try_from(v).ok());
    Ok(NllLossParams {
        count: u32_of(targets, "targets")?,
        classes: u32_of(c, "classes")?,
        inner: u32_of(inner.max(1), "inner size")?,
        idx_wide: u32::from(wide),
        has_weight: u32::from(weights.is_some()),
        mode,
        has_ignore: u32::from(ignore.is_some()),
        ignore: ignore.unwrap_or(0),
    })
}

/// Workgroups of 64: one invocation per target without a reduction, one
/// workgroup with.
pub fn nll_groups(p: &NllLossParams) -> u64 {
    if p.mode == 0 {
        u64::from(p.count).div_ceil(64)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_reductions() {
        let l = NllLoss {
            reduction: LossReduction::Mean,
            ignore_index: Some(-1),
        };
        let p = nll_params(&l, &[2, 5, 3], 6, true, Some(5)).unwrap();
        assert_eq!((p.count, p.classes, p.inner, p.mode), (6, 5, 3, 2));
        assert_eq!((p.has_ignore, p.ignore, p.idx_wide), (1, -1, 1));
        assert_eq!(nll_groups(&p), 1);
        assert!(nll_params(&l, &[2, 5], 2, false, Some(4)).is_err());
        let l = NllLoss {
            reduction: LossReduction::None,
            ignore_index: None,
        };
        let p = nll_params(&l, &[130, 2], 130, false, None).unwrap();
        assert_eq!((nll_groups(&p), p.inner), (3, 1));
    }
}
