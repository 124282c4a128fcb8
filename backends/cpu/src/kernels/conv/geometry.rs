//! The resolved geometry of a convolution (sizes, strides, dilations, pads)
//! and the im2col unfolding that the generic paths multiply.

use rlx_ir::ops::{resolve_pads, Conv};

use crate::kernel::KernelError;

/// Resolved geometry of one convolution.
#[derive(Debug, Clone)]
pub struct ConvGeom {
    pub n: usize,
    pub c: usize,
    pub m: usize,
    pub group: usize,
    pub input: Vec<usize>,
    pub kernel: Vec<usize>,
    pub output: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    /// Begin pads (end pads only shape the output).
    pub pads: Vec<usize>,
}

impl ConvGeom {
    pub(super) fn from_conv(
        c: &Conv,
        x: &[usize],
        w: &[usize],
        y: &[usize],
    ) -> Result<ConvGeom, KernelError> {
        let nsp = x.len() - 2;
        let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
        let pads = resolve_pads(
            c.auto_pad,
            &c.pads,
            &i64s(&x[2..]),
            &i64s(&w[2..]),
            &c.strides,
            &c.dilations,
        );
        Ok(ConvGeom {
            n: x[0],
            c: x[1],
            m: w[0],
            group: c.group.max(1) as usize,
            input: x[2..].to_vec(),
            kernel: w[2..].to_vec(),
            output: y[2..].to_vec(),
            strides: c.strides.iter().map(|&s| s as usize).collect(),
            dilations: c.dilations.iter().map(|&s| s as usize).collect(),
            pads: pads[..nsp].iter().map(|&p| p.max(0) as usize).collect(),
        }
        .as_2d())
    }

    /// A 1-D convolution as a 2-D one of height 1 (the same memory layout), so
    /// it takes the 2-D im2col, packed and depthwise paths.
    pub(super) fn as_2d(mut self) -> ConvGeom {
        if self.input.len() == 1 {
            self.input.insert(0, 1);
            self.kernel.insert(0, 1);
            self.output.insert(0, 1);
            self.strides.insert(0, 1);
            self.dilations.insert(0, 1);
            self.pads.insert(0, 0);
        }
        self
    }

    pub fn spatial_in(&self) -> usize {
        self.input.iter().product()
    }
    pub fn spatial_out(&self) -> usize {
        self.output.iter().product()
    }
    pub fn kernel_size(&self) -> usize {
        self.kernel.iter().product()
    }
    /// Two per multiply-add when each of `positions` (output positions of a
    /// convolution, input positions of a transposed one) meets one filter
    /// per channel of the other side: `m * c / group` filters in all.
    pub fn flops(&self, positions: usize) -> u64 {
        [
            self.n,
            self.m,
            self.c / self.group.max(1),
            self.kernel_size(),
            positions,
            2,
        ]
        .iter()
        .fold(1u64, |a, &v| a.saturating_mul(v as u64))
    }
    /// Rows of the im2col matrix of one group.
    pub fn col_rows(&self) -> usize {
        self.c / self.group * self.kernel_size()
    }
    /// One group whose single output position reads every input element:
    /// each kernel dim spans its input dim, with no pads or dilation.
    pub fn is_fully_connected(&self) -> bool {
        self.group == 1
            && self.spatial_out() == 1
            && self.input == self.kernel
            && self.pads.iter().all(|&p| p == 0)
            && self.dilations.iter().all(|&d| d == 1)
    }

    /// A 1x1 convolution at stride 1 without padding: its output is its
    /// input's positions, a GEMM over them.
    pub fn is_pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.strides.iter().all(|&s| s == 1)
            && self.unpadded()
    }

    /// No padding on either side. `pads` holds only the begin pads; end
    /// padding shows as output positions past the ones the input alone
    /// gives (a 1x1 convolution with pads `[0, 2]` over 4 positions has 6
    /// outputs, its last two the bias).
    pub fn unpadded(&self) -> bool {
        self.pads.iter().all(|&p| p == 0)
            && (0..self.input.len()).all(|d| {
                let extent = (self.kernel[d] - 1) * self.dilations[d] + 1;
                self.input[d] >= extent
                    && self.output[d] == (self.input[d] - extent) / self.strides[d] + 1
            })
    }
    /// Output columns per im2col tile: about 4 MiB of f32 per tile, so each
    /// GEMM call is wide enough to amortize packing the weights.
    pub(super) fn tile(&self) -> usize {
        ((1 << 20) / self.col_rows().max(1))
            .max(64)
            .min(self.spatial_out().max(1))
    }
}

/// Fills `col[r, j - j0]` for output positions `j0..j1` of one group's channels.
pub(super) fn im2col<T: Copy + Default>(
    g: &ConvGeom,
    x: &[T],
    c0: usize,
    j0: usize,
    j1: usize,
    col: &mut [T],
) {
    let width = j1 - j0;
    let ks = g.kernel_size();
    let nsp = g.input.len();
    let sin = g.spatial_in();
    if nsp == 2 {
        for cc in 0..g.c / g.group {
            let xc = &x[(c0 + cc) * sin..(c0 + cc + 1) * sin];
            for kh in 0..g.kernel[0] {
                for kw in 0..g.kernel[1] {
                    let row = (cc * ks + kh * g.kernel[1] + kw) * width;
                    im2col_row_2d(g, xc, (kh, kw), j0, &mut col[row..row + width]);
                }
            }
        }
        return;
    }
    // Any spatial rank: walk multi-indices.
    let mut kidx = vec![0usize; nsp];
    let mut oidx = vec![0usize; nsp];
    for cc in 0..g.c / g.group {
        let xc = &x[(c0 + cc) * sin..(c0 + cc + 1) * sin];
        for kf in 0..ks {
            unflatten(kf, &g.kernel, &mut kidx);
            let row = (cc * ks + kf) * width;
            for j in j0..j1 {
                unflatten(j, &g.output, &mut oidx);
                let mut off = 0usize;
                let mut inside = true;
                for d in 0..nsp {
                    let p = (oidx[d] * g.strides[d] + kidx[d] * g.dilations[d]) as isize
                        - g.pads[d] as isize;
                    if p < 0 || p >= g.input[d] as isize {
                        inside = false;
                        break;
                    }
                    off = off * g.input[d] + p as usize;
                }
                col[row + j - j0] = if inside { xc[off] } else { T::default() };
            }
        }
    }
}

/// Columns `j0..j0 + dst.len()` of the im2col row of kernel tap `(kh, kw)`
/// over channel plane `xc` of a 2-D convolution.
fn im2col_row_2d<T: Copy + Default>(
    g: &ConvGeom,
    xc: &[T],
    (kh, kw): (usize, usize),
    j0: usize,
    dst: &mut [T],
) {
    let (ih, iw) = (g.input[0] as isize, g.input[1] as isize);
    let ow = g.output[1];
    let j1 = j0 + dst.len();
    let (dh, dw) = (
        (kh * g.dilations[0]) as isize - g.pads[0] as isize,
        (kw * g.dilations[1]) as isize - g.pads[1] as isize,
    );
    let (sh, sw) = (g.strides[0] as isize, g.strides[1] as isize);
    let mut j = j0;
    while j < j1 {
        let (oh, ow0) = (j / ow, j % ow);
        let run = (ow - ow0).min(j1 - j);
        let hh = oh as isize * sh + dh;
        let out = &mut dst[j - j0..j - j0 + run];
        if hh < 0 || hh >= ih {
            out.fill(T::default());
        } else {
            let xr = &xc[(hh * iw) as usize..((hh + 1) * iw) as usize];
            // Outputs t of the run read column (ow0 + t) * sw + dw: those
            // in [lo, hi) fall inside the row, the rest are padding.
            let first = ow0 as isize * sw + dw;
            let lo = if first >= 0 {
                0
            } else {
                ((-first + sw - 1) / sw) as usize
            }
            .min(run);
            let hi = if iw - first <= 0 {
                0
            } else {
                (((iw - first + sw - 1) / sw) as usize).min(run)
            }
            .max(lo);
            out[..lo].fill(T::default());
            out[hi..].fill(T::default());
            if hi == lo {
                // The whole run reads padding.
                j += run;
                continue;
            }
            let start = (first + lo as isize * sw) as usize;
            if sw == 1 {
                out[lo..hi].copy_from_slice(&xr[start..start + (hi - lo)]);
            } else {
                for (o, v) in out[lo..hi]
                    .iter_mut()
                    .zip(xr[start..].iter().step_by(sw as usize))
                {
                    *o = *v;
                }
            }
        }
        j += run;
    }
}

pub(super) fn unflatten(mut i: usize, dims: &[usize], out: &mut [usize]) {
    for d in (0..dims.len()).rev() {
        out[d] = i % dims[d].max(1);
        i /= dims[d].max(1);
    }
}
