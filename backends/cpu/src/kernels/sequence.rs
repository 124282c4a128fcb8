//! Sequences and optionals, evaluated node by node: a sequence is a
//! [`Tensor`] holding its elements, an absent optional a [`Tensor::none`],
//! and a present optional its value itself.

use rlx_ir::ops::Op;
use rlx_ir::{Bytes, DType, Node, Tensor, ValueKind};

use crate::kernel::{run_subgraph, EvalCx, KernelError};

fn internal(e: impl ToString) -> KernelError {
    KernelError::Internal(e.to_string())
}

fn value(m: impl Into<String>) -> KernelError {
    KernelError::Value(m.into())
}

/// The elements of sequence input `port`.
fn elements(inputs: &[Tensor], port: usize) -> Result<&[Tensor], KernelError> {
    inputs[port]
        .elements()
        .ok_or_else(|| value(format!("input {port} is not a sequence")))
}

/// A position input (an integer scalar, negative from the end) in `0..len`,
/// or `0..=len` where one may insert at the end.
fn position(t: &Tensor, len: usize, end_ok: bool) -> Result<usize, KernelError> {
    let p = match t.to_i64_vec().as_deref() {
        Some([p]) => *p,
        _ => return Err(value("a sequence position must be one integer")),
    };
    let n = len as i64;
    let at = if p < 0 { p + n } else { p };
    let hi = if end_ok { n } else { n - 1 };
    if at < 0 || at > hi {
        return Err(value(format!(
            "position {p} is outside a sequence of {len} elements"
        )));
    }
    Ok(at as usize)
}

fn sequence(dtype: DType, elems: Vec<Tensor>) -> Result<Vec<Tensor>, KernelError> {
    Ok(vec![Tensor::sequence(dtype, elems).map_err(value_of)?])
}

fn value_of(e: rlx_ir::tensor::TensorError) -> KernelError {
    KernelError::Value(e.to_string())
}

pub fn construct(_: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    sequence(inputs[0].dtype(), inputs.to_vec())
}

pub fn empty(node: &Node, _: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::SequenceEmpty(op) = &node.op else {
        return Err(internal("not sequence_empty"));
    };
    sequence(op.dtype, Vec::new())
}

pub fn insert(_: &Node, inputs: &[Tensor], cx: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    cx.check_count(elements(inputs, 0)?.len() as u64 + 1)?;
    let mut elems = elements(inputs, 0)?.to_vec();
    let at = match inputs.get(2) {
        Some(p) => position(p, elems.len(), true)?,
        None => elems.len(),
    };
    elems.insert(at, inputs[1].clone());
    sequence(inputs[0].dtype(), elems)
}

pub fn erase(_: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let mut elems = elements(inputs, 0)?.to_vec();
    if elems.is_empty() {
        return Err(value("erasing from an empty sequence"));
    }
    let at = match inputs.get(1) {
        Some(p) => position(p, elems.len(), false)?,
        None => elems.len() - 1,
    };
    elems.remove(at);
    sequence(inputs[0].dtype(), elems)
}

pub fn at(_: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let elems = elements(inputs, 0)?;
    let at = position(&inputs[1], elems.len(), false)?;
    Ok(vec![elems[at].clone()])
}

pub fn length(_: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let n = elements(inputs, 0)?.len();
    Ok(vec![Tensor::scalar_i64(n as i64)])
}

/// Slices `[start, start + len)` of `axis` of a plain tensor.
fn slice_axis(x: &Tensor, axis: usize, start: usize, len: usize) -> Result<Tensor, KernelError> {
    let idx: Vec<usize> = (start..start + len).collect();
    super::data::gather_slices(x, Some(axis), &idx)
}

fn plain(t: &Tensor, what: &str) -> Result<(), KernelError> {
    if t.is_plain() {
        Ok(())
    } else {
        Err(KernelError::Unsupported(format!(
            "{what} of {} values",
            if t.dtype() == DType::Str {
                "string"
            } else {
                "non-tensor"
            }
        )))
    }
}

pub fn split_to_sequence(
    node: &Node,
    inputs: &[Tensor],
    _: &EvalCx,
) -> Result<Vec<Tensor>, KernelError> {
    let Op::SplitToSequence(op) = &node.op else {
        return Err(internal("not split_to_sequence"));
    };
    let x = &inputs[0];
    plain(x, "split_to_sequence")?;
    let r = x.dims().len();
    let axis = rlx_ir::ops::norm_axis(op.axis, r).map_err(|e| value(e.to_string()))?;
    let n = x.dims()[axis];
    let sizes: Vec<usize> = match inputs.get(1).map(|s| (s.dims().len(), s.to_i64_vec())) {
        None => vec![1; n],
        Some((0, Some(v))) => {
            let first = *v
                .first()
                .ok_or_else(|| value("an empty split size".to_string()))?;
            let s = usize::try_from(first)
                .ok()
                .filter(|&s| s > 0)
                .ok_or_else(|| value(format!("split size {first} is not positive")))?;
            (0..n.div_ceil(s)).map(|i| s.min(n - i * s)).collect()
        }
        Some((1, Some(v))) => {
            let s: Vec<usize> = v
                .iter()
                .map(|&s| {
                    usize::try_from(s).map_err(|_| value(format!("split size {s} is negative")))
                })
                .collect::<Result<_, _>>()?;
            if s.iter().sum::<usize>() != n {
                return Err(value(format!("split sizes {v:?} do not add up to {n}")));
            }
            s
        }
        _ => return Err(value("split must be an integer scalar or 1-D tensor")),
    };
    let squeeze = inputs.len() < 2 && !op.keepdims;
    let mut elems = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for s in sizes {
        let mut piece = slice_axis(x, axis, start, s)?;
        if squeeze {
            let mut d = piece.dims().to_vec();
            d.remove(axis);
            piece = piece.reshaped(d).map_err(internal)?;
        }
        elems.push(piece);
        start += s;
    }
    sequence(x.dtype(), elems)
}

pub fn concat_from_sequence(
    node: &Node,
    inputs: &[Tensor],
    cx: &EvalCx,
) -> Result<Vec<Tensor>, KernelError> {
    let Op::ConcatFromSequence(op) = &node.op else {
        return Err(internal("not concat_from_sequence"));
    };
    let elems = elements(inputs, 0)?;
    let Some(first) = elems.first() else {
        return Err(value("concatenating an empty sequence"));
    };
    for e in elems {
        plain(e, "concat_from_sequence")?;
    }
    let r = first.dims().len() + usize::from(op.new_axis);
    let axis = rlx_ir::ops::norm_axis(op.axis, r).map_err(|e| value(e.to_string()))?;
    // With new_axis every element gains a size-1 axis first.
    let parts: Vec<Tensor> = elems
        .iter()
        .map(|e| {
            if op.new_axis {
                let mut d = e.dims().to_vec();
                d.insert(axis, 1);
                e.reshaped(d).map_err(internal)
            } else {
                Ok(e.clone())
            }
        })
        .collect::<Result<_, _>>()?;
    let dims = parts[0].dims().to_vec();
    let same = |p: &Tensor| {
        p.dims().len() == dims.len()
            && p.dims()
                .iter()
                .zip(&dims)
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b)
    };
    if let Some(bad) = parts.iter().find(|p| !same(p)) {
        return Err(value(format!(
            "elements of shapes {:?} and {:?} do not concatenate along axis {axis}",
            dims,
            bad.dims()
        )));
    }
    let w = first.dtype().size();
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product::<usize>() * w;
    let total = parts
        .iter()
        .try_fold(0usize, |a, p| a.checked_add(p.dims()[axis]))
        .ok_or_else(|| value("the concatenation's length overflows"))?;
    let mut d = dims;
    d[axis] = total;
    cx.check_elements(&d)?;
    let mut out = Vec::with_capacity(outer * total * inner);
    for o in 0..outer {
        for p in &parts {
            let k = p.dims()[axis] * inner;
            out.extend_from_slice(&p.bytes()[o * k..(o + 1) * k]);
        }
    }
    Ok(vec![
        Tensor::new(first.dtype(), d, Bytes::copy_from(&out)).map_err(internal)?
    ])
}

pub fn sequence_map(
    node: &Node,
    inputs: &[Tensor],
    cx: &EvalCx,
) -> Result<Vec<Tensor>, KernelError> {
    let Op::SequenceMap(op) = &node.op else {
        return Err(internal("not sequence_map"));
    };
    let body = &op.body;
    // An input is mapped element by element where the body takes one element
    // of it (a tensor) and it is a sequence; the others go in whole.
    let mapped: Vec<bool> = inputs
        .iter()
        .zip(body.inputs())
        .map(|(t, &b)| {
            t.kind() == ValueKind::Sequence
                && body.ty(rlx_ir::Value::of(b)).kind == ValueKind::Tensor
        })
        .collect();
    let n = elements(inputs, 0)?.len();
    for (p, t) in inputs.iter().enumerate() {
        if mapped[p] && elements(inputs, p)?.len() != n {
            return Err(value(format!(
                "sequence input {p} has {} elements, input 0 has {n}",
                t.elements().map_or(0, <[Tensor]>::len)
            )));
        }
    }
    let outs = body.outputs().len();
    let mut results: Vec<Vec<Tensor>> = vec![Vec::with_capacity(n); outs];
    for i in 0..n {
        let args: Vec<Tensor> = inputs
            .iter()
            .zip(&mapped)
            .map(|(t, &m)| {
                if m {
                    t.elements().map_or_else(|| t.clone(), |e| e[i].clone())
                } else {
                    t.clone()
                }
            })
            .collect();
        let ys = run_subgraph(body, cx, args)?;
        for (r, y) in results.iter_mut().zip(ys) {
            r.push(y);
        }
    }
    results
        .into_iter()
        .enumerate()
        .map(|(k, elems)| {
            let dtype = body.ty(body.outputs()[k].value).dtype;
            Tensor::sequence(dtype, elems).map_err(value_of)
        })
        .collect()
}

pub fn optional(node: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::Optional(op) = &node.op else {
        return Err(internal("not optional"));
    };
    Ok(vec![match inputs.first() {
        Some(t) => t.clone(),
        None => {
            let kind = if op.sequence {
                ValueKind::OptionalSequence
            } else {
                ValueKind::Optional
            };
            Tensor::none(op.dtype, kind)
        }
    }])
}

pub fn has_element(_: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let has = !inputs[0].is_none();
    Ok(vec![
        Tensor::from_slice(DType::Bool, &[], &[u8::from(has)]).map_err(internal)?
    ])
}

pub fn get_element(_: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    if inputs[0].is_none() {
        return Err(value("the optional holds no value"));
    }
    Ok(vec![inputs[0].clone()])
}

pub fn zip_map(node: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::ZipMap(op) = &node.op else {
        return Err(internal("not zip_map"));
    };
    let x = &inputs[0];
    plain(x, "zip_map")?;
    let scores = x.as_slice::<f32>().map_err(|e| value(e.to_string()))?;
    let c = op.labels.numel();
    let ok = matches!(x.dims(), [n] if *n == c) || matches!(x.dims(), [_, n] if *n == c);
    if !ok {
        return Err(value(format!(
            "scores of shape {:?} for {c} labels",
            x.dims()
        )));
    }
    let maps = scores
        .chunks_exact(c.max(1))
        .map(|row| {
            let values = Tensor::from_f32(&[c], row).map_err(internal)?;
            Tensor::map(op.labels.clone(), values).map_err(value_of)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(vec![Tensor::map_sequence(
        op.labels.dtype(),
        DType::F32,
        maps,
    )
    .map_err(value_of)?])
}
