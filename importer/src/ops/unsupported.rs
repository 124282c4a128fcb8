//! Ops rlx-onnx deliberately does not import, each with the reason `inspect` shows.

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

const RANDOM: &[&str] = &[
    "RandomUniform",
    "RandomUniformLike",
    "RandomNormal",
    "RandomNormalLike",
    "Bernoulli",
    "Multinomial",
];
pub fn register(r: &mut Registry) {
    for op in RANDOM {
        r.add(op, 1, random);
    }
    r.add_in("ai.onnx.preview.training", "Gradient", 1, training);
}

fn random(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.unsupported("random sampling: its outputs cannot be reproduced across runtimes")
}

fn training(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.unsupported("Gradient needs automatic differentiation, which rlx-onnx does not do")
}
