//! ONNX Runtime's contrib ops: the `com.microsoft` domain its transformer
//! optimizer and quantizers write, and the default-domain forms of
//! LayerNormalization and SimplifiedLayerNormalization that its tools emit
//! below opset 17. Each maps onto RLX ops; what a mapper cannot express is
//! refused by name (past state, packed QKV, act-order 4-bit weights).

mod activation;
mod attention;
mod conv;
mod gqa;
mod matmul;
mod norm;
mod quant;
mod recurrent;

use crate::registry::Registry;

/// The contrib domain.
pub(crate) const MS: &str = "com.microsoft";

/// `(q - zero_point) * scale` in f32 from input ports (a scale per tensor, or
/// one per slice of `axis`; the zero point absent is 0): how the quantized
/// contrib ops (QAttention, QEmbedLayerNormalization) read their operands.
pub(crate) fn dequantize(
    cx: &mut crate::ctx::NodeCtx,
    q: usize,
    scale: usize,
    zero_point: usize,
    axis: i64,
) -> Result<rlx_ir::Value, crate::error::MapError> {
    let x = cx.req(q)?;
    let s = cx.req(scale)?;
    let zp = match cx.input(zero_point)? {
        Some(z) => z,
        None => cx.scalar(cx.dtype(x), 0.0)?,
    };
    cx.add1(
        rlx_ir::ops::DequantizeLinear {
            axis,
            block_size: 0,
        },
        &[x, s, zp],
    )
}

pub fn register(r: &mut Registry) {
    activation::register(r);
    attention::register(r);
    conv::register(r);
    gqa::register(r);
    matmul::register(r);
    norm::register(r);
    quant::register(r);
    recurrent::register(r);
}
