//! The `conv` kernel family: 1-D and 2-D convolution (groups, strides,
//! dilations, pads) as im2col into scratch, in column chunks, then the
//! `matmul` GEMM with the bias as its epilogue. Pointwise convolutions (1x1,
//! stride 1, no pads) read the image directly. [`conv2d`] resolves the
//! geometry (1-D as 2-D with a height of 1); [`Conv2d::im2col`] and
//! [`Conv2d::gemm`] plan one chunk of columns.

use rlx_ir::ops::{resolve_pads, AutoPad, Conv};

use super::matmul::{BatchDim, Gemm};
use crate::geometry::{u32_of, LResult};

crate::kernel_params! {
    /// Columns `p0..p0 + cols` of the unfolded image of one 2-D convolution
    /// input: one invocation per element of `col[c * kh * kw + y * kw + x][q]`.
    pub struct Im2colParams {
        /// Elements of the chunk (`c * kh * kw * cols`).
        pub total: u32,
        /// Input channels.
        pub c: u32,
        /// Input height.
        pub h: u32,
        /// Input width.
        pub w: u32,
        /// Kernel height.
        pub kh: u32,
        /// Kernel width.
        pub kw: u32,
        /// Output width.
        pub ow: u32,
        /// Vertical stride.
        pub sh: u32,
        /// Horizontal stride.
        pub sw: u32,
        /// Vertical dilation.
        pub dh: u32,
        /// Horizontal dilation.
        pub dw: u32,
        /// Top pad.
        pub pt: u32,
        /// Left pad.
        pub pl: u32,
        /// First output position of the chunk.
        pub p0: u32,
        /// Output positions in the chunk.
        pub cols: u32,
    }
}

/// The operands of im2col, in launch order.
pub const IM2COL_OPERANDS: &[&str] = &["x", "col"];

/// A convolution's geometry, 1-D as 2-D with a height of 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv2d {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub kh: usize,
    pub kw: usize,
    pub oh: usize,
    pub ow: usize,
    pub cout: usize,
    pub groups: usize,
    /// (vertical, horizontal) strides, dilations and begin pads.
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    pub pad: [usize; 2],
    /// 1x1, stride 1, no pads: the image is its own im2col.
    pub pointwise: bool,
}

/// The geometry of `conv` with input, weight and output dims `x`, `w`, `y`.
pub fn conv2d(conv: &Conv, x: &[usize], w: &[usize], y: &[usize]) -> LResult<Conv2d> {
    let sp = x.len().saturating_sub(2);
    if !(1..=2).contains(&sp) {
        return Err(format!(
            "{sp}-D convolution has no GPU kernel (1-D and 2-D only)"
        ));
    }
    if w.len() != x.len() || y.len() != x.len() {
        return Err("conv weight and output ranks differ from the input's".into());
    }
    let two = |v: &[usize]| if sp == 1 { [1, v[0]] } else { [v[0], v[1]] };
    let groups = usize::try_from(conv.group)
        .map_err(|_| "negative group")?
        .max(1);
    let (c, cout) = (x[1], y[1]);
    if c % groups != 0 || cout % groups != 0 {
        return Err("channels do not divide into groups".into());
    }
    let ones = vec![1; sp];
    let st = if conv.strides.is_empty() {
        ones.clone()
    } else {
        conv.strides.clone()
    };
    let dl = if conv.dilations.is_empty() {
        ones
    } else {
        conv.dilations.clone()
    };
    let xs: Vec<i64> = x[2..].iter().map(|&d| d as i64).collect();
    let ks: Vec<i64> = w[2..].iter().map(|&d| d as i64).collect();
    let pads = if conv.pads.is_empty() && conv.auto_pad == AutoPad::NotSet {
        vec![0; 2 * sp]
    } else {
        resolve_pads(conv.auto_pad, &conv.pads, &xs, &ks, &st, &dl)
    };
    let nat = |v: i64, what: &str| {
        usize::try_from(v).map_err(|_| format!("a negative {what} ({v}) has no GPU kernel"))
    };
    let pair = |v: &[i64], what: &str| -> LResult<[usize; 2]> {
        Ok(if sp == 1 {
            [1, nat(v[0], what)?]
        } else {
            [nat(v[0], what)?, nat(v[1], what)?]
        })
    };
    let stride = pair(&st, "stride")?;
    let dilation = pair(&dl, "dilation")?;
    let pad = if sp == 1 {
        [0, nat(pads[0], "pad")?]
    } else {
        [nat(pads[0], "pad")?, nat(pads[1], "pad")?]
    };
    let [h, wd] = two(&x[2..]);
    let [kh, kw] = two(&w[2..]);
    let [oh, ow] = two(&y[2..]);
    Ok(Conv2d {
        n: x[0],
        c,
        h,
        w: wd,
        kh,
        kw,
        oh,
        ow,
        cout,
        groups,
        stride,
        dilation,
        pad,
        pointwise: kh == 1 && kw == 1 && stride == [1, 1] && pads.iter().all(|&v| v == 0),
    })
}

impl Conv2d {
    /// Output positions per image.
    pub fn positions(&self) -> usize {
        self.oh * self.ow
    }

    /// Output positions per im2col chunk of at most `max_bytes`.
    pub fn chunk(&self, max_bytes: usize) -> usize {
        let p = self.positions();
        if self.pointwise {
            return p;
        }
        (max_bytes / (self.c * self.kh * self.kw * 4).max(1)).clamp(1, p.max(1))
    }

    /// The im2col launch of columns `p0..p0 + cols` (its `total` invocations).
    pub fn im2col(&self, p0: usize, cols: usize) -> LResult<Im2colParams> {
        let w = |v: usize| u32_of(v, "a conv size");
        Ok(Im2colParams {
            total: w(self.c * self.kh * self.kw * cols)?,
            c: w(self.c)?,
            h: w(self.h)?,
            w: w(self.w)?,
            kh: w(self.kh)?,
            kw: w(self.kw)?,
            ow: w(self.ow)?,
            sh: w(self.stride[0])?,
            sw: w(self.stride[1])?,
            dh: w(self.dilation[0])?,
            dw: w(self.dilation[1])?,
            pt: w(self.pad[0])?,
            pl: w(self.pad[1])?,
            p0: w(p0)?,
            cols: w(cols)?,
        })
    }

    /// The GEMM of one chunk of `cols` output positions: weights times the
    /// columns (`b_sk` apart: `cols` for im2col, the image's positions for
    /// pointwise), per group, bias per output channel when `bias`.
    pub fn gemm(&self, cols: usize, b_sk: usize, bias: bool) -> Gemm {
        let g = self.groups;
        let (cg, mg) = (self.c / g, self.cout / g);
        let kg = cg * self.kh * self.kw;
        let p = self.positions();
        Gemm {
            m: mg,
            n: cols,
            k: kg,
            a_s: [kg, 1],
            b_s: [b_sk, 1],
            c_s: [p, 1],
            bias: bias.then_some([1, 0]),
            activate: false,
            batch: if g > 1 {
                vec![BatchDim {
                    dim: g,
                    a: mg * kg,
                    b: kg * b_sk,
                    c: mg * p,
                }]
            } else {
                Vec::new()
            },
            bias_batch: if g > 1 { vec![mg] } else { Vec::new() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(strides: Vec<i64>, pads: Vec<i64>, group: i64) -> Conv {
        Conv {
            strides,
            dilations: Vec::new(),
            pads,
            auto_pad: AutoPad::NotSet,
            group,
        }
    }

    #[test]
    fn one_d_is_two_d_of_height_one() {
        let g = conv2d(
            &conv(vec![2], vec![1, 1], 1),
            &[1, 3, 9],
            &[4, 3, 3],
            &[1, 4, 5],
        )
        .unwrap();
        assert_eq!((g.h, g.w, g.kh, g.kw, g.oh, g.ow), (1, 9, 1, 3, 1, 5));
        assert_eq!((g.stride, g.pad), ([1, 2], [0, 1]));
        assert!(!g.pointwise);
        let p = g.im2col(2, 3).unwrap();
        assert_eq!((p.total, p.p0, p.cols, p.sw, p.pl), (27, 2, 3, 2, 1));
    }

    #[test]
    fn groups_batch_the_gemm() {
        let g = conv2d(
            &conv(vec![], vec![], 2),
            &[1, 4, 5, 5],
            &[6, 2, 1, 1],
            &[1, 6, 5, 5],
        )
        .unwrap();
        assert!(g.pointwise);
        assert_eq!(g.chunk(1 << 20), 25);
        let m = g.gemm(25, 25, true);
        assert_eq!((m.m, m.n, m.k), (3, 25, 2));
        assert_eq!(
            m.batch,
            vec![BatchDim {
                dim: 2,
                a: 6,
                b: 50,
                c: 75
            }]
        );
        assert_eq!(m.bias_batch, vec![3]);
        assert!(conv2d(
            &conv(vec![], vec![], 3),
            &[1, 4, 5, 5],
            &[6, 2, 1, 1],
            &[1, 6, 5, 5]
        )
        .is_err());
    }
}
