//! Resize (`wgsl/resize.wgsl`): f32 resampling one axis per dispatch, with
//! nearest, (antialiased) linear and cubic modes and every ONNX coordinate
//! transformation mode. The taps of each output position are computed here
//! from the constant scales, sizes and roi (as the CPU kernel does, in f64)
//! and travel in the dispatch's params; intermediate axes go to scratch.

use rlx_ir::ops::resize_taps::{axis_taps, AxisPlan, Taps};
use rlx_ir::ops::{CoordMode, ResizeTarget};
use rlx_ir::{DType, Op};

use super::{u32_of, Cx, LResult, Operand};
use crate::schedule::Range;

const SRC: &str = include_str!("../../../../kernels/wgsl/resize.wgsl");

/// The largest tap table (in u32 words) one dispatch carries in its params.
const MAX_TABLE_WORDS: usize = 1 << 22;

/// Marks an output position outside the crop box of `tf_crop_and_resize`.
const EXTRAPOLATE: u32 = u32::MAX;

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
        .map(|t| match t {
            Taps::Mix(v) => v.len(),
            Taps::Extrapolate => 1,
        })
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
            Taps::Extrapolate => {
                p.push(EXTRAPOLATE);
                p.push(0);
                p.extend(std::iter::repeat_n(0, 2 * (k - 1)));
            }
            Taps::Mix(v) => {
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
        let taps = (0..x.dims[a]).map(|i| Taps::Mix(vec![(i, 1.0)])).collect();
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
