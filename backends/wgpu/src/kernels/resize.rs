//! Resize (`wgsl/resize.wgsl`): f32 resampling one axis per dispatch, with
//! nearest, (antialiased) linear and cubic modes and every ONNX coordinate
//! transformation mode. The taps of each output position are computed here
//! from the constant scales, sizes and roi (as the CPU kernel does, in f64)
//! and travel in the dispatch's params; intermediate axes go to scratch.

use rlx_ir::ops::{CoordMode, NearestMode, Resize, ResizeMode, ResizeTarget};
use rlx_ir::{DType, Op};

use super::{u32_of, Cx, LResult, Operand};
use crate::schedule::Range;

const SRC: &str = include_str!("wgsl/resize.wgsl");

/// The largest tap table (in u32 words) one dispatch carries in its params.
const MAX_TABLE_WORDS: usize = 1 << 22;

/// Marks an output position outside the crop box of `tf_crop_and_resize`.
const EXTRAPOLATE: u32 = u32::MAX;

/// The taps of one output position: (input index, weight) pairs, or `None`
/// outside the crop box.
type Taps = Option<Vec<(usize, f64)>>;

struct AxisPlan {
    input: usize,
    output: usize,
    scale: f64,
    roi: (f64, f64),
}

/// The source coordinate of output index `y` (ONNX `coordinate_transformation_mode`).
fn source_coord(r: &Resize, p: &AxisPlan, y: f64) -> f64 {
    let (inp, scale) = (p.input as f64, p.scale);
    let out_f = scale * inp;
    match r.coordinate_transformation_mode {
        CoordMode::HalfPixel => (y + 0.5) / scale - 0.5,
        CoordMode::HalfPixelSymmetric => {
            let adjustment = p.output as f64 / out_f;
            let offset = inp / 2.0 * (1.0 - adjustment);
            offset + (y + 0.5) / scale - 0.5
        }
        CoordMode::PytorchHalfPixel => {
            if out_f > 1.0 {
                (y + 0.5) / scale - 0.5
            } else {
                0.0
            }
        }
        CoordMode::AlignCorners => {
            if out_f == 1.0 {
                0.0
            } else {
                y * (inp - 1.0) / (out_f - 1.0)
            }
        }
        CoordMode::Asymmetric => y / scale,
        CoordMode::TfCropAndResize => {
            let (s, e) = p.roi;
            let x = if out_f == 1.0 {
                (e - s) * (inp - 1.0) / 2.0
            } else {
                y * (e - s) * (inp - 1.0) / (out_f - 1.0)
            };
            x + s * (inp - 1.0)
        }
    }
}

/// The cubic convolution kernel with coefficient `a` at distance `x`.
fn cubic(x: f64, a: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

/// Weights for a source position `ratio` past its left neighbour (1 for
/// integral positions); weight `i` goes to neighbour `floor - n/2 + 1 + i`.
fn coeffs(r: &Resize, ratio: f64, scale: f64) -> Vec<f64> {
    let a = r.cubic_coeff_a as f64;
    match r.mode {
        ResizeMode::Nearest => {
            let right = ratio == 1.0
                || match r.nearest_mode {
                    NearestMode::RoundPreferFloor => ratio > 0.5,
                    NearestMode::RoundPreferCeil => ratio >= 0.5,
                    NearestMode::Floor => false,
                    NearestMode::Ceil => true,
                };
            if right {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        ResizeMode::Linear if !r.antialias => vec![1.0 - ratio, ratio],
        ResizeMode::Cubic if !r.antialias => vec![
            cubic(ratio + 1.0, a),
            cubic(ratio, a),
            cubic(1.0 - ratio, a),
            cubic(2.0 - ratio, a),
        ],
        // Antialiasing stretches the filter by 1/scale when downsampling.
        ResizeMode::Linear | ResizeMode::Cubic => {
            let s = scale.min(1.0);
            let support = if r.mode == ResizeMode::Linear {
                1.0
            } else {
                2.0
            };
            let start = (-support / s).floor() as i64 + 1;
            let w: Vec<f64> = (start..2 - start)
                .map(|i| {
                    let d = s * (i as f64 - ratio);
                    if r.mode == ResizeMode::Linear {
                        (1.0 - d.abs()).clamp(0.0, 1.0)
                    } else {
                        cubic(d, a)
                    }
                })
                .collect();
            let sum: f64 = w.iter().sum();
            w.into_iter().map(|v| v / sum).collect()
        }
    }
}

/// The taps of every output position of one axis.
fn axis_taps(r: &Resize, p: &AxisPlan) -> LResult<Vec<Taps>> {
    let last = p.input as i64 - 1;
    (0..p.output)
        .map(|y| {
            let x = source_coord(r, p, y as f64);
            if !x.is_finite() {
                return Err(format!("resize source coordinate {x} is not finite"));
            }
            if r.coordinate_transformation_mode == CoordMode::TfCropAndResize
                && (x < 0.0 || x > last as f64)
            {
                return Ok(None);
            }
            let fl = x.floor();
            let integral = x == fl;
            let ratio = if integral { 1.0 } else { x - fl };
            let mut w = coeffs(r, ratio, p.scale);
            let n = w.len() as i64;
            let first = fl as i64 - n / 2 + i64::from(!integral);
            if r.exclude_outside {
                for (i, c) in w.iter_mut().enumerate() {
                    let idx = first + i as i64;
                    if idx < 0 || idx > last {
                        *c = 0.0;
                    }
                }
                let sum: f64 = w.iter().sum();
                let sum = if sum == 0.0 { 1.0 } else { sum };
                w.iter_mut().for_each(|c| *c /= sum);
            }
            Ok(Some(
                w.into_iter()
                    .enumerate()
                    .filter(|&(_, c)| c != 0.0)
                    .map(|(i, c)| ((first + i as i64).clamp(0, last) as usize, c))
                    .collect(),
            ))
        })
        .collect()
}

/// One axis pass from `src` (dims `dims`) to `dst` along `axis`.
fn pass(
    cx: &mut Cx,
    src: Range,
    dst: Range,
    dims: &[usize],
    axis: usize,
    taps: &[Taps],
    fill: f32,
) -> LResult<()> {
    let inner: usize = dims[axis + 1..].iter().product();
    let outer: usize = dims[..axis].iter().product();
    let n_out = taps.len();
    let k = taps
        .iter()
        .map(|t| t.as_ref().map_or(1, |v| v.len()))
        .max()
        .unwrap_or(1)
        .max(1);
    if n_out * k * 2 > MAX_TABLE_WORDS {
        return Err(format!(
            "a resize tap table of {} words exceeds the wgpu limit of {MAX_TABLE_WORDS}",
            n_out * k * 2
        ));
    }
    let n = outer * n_out * inner;
    let mut p = vec![
        u32_of(n, "size")?,
        u32_of(dims[axis], "axis size")?,
        u32_of(n_out, "output axis size")?,
        u32_of(inner.max(1), "inner size")?,
        k as u32,
        fill.to_bits(),
    ];
    for t in taps {
        match t {
            None => {
                p.push(EXTRAPOLATE);
                p.push(0);
                p.extend(std::iter::repeat_n(0, 2 * (k - 1)));
            }
            Some(v) => {
                for &(i, w) in v {
                    p.push(u32_of(i, "a tap index")?);
                    p.push((w as f32).to_bits());
                }
                p.extend(std::iter::repeat_n(0, 2 * (k - v.len())));
            }
        }
    }
    let pipe = cx.pipeline("resize.axis", SRC);
    cx.dispatch_items(pipe, vec![src, dst], p, n as u64);
    Ok(())
}

fn floats(cx: &Cx, i: usize) -> Option<Vec<f64>> {
    match cx.values.get(i) {
        Some(Some(t)) => t.to_f64_vec(),
        _ => None,
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::Resize(r) = &cx.node.op.clone() else {
        return Err(format!("`{}` is not a resize", cx.node.op.name()));
    };
    let x: Operand = cx.input(0)?.clone();
    let y: Operand = cx.output(0)?.clone();
    if x.dtype != DType::F32 {
        return Err(format!(
            "resize on {} has no wgpu kernel (f32 only)",
            x.dtype
        ));
    }
    let rank = x.dims.len();
    let input: Vec<i64> = x.dims.iter().map(|&d| d as i64).collect();
    let roi = if cx.ins.len() > 1 && cx.input(1)?.numel() > 0 {
        floats(cx, 1).ok_or("the resize roi must be a constant (the wgpu plan reads it)")?
    } else {
        Vec::new()
    };
    let (scales, sizes) = match r.target {
        ResizeTarget::Scales => (
            Some(
                floats(cx, 2)
                    .ok_or("resize scales must be a constant (the wgpu plan reads them)")?,
            ),
            None,
        ),
        ResizeTarget::Sizes => (None, Some(cx.ints(2)?.ok_or("resize sizes must be given")?)),
    };
    let (out, sc) = r
        .resolve(&input, scales.as_deref(), sizes.as_deref(), &roi)
        .map_err(|e| e.to_string())?;
    if out.len() != rank || out.iter().zip(&y.dims).any(|(&a, &b)| a != b as i64) {
        return Err(format!(
            "resize computes output {out:?} where the plan has {:?}",
            y.dims
        ));
    }
    let axes: Vec<usize> = if r.axes.is_empty() {
        (0..rank).collect()
    } else {
        r.axes
            .iter()
            .map(|&a| super::axis(a, rank))
            .collect::<LResult<_>>()?
    };
    let mut rois = vec![(0.0, 1.0); rank];
    if r.coordinate_transformation_mode == CoordMode::TfCropAndResize {
        if roi.len() != 2 * axes.len() {
            return Err(format!(
                "tf_crop_and_resize needs {} roi values, got {}",
                2 * axes.len(),
                roi.len()
            ));
        }
        for (i, &a) in axes.iter().enumerate() {
            rois[a] = (roi[i], roi[i + axes.len()]);
        }
    }
    let mut sorted = axes.clone();
    sorted.sort_unstable();
    sorted.dedup();
    // The passes to run: (axis, taps), skipping identity axes.
    let mut plans = Vec::new();
    let mut dims = x.dims.clone();
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
        if p.input == 0 {
            return Err("resize of an empty axis to a non-empty one".into());
        }
        plans.push((a, axis_taps(r, &p)?));
        dims[a] = p.output;
    }
    if plans.is_empty() {
        // Every axis is kept: one identity pass over the last axis copies.
        let a = rank.checked_sub(1).ok_or("resize of a scalar")?;
        let taps = (0..x.dims[a]).map(|i| Some(vec![(i, 1.0)])).collect();
        plans.push((a, taps));
    }
    let fill = r.extrapolation_value;
    let mut dims = x.dims.clone();
    let mut src = x.range();
    let count = plans.len();
    for (i, (a, taps)) in plans.into_iter().enumerate() {
        let prev = dims.clone();
        dims[a] = taps.len();
        let dst = if i + 1 == count {
            y.range()
        } else {
            let bytes = dims.iter().product::<usize>() as u64 * 4;
            cx.scratch(bytes.max(4))
        };
        pass(cx, src, dst.clone(), &prev, a, &taps, fill)?;
        src = dst;
    }
    Ok(())
}
