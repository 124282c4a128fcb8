//! Sequence and optional ops, one RLX op each (see `rlx_ir::ops::sequence`).

use rlx_ir::ops::{
    ConcatFromSequence, Optional, OptionalGetElement, OptionalHasElement, SequenceAt,
    SequenceConstruct, SequenceEmpty, SequenceErase, SequenceInsert, SequenceLength, SequenceMap,
    SplitToSequence,
};
use rlx_ir::{DType, Tensor, TensorType, ValueKind};

use super::control::body;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("SequenceConstruct", 11, construct);
    r.add("SequenceEmpty", 11, empty);
    r.add("SequenceInsert", 11, insert);
    r.add("SequenceErase", 11, erase);
    r.add("SequenceAt", 11, at);
    r.add("SequenceLength", 11, length);
    r.add("SplitToSequence", 11, split_to_sequence);
    r.add("ConcatFromSequence", 11, concat_from_sequence);
    r.add("SequenceMap", 17, sequence_map);
    r.add("Optional", 15, optional);
    r.add("OptionalHasElement", 15, has_element);
    r.add("OptionalGetElement", 15, get_element);
}

/// Maps a node to `op` over all its present inputs.
fn plain(cx: &mut NodeCtx, op: impl Into<rlx_ir::Op>) -> Result<(), MapError> {
    let mut ins = Vec::new();
    for i in 0..cx.num_inputs() {
        if let Some(v) = cx.input(i)? {
            ins.push(v);
        } else if i + 1 < cx.num_inputs() {
            return cx.unsupported(format!("input {i} is left out before a later one"));
        }
    }
    let ys = cx.add(op, &ins)?;
    cx.set_outputs(&ys);
    Ok(())
}

fn construct(cx: &mut NodeCtx) -> Result<(), MapError> {
    plain(cx, SequenceConstruct {})
}

fn empty(cx: &mut NodeCtx) -> Result<(), MapError> {
    let dtype = cx.attr_dtype("dtype")?.unwrap_or(DType::F32);
    plain(cx, SequenceEmpty { dtype })
}

fn insert(cx: &mut NodeCtx) -> Result<(), MapError> {
    plain(cx, SequenceInsert {})
}

fn erase(cx: &mut NodeCtx) -> Result<(), MapError> {
    plain(cx, SequenceErase {})
}

fn at(cx: &mut NodeCtx) -> Result<(), MapError> {
    plain(cx, SequenceAt {})
}

fn length(cx: &mut NodeCtx) -> Result<(), MapError> {
    plain(cx, SequenceLength {})
}

fn split_to_sequence(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", 0)?;
    let keepdims = cx.attr_bool("keepdims", true)?;
    plain(cx, SplitToSequence { axis, keepdims })
}

fn concat_from_sequence(cx: &mut NodeCtx) -> Result<(), MapError> {
    let Some(axis) = cx.attr_i_opt("axis")? else {
        return cx.unsupported("ConcatFromSequence needs the attribute axis");
    };
    let new_axis = cx.attr_bool("new_axis", false)?;
    plain(cx, ConcatFromSequence { axis, new_axis })
}

fn sequence_map(cx: &mut NodeCtx) -> Result<(), MapError> {
    let gp = body(cx, "body")?;
    let mut ins = Vec::new();
    for i in 0..cx.num_inputs() {
        ins.push(cx.req(i)?);
    }
    // The body sees one element of each sequence input, and tensors whole.
    let formal: Vec<Option<TensorType>> = ins
        .iter()
        .map(|v| {
            let t = cx.ty(*v);
            Some(t.clone().with_kind(ValueKind::Tensor))
        })
        .collect();
    let (g, captures) = cx.subgraph("body", gp, &formal)?;
    for name in &captures {
        ins.push(cx.lookup(name)?);
    }
    let ys = cx.add(SequenceMap { body: g }, &ins)?;
    cx.set_outputs(&ys);
    Ok(())
}

fn optional(cx: &mut NodeCtx) -> Result<(), MapError> {
    let declared = cx.attr_type("type")?;
    let op = match (cx.input(0)?, declared) {
        (Some(v), _) => {
            let t = cx.ty(v);
            Optional {
                dtype: t.dtype,
                sequence: t.kind == ValueKind::Sequence,
            }
        }
        (None, Some(t)) if !t.kind.is_optional() => Optional {
            dtype: t.dtype,
            sequence: t.kind == ValueKind::Sequence,
        },
        (None, Some(t)) => {
            return cx.unsupported(format!("an optional of an optional ({t})"));
        }
        (None, None) => {
            return cx.unsupported("Optional without an input needs the attribute type")
        }
    };
    plain(cx, op)
}

fn has_element(cx: &mut NodeCtx) -> Result<(), MapError> {
    match cx.input(0)? {
        Some(v) if !cx.ty(v).kind.is_optional() => {
            // A tensor or sequence always holds its value.
            let t = cx.constant(bool_scalar(true)?);
            cx.set_output(0, t);
            Ok(())
        }
        Some(_) => plain(cx, OptionalHasElement {}),
        None => {
            let t = cx.constant(bool_scalar(false)?);
            cx.set_output(0, t);
            Ok(())
        }
    }
}

fn get_element(cx: &mut NodeCtx) -> Result<(), MapError> {
    let v = cx.req(0)?;
    if cx.ty(v).kind.is_optional() {
        plain(cx, OptionalGetElement {})
    } else {
        // A tensor or sequence is its own element.
        cx.set_output(0, v);
        Ok(())
    }
}

fn bool_scalar(v: bool) -> Result<Tensor, MapError> {
    Tensor::from_slice(DType::Bool, &[], &[u8::from(v)])
        .map_err(|e| MapError::Unsupported(e.to_string()))
}
