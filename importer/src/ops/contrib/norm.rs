//! SkipLayerNormalization, SkipSimplifiedLayerNormalization,
//! SimplifiedLayerNormalization, LayerNormalization below opset 17, and
//! EmbedLayerNormalization.

use rlx_ir::ops::{
    BinaryKind as B, Gather, LayerNorm, Reduce, ReduceKind, ResidualNorm, RmsNorm, ShapeOf, Slice,
};
use rlx_ir::{DType, Tensor, Value};

use super::MS;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::ops::{binary, cast};
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add_in(MS, "SkipLayerNormalization", 1, skip_layer_norm);
    r.add_in(MS, "SkipSimplifiedLayerNormalization", 1, skip_simplified);
    r.add_in(MS, "EmbedLayerNormalization", 1, embed_layer_norm);
    r.add_in(MS, "QEmbedLayerNormalization", 1, q_embed_layer_norm);
    // ORT defines these two in the default domain from opset 1; ONNX's own
    // LayerNormalization (opset 17) has the same semantics.
    r.add("LayerNormalization", 1, crate::ops::norm::layer_norm);
    r.add("SimplifiedLayerNormalization", 1, simplified);
}

/// ORT's default epsilon for the skip and embed layer norms.
const SKIP_EPSILON: f32 = 1e-12;

/// `input + bias` (bias at `port`, if given) for the skip norms.
fn with_bias(cx: &mut NodeCtx, x: Value, port: usize) -> Result<Value, MapError> {
    match cx.input(port)? {
        Some(b) => binary(cx, B::Add, x, b),
        None => Ok(x),
    }
}

/// `y = LayerNorm(input + skip + bias) * gamma + beta`; outputs `y`, mean,
/// inverse standard deviation, and the sum `input + skip + bias`.
fn skip_layer_norm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let epsilon = cx.attr_f("epsilon", SKIP_EPSILON)?;
    let (x, skip, gamma) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let beta = cx.input(3)?;
    let x = with_bias(cx, x, 4)?;
    if cx.output_used(1) || cx.output_used(2) {
        let sum = binary(cx, B::Add, x, skip)?;
        let mut ins = vec![sum, gamma];
        ins.extend(beta);
        let ys = cx.add(
            LayerNorm {
                axis: -1,
                epsilon,
                stats: true,
            },
            &ins,
        )?;
        cx.set_outputs(&ys);
        cx.set_output(3, sum);
        return Ok(());
    }
    let mut ins = vec![x, skip, gamma];
    ins.extend(beta);
    let ys = cx.add(
        ResidualNorm {
            axis: -1,
            epsilon,
            rms: false,
        },
        &ins,
    )?;
    cx.set_output(0, ys[0]);
    cx.set_output(3, ys[1]);
    Ok(())
}

/// The RMS form: `y = RmsNorm(input + skip + bias) * gamma`; outputs `y`,
/// (mean, unused), inverse RMS, and the sum.
fn skip_simplified(cx: &mut NodeCtx) -> Result<(), MapError> {
    let epsilon = cx.attr_f("epsilon", SKIP_EPSILON)?;
    if cx.output_used(1) || cx.output_used(2) {
        return cx.unsupported("the mean and inverse-RMS outputs (training only)");
    }
    let (x, skip, gamma) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let x = with_bias(cx, x, 3)?;
    let ys = cx.add(
        ResidualNorm {
            axis: -1,
            epsilon,
            rms: true,
        },
        &[x, skip, gamma],
    )?;
    cx.set_output(0, ys[0]);
    cx.set_output(3, ys[1]);
    Ok(())
}

/// RMS normalization over the dims from `axis` on, times `scale`.
fn simplified(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", -1)?;
    let epsilon = cx.attr_f("epsilon", 1e-5)?;
    if cx.attr_i("stash_type", 1)? != 1 {
        return cx.unsupported("stash_type other than float32");
    }
    if cx.output_used(1) {
        return cx.unsupported("the inverse-RMS output (training only)");
    }
    let (x, scale) = (cx.req(0)?, cx.req(1)?);
    let y = cx.add1(RmsNorm { axis, epsilon }, &[x, scale])?;
    cx.set_output(0, y);
    Ok(())
}

fn gather(cx: &mut NodeCtx, table: Value, ids: Value) -> Result<Value, MapError> {
    cx.add1(Gather { axis: 0 }, &[table, ids])
}

/// BERT's embedding layer: word, position and segment embeddings summed, then
/// LayerNorm. Outputs `y [B,S,H]`, `mask_index [B]` (int32: the number of ones
/// in each mask row, zeros without a mask) and the sum before the norm.
fn embed_layer_norm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let tables = [cx.req(2)?, cx.req(3)?, cx.req(5)?, cx.req(6)?];
    let segment = cx.input(4)?;
    let position_ids = cx.input(8)?;
    embed_with(cx, tables, segment, position_ids)
}

/// EmbedLayerNormalization of ORT's dynamic quantization: every table (and
/// gamma, beta) u8 with a per-tensor scale and zero point. Ports: ids,
/// segment ids, the five quantized tables, mask, their five scales, their
/// five zero points.
fn q_embed_layer_norm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let mut deq = |port: usize| super::dequantize(cx, port, port + 6, port + 11, 0);
    let tables = [deq(2)?, deq(3)?, deq(5)?, deq(6)?];
    let segment = match cx.input(4)? {
        Some(_) => Some(super::dequantize(cx, 4, 10, 15, 0)?),
        None => None,
    };
    embed_with(cx, tables, segment, None)
}

/// The sum of word, position and segment embeddings, layer-normalized;
/// `tables` are the word and position tables, gamma and beta.
fn embed_with(
    cx: &mut NodeCtx,
    [word, pos_table, gamma, beta]: [Value; 4],
    segment_table: Option<Value>,
    position_ids: Option<Value>,
) -> Result<(), MapError> {
    let epsilon = cx.attr_f("epsilon", SKIP_EPSILON)?;
    if cx.attr_i("mask_index_type", 1)? != 1 {
        return cx.unsupported("mask_index_type other than 1 (a mask index per batch)");
    }
    let ids = cx.req(0)?;
    let mut sum = gather(cx, word, ids)?;
    let pos = match position_ids {
        Some(p) => gather(cx, pos_table, p)?,
        None => {
            // Positions 0..S: the first S rows of the table.
            let s = cx.add1(
                ShapeOf {
                    start: 1,
                    end: Some(2),
                },
                &[ids],
            )?;
            let (zero, axis) = (cx.const_i64(&[0]), cx.const_i64(&[0]));
            cx.add1(Slice {}, &[pos_table, zero, s, axis])?
        }
    };
    sum = binary(cx, B::Add, sum, pos)?;
    match (cx.input(1)?, segment_table) {
        (Some(seg), Some(table)) => {
            let e = gather(cx, table, seg)?;
            sum = binary(cx, B::Add, sum, e)?;
        }
        (None, None) => {}
        _ => return cx.unsupported("segment_ids and segment_embedding must be given together"),
    }
    let y = cx.add1(
        LayerNorm {
            axis: -1,
            epsilon,
            stats: false,
        },
        &[sum, gamma, beta],
    )?;
    cx.set_output(0, y);
    if cx.output_used(1) {
        let index = match cx.input(7)? {
            Some(mask) => {
                let m = cast(cx, mask, DType::I32)?;
                let axes = cx.const_i64(&[1]);
                cx.add1(
                    Reduce {
                        kind: ReduceKind::Sum,
                        keepdims: false,
                        noop_with_empty_axes: false,
                    },
                    &[m, axes],
                )?
            }
            None => {
                // Zeros of shape [B]: the ids' first column times zero.
                let zero = cx.constant(
                    Tensor::zeros(DType::I32, &[])
                        .map_err(|e| MapError::Unsupported(e.to_string()))?,
                );
                let (start, end, axis) =
                    (cx.const_i64(&[0]), cx.const_i64(&[1]), cx.const_i64(&[1]));
                let col = cx.add1(Slice {}, &[ids, start, end, axis])?;
                let col = cast(cx, col, DType::I32)?;
                let flat = cx.const_i64(&[-1]);
                let col = cx.add1(rlx_ir::ops::Reshape { allowzero: false }, &[col, flat])?;
                binary(cx, B::Mul, col, zero)?
            }
        };
        cx.set_output(1, index);
    }
    cx.set_output(2, sum);
    Ok(())
}
