//! Resampling: Resize, GridSample, AffineGrid, RoiAlign and NonMaxSuppression.

use super::{norm_axes, value_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, op_attrs};

attr_enum! {
    pub enum ResizeMode { Nearest = "nearest", Linear = "linear", Cubic = "cubic" }
}

attr_enum! {
    pub enum CoordMode {
        HalfPixel = "half_pixel", HalfPixelSymmetric = "half_pixel_symmetric",
        PytorchHalfPixel = "pytorch_half_pixel", AlignCorners = "align_corners",
        Asymmetric = "asymmetric", TfCropAndResize = "tf_crop_and_resize",
    }
}

attr_enum! {
    pub enum NearestMode { RoundPreferFloor = "round_prefer_floor", RoundPreferCeil = "round_prefer_ceil", Floor = "floor", Ceil = "ceil" }
}

attr_enum! {
    pub enum AspectPolicy { Stretch = "stretch", NotLarger = "not_larger", NotSmaller = "not_smaller" }
}

attr_enum! {
    /// Whether input 2 holds scale factors or output sizes.
    pub enum ResizeTarget { Scales = "scales", Sizes = "sizes" }
}

op_attrs! {
    /// Resize; inputs `x`, `roi` (may be empty), and scales or sizes for `axes`
    /// (all axes when empty).
    pub struct Resize {
        pub mode: ResizeMode,
        pub coordinate_transformation_mode: CoordMode,
        pub nearest_mode: NearestMode,
        pub cubic_coeff_a: f32,
        pub exclude_outside: bool,
        pub extrapolation_value: f32,
        pub antialias: bool,
        pub axes: Vec<i64>,
        pub keep_aspect_ratio_policy: AspectPolicy,
        pub target: ResizeTarget,
    }
}

impl Resize {
    /// Concrete output sizes and per-axis scales (for all axes) from the target values.
    pub fn resolve(
        &self,
        input: &[i64],
        scales: Option<&[f64]>,
        sizes: Option<&[i64]>,
        roi: &[f64],
    ) -> Result<(Vec<i64>, Vec<f64>), InferError> {
        let rank = input.len();
        let axes = if self.axes.is_empty() {
            (0..rank).collect()
        } else {
            norm_axes(&self.axes, rank)?
        };
        let mut out = input.to_vec();
        let mut sc = vec![1.0f64; rank];
        match self.target {
            ResizeTarget::Scales => {
                let s = scales.ok_or(InferError::NotConstant { port: 2 })?;
                if s.len() != axes.len() {
                    return Err(value_err(
                        2,
                        format!("{} scales for {} axes", s.len(), axes.len()),
                    ));
                }
                for (i, &a) in axes.iter().enumerate() {
                    if s[i] <= 0.0 {
                        return Err(value_err(2, "scales must be positive"));
                    }
                    sc[a] = s[i];
                    let extent = if self.coordinate_transformation_mode
                        == CoordMode::TfCropAndResize
                        && roi.len() == 2 * axes.len()
                    {
                        roi[i + axes.len()] - roi[i]
                    } else {
                        1.0
                    };
                    out[a] = (input[a] as f64 * extent * s[i]).floor() as i64;
                }
            }
            ResizeTarget::Sizes => {
                let z = sizes.ok_or(InferError::NotConstant { port: 2 })?;
                if z.len() != axes.len() {
                    return Err(value_err(
                        2,
                        format!("{} sizes for {} axes", z.len(), axes.len()),
                    ));
                }
                let ratios: Vec<f64> = axes
                    .iter()
                    .enumerate()
                    .map(|(i, &a)| z[i] as f64 / input[a] as f64)
                    .collect();
                let fixed = match self.keep_aspect_ratio_policy {
                    AspectPolicy::Stretch => None,
                    AspectPolicy::NotLarger => ratios.iter().copied().reduce(f64::min),
                    AspectPolicy::NotSmaller => ratios.iter().copied().reduce(f64::max),
                };
                for (i, &a) in axes.iter().enumerate() {
                    match fixed {
                        None => {
                            out[a] = z[i];
                            sc[a] = ratios[i];
                        }
                        Some(r) => {
                            out[a] = (r * input[a] as f64 + 0.5).floor() as i64;
                            sc[a] = r;
                        }
                    }
                }
            }
        }
        Ok((out, sc))
    }
}

impl OpDef for Resize {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1, 2]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        let d = cx.dtype(0);
        let axes = if self.axes.is_empty() {
            (0..x.rank()).collect()
        } else {
            norm_axes(&self.axes, x.rank())?
        };
        let roi = cx.value(1).and_then(|v| v.as_f64s()).unwrap_or_default();
        let out = match (self.target, x.as_known()) {
            (ResizeTarget::Scales, Some(dims)) => match cx.value(2).and_then(|v| v.as_f64s()) {
                Some(s) => Some(
                    self.resolve(
                        &dims.iter().map(|&v| v as i64).collect::<Vec<_>>(),
                        Some(&s),
                        None,
                        &roi,
                    )?
                    .0,
                ),
                None => None,
            },
            (ResizeTarget::Sizes, Some(dims)) => match cx.ints(2) {
                Some(z) => Some(
                    self.resolve(
                        &dims.iter().map(|&v| v as i64).collect::<Vec<_>>(),
                        None,
                        Some(&z),
                        &roi,
                    )?
                    .0,
                ),
                None => None,
            },
            _ => None,
        };
        let shape = match out {
            Some(o) => Shape(o.into_iter().map(Dim::Known).collect()),
            None => {
                // Symbolic input: integral scales and stretch sizes stay exact.
                let mut s = x.clone();
                let scales = cx.value(2).and_then(|v| v.as_f64s());
                let sizes = if self.target == ResizeTarget::Sizes {
                    cx.dims_value(2)
                } else {
                    None
                };
                for (i, &a) in axes.iter().enumerate() {
                    s.0[a] = match (&scales, &sizes) {
                        (Some(sc), _)
                            if sc.len() == axes.len()
                                && sc[i].fract() == 0.0
                                && self.coordinate_transformation_mode
                                    != CoordMode::TfCropAndResize =>
                        {
                            x.0[a].mul(&Dim::Known(sc[i] as i64))
                        }
                        (_, Some(z))
                            if z.len() == axes.len()
                                && self.keep_aspect_ratio_policy == AspectPolicy::Stretch =>
                        {
                            z[i].clone()
                        }
                        _ => cx.fresh(0, a),
                    };
                }
                s
            }
        };
        Ok(vec![TensorType::new(d, shape)])
    }
}

attr_enum! {
    pub enum GridMode { Linear = "linear", Nearest = "nearest", Cubic = "cubic" }
}

attr_enum! {
    pub enum GridPadding { Zeros = "zeros", Border = "border", Reflection = "reflection" }
}

op_attrs! {
    /// Samples `x [N,C,*]` at the normalized coordinates of `grid [N,*out,r]`.
    pub struct GridSample {
        pub align_corners: bool,
        pub mode: GridMode,
        pub padding_mode: GridPadding,
    }
}

impl OpDef for GridSample {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let (x, g) = (cx.shape(0), cx.shape(1));
        cx.expect_min_rank(0, 3)?;
        cx.expect_rank(1, x.rank())?;
        let mut s = vec![x.0[0].clone(), x.0[1].clone()];
        s.extend(g.0[1..g.rank() - 1].iter().cloned());
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

op_attrs! {
    /// Sampling grid of affine transforms `theta [N,2,3]` or `[N,3,4]` for the size in input 1.
    pub struct AffineGrid {
        pub align_corners: bool,
    }
}

impl OpDef for AffineGrid {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_rank(0, 3)?;
        let n = cx
            .shape(1)
            .0
            .first()
            .and_then(Dim::known)
            .ok_or(InferError::NotConstant { port: 1 })? as usize;
        if n != 4 && n != 5 {
            return Err(value_err(1, "size must be [N,C,H,W] or [N,C,D,H,W]"));
        }
        let s = match cx.dims_value(1) {
            Some(v) if v.len() == n => {
                let mut s = vec![v[0].clone()];
                s.extend(v[2..].iter().cloned());
                s.push(Dim::Known(n as i64 - 2));
                s
            }
            _ => {
                let mut s: Vec<Dim> = (0..n - 1).map(|a| cx.fresh(0, a)).collect();
                s.push(Dim::Known(n as i64 - 2));
                s
            }
        };
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

attr_enum! {
    pub enum RoiAlignMode { Avg = "avg", Max = "max" }
}

attr_enum! {
    pub enum RoiCoordMode { HalfPixel = "half_pixel", OutputHalfPixel = "output_half_pixel" }
}

op_attrs! {
    /// Region-of-interest align; inputs `x [N,C,H,W]`, `rois [R,4]`, `batch_indices [R]`.
    pub struct RoiAlign {
        pub mode: RoiAlignMode,
        pub output_height: i64,
        pub output_width: i64,
        pub sampling_ratio: i64,
        pub spatial_scale: f32,
        pub coordinate_transformation_mode: RoiCoordMode,
    }
}

impl OpDef for RoiAlign {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_rank(0, 4)?;
        cx.expect_rank(1, 2)?;
        let s = vec![
            cx.shape(1).0[0].clone(),
            cx.shape(0).0[1].clone(),
            Dim::Known(self.output_height),
            Dim::Known(self.output_width),
        ];
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

op_attrs! {
    /// Selected box indices `[M, 3]` (batch, class, box); inputs `boxes`, `scores`,
    /// optional `max_output_boxes_per_class`, `iou_threshold`, `score_threshold`.
    pub struct NonMaxSuppression {
        pub center_point_box: bool,
    }
}

impl OpDef for NonMaxSuppression {
    fn arity(&self) -> (usize, usize) {
        (2, 5)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_rank(0, 3)?;
        cx.expect_rank(1, 3)?;
        Ok(vec![TensorType::new(
            DType::I64,
            Shape(vec![cx.fresh(0, 0), Dim::Known(3)]),
        )])
    }
}
