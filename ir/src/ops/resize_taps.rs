//! Resize sampling shared by every backend: for each output position along
//! one axis, the input taps and their weights (computed in f64), following
//! ONNX's `coordinate_transformation_mode`, nearest rounding, (antialiased)
//! linear and cubic filters, `exclude_outside` and `tf_crop_and_resize`.

use super::{CoordMode, NearestMode, Resize, ResizeMode};

/// The input taps of one output position along one axis.
#[derive(Debug, Clone, PartialEq)]
pub enum Taps {
    /// `sum(w * x[i])` over the (index, weight) pairs.
    Mix(Vec<(usize, f64)>),
    /// Outside the crop box of `tf_crop_and_resize`.
    Extrapolate,
}

/// What one axis is resampled with.
pub struct AxisPlan {
    /// Input length along the axis.
    pub input: usize,
    /// Output length along the axis.
    pub output: usize,
    /// Output over input (the given or implied scale).
    pub scale: f64,
    /// The crop box (start, end) for `tf_crop_and_resize`, in [0, 1].
    pub roi: (f64, f64),
}

/// The source coordinate of output index `y` (ONNX `coordinate_transformation_mode`).
fn source_coord(r: &Resize, p: &AxisPlan, y: f64) -> f64 {
    let (inp, scale) = (p.input as f64, p.scale);
    // The (possibly fractional) target length the scale implies.
    let out_f = scale * inp;
    match r.coordinate_transformation_mode {
        CoordMode::HalfPixel => (y + 0.5) / scale - 0.5,
        CoordMode::HalfPixelSymmetric => {
            let adjustment = p.output as f64 / out_f;
            let offset = inp / 2.0 * (1.0 - adjustment);
            offset + (y + 0.5) / scale - 0.5
        }
        // As with align_corners, the length is the fractional one.
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

/// Interpolation weights for a source position whose distance past the left
/// neighbour is `ratio` (in (0, 1]; 1 for integral positions). Weight `i` goes
/// to the neighbour `floor - n/2 + 1 + i` (`x - n/2 + i` for integral `x`).
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
pub fn axis_taps(r: &Resize, p: &AxisPlan) -> Result<Vec<Taps>, String> {
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
                return Ok(Taps::Extrapolate);
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
            Ok(Taps::Mix(
                w.into_iter()
                    .enumerate()
                    .filter(|&(_, c)| c != 0.0)
                    .map(|(i, c)| ((first + i as i64).clamp(0, last) as usize, c))
                    .collect(),
            ))
        })
        .collect()
}
