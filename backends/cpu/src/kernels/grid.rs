//! Sampling at computed coordinates: GridSample (N-D), AffineGrid (2-D and
//! 3-D) and RoiAlign.

use rlx_ir::ops::{GridMode, GridPadding, GridSample, RoiAlign, RoiAlignMode, RoiCoordMode};
use rlx_ir::{DType, Op};

use super::layout::{par_rows, strides};
use num_traits::Float;

use super::num::{AnyNum, Comp, Real};
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::GridSample(_) => Ok(fn_kernel(spec, grid_sample)),
        Op::AffineGrid(_) => Ok(fn_kernel(spec, affine_grid)),
        Op::RoiAlign(_) => Ok(fn_kernel(spec, roi_align)),
        op => Err(KernelError::Internal(format!(
            "{} is not a grid op",
            op.name()
        ))),
    }
}

/// Reflects `x` into `[lo, hi]` by bouncing off the borders.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    let bounce = |d: f64, near: f64, far: f64, dir: f64| {
        let n = (d / range).floor();
        let r = d - n * range;
        if n % 2.0 == 0.0 {
            near + dir * r
        } else {
            far - dir * r
        }
    };
    if x < lo {
        bounce(lo - x, lo, hi, 1.0)
    } else if x > hi {
        bounce(x - hi, hi, lo, -1.0)
    } else {
        x
    }
}

/// Keys' cubic convolution weights (a = -0.75) of the 4 taps around a point
/// `t` in [0, 1) past the second tap.
fn cubic4(t: f64) -> [f64; 4] {
    let a = -0.75;
    let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// Normalized `[-1, 1]` grid coordinate to an input position along an axis of `len`.
fn denormalize<F: num_traits::Float>(n: F, len: F, align: bool) -> F {
    let (one, two) = (F::one(), F::one() + F::one());
    if align {
        (n + one) / two * (len - one)
    } else {
        ((n + one) * len - one) / two
    }
}

/// Per-axis geometry of GridSample's input.
struct Axis {
    len: usize,
    lo: f64,
    hi: f64,
}

impl Axis {
    /// The input index a tap at integer position `i` reads, or `None` for a zero.
    fn fetch(&self, i: f64, pad: GridPadding) -> Option<usize> {
        let last = self.len as f64 - 1.0;
        let i = match pad {
            GridPadding::Zeros => i,
            GridPadding::Border => i.clamp(0.0, last),
            GridPadding::Reflection => reflect(i, self.lo, self.hi).trunc().clamp(0.0, last),
        };
        (i >= 0.0 && i <= last).then_some(i as usize)
    }
}

/// The (input index or zero, weight) taps along one axis at coordinate `x`.
fn grid_taps(g: &GridSample, ax: &Axis, x: f64) -> Vec<(Option<usize>, f64)> {
    let pad = g.padding_mode;
    let x = if g.mode == GridMode::Nearest {
        x.round_ties_even()
    } else {
        x
    };
    // Coordinates outside the borders move inside first (border, reflection).
    let x = if x < ax.lo || x > ax.hi {
        match pad {
            GridPadding::Border => x.clamp(0.0, ax.len as f64 - 1.0),
            GridPadding::Reflection => reflect(x, ax.lo, ax.hi),
            GridPadding::Zeros => x,
        }
    } else {
        x
    };
    match g.mode {
        GridMode::Nearest => vec![(ax.fetch(x.trunc(), pad), 1.0)],
        GridMode::Linear => {
            let x0 = x.floor();
            let t = x - x0;
            vec![(ax.fetch(x0, pad), 1.0 - t), (ax.fetch(x0 + 1.0, pad), t)]
        }
        GridMode::Cubic => {
            let x0 = x.floor();
            let w = cubic4(x - x0);
            (0..4)
                .map(|k| (ax.fetch(x0 + k as f64 - 1.0, pad), w[k]))
                .collect()
        }
    }
}

fn grid_sample_typed<T: AnyNum, G: Real>(
    g: &GridSample,
    x: &TensorRef,
    grid: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    if x.rank() < 3 || grid.rank() != x.rank() {
        return Err(KernelError::Value(format!(
            "grid {:?} does not match input {:?}",
            grid.dims, x.dims
        )));
    }
    let xs = x.slice::<T>()?;
    let gs = grid.slice::<G>()?;
    let (n, c) = (x.dims[0], x.dims[1]);
    let sp = &x.dims[2..];
    let r = sp.len();
    let out_sp = &grid.dims[1..grid.rank() - 1];
    if grid.dims[0] != n || grid.dims[grid.rank() - 1] != r || out_sp.len() != r {
        return Err(KernelError::Value(format!(
            "grid {:?} does not match input {:?}",
            grid.dims, x.dims
        )));
    }
    let npos: usize = out_sp.iter().product();
    let plane: usize = sp.iter().product();
    if plane == 0 && npos * c > 0 {
        return Err(KernelError::Value(
            "grid_sample of an empty spatial input".into(),
        ));
    }
    let st = strides(sp);
    let axes: Vec<Axis> = sp
        .iter()
        .map(|&len| {
            let (lo, hi) = if g.align_corners {
                (0.0, len as f64 - 1.0)
            } else {
                (-0.5, len as f64 - 0.5)
            };
            Axis { len, lo, hi }
        })
        .collect();
    let f64_grid = grid.dtype == DType::F64;
    let y = out.slice::<T>()?;
    // One row per (batch, output position): the taps are shared by all channels.
    let mut rows = vec![0f64; n * npos * c];
    par_rows(&mut rows, c, |row, vals| {
        let b = row / npos;
        let coords = &gs[row * r..(row + 1) * r];
        // The last grid component indexes the first spatial axis.
        let taps: Vec<Vec<(Option<usize>, f64)>> = (0..r)
            .map(|a| {
                let nv = coords[r - 1 - a].to_f64();
                // The reference denormalizes in the grid's precision, then
                // keeps single precision.
                let xv = if f64_grid {
                    denormalize(nv, sp[a] as f64, g.align_corners) as f32
                } else {
                    denormalize(nv as f32, sp[a] as f32, g.align_corners)
                };
                grid_taps(g, &axes[a], xv as f64)
            })
            .collect();
        let mut idx = vec![0usize; r];
        loop {
            let mut w = 1.0;
            let mut off = Some(0usize);
            for a in 0..r {
                let (i, wa) = taps[a][idx[a]];
                w *= wa;
                off = match (off, i) {
                    (Some(o), Some(i)) => Some(o + i * st[a]),
                    _ => None,
                };
            }
            if let Some(o) = off {
                if w != 0.0 {
                    let base = b * c * plane;
                    for (ch, v) in vals.iter_mut().enumerate() {
                        *v += w * xs[base + ch * plane + o].as_f64();
                    }
                }
            }
            let mut a = r;
            loop {
                if a == 0 {
                    return;
                }
                a -= 1;
                idx[a] += 1;
                if idx[a] < taps[a].len() {
                    break;
                }
                idx[a] = 0;
            }
        }
    });
    for b in 0..n {
        for p in 0..npos {
            for ch in 0..c {
                y[(b * c + ch) * npos + p] = T::of_f64(rows[(b * npos + p) * c + ch]);
            }
        }
    }
    Ok(())
}

fn grid_sample(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::GridSample(g) = op else {
        return Err(KernelError::Internal("not grid_sample".into()));
    };
    let (x, grid) = (&ins[0], &ins[1]);
    if x.dtype == DType::Bool {
        return Err(KernelError::DType(DType::Bool));
    }
    with_dtype!(grid.dtype, G => with_dtype!(x.dtype, T =>
        grid_sample_typed::<T, G>(g, x, grid, &mut outs[0]), num), float)
}

fn affine_typed<T: Real>(
    align: bool,
    theta: &TensorRef,
    size: &[i64],
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let th = theta.slice::<T>()?;
    let sp: Vec<usize> = size[2..].iter().map(|&d| d as usize).collect();
    let r = sp.len();
    if theta.rank() != 3 || theta.dims[1..] != [r, r + 1] || size[0] as usize != theta.dims[0] {
        return Err(KernelError::Value(format!(
            "theta {:?} does not fit size {size:?}",
            theta.dims
        )));
    }
    // Normalized coordinate of index i along an axis of length len.
    let base = |i: usize, len: usize| -> f64 {
        if align {
            if len == 1 {
                -1.0
            } else {
                -1.0 + 2.0 * i as f64 / (len - 1) as f64
            }
        } else {
            -1.0 + (2 * i + 1) as f64 / len as f64
        }
    };
    let npos: usize = sp.iter().product();
    let st = strides(&sp);
    let y = out.slice::<T>()?;
    par_rows(y, r, |row, v| {
        let (b, p) = (row / npos, row % npos);
        // Homogeneous point (x, y[, z], 1): x runs along the last axis.
        let mut h = vec![1.0; r + 1];
        for a in 0..r {
            h[r - 1 - a] = base(p / st[a] % sp[a], sp[a]);
        }
        let t = &th[b * r * (r + 1)..(b + 1) * r * (r + 1)];
        for (k, o) in v.iter_mut().enumerate() {
            let s: f64 = (0..=r).map(|j| t[k * (r + 1) + j].to_f64() * h[j]).sum();
            *o = T::from_f64(s);
        }
    });
    Ok(())
}

fn affine_grid(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::AffineGrid(a) = op else {
        return Err(KernelError::Internal("not affine_grid".into()));
    };
    let size = ins[1].to_i64s()?;
    if !(size.len() == 4 || size.len() == 5) || size.iter().any(|&d| d < 0) {
        return Err(KernelError::Value(format!("bad affine_grid size {size:?}")));
    }
    let want: Vec<usize> = std::iter::once(size[0] as usize)
        .chain(size[2..].iter().map(|&d| d as usize))
        .chain([size.len() - 2])
        .collect();
    if want != outs[0].dims {
        return Err(KernelError::Value(format!(
            "affine_grid size {size:?} does not match the planned output {:?}",
            outs[0].dims
        )));
    }
    with_dtype!(ins[0].dtype, T => affine_typed::<T>(a.align_corners, &ins[0], &size, &mut outs[0]), float)
}

/// Bilinear sample taps of RoiAlign: 4 (offset, weight) pairs, all zero
/// weight outside the feature map. Computed in `F`, the input's compute type,
/// as the reference does.
fn roi_taps<F: Float>(h: usize, w: usize, y: F, x: F) -> [(usize, f64); 4] {
    let c = |v: f64| F::from(v).unwrap_or_else(F::nan);
    let (hf, wf) = (c(h as f64), c(w as f64));
    if y < -F::one() || y > hf || x < -F::one() || x > wf {
        return [(0, 0.0); 4];
    }
    let (mut y, mut x) = (y.max(F::zero()), x.max(F::zero()));
    let (mut y0, mut x0) = (y.to_usize().unwrap_or(0), x.to_usize().unwrap_or(0));
    let (y1, x1);
    if y0 + 1 >= h {
        y0 = h - 1;
        y1 = y0;
        y = c(y0 as f64);
    } else {
        y1 = y0 + 1;
    }
    if x0 + 1 >= w {
        x0 = w - 1;
        x1 = x0;
        x = c(x0 as f64);
    } else {
        x1 = x0 + 1;
    }
    let (ly, lx) = (y - c(y0 as f64), x - c(x0 as f64));
    let (hy, hx) = (F::one() - ly, F::one() - lx);
    let f = |v: F| v.to_f64().unwrap_or(f64::NAN);
    [
        (y0 * w + x0, f(hy * hx)),
        (y0 * w + x1, f(hy * lx)),
        (y1 * w + x0, f(ly * hx)),
        (y1 * w + x1, f(ly * lx)),
    ]
}

/// Most bilinear samples one RoiAlign region may take.
const MAX_SAMPLES: usize = 1 << 26;

/// Where one region's bins and samples lie, in the compute type `F`.
struct RoiGeom<F> {
    sw: F,
    sh: F,
    bw: F,
    bh: F,
    gw: usize,
    gh: usize,
}

impl<F: Float> RoiGeom<F> {
    fn new(r: &RoiAlign, half: bool, bx: &[F], ph: usize, pw: usize) -> RoiGeom<F> {
        let c = |v: f64| F::from(v).unwrap_or_else(F::nan);
        let scale = c(r.spatial_scale as f64);
        let off = c(if half { 0.5 } else { 0.0 });
        let (sw, sh) = (bx[0] * scale - off, bx[1] * scale - off);
        let (mut rw, mut rh) = (bx[2] * scale - off - sw, bx[3] * scale - off - sh);
        if !half {
            // Malformed regions become 1x1.
            rw = rw.max(F::one());
            rh = rh.max(F::one());
        }
        let (bh, bw) = (rh / c(ph as f64), rw / c(pw as f64));
        // sampling_ratio 0: adaptive, ceil(bin size) samples per bin side.
        let grid = |size: F| -> usize {
            if r.sampling_ratio > 0 {
                r.sampling_ratio as usize
            } else {
                size.ceil()
                    .to_f64()
                    .map_or(0, |v| v.clamp(0.0, u32::MAX as f64) as usize)
            }
        };
        RoiGeom {
            sw,
            sh,
            bw,
            bh,
            gw: grid(bw),
            gh: grid(bh),
        }
    }
}

fn roi_typed<T: Real>(
    r: &RoiAlign,
    x: &TensorRef,
    rois: &TensorRef,
    batch: &[i64],
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    if x.rank() != 4 || rois.rank() != 2 {
        return Err(KernelError::Value(format!(
            "roi_align needs a 4-D input and 2-D rois, got {:?} and {:?}",
            x.dims, rois.dims
        )));
    }
    let xs = x.slice::<T>()?;
    let boxes: Vec<T::C> = rois
        .to_f64s()?
        .into_iter()
        .map(<T::C as Comp>::from_f64c)
        .collect();
    let (n, c, h, w) = (x.dims[0], x.dims[1], x.dims[2], x.dims[3]);
    let nr = rois.dims[0];
    let (ph, pw) = (
        r.output_height.max(0) as usize,
        r.output_width.max(0) as usize,
    );
    if rois.dims[1] != 4 || batch.len() != nr {
        return Err(KernelError::Value(format!(
            "rois {:?} and batch_indices [{}] do not match",
            rois.dims,
            batch.len()
        )));
    }
    if let Some(b) = batch.iter().find(|&&b| b < 0 || b as usize >= n) {
        return Err(KernelError::Value(format!(
            "batch index {b} out of range for batch {n}"
        )));
    }
    if nr * c * ph * pw == 0 {
        return Ok(());
    }
    if h == 0 || w == 0 {
        return Err(KernelError::Value(
            "roi_align of an empty feature map".into(),
        ));
    }
    let half = r.coordinate_transformation_mode == RoiCoordMode::HalfPixel;
    let bin = ph * pw;
    let geoms: Vec<RoiGeom<T::C>> = boxes
        .chunks_exact(4)
        .map(|bx| RoiGeom::new(r, half, bx, ph, pw))
        .collect();
    if let Some(g) = geoms
        .iter()
        .find(|g| g.gh.saturating_mul(g.gw).saturating_mul(bin) > MAX_SAMPLES)
    {
        return Err(KernelError::Value(format!(
            "roi_align would take {}x{} samples per bin",
            g.gh, g.gw
        )));
    }
    let y = out.slice::<T>()?;
    let cf = |v: usize| <T::C as Comp>::from_f64c(v as f64);
    let half_step = <T::C as Comp>::from_f64c(0.5);
    par_rows(y, c * bin, |ri, block| {
        let g = &geoms[ri];
        let (gh, gw) = (g.gh, g.gw);
        let count = (gh * gw).max(1) as f64;
        let mut taps = Vec::with_capacity(bin * gh * gw);
        for py in 0..ph {
            for px in 0..pw {
                for iy in 0..gh {
                    let yy = g.sh + cf(py) * g.bh + (cf(iy) + half_step) * g.bh / cf(gh);
                    for ix in 0..gw {
                        let xx = g.sw + cf(px) * g.bw + (cf(ix) + half_step) * g.bw / cf(gw);
                        taps.push(roi_taps(h, w, yy, xx));
                    }
                }
            }
        }
        let b = batch[ri] as usize;
        for ch in 0..c {
            let plane = &xs[(b * c + ch) * h * w..(b * c + ch + 1) * h * w];
            for (k, o) in block[ch * bin..(ch + 1) * bin].iter_mut().enumerate() {
                let samples = &taps[k * gh * gw..(k + 1) * gh * gw];
                let v = match r.mode {
                    RoiAlignMode::Avg => {
                        samples
                            .iter()
                            .map(|t| t.iter().map(|&(i, wt)| wt * plane[i].to_f64()).sum::<f64>())
                            .sum::<f64>()
                            / count
                    }
                    // The max over samples of the largest weighted corner.
                    RoiAlignMode::Max => samples
                        .iter()
                        .map(|t| {
                            t.iter()
                                .map(|&(i, wt)| wt * plane[i].to_f64())
                                .fold(f64::NEG_INFINITY, f64::max)
                        })
                        .reduce(f64::max)
                        .unwrap_or(0.0),
                };
                *o = T::from_f64(v);
            }
        }
    });
    Ok(())
}

fn roi_align(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::RoiAlign(r) = op else {
        return Err(KernelError::Internal("not roi_align".into()));
    };
    let batch = ins[2].to_i64s()?;
    with_dtype!(ins[0].dtype, T => roi_typed::<T>(r, &ins[0], &ins[1], &batch, &mut outs[0]), float)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gs(mode: GridMode, padding_mode: GridPadding, align_corners: bool) -> GridSample {
        GridSample {
            align_corners,
            mode,
            padding_mode,
        }
    }

    #[test]
    fn reflection_bounces_between_borders() {
        assert_eq!(reflect(-0.75, -0.5, 2.5), -0.25);
        assert_eq!(reflect(3.0, -0.5, 2.5), 2.0);
        // Past both borders: 6.5 bounces off 2.5 to -1.5, then off -0.5 to 0.5.
        assert_eq!(reflect(6.5, -0.5, 2.5), 0.5);
    }

    #[test]
    fn keys_weights_sum_to_one() {
        for t in [0.0, 0.25, 0.5, 0.9] {
            let s: f64 = cubic4(t).iter().sum();
            assert!((s - 1.0).abs() < 1e-12);
        }
        assert_eq!(cubic4(0.0), [0.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn linear_taps_and_padding() {
        let ax = Axis {
            len: 3,
            lo: -0.5,
            hi: 2.5,
        };
        let zeros = gs(GridMode::Linear, GridPadding::Zeros, false);
        assert_eq!(
            grid_taps(&zeros, &ax, -0.25),
            vec![(None, 0.25), (Some(0), 0.75)]
        );
        let border = gs(GridMode::Linear, GridPadding::Border, false);
        // Inside the borders; the left tap clamps onto index 0.
        assert_eq!(
            grid_taps(&border, &ax, -0.25),
            vec![(Some(0), 0.25), (Some(0), 0.75)]
        );
        // Outside: clamped to 0 first.
        assert_eq!(
            grid_taps(&border, &ax, -2.0),
            vec![(Some(0), 1.0), (Some(1), 0.0)]
        );
        let nearest = gs(GridMode::Nearest, GridPadding::Zeros, false);
        // 1.5 rounds to even 2; 0.5 to 0.
        assert_eq!(grid_taps(&nearest, &ax, 1.5), vec![(Some(2), 1.0)]);
        assert_eq!(grid_taps(&nearest, &ax, 0.5), vec![(Some(0), 1.0)]);
    }

    #[test]
    fn roi_bilinear_taps() {
        // (y, x) = (0.5, 1.25) on a 2x3 map: rows 0/1 half each, columns 1/2.
        let t = roi_taps(2, 3, 0.5f64, 1.25);
        assert_eq!(t, [(1, 0.375), (2, 0.125), (4, 0.375), (5, 0.125)]);
        // Outside by more than one pixel: no contribution.
        assert!(roi_taps(2, 3, -1.5f64, 0.0).iter().all(|&(_, w)| w == 0.0));
    }
}
