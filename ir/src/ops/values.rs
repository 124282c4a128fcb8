//! Compile-time values of shape arithmetic.
//!
//! [`eval_known`] computes an op's output values from its known input values for
//! the ops that shape computations are made of (Shape, Gather, Concat, Slice,
//! Unsqueeze, Cast, integer arithmetic, ...). Elements may be symbolic dims, so
//! `Reshape(x, Concat(Shape(x)[0], [-1]))` infers `[N, ...]` without knowing `N`.
//! Everything else is left to constant folding, which runs real kernels.

use super::{norm_axis, BinaryKind, CompareKind, KnownValue, Op, UnaryKind};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::TensorType;
use crate::tensor::Tensor;

/// Largest value (in elements) evaluated symbolically.
const MAX_ELEMS: usize = 4096;

/// An integer (or bool) tensor of `dtype` from i64 values; `None` for other dtypes.
pub fn int_tensor(dtype: DType, shape: &[usize], v: &[i64]) -> Option<Tensor> {
    let t = match dtype {
        DType::I64 => Tensor::from_slice(dtype, shape, v),
        DType::I32 => Tensor::from_slice(
            dtype,
            shape,
            &v.iter().map(|&x| x as i32).collect::<Vec<_>>(),
        ),
        DType::I16 => Tensor::from_slice(
            dtype,
            shape,
            &v.iter().map(|&x| x as i16).collect::<Vec<_>>(),
        ),
        DType::I8 => Tensor::from_slice(
            dtype,
            shape,
            &v.iter().map(|&x| x as i8).collect::<Vec<_>>(),
        ),
        DType::U8 | DType::Bool => Tensor::from_slice(
            dtype,
            shape,
            &v.iter().map(|&x| x as u8).collect::<Vec<_>>(),
        ),
        DType::U16 => Tensor::from_slice(
            dtype,
            shape,
            &v.iter().map(|&x| x as u16).collect::<Vec<_>>(),
        ),
        DType::U32 => Tensor::from_slice(
            dtype,
            shape,
            &v.iter().map(|&x| x as u32).collect::<Vec<_>>(),
        ),
        DType::U64 => Tensor::from_slice(
            dtype,
            shape,
            &v.iter().map(|&x| x as u64).collect::<Vec<_>>(),
        ),
        _ => return None,
    };
    t.ok()
}

/// A float tensor of `dtype` from f64 values; `None` for non-float dtypes.
pub fn float_tensor(dtype: DType, shape: &[usize], v: &[f64]) -> Option<Tensor> {
    let t = match dtype {
        DType::F32 => Tensor::from_slice(
            dtype,
            shape,
            &v.iter().map(|&x| x as f32).collect::<Vec<_>>(),
        ),
        DType::F64 => Tensor::from_slice(dtype, shape, v),
        DType::F16 => Tensor::from_slice(
            dtype,
            shape,
            &v.iter()
                .map(|&x| half::f16::from_f64(x))
                .collect::<Vec<_>>(),
        ),
        DType::BF16 => Tensor::from_slice(
            dtype,
            shape,
            &v.iter()
                .map(|&x| half::bf16::from_f64(x))
                .collect::<Vec<_>>(),
        ),
        _ => return None,
    };
    t.ok()
}

/// Normalizes a value: fully known dims become a concrete tensor.
fn dims_value(dtype: DType, shape: Vec<usize>, elems: Vec<Dim>) -> Option<KnownValue> {
    if elems.iter().all(Dim::is_known) {
        let v: Vec<i64> = elems.iter().filter_map(Dim::known).collect();
        return int_tensor(dtype, &shape, &v).map(KnownValue::Tensor);
    }
    Some(KnownValue::Dims {
        dtype,
        shape,
        elems,
    })
}

/// Output values of `op` from its inputs' known values, where shape arithmetic allows.
pub fn eval_known(
    op: &Op,
    inputs: &[TensorType],
    values: &[Option<KnownValue>],
    outputs: &[TensorType],
) -> Vec<Option<KnownValue>> {
    let mut out = vec![None; outputs.len()];
    if outputs.is_empty() {
        return out;
    }
    let out_shape = match outputs[0].shape.as_known() {
        Some(s) if crate::tensor::checked_numel(&s).is_ok_and(|n| n <= MAX_ELEMS) => s,
        _ => return out,
    };
    out[0] = eval_first(op, inputs, values, &outputs[0], out_shape);
    out
}

fn eval_first(
    op: &Op,
    inputs: &[TensorType],
    values: &[Option<KnownValue>],
    out: &TensorType,
    shape: Vec<usize>,
) -> Option<KnownValue> {
    let val = |i: usize| values.get(i).and_then(Option::as_ref);
    let dims = |i: usize| val(i).and_then(KnownValue::as_dims);
    let dt = out.dtype;
    match op {
        Op::Constant(c) => Some(KnownValue::Tensor(c.value.clone())),
        Op::ShapeOf(s) => {
            let r = s.range(inputs[0].rank());
            dims_value(DType::I64, shape, inputs[0].shape.0[r].to_vec())
        }
        Op::Size(_) => dims_value(DType::I64, shape, vec![inputs[0].shape.numel()]),
        Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_) => match val(0)? {
            KnownValue::Tensor(t) => t.reshaped(shape).ok().map(KnownValue::Tensor),
            KnownValue::Dims { elems, .. } => dims_value(dt, shape, elems.clone()),
        },
        Op::Gather(g) => {
            let data = dims(0)?;
            let idx = val(1)?.as_i64s()?;
            let r = inputs[0].rank();
            if r > 1 || norm_axis(g.axis, r).ok()? != 0 {
                return None;
            }
            let n = data.len() as i64;
            let picked = idx
                .iter()
                .map(|&i| data.get((if i < 0 { i + n } else { i }) as usize).cloned())
                .collect::<Option<Vec<_>>>()?;
            dims_value(dt, shape, picked)
        }
        Op::Concat(_) => {
            if inputs[0].rank() != 1 {
                return None;
            }
            let mut all = Vec::new();
            for i in 0..inputs.len() {
                all.extend(dims(i)?);
            }
            dims_value(dt, shape, all)
        }
        Op::Slice(_) => {
            if inputs[0].rank() != 1 {
                return None;
            }
            let data = dims(0)?;
            let (st, en) = (val(1)?.as_i64s()?, val(2)?.as_i64s()?);
            let step = if inputs.len() > 4 {
                val(4)?.as_i64s()?
            } else {
                vec![1]
            };
            let (start, len) = super::slice_range(
                data.len() as i64,
                *st.first()?,
                *en.first()?,
                *step.first()?,
            );
            let picked = (0..len)
                .map(|k| data[(start + k * step[0]) as usize].clone())
                .collect();
            dims_value(dt, shape, picked)
        }
        Op::Cast(c) => {
            let v = val(0)?;
            let from = v.dtype();
            if (from.is_int() || from == DType::Bool) && c.to.is_int() {
                dims_value(c.to, shape, v.as_dims()?)
            } else if from.is_int() && c.to.is_float() {
                let i = v.as_i64s()?;
                float_tensor(
                    c.to,
                    &shape,
                    &i.iter().map(|&x| x as f64).collect::<Vec<_>>(),
                )
                .map(KnownValue::Tensor)
            } else if from.is_float() && c.to.is_int() {
                let f = v.as_f64s()?;
                if f.iter().any(|x| !x.is_finite()) {
                    return None;
                }
                int_tensor(
                    c.to,
                    &shape,
                    &f.iter().map(|&x| x.trunc() as i64).collect::<Vec<_>>(),
                )
                .map(KnownValue::Tensor)
            } else if from.is_float() && c.to.is_float() {
                float_tensor(c.to, &shape, &v.as_f64s()?).map(KnownValue::Tensor)
            } else {
                None
            }
        }
        Op::Binary(b) if dt.is_int() => {
            let (x, y) = (dims(0)?, dims(1)?);
            let f = |a: &Dim, c: &Dim| -> Option<Dim> {
                Some(match b.kind {
                    BinaryKind::Add => a.add(c),
                    BinaryKind::Sub => a.sub(c),
                    BinaryKind::Mul => a.mul(c),
                    BinaryKind::Div => match (a.known(), c.known()) {
                        (Some(p), Some(q)) if q != 0 => Dim::Known(p.wrapping_div(q)),
                        _ => a.floor_div(c).ok()?,
                    },
                    BinaryKind::Max => a.max_dim(c),
                    BinaryKind::Min => a.min_dim(c),
                    BinaryKind::Mod => match (a.known(), c.known()) {
                        (Some(p), Some(q)) if q != 0 => Dim::Known(python_mod(p, q)),
                        _ => return None,
                    },
                    _ => return None,
                })
            };
            let n: usize = shape.iter().product();
            let elems = broadcast_pairs(&x, &y, n)?
                .into_iter()
                .map(|(a, c)| f(a, c))
                .collect::<Option<Vec<_>>>()?;
            dims_value(dt, shape, elems)
        }
        Op::Binary(b) if dt.is_float() => {
            let (x, y) = (val(0)?.as_f64s()?, val(1)?.as_f64s()?);
            let n: usize = shape.iter().product();
            let elems: Vec<f64> = broadcast_pairs(&x, &y, n)?
                .into_iter()
                .map(|(a, c)| match b.kind {
                    BinaryKind::Add => Some(a + c),
                    BinaryKind::Sub => Some(a - c),
                    BinaryKind::Mul => Some(a * c),
                    BinaryKind::Div => Some(a / c),
                    BinaryKind::Max => Some(a.max(*c)),
                    BinaryKind::Min => Some(a.min(*c)),
                    _ => None,
                })
                .collect::<Option<_>>()?;
            float_tensor(dt, &shape, &elems).map(KnownValue::Tensor)
        }
        Op::Unary(u) => {
            let v = val(0)?;
            if v.dtype().is_float() {
                let f = v.as_f64s()?;
                let g: Vec<f64> = match u.kind {
                    UnaryKind::Floor => f.iter().map(|x| x.floor()).collect(),
                    UnaryKind::Ceil => f.iter().map(|x| x.ceil()).collect(),
                    UnaryKind::Neg => f.iter().map(|x| -x).collect(),
                    UnaryKind::Abs => f.iter().map(|x| x.abs()).collect(),
                    _ => return None,
                };
                float_tensor(dt, &shape, &g).map(KnownValue::Tensor)
            } else {
                let d = v.as_dims()?;
                let g: Vec<Dim> = match u.kind {
                    UnaryKind::Neg => d.iter().map(Dim::neg).collect(),
                    UnaryKind::Abs => d
                        .iter()
                        .map(|x| x.known().map(|k| Dim::Known(k.abs())))
                        .collect::<Option<_>>()?,
                    _ => return None,
                };
                dims_value(dt, shape, g)
            }
        }
        Op::Compare(c) => {
            let (x, y) = (dims(0)?, dims(1)?);
            let n: usize = shape.iter().product();
            let r = broadcast_pairs(&x, &y, n)?
                .into_iter()
                .map(|(a, b)| {
                    let d = if a == b { 0 } else { a.sub(b).known()? };
                    Some(i64::from(match c.kind {
                        CompareKind::Equal => d == 0,
                        CompareKind::Less => d < 0,
                        CompareKind::LessOrEqual => d <= 0,
                        CompareKind::Greater => d > 0,
                        CompareKind::GreaterOrEqual => d >= 0,
                    }))
                })
                .collect::<Option<Vec<i64>>>()?;
            int_tensor(DType::Bool, &shape, &r).map(KnownValue::Tensor)
        }
        Op::Where(_) => {
            let cond = val(0)?.as_i64s()?;
            let (x, y) = (dims(1)?, dims(2)?);
            let n: usize = shape.iter().product();
            if cond.len() != n && cond.len() != 1 {
                return None;
            }
            let pairs = broadcast_pairs(&x, &y, n)?;
            let r = pairs
                .into_iter()
                .enumerate()
                .map(|(i, (a, b))| {
                    if cond[i % cond.len()] != 0 {
                        a.clone()
                    } else {
                        b.clone()
                    }
                })
                .collect();
            dims_value(dt, shape, r)
        }
        Op::Reduce(r) if inputs[0].rank() == 1 && dt.is_int() => {
            let x = dims(0)?;
            let v = match r.kind {
                super::ReduceKind::Prod => x.iter().fold(Dim::Known(1), |a, d| a.mul(d)),
                super::ReduceKind::Sum => x.iter().fold(Dim::Known(0), |a, d| a.add(d)),
                _ => return None,
            };
            dims_value(dt, shape, vec![v])
        }
        Op::ConstantOfShape(c) => {
            let n: usize = shape.iter().product();
            let one = c.value.bytes();
            let mut bytes = Vec::with_capacity(n * one.len());
            for _ in 0..n {
                bytes.extend_from_slice(one);
            }
            Tensor::new(
                c.value.dtype(),
                shape,
                crate::tensor::Bytes::copy_from(&bytes),
            )
            .ok()
            .map(KnownValue::Tensor)
        }
        Op::Range(_) if dt.is_int() => {
            let (s, d) = (val(0)?.as_i64s()?, val(2)?.as_i64s()?);
            let n: usize = shape.iter().product();
            // Each value lies between start and limit, but i * delta alone
            // may not fit in i64.
            let at =
                |i: i64| i64::try_from(i128::from(s[0]) + i128::from(i) * i128::from(d[0])).ok();
            let v: Vec<i64> = (0..n as i64).map(at).collect::<Option<_>>()?;
            int_tensor(dt, &shape, &v).map(KnownValue::Tensor)
        }
        Op::Expand(_) if inputs[0].shape.numel().known() == Some(1) => {
            let d = dims(0)?;
            let n: usize = shape.iter().product();
            dims_value(dt, shape, vec![d.first()?.clone(); n])
        }
        _ => None,
    }
}

/// Element pairs of a broadcast of two flat values (scalar or equal length).
fn broadcast_pairs<'a, T>(x: &'a [T], y: &'a [T], n: usize) -> Option<Vec<(&'a T, &'a T)>> {
    let pick = |v: &'a [T], i: usize| -> Option<&'a T> {
        match v.len() {
            1 => v.first(),
            l if l == n => v.get(i),
            _ => None,
        }
    };
    (0..n).map(|i| Some((pick(x, i)?, pick(y, i)?))).collect()
}

/// Integer remainder with the divisor's sign, as Python's `%`.
pub fn python_mod(p: i64, q: i64) -> i64 {
    let r = p.wrapping_rem(q);
    if r != 0 && ((r < 0) != (q < 0)) {
        r + q
    } else {
        r
    }
}
