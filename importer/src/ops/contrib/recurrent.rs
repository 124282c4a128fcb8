//! DynamicQuantizeLSTM (`com.microsoft`, ORT's dynamic quantization of LSTM):
//! an RLX LSTM with int8 or uint8 weights, quantizing its activations at every
//! product as ONNX Runtime does.

use rlx_ir::ops::{Expand, RecurrentKind, Reshape, Transpose};
use rlx_ir::Value;

use super::MS;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::ops::recurrent::layer;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add_in(MS, "DynamicQuantizeLSTM", 1, dynamic_quantize_lstm);
}

/// Inputs as LSTM's, but `W` `[dirs, input, 4*hidden]` and `R`
/// `[dirs, hidden, 4*hidden]` transposed and quantized, then `W_scale`,
/// `W_zero_point`, `R_scale`, `R_zero_point` per direction (`[dirs]`) or per
/// output channel (`[dirs, 4*hidden]`).
fn dynamic_quantize_lstm(cx: &mut NodeCtx) -> Result<(), MapError> {
    let flip = |cx: &mut NodeCtx, v: Value| {
        cx.add1(
            Transpose {
                perm: vec![0, 2, 1],
            },
            &[v],
        )
    };
    let (w, r) = (cx.req(1)?, cx.req(2)?);
    let (w, r) = (flip(cx, w)?, flip(cx, r)?);
    let dims = cx.ty(w).shape.0;
    let (Some(dirs), Some(rows)) = (dims[0].known(), dims[1].known()) else {
        return cx.unsupported("W's direction and gate dims must be known");
    };
    let mut quant = Vec::with_capacity(4);
    for port in 8..12 {
        let v = cx.req(port)?;
        quant.push(per_row(cx, v, dirs, rows)?);
    }
    let quant = [quant[0], quant[1], quant[2], quant[3]];
    layer(cx, RecurrentKind::Lstm, w, r, Some(quant))
}

/// A per-direction `[dirs]` scale or zero point as `[dirs, rows]`; a
/// per-channel one stays.
fn per_row(cx: &mut NodeCtx, v: Value, dirs: i64, rows: i64) -> Result<Value, MapError> {
    match cx.rank(v) {
        2 => Ok(v),
        1 => {
            let column = cx.const_i64(&[dirs, 1]);
            let v = cx.add1(Reshape { allowzero: false }, &[v, column])?;
            let full = cx.const_i64(&[dirs, rows]);
            cx.add1(Expand {}, &[v, full])
        }
        r => cx.unsupported(format!(
            "a scale or zero point of rank {r} (expected [directions] or [directions, 4*hidden])"
        )),
    }
}
