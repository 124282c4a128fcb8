//! Resize: nearest, (antialiased) linear and cubic resampling, one axis at a
//! time, with every ONNX coordinate transformation mode. Each resized axis
//! is one pass over the data with the axis's taps (rlx-ir's `axis_taps`):
//! a gather where every position takes one source element (nearest, or
//! linear at integral coordinates), in the data's own type whatever it is;
//! a weighted sum in f32 for f32 data; the f64 reference path (integers
//! round half to even) for the rest.

use rlx_ir::ops::resize_taps::{axis_taps, AxisPlan, Taps};
use rlx_ir::ops::{CoordMode, ResizeTarget};
use rlx_ir::{DType, Op};

use super::layout::par_rows;
use super::num::AnyNum;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Resize(_) => Ok(fn_kernel(spec, resize)),
        op => Err(KernelError::Internal(format!(
            "{} is not a resize",
            op.name()
        ))),
    }
}

/// Resamples `src` (dims `dims`) along `axis` into `taps.len()` positions.
fn apply_axis(src: &[f64], dims: &[usize], axis: usize, taps: &[Taps], fill: f64) -> Vec<f64> {
    let inner: usize = dims[axis + 1..].iter().product();
    let (n_in, n_out) = (dims[axis], taps.len());
    let outer: usize = dims[..axis].iter().product();
    let mut dst = vec![0f64; outer * n_out * inner];
    par_rows(&mut dst, inner, |row, out| {
        let (o, y) = (row / n_out, row % n_out);
        match &taps[y] {
            Taps::Extrapolate => out.fill(fill),
            Taps::Mix(ws) => {
                let base = o * n_in * inner;
                for (j, v) in out.iter_mut().enumerate() {
                    *v = ws.iter().map(|&(i, w)| w * src[base + i * inner + j]).sum();
                }
            }
        }
    });
    dst
}

fn store<T: AnyNum>(vals: &[f64], float: bool, out: &mut TensorMut) -> Result<(), KernelError> {
    let y = out.slice::<T>()?;
    for (o, &v) in y.iter_mut().zip(vals) {
        // Integers round half to even and saturate, as the ONNX reference casts.
        *o = T::of_f64(if float { v } else { v.round_ties_even() });
    }
    Ok(())
}

fn resize(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Resize(r) = op else {
        return Err(KernelError::Internal("not a resize".into()));
    };
    let x = &ins[0];
    let rank = x.rank();
    let input: Vec<i64> = x.dims.iter().map(|&d| d as i64).collect();
    let roi = ins[1].to_f64s()?;
    let (scales, sizes) = match r.target {
        ResizeTarget::Scales => (Some(ins[2].to_f64s()?), None),
        ResizeTarget::Sizes => (None, Some(ins[2].to_i64s()?)),
    };
    let (out, sc) = r
        .resolve(&input, scales.as_deref(), sizes.as_deref(), &roi)
        .map_err(|e| KernelError::Value(e.to_string()))?;
    if out.len() != outs[0].dims.len() || out.iter().zip(outs[0].dims).any(|(&a, &b)| a != b as i64)
    {
        return Err(KernelError::Value(format!(
            "resize computes output {out:?} where the plan has {:?}",
            outs[0].dims
        )));
    }
    let axes: Vec<usize> = if r.axes.is_empty() {
        (0..rank).collect()
    } else {
        r.axes
            .iter()
            .map(|&a| (if a < 0 { a + rank as i64 } else { a }) as usize)
            .collect()
    };
    let mut rois = vec![(0.0, 1.0); rank];
    if r.coordinate_transformation_mode == CoordMode::TfCropAndResize {
        if roi.len() != 2 * axes.len() {
            return Err(KernelError::Value(format!(
                "tf_crop_and_resize needs {} roi values, got {}",
                2 * axes.len(),
                roi.len()
            )));
        }
        for (i, &a) in axes.iter().enumerate() {
            rois[a] = (roi[i], roi[i + axes.len()]);
        }
    }
    let mut passes = Vec::new();
    let mut sorted = axes.clone();
    sorted.sort_unstable();
    for a in sorted {
        let p = AxisPlan {
            input: x.dims[a],
            output: out[a] as usize,
            scale: sc[a],
            roi: rois[a],
        };
        let identity = (p.scale - 1.0).abs() <= 1e-9 && p.output == p.input && p.roi == (0.0, 1.0);
        if identity {
            continue;
        }
        if p.input == 0 && p.output > 0 {
            return Err(KernelError::Value(
                "resize of an empty axis to a non-empty one".into(),
            ));
        }
        passes.push((a, axis_taps(r, &p).map_err(KernelError::Value)?));
    }
    let fill = r.extrapolation_value as f64;
    let gathers: Option<Vec<Vec<usize>>> = passes.iter().map(|(_, t)| gather_index(t)).collect();
    // Nearest neighbours over the last two axes (an upsampling of images):
    // one pass over the output, whatever the element type (f32 included:
    // a weight of exactly 1 copies the value).
    let rank = x.dims.len();
    if let (Some([hi, wi]), 4, [(h, _), (w, _)]) =
        (gathers.as_deref(), x.dtype.size(), passes.as_slice())
    {
        if rank >= 2 && *h == rank - 2 && *w == rank - 1 {
            gather_2d(x.slice::<u32>()?, x.dims, hi, wi, outs[0].slice::<u32>()?);
            return Ok(());
        }
    }
    match (x.dtype, gathers) {
        (DType::F32, _) => {
            let fill = fill as f32;
            run_passes(
                x.slice::<f32>()?,
                x.dims,
                &passes,
                outs[0].slice::<f32>()?,
                |src, dims, a, taps, dst| mix_axis(src, dims, a, taps, fill, dst),
            );
            Ok(())
        }
        (DType::Bool, _) => Err(KernelError::DType(DType::Bool)),
        (d, Some(index)) => {
            let by_index: Vec<(usize, Vec<usize>)> =
                passes.iter().map(|(a, _)| *a).zip(index).collect();
            match d.size() {
                1 => run_passes(
                    x.slice::<u8>()?,
                    x.dims,
                    &by_index,
                    outs[0].slice::<u8>()?,
                    gather_axis::<u8>,
                ),
                2 => run_passes(
                    x.slice::<u16>()?,
                    x.dims,
                    &by_index,
                    outs[0].slice::<u16>()?,
                    gather_axis::<u16>,
                ),
                4 => run_passes(
                    x.slice::<u32>()?,
                    x.dims,
                    &by_index,
                    outs[0].slice::<u32>()?,
                    gather_axis::<u32>,
                ),
                8 => run_passes(
                    x.slice::<u64>()?,
                    x.dims,
                    &by_index,
                    outs[0].slice::<u64>()?,
                    gather_axis::<u64>,
                ),
                _ => return reference(x, &passes, fill, &mut outs[0]),
            }
            Ok(())
        }
        (_, None) => reference(x, &passes, fill, &mut outs[0]),
    }
}

/// The f64 path: each pass in f64, then stored in the data's type.
fn reference(
    x: &TensorRef,
    passes: &[(usize, Vec<Taps>)],
    fill: f64,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let mut dims = x.dims.to_vec();
    let mut data = x.to_f64s()?;
    for (a, taps) in passes {
        data = apply_axis(&data, &dims, *a, taps, fill);
        dims[*a] = taps.len();
    }
    let float = x.dtype.is_float();
    with_dtype!(x.dtype, T => store::<T>(&data, float, out), num)
}

/// The source position of each output position, if every one takes exactly
/// one source element (no extrapolation).
fn gather_index(taps: &[Taps]) -> Option<Vec<usize>> {
    taps.iter()
        .map(|t| match t {
            Taps::Mix(ws) if ws.len() == 1 && ws[0].1 == 1.0 => Some(ws[0].0),
            _ => None,
        })
        .collect()
}

/// Runs one pass per resized axis from `x` (dims `dims`) into `out`: the
/// last pass writes `out`, earlier ones a buffer each.
fn run_passes<T: Copy + Default, E>(
    x: &[T],
    dims: &[usize],
    passes: &[(usize, Vec<E>)],
    out: &mut [T],
    pass: impl Fn(&[T], &[usize], usize, &[E], &mut [T]),
) {
    let Some(((last_axis, last), rest)) = passes.split_last() else {
        out.copy_from_slice(x);
        return;
    };
    let mut dims = dims.to_vec();
    let mut buf: Option<Vec<T>> = None;
    for (a, p) in rest {
        let mut next_dims = dims.clone();
        next_dims[*a] = p.len();
        let mut next = vec![T::default(); next_dims.iter().product()];
        pass(
            buf.as_deref().unwrap_or(x),
            &dims,
            *a,
            p.as_slice(),
            &mut next,
        );
        buf = Some(next);
        dims = next_dims;
    }
    pass(
        buf.as_deref().unwrap_or(x),
        &dims,
        *last_axis,
        last.as_slice(),
        out,
    );
}

/// Resamples f32 `src` (dims `dims`) along `axis` into `dst` with `taps`.
fn mix_axis(src: &[f32], dims: &[usize], axis: usize, taps: &[Taps], fill: f32, dst: &mut [f32]) {
    let inner: usize = dims[axis + 1..].iter().product();
    let (n_in, n_out) = (dims[axis], taps.len());
    if inner == 1 {
        // The last axis: a row of the output per row of the input.
        par_rows(dst, n_out, |o, out| {
            let row = &src[o * n_in..(o + 1) * n_in];
            for (v, t) in out.iter_mut().zip(taps) {
                *v = match t {
                    Taps::Extrapolate => fill,
                    Taps::Mix(ws) => ws.iter().map(|&(i, w)| w as f32 * row[i]).sum(),
                };
            }
        });
        return;
    }
    par_rows(dst, inner, |row, out| {
        let (o, y) = (row / n_out, row % n_out);
        let at = |i: usize| &src[(o * n_in + i) * inner..(o * n_in + i + 1) * inner];
        match &taps[y] {
            Taps::Extrapolate => out.fill(fill),
            Taps::Mix(ws) => match ws.as_slice() {
                [(i, w)] if *w == 1.0 => out.copy_from_slice(at(*i)),
                _ => {
                    out.fill(0.0);
                    for &(i, w) in ws {
                        let w = w as f32;
                        for (d, &v) in out.iter_mut().zip(at(i)) {
                            *d += w * v;
                        }
                    }
                }
            },
        }
    });
}

/// Nearest-neighbour resampling of the last two axes of `src` (dims
/// `dims`): output row `y` of a plane is source row `rows[y]` gathered
/// through `cols`. A row that repeats the one before is copied from it, and
/// an integer upsampling of the columns writes each source value that many
/// times, both vectorizable.
fn gather_2d<T: Copy + Send + Sync>(
    src: &[T],
    dims: &[usize],
    rows: &[usize],
    cols: &[usize],
    dst: &mut [T],
) {
    let r = dims.len();
    let (ih, iw) = (dims[r - 2], dims[r - 1]);
    let (oh, ow) = (rows.len(), cols.len());
    let repeat = (iw > 0 && ow % iw == 0)
        .then_some(ow / iw)
        .filter(|&k| cols.iter().enumerate().all(|(j, &i)| i == j / k));
    par_rows(dst, oh * ow, |p, plane| {
        let sp = &src[p * ih * iw..(p + 1) * ih * iw];
        for y in 0..oh {
            let sy = rows[y];
            if y > 0 && rows[y - 1] == sy {
                plane.copy_within((y - 1) * ow..y * ow, y * ow);
                continue;
            }
            let line = &sp[sy * iw..(sy + 1) * iw];
            let out = &mut plane[y * ow..(y + 1) * ow];
            match repeat {
                Some(2) => {
                    for (o, &v) in out.chunks_exact_mut(2).zip(line) {
                        o[0] = v;
                        o[1] = v;
                    }
                }
                Some(k) => {
                    for (o, &v) in out.chunks_exact_mut(k).zip(line) {
                        o.fill(v);
                    }
                }
                None => {
                    for (o, &i) in out.iter_mut().zip(cols) {
                        *o = line[i];
                    }
                }
            }
        }
    });
}

/// Gathers `src` (dims `dims`) along `axis` into `dst`: output position `y`
/// takes source position `index[y]`.
fn gather_axis<T: Copy + Send + Sync>(
    src: &[T],
    dims: &[usize],
    axis: usize,
    index: &[usize],
    dst: &mut [T],
) {
    let inner: usize = dims[axis + 1..].iter().product();
    let (n_in, n_out) = (dims[axis], index.len());
    if inner == 1 {
        par_rows(dst, n_out, |o, out| {
            let row = &src[o * n_in..(o + 1) * n_in];
            for (v, &i) in out.iter_mut().zip(index) {
                *v = row[i];
            }
        });
        return;
    }
    par_rows(dst, inner, |row, out| {
        let (o, i) = (row / n_out, index[row % n_out]);
        out.copy_from_slice(&src[(o * n_in + i) * inner..(o * n_in + i + 1) * inner]);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::ops::{AspectPolicy, NearestMode, Resize, ResizeMode};

    fn op(mode: ResizeMode, ctm: CoordMode) -> Resize {
        Resize {
            mode,
            coordinate_transformation_mode: ctm,
            nearest_mode: NearestMode::RoundPreferFloor,
            cubic_coeff_a: -0.75,
            exclude_outside: false,
            extrapolation_value: 0.0,
            antialias: false,
            axes: Vec::new(),
            keep_aspect_ratio_policy: AspectPolicy::Stretch,
            target: ResizeTarget::Scales,
        }
    }

    fn run1(r: &Resize, x: &[f64], out: usize, scale: f64) -> Vec<f64> {
        let p = AxisPlan {
            input: x.len(),
            output: out,
            scale,
            roi: (0.0, 1.0),
        };
        let taps = axis_taps(r, &p).unwrap();
        apply_axis(x, &[x.len()], 0, &taps, 0.0)
    }

    /// The f32 and gather passes against the f64 one, along each axis of a
    /// [3, 5, 4] tensor, down and up, in every mode.
    #[test]
    fn fast_passes_match_the_reference() {
        let dims = [3usize, 5, 4];
        let x: Vec<f64> = (0..60).map(|i| ((i * 37) % 23) as f64 - 11.0).collect();
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let xi: Vec<u32> = (0..60).collect();
        for mode in [ResizeMode::Nearest, ResizeMode::Linear, ResizeMode::Cubic] {
            let r = op(mode, CoordMode::HalfPixel);
            for axis in 0..3 {
                for (out, scale) in [
                    (7usize, 7.0 / dims[axis] as f64),
                    (2, 2.0 / dims[axis] as f64),
                ] {
                    let p = AxisPlan {
                        input: dims[axis],
                        output: out,
                        scale,
                        roi: (0.0, 1.0),
                    };
                    let taps = axis_taps(&r, &p).unwrap();
                    let want = apply_axis(&x, &dims, axis, &taps, 0.0);
                    let mut got = vec![0f32; want.len()];
                    mix_axis(&x32, &dims, axis, &taps, 0.0, &mut got);
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            (f64::from(*g) - w).abs() <= 1e-5 * w.abs().max(1.0),
                            "{mode:?} axis {axis}"
                        );
                    }
                    if let Some(index) = gather_index(&taps) {
                        let want = apply_axis(
                            &xi.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
                            &dims,
                            axis,
                            &taps,
                            0.0,
                        );
                        let mut got = vec![0u32; want.len()];
                        gather_axis(&xi, &dims, axis, &index, &mut got);
                        assert!(got.iter().zip(&want).all(|(&g, &w)| f64::from(g) == w));
                    } else {
                        assert_ne!(mode, ResizeMode::Nearest, "nearest taps are a gather");
                    }
                }
            }
        }
    }

    #[test]
    fn linear_half_pixel_upsample() {
        // x_ori = (y + 0.5) / 2 - 0.5: -0.25, 0.25, 0.75, 1.25 (edges clamp).
        let r = op(ResizeMode::Linear, CoordMode::HalfPixel);
        let y = run1(&r, &[1.0, 3.0], 4, 2.0);
        assert_eq!(y, vec![1.0, 1.5, 2.5, 3.0]);
    }

    #[test]
    fn nearest_modes_pick_neighbours() {
        // asymmetric, scale 0.6: x_ori = 0, 1.666..; round -> 2, floor -> 1.
        let mut r = op(ResizeMode::Nearest, CoordMode::Asymmetric);
        assert_eq!(run1(&r, &[1.0, 2.0, 3.0, 4.0], 2, 0.6), vec![1.0, 3.0]);
        r.nearest_mode = NearestMode::Floor;
        assert_eq!(run1(&r, &[1.0, 2.0, 3.0, 4.0], 2, 0.6), vec![1.0, 2.0]);
    }

    #[test]
    fn cubic_at_integer_is_exact_and_midpoint_uses_keys() {
        let r = op(ResizeMode::Cubic, CoordMode::Asymmetric);
        // x_ori = 0, 0.5, 1, 1.5 over [0, 1, 8, 27]; at 1.5 the taps 0..3
        // weigh (-0.09375, 0.59375, 0.59375, -0.09375) with a = -0.75.
        let y = run1(&r, &[0.0, 1.0, 8.0, 27.0], 8, 2.0);
        assert_eq!(y[0], 0.0);
        assert_eq!(y[2], 1.0);
        let want = -0.09375 * 0.0 + 0.59375 * 1.0 + 0.59375 * 8.0 - 0.09375 * 27.0;
        assert!((y[3] - want).abs() < 1e-12);
    }

    #[test]
    fn antialias_linear_widens_the_filter() {
        // scale 0.5: triangle of half-width 2 centred at x_ori = 0.5 (half
        // pixel, y = 0); taps -1..2 weigh 0.25, 0.75, 0.75, 0.25 (normalized).
        let mut r = op(ResizeMode::Linear, CoordMode::HalfPixel);
        r.antialias = true;
        let y = run1(&r, &[2.0, 4.0, 6.0, 8.0], 2, 0.5);
        let want = (0.25 * 2.0 + 0.75 * 2.0 + 0.75 * 4.0 + 0.25 * 6.0) / 2.0;
        assert!((y[0] - want).abs() < 1e-12, "{y:?}");
    }

    #[test]
    fn pytorch_half_pixel_single_output() {
        let r = op(ResizeMode::Linear, CoordMode::PytorchHalfPixel);
        // Target length 1.5 (> 1): x_ori = (0 + 0.5) / 0.5 - 0.5 = 0.5.
        assert_eq!(run1(&r, &[2.0, 4.0, 8.0], 1, 0.5), vec![3.0]);
        // Target length exactly 1: x_ori = 0.
        assert_eq!(run1(&r, &[2.0, 4.0, 8.0], 1, 1.0 / 3.0), vec![2.0]);
    }

    /// The fused nearest pass over the last two axes against one gather
    /// per axis: integer upsampling (2 and 3), a fractional one and a
    /// downsampling, repeated and skipped rows.
    #[test]
    fn nearest_2d_matches_one_gather_per_axis() {
        let dims = [2, 3, 4, 5];
        let src: Vec<u32> = (0..dims.iter().product::<usize>() as u32).collect();
        let cases: [(Vec<usize>, Vec<usize>); 3] = [
            (
                (0..8).map(|y| y / 2).collect(),
                (0..10).map(|x| x / 2).collect(),
            ),
            (vec![0, 0, 0, 1, 1, 1, 3], (0..15).map(|x| x / 3).collect()),
            (vec![3, 1], vec![0, 2, 2, 4, 1, 3, 0]),
        ];
        for (rows, cols) in cases {
            let mut mid = vec![0u32; 2 * 3 * rows.len() * 5];
            gather_axis(&src, &dims, 2, &rows, &mut mid);
            let mut want = vec![0u32; 2 * 3 * rows.len() * cols.len()];
            gather_axis(&mid, &[2, 3, rows.len(), 5], 3, &cols, &mut want);
            let mut got = vec![0u32; want.len()];
            gather_2d(&src, &dims, &rows, &cols, &mut got);
            assert_eq!(got, want, "rows {rows:?} cols {cols:?}");
        }
    }

    #[test]
    fn crop_and_resize_extrapolates() {
        let r = op(ResizeMode::Linear, CoordMode::TfCropAndResize);
        let p = AxisPlan {
            input: 3,
            output: 3,
            scale: 1.0,
            roi: (0.5, 1.5),
        };
        // x_ori = 1, 2, 3 (out of range).
        let taps = axis_taps(&r, &p).unwrap();
        let y = apply_axis(&[10.0, 20.0, 30.0], &[3], 0, &taps, -1.0);
        assert_eq!(y, vec![20.0, 30.0, -1.0]);
    }
}
