//! Resize (and the older Upsample), GridSample, AffineGrid, RoiAlign and
//! NonMaxSuppression.

use rlx_ir::ops::values::float_tensor;
use rlx_ir::ops::{
    AffineGrid, AspectPolicy, CoordMode, GridMode, GridPadding, GridSample, NearestMode,
    NonMaxSuppression, Resize, ResizeMode, ResizeTarget, RoiAlign, RoiAlignMode, RoiCoordMode,
};
use rlx_ir::{DType, Value};

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("Upsample", 7, upsample);
    r.add("Resize", 10, resize_v10);
    r.add("Resize", 11, resize);
    r.add("GridSample", 16, grid_sample);
    r.add("AffineGrid", 20, affine_grid);
    r.add("RoiAlign", 10, roi_align);
    r.add("NonMaxSuppression", 10, nms);
}

fn empty_roi(cx: &mut NodeCtx) -> Result<Value, MapError> {
    let t = float_tensor(DType::F32, &[0], &[])
        .ok_or_else(|| MapError::Unsupported("empty roi".into()))?;
    Ok(cx.constant(t))
}

fn mode(cx: &mut NodeCtx, allowed: &[&str]) -> Result<ResizeMode, MapError> {
    let m = cx.attr_choice("mode", "nearest", allowed)?;
    Ok(match m.as_str() {
        "linear" | "bilinear" => ResizeMode::Linear,
        "cubic" => ResizeMode::Cubic,
        _ => ResizeMode::Nearest,
    })
}

/// The Upsample/Resize-10 semantics: asymmetric coordinates; nearest takes
/// `nearest` (floor, or ceil on shrinking axes for Resize-10) over `axes`
/// (all when empty).
fn simple_resize(
    cx: &mut NodeCtx,
    x: Value,
    scales: Value,
    mode: ResizeMode,
    nearest: NearestMode,
    axes: Vec<i64>,
) -> Result<Value, MapError> {
    let roi = empty_roi(cx)?;
    let op = Resize {
        mode,
        coordinate_transformation_mode: CoordMode::Asymmetric,
        nearest_mode: nearest,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
        antialias: false,
        axes,
        keep_aspect_ratio_policy: AspectPolicy::Stretch,
        target: ResizeTarget::Scales,
    };
    cx.add1(op, &[x, roi, scales])
}

/// Constant f32 scales.
fn scales_const(cx: &mut NodeCtx, s: &[f64]) -> Result<Value, MapError> {
    let t = float_tensor(DType::F32, &[s.len()], s)
        .ok_or_else(|| MapError::Unsupported("scales".into()))?;
    Ok(cx.constant(t))
}

/// Resize-10 nearest, as onnxruntime and the opset-10 ONNX tests define it:
/// asymmetric coordinates rounded up (ceil) on shrinking axes and down
/// (floor) on growing ones. Axes of each kind become one Resize each.
fn nearest_v10(cx: &mut NodeCtx, x: Value, scales: Value) -> Result<Value, MapError> {
    let Some(s) = cx.known(scales).and_then(|k| k.as_f64s()) else {
        return cx
            .unsupported("Resize-10 nearest needs constant scales (rounding depends on them)");
    };
    let pick = |keep: &dyn Fn(f64) -> bool| -> (Vec<i64>, Vec<f64>) {
        s.iter()
            .enumerate()
            .filter(|(_, &v)| keep(v))
            .map(|(i, &v)| (i as i64, v))
            .unzip()
    };
    let (down, down_s) = pick(&|v| v < 1.0);
    let (up, up_s) = pick(&|v| v >= 1.0);
    if down.is_empty() {
        return simple_resize(
            cx,
            x,
            scales,
            ResizeMode::Nearest,
            NearestMode::Floor,
            Vec::new(),
        );
    }
    if up.is_empty() {
        return simple_resize(
            cx,
            x,
            scales,
            ResizeMode::Nearest,
            NearestMode::Ceil,
            Vec::new(),
        );
    }
    let ds = scales_const(cx, &down_s)?;
    let y = simple_resize(cx, x, ds, ResizeMode::Nearest, NearestMode::Ceil, down)?;
    let us = scales_const(cx, &up_s)?;
    simple_resize(cx, y, us, ResizeMode::Nearest, NearestMode::Floor, up)
}

fn upsample(cx: &mut NodeCtx) -> Result<(), MapError> {
    let mode = mode(cx, &["nearest", "linear", "bilinear"])?;
    let x = cx.req(0)?;
    let scales = if cx.opset < 9 {
        let s = cx.attr_floats("scales")?.ok_or_else(|| MapError::Attr {
            name: "scales".into(),
            reason: "is required".into(),
        })?;
        let t = float_tensor(
            DType::F32,
            &[s.len()],
            &s.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        )
        .ok_or_else(|| MapError::Unsupported("scales".into()))?;
        cx.constant(t)
    } else {
        cx.req(1)?
    };
    // Upsample scales are at least 1, so nearest rounds down.
    let y = simple_resize(cx, x, scales, mode, NearestMode::Floor, Vec::new())?;
    cx.set_output(0, y);
    Ok(())
}

fn resize_v10(cx: &mut NodeCtx) -> Result<(), MapError> {
    let mode = mode(cx, &["nearest", "linear"])?;
    let (x, scales) = (cx.req(0)?, cx.req(1)?);
    let y = match mode {
        ResizeMode::Nearest => nearest_v10(cx, x, scales)?,
        _ => simple_resize(cx, x, scales, mode, NearestMode::Floor, Vec::new())?,
    };
    cx.set_output(0, y);
    Ok(())
}

fn resize(cx: &mut NodeCtx) -> Result<(), MapError> {
    let mode = mode(cx, &["nearest", "linear", "cubic"])?;
    let mut coord_modes = vec![
        "half_pixel",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
        "tf_crop_and_resize",
    ];
    if cx.opset >= 19 {
        coord_modes.push("half_pixel_symmetric");
    }
    let ctm = cx.attr_choice("coordinate_transformation_mode", "half_pixel", &coord_modes)?;
    let nm = cx.attr_choice(
        "nearest_mode",
        "round_prefer_floor",
        &["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"],
    )?;
    let cubic_coeff_a = cx.attr_f("cubic_coeff_a", -0.75)?;
    let exclude_outside = cx.attr_bool("exclude_outside", false)?;
    let extrapolation_value = cx.attr_f("extrapolation_value", 0.0)?;
    let antialias = cx.attr_bool("antialias", false)?;
    let axes = cx.attr_ints("axes")?.unwrap_or_default();
    let kar = cx.attr_choice(
        "keep_aspect_ratio_policy",
        "stretch",
        &["stretch", "not_larger", "not_smaller"],
    )?;
    let x = cx.req(0)?;
    let roi = match cx.input(1)? {
        Some(r) => r,
        None => empty_roi(cx)?,
    };
    let scales = cx.input(2)?;
    let sizes = cx.input(3)?;
    let nonempty = |cx: &NodeCtx, v: Value| cx.ty(v).shape.numel().known() != Some(0);
    let (target, t) = match (scales, sizes) {
        (_, Some(s)) if nonempty(cx, s) => (ResizeTarget::Sizes, s),
        (Some(s), _) if nonempty(cx, s) => (ResizeTarget::Scales, s),
        _ => return cx.unsupported("Resize needs non-empty scales or sizes"),
    };
    let op = Resize {
        mode,
        coordinate_transformation_mode: CoordMode::from_name(&ctm).unwrap_or(CoordMode::HalfPixel),
        nearest_mode: NearestMode::from_name(&nm).unwrap_or(NearestMode::RoundPreferFloor),
        cubic_coeff_a,
        exclude_outside,
        extrapolation_value,
        antialias,
        axes,
        keep_aspect_ratio_policy: AspectPolicy::from_name(&kar).unwrap_or(AspectPolicy::Stretch),
        target,
    };
    let y = cx.add1(op, &[x, roi, t])?;
    cx.set_output(0, y);
    Ok(())
}

fn grid_sample(cx: &mut NodeCtx) -> Result<(), MapError> {
    let m = if cx.opset < 20 {
        cx.attr_choice("mode", "bilinear", &["bilinear", "nearest", "bicubic"])?
    } else {
        cx.attr_choice("mode", "linear", &["linear", "nearest", "cubic"])?
    };
    let mode = match m.as_str() {
        "bilinear" | "linear" => GridMode::Linear,
        "bicubic" | "cubic" => GridMode::Cubic,
        _ => GridMode::Nearest,
    };
    let p = cx.attr_choice("padding_mode", "zeros", &["zeros", "border", "reflection"])?;
    let align_corners = cx.attr_bool("align_corners", false)?;
    let (x, g) = (cx.req(0)?, cx.req(1)?);
    let op = GridSample {
        align_corners,
        mode,
        padding_mode: GridPadding::from_name(&p).unwrap_or(GridPadding::Zeros),
    };
    let y = cx.add1(op, &[x, g])?;
    cx.set_output(0, y);
    Ok(())
}

fn affine_grid(cx: &mut NodeCtx) -> Result<(), MapError> {
    let align_corners = cx.attr_bool("align_corners", false)?;
    let (t, s) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(AffineGrid { align_corners }, &[t, s])?;
    cx.set_output(0, y);
    Ok(())
}

fn roi_align(cx: &mut NodeCtx) -> Result<(), MapError> {
    let m = cx.attr_choice("mode", "avg", &["avg", "max"])?;
    let output_height = cx.attr_i("output_height", 1)?;
    let output_width = cx.attr_i("output_width", 1)?;
    let sampling_ratio = cx.attr_i("sampling_ratio", 0)?;
    let spatial_scale = cx.attr_f("spatial_scale", 1.0)?;
    let ctm = if cx.opset >= 16 {
        cx.attr_choice(
            "coordinate_transformation_mode",
            "half_pixel",
            &["half_pixel", "output_half_pixel"],
        )?
    } else {
        "output_half_pixel".to_string()
    };
    let (x, rois, b) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let op = RoiAlign {
        mode: if m == "max" {
            RoiAlignMode::Max
        } else {
            RoiAlignMode::Avg
        },
        output_height,
        output_width,
        sampling_ratio,
        spatial_scale,
        coordinate_transformation_mode: RoiCoordMode::from_name(&ctm)
            .unwrap_or(RoiCoordMode::HalfPixel),
    };
    let y = cx.add1(op, &[x, rois, b])?;
    cx.set_output(0, y);
    Ok(())
}

fn nms(cx: &mut NodeCtx) -> Result<(), MapError> {
    let center_point_box = cx.attr_bool("center_point_box", false)?;
    let (b, s) = (cx.req(0)?, cx.req(1)?);
    let mut ins = vec![b, s];
    // Optional trailing inputs; an absent one in the middle gets its default.
    let defaults = [
        (2, DType::I64, 0.0),
        (3, DType::F32, 0.0),
        (4, DType::F32, f64::NEG_INFINITY),
    ];
    let last = (2..5).rev().find(|&i| cx.input(i).ok().flatten().is_some());
    if let Some(last) = last {
        for &(i, d, v) in &defaults[..last - 1] {
            let x = match cx.input(i)? {
                Some(x) => x,
                None => cx.scalar(d, v)?,
            };
            ins.push(x);
        }
    }
    let y = cx.add1(NonMaxSuppression { center_point_box }, &ins)?;
    cx.set_output(0, y);
    Ok(())
}
