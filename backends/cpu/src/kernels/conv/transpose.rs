//! ConvTranspose: per image and group, `col = W_gᵀ · x_g` (one GEMM, the
//! taps of every output channel as rows), then col2im: each tap's row of
//! `col` is added into the output at its stride. Two-dimensional ones
//! scatter by rows, channels split over the pool's threads; with a stride
//! equal to the kernel and no padding (upsampling by 2x2/2) every output
//! element takes exactly one tap, so the scatter writes `bias + col` and
//! the output is never filled first. Other ranks take the N-d loop.

use rlx_ir::ops::ConvTranspose;
use rlx_ir::DType;

use super::geometry::{unflatten, ConvGeom};
use super::operands::{bias, widened};
use crate::kernel::{Kernel, KernelError};
use crate::kernels::gemm::{gemm_strided, GemmElem};
use crate::kernels::num::Comp;
use crate::tensor::{TensorMut, TensorRef};

pub struct ConvTransposeKernel {
    pub dtype: DType,
    pub g: ConvGeom,
}

pub fn geom(t: &ConvTranspose, x: &[usize], w: &[usize], y: &[usize]) -> ConvGeom {
    let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let (pads, _) = t.resolve(&i64s(&x[2..]), &i64s(&w[2..]));
    let nsp = x.len() - 2;
    ConvGeom {
        n: x[0],
        c: x[1],
        m: y[1],
        group: t.group.max(1) as usize,
        input: x[2..].to_vec(),
        kernel: w[2..].to_vec(),
        output: y[2..].to_vec(),
        strides: t.strides.iter().map(|&s| s as usize).collect(),
        dilations: t.dilations.iter().map(|&s| s as usize).collect(),
        pads: pads[..nsp].iter().map(|&p| p.max(0) as usize).collect(),
    }
}

impl Kernel for ConvTransposeKernel {
    fn flops(&self) -> Option<u64> {
        // Every input position scatters one filter's worth.
        Some(self.g.flops(self.g.spatial_in()))
    }

    fn label(&self) -> String {
        let g = &self.g;
        format!(
            "conv_transpose.{} k{:?} s{:?} g{} {}->{}",
            self.dtype, g.kernel, g.strides, g.group, g.c, g.m
        )
    }

    fn scratch_bytes(&self) -> usize {
        let g = &self.g;
        let col = g.m / g.group * g.kernel_size() * g.spatial_in();
        let widen = g.n * g.c * g.spatial_in()
            + g.c * g.m / g.group * g.kernel_size()
            + g.n * g.m * g.spatial_out()
            + g.m;
        (col + widen) * 8 + 256
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        scratch: &mut [u8],
    ) -> Result<(), KernelError> {
        let out = &mut outs[0];
        match self.dtype {
            DType::F32 => conv_transpose::<f32>(
                &self.g,
                ins[0].slice()?,
                ins[1].slice()?,
                bias(ins)?,
                out.slice()?,
                scratch,
            ),
            DType::F64 => conv_transpose::<f64>(
                &self.g,
                ins[0].slice()?,
                ins[1].slice()?,
                bias(ins)?,
                out.slice()?,
                scratch,
            ),
            DType::F16 | DType::BF16 => widened(ins, out, scratch, |x, w, b, y, rest| {
                conv_transpose::<f32>(&self.g, x, w, b, y, rest)
            }),
            d => Err(KernelError::DType(d)),
        }
    }
}

/// `y = col2im(W_gᵀ · x_g)` per batch and group, plus bias.
fn conv_transpose<T: GemmElem + Comp + bytemuck::Pod + Default>(
    g: &ConvGeom,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
    scratch: &mut [u8],
) -> Result<(), KernelError> {
    let (sin, sout) = (g.spatial_in(), g.spatial_out());
    if y.is_empty() || sout == 0 {
        return Ok(());
    }
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let ks = g.kernel_size();
    let rows = mg * ks;
    let sz = std::mem::size_of::<T>();
    let scratch = crate::kernels::layout::aligned_mut(scratch, sz);
    let col: &mut [T] = bytemuck::try_cast_slice_mut(&mut scratch[..rows * sin * sz])
        .map_err(|e| KernelError::Internal(e.to_string()))?;
    for n in 0..g.n {
        let yn = &mut y[n * g.m * sout..(n + 1) * g.m * sout];
        for grp in 0..g.group {
            // W for the group is [cg, mg*ks]; read it transposed.
            let wg = &w[grp * cg * rows..(grp + 1) * cg * rows];
            let xg = &x[(n * g.c + grp * cg) * sin..(n * g.c + (grp + 1) * cg) * sin];
            let yg = &mut yn[grp * mg * sout..(grp + 1) * mg * sout];
            let bg = bias.map(|b| &b[grp * mg..(grp + 1) * mg]);
            if tiles(g) {
                tiled(g, wg, xg, bg, yg, col);
                continue;
            }
            gemm_strided(rows, sin, cg, wg, (1, rows), xg, (sin, 1), col, sin, false);
            if g.input.len() == 2 {
                col2im_2d(g, col, bg, yg);
            } else {
                col2im_nd(g, col, bg, yg);
            }
        }
    }
    Ok(())
}

/// The input positions `i` (below `len`) whose output `i*s + off - pad`
/// falls in `0..out`.
fn inside(len: usize, s: usize, off: usize, pad: usize, out: usize) -> std::ops::Range<usize> {
    let lo = pad.saturating_sub(off).div_ceil(s);
    let hi = (out + pad).saturating_sub(off).div_ceil(s).min(len);
    lo..hi.max(lo)
}

/// Whether every output element of a 2-D transposed convolution takes
/// exactly one tap: stride equal to the kernel, no dilation, no padding,
/// no extra output (upsampling by 2x2/2).
fn tiles(g: &ConvGeom) -> bool {
    g.input.len() == 2
        && g.kernel == g.strides
        && g.dilations.iter().all(|&d| d == 1)
        && g.pads.iter().all(|&p| p == 0)
        && g.output[0] == g.input[0] * g.strides[0]
        && g.output[1] == g.input[1] * g.strides[1]
}

/// Bytes of `col` one band of input rows fills before it is scattered: it
/// is read back from L2.
const BAND_BYTES: usize = 256 << 10;

/// A [`tiles`] group: bands of input rows over the pool, each one product
/// into its own part of `col` and a scatter of that part (still in cache)
/// as `bias + col`, the output rows of a band interleaving its taps.
fn tiled<T: GemmElem + Comp + Default>(
    g: &ConvGeom,
    w: &[T],
    x: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
    col: &mut [T],
) {
    let (ih, iw) = (g.input[0], g.input[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let (sin, sout, ow) = (ih * iw, g.spatial_out(), g.output[1]);
    let rows = mg * kh * kw;
    let line = rows * iw * std::mem::size_of::<T>();
    let band = (BAND_BYTES / line.max(1)).clamp(1, ih);
    let out = crate::par::Disjoint::new(y);
    crate::par::chunks_mut(&mut col[..rows * sin], rows * band * iw, |t, part| {
        let (r0, r1) = (t * band, (t * band + band).min(ih));
        let n = (r1 - r0) * iw;
        gemm_strided(
            rows,
            n,
            cg,
            w,
            (1, rows),
            &x[r0 * iw..],
            (sin, 1),
            part,
            n,
            false,
        );
        for m in 0..mg {
            let b = bias.map_or(T::zero(), |b| b[m]);
            for r in r0..r1 {
                for ky in 0..kh {
                    // SAFETY: output rows r*kh+ky of channel m belong to this
                    // band alone; the row is inside `y`.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(out.at(m * sout + (r * kh + ky) * ow), ow)
                    };
                    let tap = |kx: usize| {
                        let at = ((m * kh + ky) * kw + kx) * n + (r - r0) * iw;
                        &part[at..at + iw]
                    };
                    if kw == 2 {
                        let (a, c) = (tap(0), tap(1));
                        for ((d, p), q) in dst.chunks_exact_mut(2).zip(a).zip(c) {
                            d[0] = b + *p;
                            d[1] = b + *q;
                        }
                    } else {
                        for kx in 0..kw {
                            for (j, v) in tap(kx).iter().enumerate() {
                                dst[j * kw + kx] = b + *v;
                            }
                        }
                    }
                }
            }
        }
    });
}

/// 2-D col2im of one group's `mg` channels, channels over the pool.
fn col2im_2d<T: Comp + Default>(g: &ConvGeom, col: &[T], bias: Option<&[T]>, y: &mut [T]) {
    let (ih, iw) = (g.input[0], g.input[1]);
    let (oh, ow) = (g.output[0], g.output[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (sh, sw) = (g.strides[0], g.strides[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (ph, pw) = (g.pads[0], g.pads[1]);
    let (sin, sout) = (ih * iw, oh * ow);
    // Every output element takes exactly one tap: no fill, no sum.
    let tiles = tiles(g);
    let per = (1 << 16) / sout.max(1) + 1;
    crate::par::chunks_mut(y, per * sout, |c, chunk| {
        for (k, yr) in chunk.chunks_mut(sout).enumerate() {
            let m = c * per + k;
            let b = bias.map_or(T::zero(), |b| b[m]);
            if !tiles {
                yr.fill(b);
            }
            for ky in 0..kh {
                let rows = inside(ih, sh, ky * dh, ph, oh);
                for kx in 0..kw {
                    let cols = inside(iw, sw, kx * dw, pw, ow);
                    if cols.is_empty() {
                        continue;
                    }
                    let cr = &col[((m * kh + ky) * kw + kx) * sin..][..sin];
                    let x0 = cols.start * sw + kx * dw - pw;
                    for r in rows.clone() {
                        let src = &cr[r * iw + cols.start..r * iw + cols.end];
                        let dst = &mut yr[(r * sh + ky * dh - ph) * ow..][..ow];
                        if tiles {
                            for (j, v) in src.iter().enumerate() {
                                dst[x0 + j * sw] = b + *v;
                            }
                        } else if sw == 1 {
                            for (d, v) in dst[x0..x0 + src.len()].iter_mut().zip(src) {
                                *d = *d + *v;
                            }
                        } else {
                            for (j, v) in src.iter().enumerate() {
                                let d = &mut dst[x0 + j * sw];
                                *d = *d + *v;
                            }
                        }
                    }
                }
            }
        }
    });
}

/// col2im of any rank, element by element.
fn col2im_nd<T: Comp + Default>(g: &ConvGeom, col: &[T], bias: Option<&[T]>, y: &mut [T]) {
    let (sin, sout) = (g.spatial_in(), g.spatial_out());
    let ks = g.kernel_size();
    let nsp = g.input.len();
    let (mut kidx, mut iidx) = (vec![0usize; nsp], vec![0usize; nsp]);
    for (mm, yr) in y.chunks_mut(sout).enumerate() {
        yr.fill(bias.map_or(T::zero(), |b| b[mm]));
        for kf in 0..ks {
            unflatten(kf, &g.kernel, &mut kidx);
            let cr = &col[(mm * ks + kf) * sin..(mm * ks + kf + 1) * sin];
            for (i, v) in cr.iter().enumerate() {
                unflatten(i, &g.input, &mut iidx);
                let mut off = 0usize;
                let mut inside = true;
                for d in 0..nsp {
                    let p = (iidx[d] * g.strides[d] + kidx[d] * g.dilations[d]) as isize
                        - g.pads[d] as isize;
                    if p < 0 || p >= g.output[d] as isize {
                        inside = false;
                        break;
                    }
                    off = off * g.output[d] + p as usize;
                }
                if inside {
                    yr[off] = yr[off] + *v;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: every input element times every tap, added at its
    /// output position.
    fn naive(g: &ConvGeom, x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
        let (cg, mg) = (g.c / g.group, g.m / g.group);
        let (ih, iw, oh, ow) = (g.input[0], g.input[1], g.output[0], g.output[1]);
        let (kh, kw) = (g.kernel[0], g.kernel[1]);
        let mut y = vec![0f32; g.n * g.m * oh * ow];
        for n in 0..g.n {
            for m in 0..g.m {
                y[(n * g.m + m) * oh * ow..][..oh * ow].fill(bias[m]);
            }
            for c in 0..g.c {
                let grp = c / cg;
                for mm in 0..mg {
                    let m = grp * mg + mm;
                    for (r, q, ky, kx) in itertools(ih, iw, kh, kw) {
                        let oy =
                            (r * g.strides[0] + ky * g.dilations[0]) as isize - g.pads[0] as isize;
                        let ox =
                            (q * g.strides[1] + kx * g.dilations[1]) as isize - g.pads[1] as isize;
                        if oy < 0 || ox < 0 || oy >= oh as isize || ox >= ow as isize {
                            continue;
                        }
                        let wv = w[((c * mg + mm) * kh + ky) * kw + kx];
                        let xv = x[((n * g.c + c) * ih + r) * iw + q];
                        y[((n * g.m + m) * oh + oy as usize) * ow + ox as usize] += wv * xv;
                    }
                }
            }
        }
        y
    }

    fn itertools(a: usize, b: usize, c: usize, d: usize) -> Vec<(usize, usize, usize, usize)> {
        let mut v = Vec::new();
        for i in 0..a {
            for j in 0..b {
                for k in 0..c {
                    for l in 0..d {
                        v.push((i, j, k, l));
                    }
                }
            }
        }
        v
    }

    /// Whole transposed convolutions, tiled (2x2/2, 3x2/(3,2)) and not,
    /// grouped and batched, on one thread and on a pool with bands split
    /// over it, against the definition.
    #[test]
    fn transposed_convolutions_match_the_definition() {
        // (n, c, m, group, input, kernel, stride, pad, output)
        let cases = [
            (2, 4, 6, 2, [7, 5], [2, 2], [2, 2], [0, 0], [14, 10]),
            (1, 3, 2, 1, [40, 33], [3, 2], [3, 2], [0, 0], [120, 66]),
            // 256 tap rows of 40: bands of 6 input rows.
            (1, 2, 64, 1, [30, 40], [2, 2], [2, 2], [0, 0], [60, 80]),
            (1, 3, 4, 1, [6, 5], [3, 3], [2, 2], [1, 1], [11, 9]),
        ];
        let pool = crate::par::Pool::new(3).unwrap();
        for (n, c, m, group, input, kernel, strides, pads, output) in cases {
            let g = ConvGeom {
                n,
                c,
                m,
                group,
                input: input.to_vec(),
                kernel: kernel.to_vec(),
                output: output.to_vec(),
                strides: strides.to_vec(),
                dilations: vec![1, 1],
                pads: pads.to_vec(),
            };
            let x: Vec<f32> = (0..n * c * g.spatial_in())
                .map(|i| (i % 11) as f32 * 0.25 - 1.0)
                .collect();
            let w: Vec<f32> = (0..c * m / group * g.kernel_size())
                .map(|i| (i % 7) as f32 * 0.5 - 1.5)
                .collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.125).collect();
            let want = naive(&g, &x, &w, &bias);
            let k = ConvTransposeKernel {
                dtype: DType::F32,
                g: g.clone(),
            };
            for threads in [1, 3] {
                let mut y = vec![f32::NAN; want.len()];
                let mut scratch = vec![0u8; k.scratch_bytes()];
                let mut run =
                    || conv_transpose(&g, &x, &w, Some(&bias), &mut y, &mut scratch).unwrap();
                if threads == 1 {
                    run();
                } else {
                    pool.install(run);
                }
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                        "{g:?} at {i}: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// The 2-D scatter against the N-d loop on strides, dilations, pads and
    /// kernels that overlap, tile exactly, or leave gaps.
    #[test]
    fn the_2d_scatter_matches_the_nd_loop() {
        let cases = [
            // (input, kernel, stride, dilation, pad, output)
            ([5, 7], [2, 2], [2, 2], [1, 1], [0, 0], [10, 14]),
            ([5, 7], [3, 3], [2, 2], [1, 1], [1, 1], [9, 13]),
            ([4, 6], [3, 2], [1, 1], [1, 1], [0, 0], [6, 7]),
            ([4, 6], [2, 3], [3, 2], [2, 1], [1, 2], [11, 11]),
            ([3, 3], [2, 2], [3, 3], [1, 1], [0, 0], [9, 9]),
            ([3, 5], [5, 1], [1, 1], [1, 1], [2, 0], [3, 5]),
        ];
        for (input, kernel, strides, dilations, pads, output) in cases {
            let g = ConvGeom {
                n: 1,
                c: 1,
                m: 3,
                group: 1,
                input: input.to_vec(),
                kernel: kernel.to_vec(),
                output: output.to_vec(),
                strides: strides.to_vec(),
                dilations: dilations.to_vec(),
                pads: pads.to_vec(),
            };
            let n = g.m * g.kernel_size() * g.spatial_in();
            let col: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
            let bias = [0.5f32, -1.0, 2.0];
            let mut want = vec![0f32; g.m * g.spatial_out()];
            let mut got = vec![f32::NAN; g.m * g.spatial_out()];
            col2im_nd(&g, &col, Some(&bias), &mut want);
            col2im_2d(&g, &col, Some(&bias), &mut got);
            assert_eq!(got, want, "{g:?}");
        }
    }
}
