//! The `conv_transpose` kernel family: ConvTranspose (1-D to 3-D, groups,
//! dilations, pads, output padding and shape) in the gather form, one
//! invocation per output element (no scatter, no atomics). [`plan`] checks
//! the weights and the output sizes and fills [`ConvTransposeParams`].

use rlx_ir::ops::ConvTranspose;

use crate::geometry::{u32_of, LResult};

crate::kernel_params! {
    /// `y[n, m, o] = bias[m] + sum over the group's input channels and kernel
    /// taps of x * w`. Spatial dims are right-aligned into 3 (leading ones
    /// have size 1, stride 1, pad 0).
    pub struct ConvTransposeParams {
        /// Output elements.
        pub total: u32,
        /// Input channels.
        pub c: u32,
        /// Output channels.
        pub m: u32,
        pub groups: u32,
        /// 1: add `bias[m]`.
        pub has_bias: u32,
        /// Input sizes per spatial dim.
        pub input: [u32; 3],
        /// Output sizes per spatial dim.
        pub output: [u32; 3],
        /// Kernel sizes per spatial dim.
        pub kernel: [u32; 3],
        pub stride: [u32; 3],
        pub dilation: [u32; 3],
        /// Begin pads; negative when an output_shape exceeds the full size.
        pub pad: [i32; 3],
    }
}

/// The operands, in launch order (`bias` repeats `y` when absent).
pub const CONV_TRANSPOSE_OPERANDS: &[&str] = &["y", "x", "w", "bias"];

/// The parameters of `ct` with input, weight and output dims `x`, `w`, `y`.
pub fn plan(
    ct: &ConvTranspose,
    x: &[usize],
    w: &[usize],
    y: &[usize],
    bias: bool,
) -> LResult<ConvTransposeParams> {
    let sp = x.len().saturating_sub(2);
    if !(1..=3).contains(&sp) || w.len() != x.len() || y.len() != x.len() {
        return Err(format!(
            "conv_transpose over {sp} spatial dims has no GPU kernel (1-D to 3-D)"
        ));
    }
    let (c, m) = (x[1], y[1]);
    let groups = usize::try_from(ct.group).unwrap_or(0).max(1);
    if c % groups != 0 || m % groups != 0 || w[0] != c || w[1] * groups != m {
        return Err(format!(
            "weights {w:?} do not fit {c} input and {m} output channels in {groups} groups"
        ));
    }
    let input: Vec<i64> = x[2..].iter().map(|&d| d as i64).collect();
    let kernel: Vec<i64> = w[2..].iter().map(|&d| d as i64).collect();
    let (pads, out) = ct.resolve(&input, &kernel);
    if out.iter().zip(&y[2..]).any(|(&a, &b)| a != b as i64) {
        return Err(format!(
            "output sizes {out:?} differ from the planned {:?}",
            &y[2..]
        ));
    }
    let mut p = ConvTransposeParams {
        total: u32_of(y.iter().product(), "output size")?,
        c: u32_of(c, "channels")?,
        m: u32_of(m, "channels")?,
        groups: u32_of(groups, "groups")?,
        has_bias: u32::from(bias),
        input: [1; 3],
        output: [1; 3],
        kernel: [1; 3],
        stride: [1; 3],
        dilation: [1; 3],
        pad: [0; 3],
    };
    let word =
        |v: i64, what: &str| u32::try_from(v).map_err(|_| format!("{what} {v} is out of range"));
    for d in 0..3 {
        let Some(i) = (d + sp).checked_sub(3) else {
            continue;
        };
        let at = |v: &[i64], dflt: i64| v.get(i).copied().unwrap_or(dflt);
        p.input[d] = u32_of(x[2 + i], "an input size")?;
        p.output[d] = u32_of(y[2 + i], "an output size")?;
        p.kernel[d] = u32_of(w[2 + i], "a kernel size")?;
        p.stride[d] = word(at(&ct.strides, 1), "stride")?.max(1);
        p.dilation[d] = word(at(&ct.dilations, 1), "dilation")?.max(1);
        p.pad[d] = i32::try_from(pads.get(i).copied().unwrap_or(0))
            .map_err(|_| "a pad is out of range".to_string())?;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::ops::AutoPad;

    #[test]
    fn spatial_dims_right_align() {
        let ct = ConvTranspose {
            strides: vec![2],
            dilations: vec![1],
            pads: vec![1, 1],
            auto_pad: AutoPad::NotSet,
            group: 1,
            output_padding: vec![0],
            output_shape: vec![],
        };
        // (5 - 1) * 2 + 3 - 2 = 9
        let p = plan(&ct, &[1, 2, 5], &[2, 4, 3], &[1, 4, 9], true).unwrap();
        assert_eq!((p.total, p.c, p.m, p.has_bias), (36, 2, 4, 1));
        assert_eq!(p.input, [1, 1, 5]);
        assert_eq!(p.stride, [1, 1, 2]);
        assert_eq!(p.pad, [0, 0, 1]);
        assert!(plan(&ct, &[1, 2, 5], &[2, 4, 3], &[1, 4, 8], true).is_err());
        assert!(plan(&ct, &[1, 3, 5], &[2, 4, 3], &[1, 4, 9], true).is_err());
    }
}
