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
const SEQUENCES: &[&str] = &[
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceAt",
    "SequenceInsert",
    "SequenceErase",
    "SequenceLength",
    "SequenceMap",
    "SplitToSequence",
    "ConcatFromSequence",
    "Optional",
    "OptionalGetElement",
    "OptionalHasElement",
];
const STRINGS: &[&str] = &[
    "StringNormalizer",
    "StringConcat",
    "StringSplit",
    "RegexFullMatch",
    "TfIdfVectorizer",
    "ImageDecoder",
];

pub fn register(r: &mut Registry) {
    for op in RANDOM {
        r.add(op, 1, random);
    }
    for op in SEQUENCES {
        r.add(op, 1, sequences);
    }
    for op in STRINGS {
        r.add(op, 1, strings);
    }
    for op in ["Adagrad", "Adam", "Momentum", "Gradient"] {
        r.add_in("ai.onnx.preview.training", op, 1, training);
    }
}

fn random(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.unsupported("random sampling: its outputs cannot be reproduced across runtimes")
}

fn sequences(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.unsupported("sequence and optional values are not supported (tensors only)")
}

fn strings(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.unsupported("string tensors are not supported")
}

fn training(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.unsupported("training operators are not supported")
}
