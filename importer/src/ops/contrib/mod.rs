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
