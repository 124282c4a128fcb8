//! Attention, MultiHeadAttention and RotaryEmbedding: projections, biases and
//! masks become RLX ops around one ONNX-style `Attention`.

use rlx_ir::ops::{
    Attention, BinaryKind as B, Compare, CompareKind, Concat, Expand, MatMul, Range, Reshape,
    RotaryEmbedding, ShapeOf, Split, Transpose, Unsqueeze, Where,
};
use rlx_ir::{DType, Dim, Value};

use super::MS;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::ops::{binary, cast, unsqueeze};
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add_in(MS, "Attention", 1, attention);
    r.add_in(MS, "QAttention", 1, q_attention);
    r.add_in(MS, "MultiHeadAttention", 1, multi_head_attention);
    r.add_in(MS, "RotaryEmbedding", 1, rotary_embedding);
}

/// ORT's additive value for masked-out keys.
const MASK_FILTER: f32 = -10000.0;

/// Dims `start..start+1` of `v`'s shape as a 1-element i64 tensor.
fn dim_of(cx: &mut NodeCtx, v: Value, axis: i64) -> Result<Value, MapError> {
    cx.add1(
        ShapeOf {
            start: axis,
            end: Some(axis + 1),
        },
        &[v],
    )
}

/// The additive bias `[B,1,1,T]` or `[B,1,S,T]` (dtype `dt`) of an ORT mask
/// over keys `key` (`[B,T,...]`): key lengths `[B]` (keys at or past the
/// length are masked), a 0/1 mask `[B,T]`, or a 0/1 mask `[B,S,T]`.
fn mask_bias(
    cx: &mut NodeCtx,
    mask: Value,
    batch: &Dim,
    key: Value,
    key_axis: i64,
    filter: f32,
    dt: DType,
) -> Result<Value, MapError> {
    let shape = cx.ty(mask).shape;
    match shape.rank() {
        1 if &shape.0[0] == batch => {
            let t = dim_of(cx, key, key_axis)?;
            let scalar = cx.const_i64(&[]);
            let t = cx.add1(Reshape { allowzero: false }, &[t, scalar])?;
            let (zero, one) = (cx.scalar(DType::I64, 0.0)?, cx.scalar(DType::I64, 1.0)?);
            let positions = cx.add1(Range {}, &[zero, t, one])?;
            let lens = cast(cx, mask, DType::I64)?;
            let lens = unsqueeze(cx, lens, &[1])?;
            let valid = cx.add1(
                Compare {
                    kind: CompareKind::Less,
                },
                &[positions, lens],
            )?;
            let (keep, drop) = (cx.scalar(dt, 0.0)?, cx.scalar(dt, filter as f64)?);
            let bias = cx.add1(Where {}, &[valid, keep, drop])?;
            unsqueeze(cx, bias, &[1, 2])
        }
        2 | 3 => {
            let m = cast(cx, mask, dt)?;
            let one = cx.scalar(dt, 1.0)?;
            let off = binary(cx, B::Sub, one, m)?;
            let f = cx.scalar(dt, filter as f64)?;
            let bias = binary(cx, B::Mul, off, f)?;
            let axes: &[i64] = if shape.rank() == 2 { &[1, 2] } else { &[1] };
            unsqueeze(cx, bias, axes)
        }
        _ => cx.unsupported(format!(
            "a mask of shape {shape} (supported: key lengths [B], or 0/1 masks [B,T] and [B,S,T])"
        )),
    }
}

/// Adds `extra` to an optional additive bias.
fn add_bias(
    cx: &mut NodeCtx,
    bias: Option<Value>,
    extra: Option<Value>,
) -> Result<Option<Value>, MapError> {
    Ok(match (bias, extra) {
        (Some(a), Some(b)) => Some(binary(cx, B::Add, a, b)?),
        (a, b) => a.or(b),
    })
}

/// ONNX attention over `[B,S,N*H]` queries and 3-D or 4-D keys and values,
/// with an optional additive bias.
fn attend(
    cx: &mut NodeCtx,
    (q, k, v): (Value, Value, Value),
    heads: i64,
    bias: Option<Value>,
    causal: bool,
) -> Result<Value, MapError> {
    let scale = cx.attr_f("scale", 0.0)?;
    let op = Attention {
        q_num_heads: heads,
        kv_num_heads: heads,
        scale: (scale != 0.0).then_some(scale),
        is_causal: causal,
        has_mask: bias.is_some(),
        ..Attention::default()
    };
    let mut ins = vec![q, k, v];
    ins.extend(bias);
    cx.add1(op, &ins)
}

fn num_heads(cx: &mut NodeCtx) -> Result<i64, MapError> {
    match cx.attr_i_opt("num_heads")? {
        Some(n) if n > 0 => Ok(n),
        _ => Err(MapError::Attr {
            name: "num_heads".into(),
            reason: "is required and positive".into(),
        }),
    }
}

/// BERT-style self-attention: `input @ weights + bias` split into Q, K, V.
fn attention(cx: &mut NodeCtx) -> Result<(), MapError> {
    if cx.input(4)?.is_some() || cx.output_used(1) {
        return cx.unsupported("past and present state (incremental decoding)");
    }
    let (x, w) = (cx.req(0)?, cx.req(1)?);
    let extra = cx.input(5)?;
    self_attention(cx, x, w, 3, extra)
}

/// Attention of ORT's dynamic quantization: a u8 input and a u8/i8 weight
/// with their scales (per tensor, or per weight column) and zero points,
/// dequantized in front of Attention (the product then runs as an integer
/// matmul again: `fuse-qdq-matmul`). Ports: input, weight, bias, input
/// scale, weight scale, mask index, input and weight zero points, past.
fn q_attention(cx: &mut NodeCtx) -> Result<(), MapError> {
    if cx.input(8)?.is_some() || cx.output_used(1) {
        return cx.unsupported("past and present state (incremental decoding)");
    }
    let x = super::dequantize(cx, 0, 3, 6, 1)?;
    let w = super::dequantize(cx, 1, 4, 7, 1)?;
    self_attention(cx, x, w, 5, None)
}

/// Attention's body on float `x` and `w`: bias on port 2, the mask on port
/// `mask_port`, an additive `extra` bias.
fn self_attention(
    cx: &mut NodeCtx,
    x: Value,
    w: Value,
    mask_port: usize,
    extra: Option<Value>,
) -> Result<(), MapError> {
    let heads = num_heads(cx)?;
    let causal = cx.attr_bool("unidirectional", false)?;
    let filter = cx.attr_f("mask_filter_value", MASK_FILTER)?;
    if cx.attr_bool("do_rotary", false)? {
        return cx.unsupported("do_rotary=1 (rotary embedding inside Attention)");
    }
    cx.ignore_attr("rotary_embedding_dim");
    cx.ignore_attr("past_present_share_buffer");
    let total = cx
        .ty(w)
        .shape
        .0
        .get(1)
        .and_then(Dim::known)
        .ok_or_else(|| {
            MapError::Unsupported("weights need a known shape [hidden, q+k+v]".into())
        })?;
    let sizes = match cx.attr_ints("qkv_hidden_sizes")? {
        Some(s) if s.len() == 3 && s.iter().sum::<i64>() == total => s,
        Some(s) => {
            return Err(MapError::Attr {
                name: "qkv_hidden_sizes".into(),
                reason: format!("{s:?} does not split {total} columns"),
            })
        }
        None if total % 3 == 0 => vec![total / 3; 3],
        None => return cx.unsupported(format!("{total} weight columns do not split into Q, K, V")),
    };
    let mut qkv = cx.add1(MatMul {}, &[x, w])?;
    if let Some(b) = cx.input(2)? {
        qkv = binary(cx, B::Add, qkv, b)?;
    }
    let sizes = cx.const_i64(&sizes);
    let parts = cx.add(
        Split {
            axis: -1,
            num_outputs: 3,
        },
        &[qkv, sizes],
    )?;
    let dt = cx.dtype(x);
    let batch = cx.ty(x).shape.0[0].clone();
    let mask = match cx.input(mask_port)? {
        Some(m) => Some(mask_bias(cx, m, &batch, x, 1, filter, dt)?),
        None => None,
    };
    let bias = add_bias(cx, mask, extra)?;
    let y = attend(cx, (parts[0], parts[1], parts[2]), heads, bias, causal)?;
    cx.set_output(0, y);
    Ok(())
}

/// Attention over separate query, key and value (`[B,S,D]`; keys and values
/// also `[B,N,L,H]`), with an optional packed input-projection bias.
fn multi_head_attention(cx: &mut NodeCtx) -> Result<(), MapError> {
    let heads = num_heads(cx)?;
    let causal = cx.attr_bool("unidirectional", false)?;
    let filter = cx.attr_f("mask_filter_value", MASK_FILTER)?;
    let mut past = (1..4).any(|o| cx.output_used(o));
    for p in 6..10 {
        past |= cx.input(p)?.is_some();
    }
    if past {
        return cx.unsupported("past and present state (incremental decoding)");
    }
    let q = cx.req(0)?;
    let (Some(mut k), Some(mut v)) = (cx.input(1)?, cx.input(2)?) else {
        return cx.unsupported("packed QKV or KV (key and value must be separate inputs)");
    };
    let (rq, rk) = (cx.rank(q), cx.rank(k));
    if rq != 3 || !(rk == 3 || rk == 4) || cx.rank(v) != rk {
        return cx.unsupported(format!(
            "query of rank {rq} with key of rank {rk} (supported: [B,S,D] queries, [B,L,D] or [B,N,L,H] keys and values)"
        ));
    }
    let mut q = q;
    if let Some(bias) = cx.input(3)? {
        if rk == 4 {
            return cx.unsupported("a projection bias with [B,N,L,H] keys");
        }
        let dims = [q, k, v].map(|t| cx.ty(t).shape.0[2].known());
        let [Some(dq), Some(dk), Some(dv)] = dims else {
            return cx.unsupported("a projection bias with unknown hidden sizes");
        };
        let sizes = cx.const_i64(&[dq, dk, dv]);
        let b = cx.add(
            Split {
                axis: 0,
                num_outputs: 3,
            },
            &[bias, sizes],
        )?;
        q = binary(cx, B::Add, q, b[0])?;
        k = binary(cx, B::Add, k, b[1])?;
        v = binary(cx, B::Add, v, b[2])?;
    }
    let dt = cx.dtype(q);
    let batch = cx.ty(q).shape.0[0].clone();
    let key_axis = if rk == 4 { 2 } else { 1 };
    let mask = match cx.input(4)? {
        Some(m) => Some(mask_bias(cx, m, &batch, k, key_axis, filter, dt)?),
        None => None,
    };
    let extra = cx.input(5)?;
    let bias = add_bias(cx, mask, extra)?;
    let y = if rk == 4 {
        // Keys and values come split into heads: split the queries too, and
        // merge the heads of the result.
        let hd = cx.ty(k).shape.0[3]
            .known()
            .ok_or_else(|| MapError::Unsupported("[B,N,L,H] keys need a known head size".into()))?;
        let split = cx.const_i64(&[0, 0, heads, hd]);
        let q4 = cx.add1(Reshape { allowzero: false }, &[q, split])?;
        let q4 = cx.add1(
            Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[q4],
        )?;
        let y = attend(cx, (q4, k, v), heads, bias, causal)?;
        let y = cx.add1(
            Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[y],
        )?;
        let merge = cx.const_i64(&[0, 0, -1]);
        cx.add1(Reshape { allowzero: false }, &[y, merge])?
    } else {
        attend(cx, (q, k, v), heads, bias, causal)?
    };
    cx.set_output(0, y);
    Ok(())
}

/// Rotary embedding with ORT's input order (`x`, `position_ids`, `cos`,
/// `sin`); `position_ids` of shape `[1]` is the first position of every row.
fn rotary_embedding(cx: &mut NodeCtx) -> Result<(), MapError> {
    let interleaved = cx.attr_bool("interleaved", false)?;
    let rotary_embedding_dim = cx.attr_i("rotary_embedding_dim", 0)?;
    let num_heads = cx.attr_i("num_heads", 0)?;
    if cx.attr_f("scale", 1.0)? != 1.0 {
        return cx.unsupported("scale other than 1.0");
    }
    if cx.attr_bool("is_packed_batching", false)? {
        return cx.unsupported("is_packed_batching=1");
    }
    let (x, pos, cos, sin) = (cx.req(0)?, cx.req(1)?, cx.req(2)?, cx.req(3)?);
    let pos = if cx.rank(pos) == 1 {
        // An offset: positions offset..offset+S for every row.
        let seq_axis = if cx.rank(x) == 4 { 2 } else { 1 };
        let s = dim_of(cx, x, seq_axis)?;
        let scalar = cx.const_i64(&[]);
        let start = cx.add1(Reshape { allowzero: false }, &[pos, scalar])?;
        let len = cx.add1(Reshape { allowzero: false }, &[s, scalar])?;
        let end = binary(cx, B::Add, start, len)?;
        let one = cx.scalar(DType::I64, 1.0)?;
        let row = cx.add1(Range {}, &[start, end, one])?;
        let b = dim_of(cx, x, 0)?;
        let shape = cx.add1(Concat { axis: 0 }, &[b, s])?;
        let axis0 = cx.const_i64(&[0]);
        let row = cx.add1(Unsqueeze {}, &[row, axis0])?;
        cx.add1(Expand {}, &[row, shape])?
    } else {
        pos
    };
    let y = cx.add1(
        RotaryEmbedding {
            interleaved,
            rotary_embedding_dim,
            num_heads,
        },
        &[x, cos, sin, pos],
    )?;
    cx.set_output(0, y);
    Ok(())
}
