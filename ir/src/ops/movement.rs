//! Shape and data movement: Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
//! Expand, Concat, Split, Slice, Pad, Tile, DepthToSpace, SpaceToDepth,
//! ReverseSequence, CenterCropPad.
//!
//! Shape-determining operands (target shapes, slice bounds, pads, repeats, axes)
//! are inputs, as in recent ONNX opsets; their values are read when known, and
//! the output dims are fresh symbols otherwise.

use super::{
    attr_err, broadcast, broadcast_dim, norm_axes, norm_axis, value_err, InferCx, InferError, OpDef,
};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, op_attrs};

op_attrs! {
    /// Reshape to the shape in input 1; `0` copies the input dim unless
    /// `allowzero`, `-1` is inferred.
    pub struct Reshape {
        pub allowzero: bool,
    }
}

/// The output shape of a reshape of `input` to the target `spec`.
pub fn reshape_shape(input: &Shape, spec: &[Dim], allowzero: bool) -> Result<Shape, InferError> {
    let mut out = Vec::with_capacity(spec.len());
    let mut infer_at = None;
    for (i, d) in spec.iter().enumerate() {
        match d.known() {
            Some(-1) => {
                if infer_at.replace(i).is_some() {
                    return Err(value_err(1, "more than one -1 in the target shape"));
                }
                out.push(Dim::Known(1));
            }
            Some(0) if !allowzero => {
                out.push(input.0.get(i).cloned().ok_or_else(|| {
                    value_err(1, format!("0 at {i} copies a dim the input lacks"))
                })?)
            }
            Some(v) if v < -1 => return Err(value_err(1, format!("invalid target dim {v}"))),
            _ => out.push(d.clone()),
        }
    }
    let total = input.numel();
    if let Some(i) = infer_at {
        let rest = out.iter().fold(Dim::Known(1), |a, d| a.mul(d));
        if rest.known() == Some(0) {
            return Err(value_err(1, "cannot infer -1 next to a zero dim"));
        }
        out[i] = total.floor_div(&rest)?;
    }
    let prod = Shape(out.clone()).numel();
    if let (Some(a), Some(b)) = (prod.known(), total.known()) {
        if a != b {
            return Err(InferError::Mismatch {
                what: "element counts of reshape",
                a: total.to_string(),
                b: Shape(out).to_string(),
            });
        }
    }
    Ok(Shape(out))
}

impl OpDef for Reshape {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, &[DType::I64])?;
        cx.expect_rank(1, 1)?;
        let s = match cx.dims_value(1) {
            Some(spec) => reshape_shape(cx.shape(0), &spec, self.allowzero)?,
            None => {
                let n = cx.shape(1).0[0]
                    .known()
                    .ok_or(InferError::NotConstant { port: 1 })?;
                cx.fresh_shape(0, n as usize)?
            }
        };
        Ok(vec![TensorType::new(cx.dtype(0), s)])
    }
}

op_attrs! {
    /// Reshape to 2-D: `[prod(d[..axis]), prod(d[axis..])]`.
    pub struct Flatten {
        pub axis: i64,
    }
}

impl OpDef for Flatten {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        let r = x.rank() as i64;
        let a = if self.axis < 0 {
            self.axis + r
        } else {
            self.axis
        };
        if !(0..=r).contains(&a) {
            return Err(InferError::Axis {
                axis: self.axis,
                rank: x.rank(),
            });
        }
        let a = a as usize;
        let outer = Shape(x.0[..a].to_vec()).numel();
        let inner = Shape(x.0[a..].to_vec()).numel();
        Ok(vec![TensorType::new(
            cx.dtype(0),
            Shape(vec![outer, inner]),
        )])
    }
}

op_attrs! {
    /// Removes the size-1 axes given by input 1, or every size-1 axis without it.
    pub struct Squeeze {}
}

impl OpDef for Squeeze {
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        let axes = if cx.has(1) {
            let Some(a) = cx.ints(1) else {
                let n = cx
                    .shape(1)
                    .0
                    .first()
                    .and_then(Dim::known)
                    .ok_or(InferError::NotConstant { port: 1 })? as usize;
                let r = x
                    .rank()
                    .checked_sub(n)
                    .ok_or_else(|| value_err(1, "more axes than dims"))?;
                return Ok(vec![TensorType::new(cx.dtype(0), cx.fresh_shape(0, r)?)]);
            };
            let axes = norm_axes(&a, x.rank())?;
            for &a in &axes {
                if let Some(v) = x.0[a].known() {
                    if v != 1 {
                        return Err(value_err(1, format!("axis {a} has size {v}, not 1")));
                    }
                }
            }
            axes
        } else {
            // Every axis known to be 1. A dim named by an input (a batch or
            // sequence length) stays, as ONNX Runtime's shape inference keeps
            // it: specialization infers again with the real sizes and drops it
            // there if it is 1. A dim computed from data could be anything.
            let runtime = x.0.iter().any(|d| {
                d.symbols()
                    .iter()
                    .any(|s| super::infer::is_runtime_symbol(s))
            });
            if runtime {
                return Err(value_err(
                    0,
                    "squeezing every size-1 axis needs dims not computed from data",
                ));
            }
            (0..x.rank())
                .filter(|&i| x.0[i].known() == Some(1))
                .collect()
        };
        let s =
            x.0.iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, d)| d.clone())
                .collect();
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

op_attrs! {
    /// Inserts size-1 axes at the output positions given by input 1.
    pub struct Unsqueeze {}
}

impl OpDef for Unsqueeze {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        let Some(a) = cx.ints(1) else {
            // Unknown axes: only the output rank is known.
            let n = cx
                .shape(1)
                .0
                .first()
                .and_then(Dim::known)
                .ok_or(InferError::NotConstant { port: 1 })? as usize;
            return Ok(vec![TensorType::new(
                cx.dtype(0),
                cx.fresh_shape(0, x.rank() + n)?,
            )]);
        };
        let rank = x.rank() + a.len();
        let axes = norm_axes(&a, rank)?;
        let mut src = x.0.iter();
        let s = (0..rank)
            .map(|i| {
                if axes.contains(&i) {
                    Some(Dim::Known(1))
                } else {
                    src.next().cloned()
                }
            })
            .collect::<Option<Vec<_>>>();
        let s = s.ok_or_else(|| value_err(1, "bad axes"))?;
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

op_attrs! {
    /// Permutes the axes: output axis `i` is input axis `perm[i]`.
    pub struct Transpose {
        pub perm: Vec<i64>,
    }
}

impl OpDef for Transpose {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        if self.perm.len() != x.rank() {
            return Err(attr_err(
                "perm",
                format!("{} entries for rank {}", self.perm.len(), x.rank()),
            ));
        }
        let p = norm_axes(&self.perm, x.rank())?;
        Ok(vec![TensorType::new(
            cx.dtype(0),
            Shape(p.iter().map(|&i| x.0[i].clone()).collect()),
        )])
    }
}

op_attrs! {
    /// Broadcasts the input against the shape in input 1 (both ways).
    pub struct Expand {}
}

impl OpDef for Expand {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, &[DType::I64])?;
        cx.expect_rank(1, 1)?;
        let s = match cx.dims_value(1) {
            Some(v) => broadcast(cx.shape(0), &Shape(v))?,
            None => {
                let n = cx.shape(1).0[0]
                    .known()
                    .ok_or(InferError::NotConstant { port: 1 })? as usize;
                cx.fresh_shape(0, n.max(cx.rank(0)))?
            }
        };
        Ok(vec![TensorType::new(cx.dtype(0), s)])
    }
}

op_attrs! {
    /// Concatenates the inputs along `axis`.
    pub struct Concat {
        pub axis: i64,
    }
}

impl OpDef for Concat {
    fn arity(&self) -> (usize, usize) {
        (1, usize::MAX)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let first = cx.shape(0);
        let axis = norm_axis(self.axis, first.rank())?;
        let mut out = first.clone();
        for i in 1..cx.inputs.len() {
            cx.expect_same_dtype(i, 0)?;
            let s = cx.shape(i);
            if s.rank() != first.rank() {
                return Err(InferError::Rank {
                    port: i,
                    got: s.rank(),
                    expected: first.rank().to_string(),
                });
            }
            for (j, d) in s.0.iter().enumerate() {
                if j == axis {
                    out.0[j] = out.0[j].add(d);
                } else if out.0[j] != *d {
                    let unified = match (out.0[j].known(), d.known()) {
                        (Some(_), Some(_)) => None,
                        (Some(_), None) => Some(out.0[j].clone()),
                        (None, Some(_)) => Some(d.clone()),
                        (None, None) => broadcast_dim(&out.0[j], d),
                    };
                    out.0[j] = unified.ok_or_else(|| InferError::Mismatch {
                        what: "concat dims",
                        a: first.to_string(),
                        b: s.to_string(),
                    })?;
                }
            }
        }
        Ok(vec![TensorType::new(cx.dtype(0), out)])
    }
}

op_attrs! {
    /// Splits along `axis` into `num_outputs` parts: sizes from input 1, or equal
    /// parts with a smaller last one.
    pub struct Split {
        pub axis: i64,
        pub num_outputs: i64,
    }
}

impl OpDef for Split {
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        let axis = norm_axis(self.axis, x.rank())?;
        if self.num_outputs < 1 {
            return Err(attr_err("num_outputs", "must be positive"));
        }
        let k = self.num_outputs as usize;
        let n = &x.0[axis];
        let sizes: Vec<Dim> = if cx.has(1) {
            match cx.dims_value(1) {
                Some(v) => {
                    if v.len() != k {
                        return Err(value_err(1, format!("{} sizes for {k} outputs", v.len())));
                    }
                    if let Some((i, d)) = v
                        .iter()
                        .enumerate()
                        .find(|(_, d)| d.known().is_some_and(|x| x < 0))
                    {
                        return Err(value_err(1, format!("size {d} at {i} is negative")));
                    }
                    let total = v.iter().fold(Dim::Known(0), |a, d| a.add(d));
                    if let (Some(t), Some(nn)) = (total.known(), n.known()) {
                        if t != nn {
                            return Err(value_err(
                                1,
                                format!("sizes sum to {t}, the axis has {nn}"),
                            ));
                        }
                    }
                    v
                }
                None => (0..k).map(|i| cx.fresh(i, axis)).collect(),
            }
        } else {
            let each = n.ceil_div(&Dim::Known(k as i64))?;
            let mut v = vec![each.clone(); k];
            v[k - 1] = n.sub(&each.mul(&Dim::Known(k as i64 - 1)));
            if let Some(last) = v[k - 1].known() {
                if last < 0 {
                    return Err(value_err(
                        0,
                        format!("axis of size {n} cannot split into {k} parts"),
                    ));
                }
            }
            v
        };
        Ok(sizes
            .into_iter()
            .map(|d| {
                let mut s = x.clone();
                s.0[axis] = d;
                TensorType::new(cx.dtype(0), s)
            })
            .collect())
    }
}

op_attrs! {
    /// Strided slice; inputs `data`, `starts`, `ends`, optional `axes`, optional `steps`.
    pub struct Slice {}
}

/// Clamped start and length of an ONNX slice over a concrete axis of size `n`.
pub fn slice_range(n: i64, start: i64, end: i64, step: i64) -> (i64, i64) {
    let fix = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    if n <= 0 {
        return (0, 0);
    }
    if step > 0 {
        let s = fix(start).clamp(0, n);
        let e = fix(end).clamp(0, n);
        (s, ((e - s).max(0) + step - 1) / step)
    } else {
        let s = fix(start).clamp(0, n - 1);
        let e = fix(end).clamp(-1, n - 1);
        (s, ((s - e).max(0) + (-step) - 1) / (-step))
    }
}

/// The per-axis (start, end, step) of a slice for an input of `rank`.
pub fn slice_params(
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
    rank: usize,
) -> Result<Vec<(usize, i64, i64, i64)>, InferError> {
    if starts.len() != ends.len() {
        return Err(value_err(2, "starts and ends differ in length"));
    }
    let axes = match axes {
        Some(a) => norm_axes(a, rank)?,
        None if starts.len() <= rank => (0..starts.len()).collect(),
        None => {
            return Err(value_err(
                1,
                format!("{} starts for a rank-{rank} input", starts.len()),
            ))
        }
    };
    if axes.len() != starts.len() {
        return Err(value_err(3, "axes and starts differ in length"));
    }
    let steps = steps
        .map(<[i64]>::to_vec)
        .unwrap_or_else(|| vec![1; starts.len()]);
    if steps.len() != starts.len() || steps.contains(&0) {
        return Err(value_err(4, "steps must be non-zero, one per axis"));
    }
    Ok((0..starts.len())
        .map(|i| (axes[i], starts[i], ends[i], steps[i]))
        .collect())
}

/// Length of a slice of a symbolic axis, for the bounds ONNX exporters produce.
fn symbolic_slice_len(n: &Dim, start: &Dim, end: &Dim, step: i64) -> Option<Dim> {
    const BIG: i64 = 1 << 40;
    let pos = |d: &Dim| -> Dim {
        match d.known() {
            Some(v) if v < 0 => n.add(&Dim::Known(v)),
            Some(v) if v >= BIG => n.clone(),
            _ => d.min_dim(n),
        }
    };
    if step > 0 {
        let (s, e) = (pos(start), pos(end));
        e.sub(&s).ceil_div(&Dim::Known(step)).ok()
    } else {
        let s = match start.known() {
            Some(v) if v >= BIG => n.sub(&Dim::Known(1)),
            _ => pos(start),
        };
        let e = match end.known() {
            Some(v) if v <= -BIG => Dim::Known(-1),
            _ => pos(end),
        };
        s.sub(&e).ceil_div(&Dim::Known(-step)).ok()
    }
}

impl OpDef for Slice {
    fn arity(&self) -> (usize, usize) {
        (3, 5)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1, 2, 3, 4]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        if cx.has(3) && cx.ints(3).is_none() {
            return Ok(vec![TensorType::new(
                cx.dtype(0),
                cx.fresh_shape(0, x.rank())?,
            )]);
        }
        let axes = if cx.has(3) { cx.ints(3) } else { None };
        let steps = if cx.has(4) {
            cx.ints(4)
        } else {
            Some(vec![
                1;
                cx.shape(1).0.first().and_then(Dim::known).unwrap_or(0)
                    as usize
            ])
        };
        let (Some(starts), Some(ends), Some(steps)) = (cx.dims_value(1), cx.dims_value(2), steps)
        else {
            // Unknown bounds: the sliced axes get fresh dims.
            let mut s = x.clone();
            match &axes {
                Some(a) => {
                    for ax in norm_axes(a, x.rank())? {
                        s.0[ax] = cx.fresh(0, ax);
                    }
                }
                None => {
                    let n = cx
                        .shape(1)
                        .0
                        .first()
                        .and_then(Dim::known)
                        .unwrap_or(x.rank() as i64) as usize;
                    for ax in 0..n.min(x.rank()) {
                        s.0[ax] = cx.fresh(0, ax);
                    }
                }
            }
            return Ok(vec![TensorType::new(cx.dtype(0), s)]);
        };
        if starts.len() != ends.len() || steps.len() != starts.len() {
            return Err(value_err(2, "starts, ends and steps differ in length"));
        }
        let axes = match axes {
            Some(a) => norm_axes(&a, x.rank())?,
            None if starts.len() <= x.rank() => (0..starts.len()).collect(),
            None => {
                return Err(value_err(
                    1,
                    format!("{} starts for a rank-{} input", starts.len(), x.rank()),
                ))
            }
        };
        if axes.len() != starts.len() {
            return Err(value_err(3, "axes and starts differ in length"));
        }
        let mut s = x.clone();
        for i in 0..axes.len() {
            let ax = axes[i];
            if steps[i] == 0 {
                return Err(value_err(4, "steps must be non-zero"));
            }
            s.0[ax] = match (x.0[ax].known(), starts[i].known(), ends[i].known()) {
                (Some(n), Some(st), Some(en)) => Dim::Known(slice_range(n, st, en, steps[i]).1),
                _ => symbolic_slice_len(&x.0[ax], &starts[i], &ends[i], steps[i])
                    .unwrap_or_else(|| cx.fresh(0, ax)),
            };
        }
        Ok(vec![TensorType::new(cx.dtype(0), s)])
    }
}

attr_enum! {
    pub enum PadMode { Constant = "constant", Reflect = "reflect", Edge = "edge", Wrap = "wrap" }
}

op_attrs! {
    /// Pads (or crops, with negative pads); inputs `x`, `pads` (begins then ends),
    /// scalar `value`, optional `axes`.
    pub struct Pad {
        pub mode: PadMode,
    }
}

impl OpDef for Pad {
    fn arity(&self) -> (usize, usize) {
        (3, 4)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1, 3]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        if cx.has(3) && cx.ints(3).is_none() {
            return Ok(vec![TensorType::new(
                cx.dtype(0),
                cx.fresh_shape(0, x.rank())?,
            )]);
        }
        let axes = if let Some(a) = cx.ints(3) {
            norm_axes(&a, x.rank())?
        } else {
            (0..x.rank()).collect()
        };
        let Some(pads) = cx.ints(1) else {
            let mut s = x.clone();
            for &a in &axes {
                s.0[a] = cx.fresh(0, a);
            }
            return Ok(vec![TensorType::new(cx.dtype(0), s)]);
        };
        if pads.len() != 2 * axes.len() {
            return Err(value_err(
                1,
                format!("{} pads for {} axes", pads.len(), axes.len()),
            ));
        }
        let mut s = x.clone();
        for (i, &a) in axes.iter().enumerate() {
            let total = pads[i]
                .checked_add(pads[i + axes.len()])
                .ok_or_else(|| value_err(1, "pads past i64"))?;
            s.0[a] = s.0[a].add(&Dim::Known(total));
            if s.0[a].known().is_some_and(|v| v < 0) {
                return Err(value_err(1, "pads crop more than the axis holds"));
            }
        }
        Ok(vec![TensorType::new(cx.dtype(0), s)])
    }
}

op_attrs! {
    /// Repeats the input `repeats[i]` times along each axis (input 1).
    pub struct Tile {}
}

impl OpDef for Tile {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        let s = match cx.dims_value(1) {
            Some(r) => {
                if r.len() != x.rank() {
                    return Err(value_err(
                        1,
                        format!("{} repeats for rank {}", r.len(), x.rank()),
                    ));
                }
                Shape(x.0.iter().zip(&r).map(|(a, b)| a.mul(b)).collect())
            }
            None => cx.fresh_shape(0, x.rank())?,
        };
        Ok(vec![TensorType::new(cx.dtype(0), s)])
    }
}

attr_enum! {
    /// The block order of DepthToSpace and SpaceToDepth: depth-column-row
    /// (channel blocks outermost) or column-row-depth (channels outermost).
    pub enum DepthToSpaceMode { Dcr = "dcr", Crd = "crd" }
}

op_attrs! {
    /// Moves channel blocks into spatial blocks: `[N,C,H,W] -> [N,C/b²,H*b,W*b]`.
    pub struct DepthToSpace {
        pub blocksize: i64,
        pub mode: DepthToSpaceMode,
    }
}

impl OpDef for DepthToSpace {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_rank(0, 4)?;
        let b = self.blocksize;
        if b < 1 {
            return Err(attr_err("blocksize", "must be positive"));
        }
        let x = &cx.shape(0).0;
        let bb = Dim::Known(b);
        let b2 = b
            .checked_mul(b)
            .ok_or_else(|| attr_err("blocksize", "its square overflows i64"))?;
        let s = vec![
            x[0].clone(),
            block_div(&x[1], b2, "channels", "the square of blocksize")?,
            x[2].mul(&bb),
            x[3].mul(&bb),
        ];
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

/// `d / k` for a dim that must be a multiple of `k` (as ONNX Runtime
/// requires of DepthToSpace's channels and SpaceToDepth's height and width):
/// a known dim that is not is an error, where a floor would drop the rest
/// of the tensor; a symbolic one is checked once it is bound.
fn block_div(d: &Dim, k: i64, what: &str, of: &str) -> Result<Dim, InferError> {
    if let Dim::Known(v) = d {
        if v % k != 0 {
            return Err(value_err(
                0,
                format!("{what} {v} is not a multiple of {of} ({k})"),
            ));
        }
    }
    Ok(d.floor_div(&Dim::Known(k))?)
}

op_attrs! {
    /// Moves spatial blocks into channels: `[N,C,H,W] -> [N,C*b²,H/b,W/b]`.
    pub struct SpaceToDepth {
        pub blocksize: i64,
        pub mode: DepthToSpaceMode,
    }
}

impl OpDef for SpaceToDepth {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_rank(0, 4)?;
        let b = self.blocksize;
        if b < 1 {
            return Err(attr_err("blocksize", "must be positive"));
        }
        let x = &cx.shape(0).0;
        let b2 = b
            .checked_mul(b)
            .ok_or_else(|| attr_err("blocksize", "its square overflows i64"))?;
        let s = vec![
            x[0].clone(),
            x[1].mul(&Dim::Known(b2)),
            block_div(&x[2], b, "height", "blocksize")?,
            block_div(&x[3], b, "width", "blocksize")?,
        ];
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

op_attrs! {
    /// Reverses the first `lens[b]` steps along `time_axis` of each batch entry.
    pub struct ReverseSequence {
        pub batch_axis: i64,
        pub time_axis: i64,
    }
}

impl OpDef for ReverseSequence {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(1, &[DType::I64])?;
        norm_axis(self.batch_axis, cx.rank(0))?;
        norm_axis(self.time_axis, cx.rank(0))?;
        Ok(vec![cx.ty(0).clone()])
    }
}

op_attrs! {
    /// Center-crops or pads `axes` to the sizes in input 1.
    pub struct CenterCropPad {
        pub axes: Vec<i64>,
    }
}

impl OpDef for CenterCropPad {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let x = cx.shape(0);
        let axes: Vec<usize> = if self.axes.is_empty() {
            (0..x.rank()).collect()
        } else {
            norm_axes(&self.axes, x.rank())?
        };
        let mut s = x.clone();
        match cx.dims_value(1) {
            Some(v) => {
                if v.len() != axes.len() {
                    return Err(value_err(
                        1,
                        format!("{} sizes for {} axes", v.len(), axes.len()),
                    ));
                }
                for (a, d) in axes.iter().zip(v) {
                    s.0[*a] = d;
                }
            }
            None => {
                for &a in &axes {
                    s.0[a] = cx.fresh(0, a);
                }
            }
        }
        Ok(vec![TensorType::new(cx.dtype(0), s)])
    }
}
