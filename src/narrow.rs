//! Lossless narrow encodings of weights in artifacts, so that an artifact is
//! no larger than its model: weights that the model stored as int8/uint8
//! (folded from DequantizeLinear, or widened to i32 for an integer matrix
//! product) or as f16 (folded from a Cast) are wide in the compiled graph,
//! and are stored here as they came.
//!
//! Nothing is guessed: an encoding is used only when decoding it gives back
//! every f32 bit for bit. Loading decodes into memory (such weights are not
//! borrowed from the file).

use rlx_ir::{DType, Tensor};

/// How a weight's bytes are stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Encoding {
    /// As f16: every value is exactly an f16.
    F16,
    /// As 8-bit integers `q`: the value is `(q - zero_point) as f32 * scale`
    /// with the scale and zero point of its slice along `axis` (one slice
    /// for the whole tensor when `None`).
    Affine {
        signed: bool,
        axis: Option<usize>,
        scales: Vec<f32>,
        zero_points: Vec<i32>,
    },
    /// An integer weight (i16, i32, i64) whose values all fit in 8 bits,
    /// stored as i8 (`signed`) or u8.
    Int8 { signed: bool },
}

/// Weights smaller than this stay as they are.
const MIN_ELEMENTS: usize = 256;

/// The narrowest exact encoding of `t` and its bytes, if `t` is an f32
/// tensor that has one.
pub fn encode(t: &Tensor) -> Option<(Encoding, Vec<u8>)> {
    if t.numel() < MIN_ELEMENTS {
        return None;
    }
    if matches!(t.dtype(), DType::I16 | DType::I32 | DType::I64) {
        let v = t.to_i64_vec()?;
        for (signed, range) in [(true, -128..=127), (false, 0..=255)] {
            if v.iter().all(|x| range.contains(x)) {
                let bytes = v.iter().map(|&x| x as u8).collect();
                return Some((Encoding::Int8 { signed }, bytes));
            }
        }
        return None;
    }
    if t.dtype() != DType::F32 {
        return None;
    }
    let v = t.values::<f32>().ok()?;
    let candidates = std::iter::once(None).chain((0..t.dims().len()).map(Some));
    for axis in candidates {
        if let Some(found) = affine(v, t.dims(), axis) {
            if decode(&found.0, DType::F32, t.dims(), &found.1).is_ok_and(|d| same_bits(&d, t)) {
                return Some(found);
            }
        }
    }
    if v.iter()
        .all(|x| half::f16::from_f32(*x).to_f32().to_bits() == x.to_bits())
    {
        let bytes: Vec<u8> = v
            .iter()
            .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
            .collect();
        return Some((Encoding::F16, bytes));
    }
    None
}

fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype() && a.dims() == b.dims() && a.bytes() == b.bytes()
}

/// (outer, size, inner) of `axis` in row-major `dims`.
fn split(dims: &[usize], axis: Option<usize>) -> (usize, usize, usize) {
    // Saturating: a zero dim makes the whole count 0 while the others may
    // still overflow (a crafted artifact); the callers compare with lengths.
    let product = |d: &[usize]| d.iter().fold(1usize, |a, &x| a.saturating_mul(x));
    match axis {
        None => (1, 1, product(dims)),
        Some(a) => (product(&dims[..a]), dims[a], product(&dims[a + 1..])),
    }
}

/// Per slice along `axis`, an integer grid `k * scale` that holds every value.
fn affine(v: &[f32], dims: &[usize], axis: Option<usize>) -> Option<(Encoding, Vec<u8>)> {
    let (outer, size, inner) = split(dims, axis);
    // A scale and zero point (8 bytes) per slice must stay small next to
    // the slice's bytes.
    if outer * inner < 16 {
        return None;
    }
    let mut ks = vec![0i32; v.len()];
    let mut scales = Vec::with_capacity(size);
    let mut lows = Vec::with_capacity(size);
    for s in 0..size {
        let at = |i: usize| (i / inner) * size * inner + s * inner + i % inner;
        let slice: Vec<f32> = (0..outer * inner).map(|i| v[at(i)]).collect();
        let (scale, k) = grid(&slice)?;
        for (i, k) in k.into_iter().enumerate() {
            ks[at(i)] = k;
        }
        scales.push(scale);
        lows.push((0..outer * inner).map(|i| ks[at(i)]).min().unwrap_or(0));
    }
    let signed = ks.iter().all(|k| (-128..=127).contains(k));
    let zero_points: Vec<i32> = if signed {
        vec![0; size]
    } else {
        lows.iter().map(|l| -l).collect()
    };
    let mut bytes = vec![0u8; v.len()];
    for s in 0..size {
        for i in 0..outer * inner {
            let at = (i / inner) * size * inner + s * inner + i % inner;
            let q = ks[at] + zero_points[s];
            bytes[at] = if signed {
                (q as i8) as u8
            } else {
                u8::try_from(q).ok()?
            };
        }
    }
    Some((
        Encoding::Affine {
            signed,
            axis,
            scales,
            zero_points,
        },
        bytes,
    ))
}

/// A scale and integers `k` (spanning at most 256 levels) with
/// `k as f32 * scale == value` bit for bit, for every value.
fn grid(values: &[f32]) -> Option<(f32, Vec<i32>)> {
    if values.iter().any(|x| !x.is_finite()) {
        return None;
    }
    // Most f32 weights have thousands of distinct values: stop at 257.
    let mut seen = std::collections::HashSet::new();
    for x in values {
        if seen.insert(x.to_bits()) && seen.len() > 256 {
            return None;
        }
    }
    let mut distinct: Vec<f32> = seen.into_iter().map(f32::from_bits).collect();
    distinct.sort_by(f32::total_cmp);
    let peak = distinct
        .iter()
        .copied()
        .max_by(|a, b| a.abs().total_cmp(&b.abs()))?;
    if peak == 0.0 {
        return Some((1.0, vec![0; values.len()]));
    }
    // The levels are multiples of the scale: an approximate GCD of the gaps
    // between them (and the peak) finds it, and the peak's level then pins
    // it to within a few ulps.
    // With at most 256 levels the scale is at least peak/255; rounding noise
    // (which Euclid's steps amplify) stays far below this tolerance.
    let tol = f64::from(peak.abs()) / 255.0 / 8.0;
    let gcd = |mut a: f64, mut b: f64| {
        while b > tol {
            (a, b) = (b, a % b);
        }
        a
    };
    let gap = distinct
        .windows(2)
        .map(|w| f64::from(w[1]) - f64::from(w[0]))
        .fold(f64::from(peak.abs()), gcd) as f32;
    if gap <= 0.0 {
        return None;
    }
    let peak_level = (peak / gap).round();
    if peak_level.abs() > 255.0 || peak_level == 0.0 {
        return None;
    }
    let base = peak / peak_level;
    let mut candidate = base;
    for step in 0..7 {
        // base, then one, two and three ulps either side.
        let ulps = (step + 1) / 2;
        let up = step % 2 == 1;
        candidate = f32::from_bits(if up {
            base.to_bits() + ulps
        } else {
            base.to_bits().saturating_sub(ulps)
        });
        if candidate <= 0.0 || !candidate.is_finite() {
            continue;
        }
        let ks: Option<Vec<i32>> = values
            .iter()
            .map(|&x| {
                let k = (x / candidate).round();
                (k.abs() <= 255.0 && (k * candidate).to_bits() == x.to_bits()).then_some(k as i32)
            })
            .collect();
        if let Some(ks) = ks {
            let (lo, hi) = ks
                .iter()
                .fold((i32::MAX, i32::MIN), |(l, h), &k| (l.min(k), h.max(k)));
            if hi - lo <= 255 {
                return Some((candidate, ks));
            }
        }
    }
    let _ = candidate;
    None
}

/// The tensor of `dtype` and `dims` that `bytes` encode.
pub fn decode(e: &Encoding, dtype: DType, dims: &[usize], bytes: &[u8]) -> Result<Tensor, String> {
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("shape {dims:?} has too many elements"))?;
    if let Encoding::Int8 { signed } = e {
        if bytes.len() != n || !matches!(dtype, DType::I16 | DType::I32 | DType::I64) {
            return Err(format!(
                "{} bytes of 8-bit integers for {n} {dtype} values",
                bytes.len()
            ));
        }
        let v: Vec<i64> = bytes
            .iter()
            .map(|&b| {
                if *signed {
                    i64::from(b as i8)
                } else {
                    i64::from(b)
                }
            })
            .collect();
        return rlx_ir::ops::values::int_tensor(dtype, dims, &v)
            .ok_or_else(|| format!("cannot make {dtype} values"));
    }
    if dtype != DType::F32 {
        return Err(format!("an f32 encoding of a {dtype} weight"));
    }
    let values: Vec<f32> = match e {
        Encoding::F16 => {
            if Some(bytes.len()) != n.checked_mul(2) {
                return Err(format!("{} bytes of f16 for {n} values", bytes.len()));
            }
            bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect()
        }
        Encoding::Affine {
            signed,
            axis,
            scales,
            zero_points,
        } => {
            if axis.is_some_and(|a| a >= dims.len()) {
                return Err(format!("axis {axis:?} of a rank-{} tensor", dims.len()));
            }
            let (_, size, inner) = split(dims, *axis);
            if bytes.len() != n || scales.len() != size || zero_points.len() != size {
                return Err(format!(
                    "{} bytes, {} scales and {} zero points for {n} values in {size} slices",
                    bytes.len(),
                    scales.len(),
                    zero_points.len()
                ));
            }
            bytes
                .iter()
                .enumerate()
                .map(|(i, &b)| {
                    let s = (i / inner.max(1)) % size.max(1);
                    let q = if *signed {
                        i32::from(b as i8)
                    } else {
                        i32::from(b)
                    };
                    (q - zero_points[s]) as f32 * scales[s]
                })
                .collect()
        }
        Encoding::Int8 { .. } => return Err("8-bit integers decode to an integer dtype".into()),
    };
    Tensor::from_values(dims, &values).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dequantized(q: &[i8], scales: &[f32], dims: &[usize], axis: usize) -> Tensor {
        let inner: usize = dims[axis + 1..].iter().product();
        let v: Vec<f32> = q
            .iter()
            .enumerate()
            .map(|(i, &x)| f32::from(x) * scales[(i / inner) % dims[axis]])
            .collect();
        Tensor::from_values(dims, &v).unwrap()
    }

    #[test]
    fn per_channel_int8_weights_round_trip_in_a_quarter_of_the_bytes() {
        let dims = [8, 4, 3, 3];
        let q: Vec<i8> = (0..288).map(|i| ((i * 37) % 255 - 127) as i8).collect();
        let scales: Vec<f32> = (0..8).map(|c| 0.0123 * (c as f32 + 1.0) / 7.0).collect();
        let t = dequantized(&q, &scales, &dims, 0);
        let (e, bytes) = encode(&t).expect("an exact encoding");
        assert!(
            matches!(
                e,
                Encoding::Affine {
                    axis: Some(0),
                    signed: true,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(bytes.len(), 288);
        assert_eq!(
            decode(&e, DType::F32, &dims, &bytes).unwrap().bytes(),
            t.bytes()
        );
    }

    #[test]
    fn f16_values_are_stored_as_f16_and_others_stay() {
        let v: Vec<f32> = (0..300)
            .map(|i| half::f16::from_f32(i as f32 * 0.37 - 40.0).to_f32())
            .collect();
        let t = Tensor::from_values(&[300], &v).unwrap();
        let (e, bytes) = encode(&t).unwrap();
        assert_eq!(e, Encoding::F16);
        assert_eq!(
            decode(&e, DType::F32, &[300], &bytes).unwrap().bytes(),
            t.bytes()
        );
        // Arbitrary floats have no exact narrow form.
        let w: Vec<f32> = (0..300).map(|i| (i as f32 * 0.731).sin() / 3.0).collect();
        assert!(encode(&Tensor::from_values(&[300], &w).unwrap()).is_none());
    }

    #[test]
    fn wide_integers_that_fit_in_8_bits_are_stored_in_8() {
        let v: Vec<i32> = (0..512).map(|i| (i % 256) - 128).collect();
        let t = Tensor::from_values(&[2, 256], &v).unwrap();
        let (e, bytes) = encode(&t).unwrap();
        assert_eq!(e, Encoding::Int8 { signed: true });
        assert_eq!(
            decode(&e, DType::I32, &[2, 256], &bytes).unwrap().bytes(),
            t.bytes()
        );
        let w: Vec<i64> = (0..300).map(|i| i * 1000).collect();
        assert!(encode(&Tensor::from_values(&[300], &w).unwrap()).is_none());
    }

    #[test]
    fn uint8_with_a_zero_point_round_trips() {
        let v: Vec<f32> = (0..400)
            .map(|i| ((i % 256) as i32 - 30) as f32 * 0.05)
            .collect();
        let t = Tensor::from_values(&[400], &v).unwrap();
        let (e, bytes) = encode(&t).unwrap();
        assert!(matches!(e, Encoding::Affine { signed: false, .. }), "{e:?}");
        assert_eq!(
            decode(&e, DType::F32, &[400], &bytes).unwrap().bytes(),
            t.bytes()
        );
    }
}
