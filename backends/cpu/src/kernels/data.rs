//! Ops whose output sizes depend on the data: NonZero, Compress, Unique and
//! NonMaxSuppression. They compute outputs with their shapes.

use std::cmp::Ordering;

use rlx_ir::{Bytes, DType, Node, Op, Tensor};

use super::cast::{read, Val};
use super::layout::strides;
use crate::kernel::{EvalCx, KernelError};

fn internal(e: impl ToString) -> KernelError {
    KernelError::Internal(e.to_string())
}

fn is_nonzero(t: &Tensor, i: usize) -> bool {
    if t.dtype() == DType::Bool {
        return t.bytes()[i] != 0;
    }
    match read(t.dtype(), t.bytes(), i) {
        Val::Int(v) => v != 0,
        Val::Float(f) => f != 0.0,
    }
}

pub fn nonzero(_: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let x = &inputs[0];
    let dims = x.dims();
    let st = strides(dims);
    let hits: Vec<usize> = (0..x.numel()).filter(|&i| is_nonzero(x, i)).collect();
    let r = dims.len();
    let mut out = vec![0i64; r * hits.len()];
    for (k, &i) in hits.iter().enumerate() {
        for d in 0..r {
            out[d * hits.len() + k] = ((i / st[d]) % dims[d]) as i64;
        }
    }
    Ok(vec![
        Tensor::from_i64(&[r, hits.len()], &out).map_err(internal)?
    ])
}

/// Gathers slices `idx` of `axis` (or flat elements when `axis` is None).
pub(crate) fn gather_slices(
    x: &Tensor,
    axis: Option<usize>,
    idx: &[usize],
) -> Result<Tensor, KernelError> {
    let w = x.dtype().size();
    match axis {
        None => {
            let mut out = Vec::with_capacity(idx.len() * w);
            for &i in idx {
                out.extend_from_slice(&x.bytes()[i * w..(i + 1) * w]);
            }
            Tensor::new(x.dtype(), vec![idx.len()], Bytes::copy_from(&out)).map_err(internal)
        }
        Some(a) => {
            let dims = x.dims();
            let outer: usize = dims[..a].iter().product();
            let inner: usize = dims[a + 1..].iter().product::<usize>() * w;
            let n = dims[a];
            let mut out = Vec::with_capacity(outer * idx.len() * inner);
            for o in 0..outer {
                for &i in idx {
                    let at = (o * n + i) * inner;
                    out.extend_from_slice(&x.bytes()[at..at + inner]);
                }
            }
            let mut s = dims.to_vec();
            s[a] = idx.len();
            Tensor::new(x.dtype(), s, Bytes::copy_from(&out)).map_err(internal)
        }
    }
}

pub fn compress(node: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::Compress(c) = &node.op else {
        return Err(internal("not compress"));
    };
    let (x, cond) = (&inputs[0], &inputs[1]);
    let axis = c.axis.map(|a| super::layout::axis(a, x.dims().len()));
    let limit = axis.map_or(x.numel(), |a| x.dims()[a]);
    let idx: Vec<usize> = (0..cond.numel().min(limit))
        .filter(|&i| cond.bytes()[i] != 0)
        .collect();
    Ok(vec![gather_slices(x, axis, &idx)?])
}

/// Element or slice `i` as comparable values.
fn key(x: &Tensor, axis: Option<usize>, i: usize) -> Vec<f64> {
    let vals = |j: usize| match read(x.dtype(), x.bytes(), j) {
        Val::Int(v) => v as f64,
        Val::Float(f) => f,
    };
    match axis {
        None => vec![vals(i)],
        Some(a) => {
            let dims = x.dims();
            let outer: usize = dims[..a].iter().product();
            let inner: usize = dims[a + 1..].iter().product();
            let n = dims[a];
            let mut v = Vec::with_capacity(outer * inner);
            for o in 0..outer {
                for k in 0..inner {
                    v.push(vals((o * n + i) * inner + k));
                }
            }
            v
        }
    }
}

fn cmp_keys(a: &[f64], b: &[f64]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.partial_cmp(y).unwrap_or(Ordering::Equal) {
            Ordering::Equal => continue,
            o => return o,
        }
    }
    Ordering::Equal
}

pub fn unique(node: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::Unique(u) = &node.op else {
        return Err(internal("not unique"));
    };
    let x = &inputs[0];
    let axis = u.axis.map(|a| super::layout::axis(a, x.dims().len()));
    let n = axis.map_or(x.numel(), |a| x.dims()[a]);
    let keys: Vec<Vec<f64>> = (0..n).map(|i| key(x, axis, i)).collect();
    // First occurrences, in order of appearance.
    let mut firsts: Vec<usize> = Vec::new();
    let mut inverse = vec![0usize; n];
    for i in 0..n {
        match firsts
            .iter()
            .position(|&f| cmp_keys(&keys[f], &keys[i]) == Ordering::Equal)
        {
            Some(p) => inverse[i] = p,
            None => {
                inverse[i] = firsts.len();
                firsts.push(i);
            }
        }
    }
    let mut order: Vec<usize> = (0..firsts.len()).collect();
    if u.sorted {
        order.sort_by(|&p, &q| cmp_keys(&keys[firsts[p]], &keys[firsts[q]]));
    }
    let mut rank = vec![0usize; order.len()];
    for (r, &p) in order.iter().enumerate() {
        rank[p] = r;
    }
    let picked: Vec<usize> = order.iter().map(|&p| firsts[p]).collect();
    let mut counts = vec![0i64; order.len()];
    for &p in &inverse {
        counts[rank[p]] += 1;
    }
    let y = gather_slices(x, axis, &picked)?;
    let m = picked.len();
    let idx: Vec<i64> = picked.iter().map(|&i| i as i64).collect();
    let inv: Vec<i64> = inverse.iter().map(|&p| rank[p] as i64).collect();
    Ok(vec![
        y,
        Tensor::from_i64(&[m], &idx).map_err(internal)?,
        Tensor::from_i64(&[n], &inv).map_err(internal)?,
        Tensor::from_i64(&[m], &counts).map_err(internal)?,
    ])
}

pub fn non_max_suppression(
    node: &Node,
    inputs: &[Tensor],
    _: &EvalCx,
) -> Result<Vec<Tensor>, KernelError> {
    let Op::NonMaxSuppression(op) = &node.op else {
        return Err(internal("not nms"));
    };
    let f = |t: &Tensor| -> Vec<f64> {
        (0..t.numel())
            .map(|i| match read(t.dtype(), t.bytes(), i) {
                Val::Int(v) => v as f64,
                Val::Float(x) => x,
            })
            .collect()
    };
    let (boxes, scores) = (f(&inputs[0]), f(&inputs[1]));
    let max_out = inputs
        .get(2)
        .and_then(|t| t.to_i64_vec())
        .and_then(|v| v.first().copied())
        .unwrap_or(0)
        .max(0) as usize;
    let iou_th = inputs
        .get(3)
        .map(f)
        .and_then(|v| v.first().copied())
        .unwrap_or(0.0);
    let score_th = inputs.get(4).map(f).and_then(|v| v.first().copied());
    // boxes [batch, boxes, 4], scores [batch, classes, boxes].
    let (bd, sd) = (inputs[0].dims(), inputs[1].dims());
    let (&[nb, nbox, 4], &[sb, nc, sbox]) = (bd, sd) else {
        return Err(KernelError::Value(format!(
            "boxes {bd:?} and scores {sd:?} must be [batch, boxes, 4] and [batch, classes, boxes]"
        )));
    };
    if (sb, sbox) != (nb, nbox) {
        return Err(KernelError::Value(format!(
            "scores {sd:?} do not match boxes {bd:?} (batch and box counts)"
        )));
    }
    let corners = |b: usize, i: usize| -> [f64; 4] {
        let p = &boxes[(b * nbox + i) * 4..(b * nbox + i) * 4 + 4];
        if op.center_point_box {
            let (xc, yc, w, h) = (p[0], p[1], p[2], p[3]);
            [yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]
        } else {
            [
                p[0].min(p[2]),
                p[1].min(p[3]),
                p[0].max(p[2]),
                p[1].max(p[3]),
            ]
        }
    };
    let iou = |a: [f64; 4], b: [f64; 4]| -> f64 {
        let ih = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
        let iw = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
        let inter = ih * iw;
        let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
        if union <= 0.0 {
            0.0
        } else {
            inter / union
        }
    };
    let mut out: Vec<i64> = Vec::new();
    for b in 0..nb {
        for c in 0..nc {
            let s = |i: usize| scores[(b * nc + c) * nbox + i];
            let mut cand: Vec<usize> = (0..nbox)
                .filter(|&i| score_th.is_none_or(|t| s(i) > t))
                .collect();
            cand.sort_by(|&p, &q| {
                s(q).partial_cmp(&s(p))
                    .unwrap_or(Ordering::Equal)
                    .then(p.cmp(&q))
            });
            let mut kept: Vec<usize> = Vec::new();
            for i in cand {
                if kept.len() >= max_out {
                    break;
                }
                if kept
                    .iter()
                    .all(|&k| iou(corners(b, k), corners(b, i)) <= iou_th)
                {
                    kept.push(i);
                }
            }
            for k in kept {
                out.extend([b as i64, c as i64, k as i64]);
            }
        }
    }
    Ok(vec![
        Tensor::from_i64(&[out.len() / 3, 3], &out).map_err(internal)?
    ])
}
