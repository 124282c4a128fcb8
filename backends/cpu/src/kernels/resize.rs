//! Resize: nearest, (antialiased) linear and cubic resampling, one axis at a
//! time in f64, with every ONNX coordinate transformation mode.

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
    let fill = r.extrapolation_value as f64;
    let mut dims = x.dims.to_vec();
    let mut data = x.to_f64s()?;
    let mut sorted = axes.clone();
    sorted.sort_unstable();
    for a in sorted {
        let p = AxisPlan {
            input: dims[a],
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
        let taps = axis_taps(r, &p).map_err(KernelError::Value)?;
        data = apply_axis(&data, &dims, a, &taps, fill);
        dims[a] = p.output;
    }
    let float = x.dtype.is_float();
    match x.dtype {
        DType::Bool => Err(KernelError::DType(DType::Bool)),
        d => with_dtype!(d, T => store::<T>(&data, float, &mut outs[0]), num),
    }
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
