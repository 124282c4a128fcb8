//! The `pool` kernel family: windowed max, average and lp pooling (1-D to
//! 3-D, run as 3-D with unit leading axes) and local response normalization
//! across channels. Parameter structs and the window geometry every GPU
//! backend shares.

use rlx_ir::ops::{resolve_pads, AutoPad, Lrn, Pool, PoolKind};

use crate::geometry::{u32_of, LResult};

crate::kernel_params! {
    /// 3-D pooling, one invocation per output element. Per axis (depth,
    /// height, width), unit where the pool has fewer spatial axes.
    pub struct PoolParams {
        /// Output elements.
        pub n: u32,
        /// Input spatial dims.
        pub in_dims: [u32; 3],
        /// Output spatial dims.
        pub out_dims: [u32; 3],
        /// Window size.
        pub kernel: [u32; 3],
        /// Window strides.
        pub strides: [u32; 3],
        /// Window dilations.
        pub dilations: [u32; 3],
        /// Begin pads.
        pub pad_begin: [u32; 3],
        /// Padded extent: input dim plus end pad.
        pub padded: [u32; 3],
        /// 0 max, 1 average, 2 lp.
        pub kind: u32,
        /// Average pooling divides by the padded window (1) or by the
        /// elements inside the input (0).
        pub count_include_pad: u32,
        /// The norm of lp pooling.
        pub lp: f32,
    }
}

crate::kernel_params! {
    /// Local response normalization, one invocation per element: channel
    /// `c` sums squares over channels `c - lo ..= c + hi`.
    pub struct LrnParams {
        /// Elements.
        pub n: u32,
        /// Channels (dim 1).
        pub channels: u32,
        /// Elements per channel (product of the dims after 1).
        pub spatial: u32,
        /// Channels before the centre in the window.
        pub lo: u32,
        /// Channels after the centre in the window.
        pub hi: u32,
        /// alpha / size.
        pub alpha: f32,
        /// The exponent.
        pub beta: f32,
        /// The additive bias.
        pub bias: f32,
    }
}

/// The operand names of the pool and lrn kernels, in launch order.
pub const POOL_OPERANDS: &[&str] = &["x", "y"];
pub const LRN_OPERANDS: &[&str] = &["x", "y"];

/// The pooling kernel's kind code (max pooling with an indices output has
/// no kernel).
pub fn pool_kind(kind: PoolKind, with_indices: bool) -> LResult<u32> {
    match kind {
        PoolKind::Max if with_indices => Err("max pooling with indices has no GPU kernel".into()),
        PoolKind::Max => Ok(0),
        PoolKind::Avg => Ok(1),
        PoolKind::Lp => Ok(2),
    }
}

/// The window geometry of `p` over input `x` (N, C, spatial...) giving
/// output `y`; `kind` from [`pool_kind`].
pub fn pool_params(p: &Pool, kind: u32, x: &[usize], y: &[usize]) -> LResult<PoolParams> {
    let sp = x.len().saturating_sub(2);
    if !(1..=3).contains(&sp) || y.len() != x.len() {
        return Err(format!(
            "{sp}-D pooling has no GPU kernel (1-D to 3-D only)"
        ));
    }
    let ones = vec![1i64; sp];
    let or_ones = |v: &[i64]| {
        if v.is_empty() {
            ones.clone()
        } else {
            v.to_vec()
        }
    };
    let st = or_ones(&p.strides);
    let dl = or_ones(&p.dilations);
    let xs: Vec<i64> = x[2..].iter().map(|&d| d as i64).collect();
    let pads = if p.pads.is_empty() && p.auto_pad == AutoPad::NotSet {
        vec![0; 2 * sp]
    } else {
        resolve_pads(p.auto_pad, &p.pads, &xs, &p.kernel_shape, &st, &dl)
    };
    if pads.len() != 2 * sp || p.kernel_shape.len() != sp || st.len() != sp || dl.len() != sp {
        return Err("pool attributes do not match the spatial rank".into());
    }
    // Fewer than 3 spatial axes run with unit leading axes.
    let three = |v: &[i64], fill: i64| -> LResult<[u32; 3]> {
        let mut o = [fill; 3];
        o[3 - sp..].copy_from_slice(v);
        let mut w = [0u32; 3];
        for (w, v) in w.iter_mut().zip(o) {
            *w =
                u32::try_from(v).map_err(|_| format!("pool geometry value {v} is out of range"))?;
        }
        Ok(w)
    };
    let outs: Vec<i64> = y[2..].iter().map(|&d| d as i64).collect();
    let ext: Vec<i64> = xs.iter().zip(&pads[sp..]).map(|(a, b)| a + b).collect();
    Ok(PoolParams {
        n: u32_of(y.iter().product(), "output size")?,
        in_dims: three(&xs, 1)?,
        out_dims: three(&outs, 1)?,
        kernel: three(&p.kernel_shape, 1)?,
        strides: three(&st, 1)?,
        dilations: three(&dl, 1)?,
        pad_begin: three(&pads[..sp], 0)?,
        padded: three(&ext, 1)?,
        kind,
        count_include_pad: u32::from(p.count_include_pad),
        lp: p.p as f32,
    })
}

/// The channel window of `l` over input `x` (N, C, ...).
pub fn lrn_params(l: &Lrn, x: &[usize]) -> LResult<LrnParams> {
    if x.len() < 2 {
        return Err(format!("lrn of rank {} has no GPU kernel", x.len()));
    }
    let size = usize::try_from(l.size)
        .map_err(|_| "lrn size must be positive")?
        .max(1);
    let lo = (size - 1) / 2;
    Ok(LrnParams {
        n: u32_of(x.iter().product(), "output size")?,
        channels: u32_of(x[1], "channels")?,
        spatial: u32_of(x[2..].iter().product(), "spatial size")?,
        lo: u32_of(lo, "lrn size")?,
        hi: u32_of(size - 1 - lo, "lrn size")?,
        alpha: l.alpha / size as f32,
        beta: l.beta,
        bias: l.bias,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(kernel: &[i64], strides: &[i64], pads: &[i64]) -> Pool {
        Pool {
            kind: PoolKind::Avg,
            kernel_shape: kernel.to_vec(),
            strides: strides.to_vec(),
            dilations: Vec::new(),
            pads: pads.to_vec(),
            auto_pad: AutoPad::NotSet,
            ceil_mode: false,
            count_include_pad: true,
            p: 2,
            storage_order: 0,
            with_indices: false,
        }
    }

    #[test]
    fn two_d_pools_run_with_a_unit_depth() {
        let p = pool(&[3, 3], &[2, 2], &[1, 1, 0, 1]);
        let q = pool_params(&p, 1, &[1, 2, 5, 6], &[1, 2, 3, 3]).unwrap();
        assert_eq!(q.n, 18);
        assert_eq!(q.in_dims, [1, 5, 6]);
        assert_eq!(q.out_dims, [1, 3, 3]);
        assert_eq!(q.kernel, [1, 3, 3]);
        assert_eq!(q.strides, [1, 2, 2]);
        assert_eq!(q.dilations, [1, 1, 1]);
        assert_eq!(q.pad_begin, [0, 1, 1]);
        assert_eq!(q.padded, [1, 5, 7]);
        assert_eq!(q.count_include_pad, 1);
        assert!(pool_params(&p, 1, &[1, 2, 5], &[1, 2, 3]).is_err());
        assert!(pool_kind(PoolKind::Max, true).is_err());
    }

    #[test]
    fn lrn_window_splits_around_the_centre() {
        let l = Lrn {
            size: 4,
            alpha: 2.0,
            beta: 0.75,
            bias: 1.0,
        };
        let q = lrn_params(&l, &[2, 5, 3, 3]).unwrap();
        assert_eq!((q.n, q.channels, q.spatial), (90, 5, 9));
        assert_eq!((q.lo, q.hi), (1, 2));
        assert_eq!(q.alpha, 0.5);
    }
}
