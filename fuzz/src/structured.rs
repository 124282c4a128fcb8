//! Generated models: an [`arbitrary`]-driven [`Spec`] of inputs, small
//! int64 constants and up to 12 nodes drawn from a [`Table`]'s ops, each
//! reading earlier values and carrying attributes from the table, encoded
//! as an ONNX model. Most specs are invalid models (the importer must say
//! why); coverage guidance finds the ones that reach inference, the passes
//! and the kernels with odd shapes and attribute values.
//!
//! Two tables: [`GENERAL`] (float and int64 inputs through the tensor
//! ops) and [`TEXT`] (string, byte, sequence and image inputs through the
//! string, regex, sequence, Einsum and image ops, with byte and string
//! constants taken from the fuzzer's data, see [`TextSpec`]).

use arbitrary::Arbitrary;
use prost::Message;
use rlx_onnx::importer::proto::{
    attribute_proto, tensor_proto, tensor_shape_proto, type_proto, AttributeProto, GraphProto,
    ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
};

/// Default-domain ops the generator draws from.
pub const OPS: &[&str] = &[
    "Relu",
    "Neg",
    "Exp",
    "Log",
    "Sqrt",
    "Abs",
    "Sigmoid",
    "Tanh",
    "Floor",
    "Reciprocal",
    "Erf",
    "Sign",
    "Not",
    "Cast",
    "Identity",
    "Softmax",
    "LogSoftmax",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Mod",
    "Equal",
    "Less",
    "And",
    "Where",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "GatherElements",
    "GatherND",
    "ScatterElements",
    "ScatterND",
    "Expand",
    "Tile",
    "Pad",
    "Shape",
    "Size",
    "ConstantOfShape",
    "Range",
    "OneHot",
    "CumSum",
    "TopK",
    "ArgMax",
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceProd",
    "ReduceL2",
    "NonZero",
    "Trilu",
    "DepthToSpace",
    "SpaceToDepth",
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "LpPool",
    "BatchNormalization",
    "LayerNormalization",
    "InstanceNormalization",
    "MatMul",
    "Gemm",
    "LRN",
    "Resize",
    "Einsum",
    "GridSample",
    "LSTM",
    "GRU",
    "RNN",
    "Compress",
    "ReverseSequence",
    "Unique",
    "Clip",
    "Dropout",
    "Hardmax",
    "MeanVarianceNormalization",
    "Col2Im",
    "DFT",
    "QuantizeLinear",
    "DequantizeLinear",
    "MatMulInteger",
    "CenterCropPad",
    "AffineGrid",
    "SequenceConstruct",
    "SequenceInsert",
    "SequenceErase",
    "SequenceAt",
    "SequenceLength",
    "SplitToSequence",
    "ConcatFromSequence",
    "Optional",
    "OptionalHasElement",
    "OptionalGetElement",
    "TfIdfVectorizer",
    "ImageDecoder",
];

/// Attribute names the generator draws from.
pub const ATTRS: &[&str] = &[
    "axis",
    "axes",
    "perm",
    "kernel_shape",
    "strides",
    "pads",
    "dilations",
    "group",
    "keepdims",
    "epsilon",
    "alpha",
    "beta",
    "transA",
    "transB",
    "to",
    "count_include_pad",
    "ceil_mode",
    "exclusive",
    "reverse",
    "largest",
    "sorted",
    "blocksize",
    "hidden_size",
    "direction",
    "mode",
    "equation",
    "upper",
    "select_last_index",
    "output_padding",
    "allowzero",
    "split",
    "num_outputs",
    "auto_pad",
    "coordinate_transformation_mode",
    "p",
    "size",
    "batch_axis",
    "time_axis",
    "onesided",
    "inverse",
    "block_shape",
    "output_shape",
    "sorted",
    "align_corners",
    "stash_type",
    "batch_dims",
    "reduction",
    "saturate",
    "block_size",
    "linear_before_reset",
    "new_axis",
    "min_gram_length",
    "max_gram_length",
    "max_skip_count",
    "ngram_counts",
    "ngram_indexes",
    "pool_int64s",
];

/// String attribute values the generator draws from.
pub const STRINGS: &[&str] = &[
    "constant",
    "reflect",
    "edge",
    "wrap",
    "nearest",
    "linear",
    "cubic",
    "forward",
    "reverse",
    "bidirectional",
    "SAME_UPPER",
    "SAME_LOWER",
    "VALID",
    "NOTSET",
    "DCR",
    "CRD",
    "ij,jk->ik",
    "ii->i",
    "...ij->...ji",
    "bij,bjk->bik",
    "i,i->",
    "half_pixel",
    "align_corners",
    "asymmetric",
    "pytorch_half_pixel",
    "bilinear",
    "zeros",
    "border",
    "TF",
    "TFIDF",
    "Grayscale",
    "add",
    "mul",
    "max",
    "",
];

/// What a generator draws from: op types, attribute names and string
/// attribute values, and the ONNX element types of its inputs.
pub struct Table {
    pub ops: &'static [&'static str],
    pub attrs: &'static [&'static str],
    pub strings: &'static [&'static str],
    pub elems: &'static [i32],
}

/// Float and int64 inputs through the tensor ops.
pub const GENERAL: Table = Table {
    ops: OPS,
    attrs: ATTRS,
    strings: STRINGS,
    elems: &[1, 7],
};

/// Strings, bytes, sequences and images: the ops whose output sizes the
/// data decides (StringSplit, string broadcasts, ConcatFromSequence,
/// ImageDecoder), regex patterns and Einsum equations.
pub const TEXT: Table = Table {
    ops: TEXT_OPS,
    attrs: TEXT_ATTRS,
    strings: TEXT_STRINGS,
    elems: &[8, 2, 1, 7],
};

/// Default-domain ops of the [`TEXT`] table.
pub const TEXT_OPS: &[&str] = &[
    "StringNormalizer",
    "StringConcat",
    "StringSplit",
    "RegexFullMatch",
    "Equal",
    "Cast",
    "Where",
    "Identity",
    "Concat",
    "Reshape",
    "Expand",
    "Gather",
    "Unsqueeze",
    "Shape",
    "Size",
    "Einsum",
    "ImageDecoder",
    "SequenceConstruct",
    "SequenceInsert",
    "SequenceAt",
    "SequenceLength",
    "SequenceErase",
    "SplitToSequence",
    "ConcatFromSequence",
    "TfIdfVectorizer",
    "Unique",
    "Tile",
    "Loop",
];

/// Attribute names of the [`TEXT`] table.
pub const TEXT_ATTRS: &[&str] = &[
    "pattern",
    "delimiter",
    "maxsplit",
    "case_change_action",
    "is_case_sensitive",
    "stopwords",
    "locale",
    "equation",
    "pixel_format",
    "to",
    "axis",
    "new_axis",
    "keepdims",
    "mode",
    "min_gram_length",
    "max_gram_length",
    "max_skip_count",
    "ngram_counts",
    "ngram_indexes",
    "pool_strings",
];

/// String attribute values of the [`TEXT`] table: regex patterns (RE2's
/// syntax, escapes from the full-match group, catastrophic nesting),
/// delimiters, Einsum equations (many summed labels, ellipses, repeats).
pub const TEXT_STRINGS: &[&str] = &[
    r"\w+\d",
    r"a)|(?:b",
    r"(a*)*b",
    r"[[:alpha:]]+",
    r"\p{L}+",
    r"(?i)abc",
    r"[a-z&&[^aeiou]]",
    r"\",
    r"(",
    r"x{1000}{1000}",
    r".*",
    "",
    " ",
    ",",
    "ab",
    "LOWER",
    "UPPER",
    "NONE",
    "en_US",
    "BGR",
    "RGB",
    "Grayscale",
    "i,j,k,l->",
    "abcde,abcde->",
    "ij,jk,kl->il",
    "...i,...i->...",
    "ii->",
    "i,i,i,i,i->i",
    "ab,bc->",
    "TF",
    "IDF",
];

/// A generated model.
#[derive(Debug, Arbitrary)]
pub struct Spec {
    pub opset: u8,
    pub inputs: Vec<InputSpec>,
    pub constants: Vec<ConstSpec>,
    pub nodes: Vec<NodeSpec>,
}

/// A graph input: an f32 (or, odd `kind`, i64) tensor of fixed dims.
#[derive(Debug, Arbitrary)]
pub struct InputSpec {
    pub kind: u8,
    pub dims: Vec<u8>,
}

/// An int64 initializer: a 1-D list, or a scalar when `scalar`.
#[derive(Debug, Arbitrary)]
pub struct ConstSpec {
    pub scalar: bool,
    pub values: Vec<i8>,
    /// Replaces the first value, to reach the far ends of i64.
    pub wide: Option<i64>,
}

#[derive(Debug, Arbitrary)]
pub struct NodeSpec {
    pub op: u16,
    /// Earlier values by index (modulo their count); 255 an omitted input.
    pub inputs: Vec<u8>,
    pub outputs: u8,
    pub attrs: Vec<AttrSpec>,
}

#[derive(Debug, Arbitrary)]
pub struct AttrSpec {
    pub name: u8,
    pub value: AttrValue,
}

#[derive(Debug, Arbitrary)]
pub enum AttrValue {
    Int(i8),
    Wide(i64),
    Ints(Vec<i8>),
    Float(f32),
    Str(u8),
}

const MAX_INPUTS: usize = 3;
const MAX_CONSTANTS: usize = 4;
const MAX_NODES: usize = 12;
const MAX_RANK: usize = 5;
const MAX_LIST: usize = 8;

fn pick<'a>(list: &[&'a str], i: usize) -> &'a str {
    list[i % list.len()]
}

fn value_info(name: &str, elem: i32, dims: Option<&[i64]>) -> ValueInfoProto {
    use tensor_shape_proto::{dimension, Dimension};
    let shape = dims.map(|d| TensorShapeProto {
        dim: d
            .iter()
            .map(|&v| Dimension {
                value: Some(dimension::Value::DimValue(v)),
                ..Default::default()
            })
            .collect(),
    });
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: (elem != 0).then_some(elem),
                shape,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn attribute(t: &Table, a: &AttrSpec) -> AttributeProto {
    use attribute_proto::AttributeType as T;
    let mut p = AttributeProto {
        name: Some(pick(t.attrs, a.name as usize).into()),
        ..Default::default()
    };
    match &a.value {
        AttrValue::Int(v) => {
            p.r#type = Some(T::Int as i32);
            p.i = Some(i64::from(*v));
        }
        AttrValue::Wide(v) => {
            p.r#type = Some(T::Int as i32);
            p.i = Some(*v);
        }
        AttrValue::Ints(v) => {
            p.r#type = Some(T::Ints as i32);
            p.ints = v.iter().take(MAX_LIST).map(|&x| i64::from(x)).collect();
        }
        AttrValue::Float(v) => {
            p.r#type = Some(T::Float as i32);
            p.f = Some(*v);
        }
        AttrValue::Str(i) => {
            p.r#type = Some(T::String as i32);
            p.s = Some(pick(t.strings, *i as usize).as_bytes().to_vec());
        }
    }
    p
}

/// A [`Spec`] for the [`TEXT`] table, with constants made of the fuzzer's
/// bytes: a byte string becomes a 1-D uint8 tensor (an encoded image for
/// ImageDecoder) or, split at newlines, a 1-D string tensor.
#[derive(Debug, Arbitrary)]
pub struct TextSpec {
    pub spec: Spec,
    pub blobs: Vec<Blob>,
}

#[derive(Debug, Arbitrary)]
pub struct Blob {
    pub text: bool,
    pub bytes: Vec<u8>,
}

const MAX_BLOBS: usize = 3;
const MAX_BLOB_BYTES: usize = 4096;

/// The ONNX model of `spec`, serialized.
pub fn encode(spec: &Spec) -> Vec<u8> {
    encode_with(spec, &GENERAL, &[])
}

/// The ONNX model of a [`TextSpec`], serialized.
pub fn encode_text(spec: &TextSpec) -> Vec<u8> {
    encode_with(&spec.spec, &TEXT, &spec.blobs)
}

/// A blob as an initializer named `name`.
fn blob_tensor(name: String, b: &Blob) -> TensorProto {
    let bytes = &b.bytes[..b.bytes.len().min(MAX_BLOB_BYTES)];
    if b.text {
        let items: Vec<Vec<u8>> = bytes.split(|c| *c == b'\n').map(<[u8]>::to_vec).collect();
        TensorProto {
            name: Some(name),
            dims: vec![items.len() as i64],
            data_type: Some(tensor_proto::DataType::String as i32),
            string_data: items,
            ..Default::default()
        }
    } else {
        TensorProto {
            name: Some(name),
            dims: vec![bytes.len() as i64],
            data_type: Some(tensor_proto::DataType::Uint8 as i32),
            raw_data: Some(bytes.to_vec()),
            ..Default::default()
        }
    }
}

fn encode_with(spec: &Spec, table: &Table, blobs: &[Blob]) -> Vec<u8> {
    let mut graph = GraphProto {
        name: Some("fuzz".into()),
        ..Default::default()
    };
    let mut values: Vec<String> = Vec::new();
    for (i, input) in spec.inputs.iter().take(MAX_INPUTS).enumerate() {
        let name = format!("x{i}");
        let dims: Vec<i64> = input
            .dims
            .iter()
            .take(MAX_RANK)
            .map(|&d| i64::from(d % 6))
            .collect();
        let elem = table.elems[input.kind as usize % table.elems.len()];
        graph.input.push(value_info(&name, elem, Some(&dims)));
        values.push(name);
    }
    for (i, c) in spec.constants.iter().take(MAX_CONSTANTS).enumerate() {
        let name = format!("c{i}");
        let mut v: Vec<i64> = c
            .values
            .iter()
            .take(MAX_LIST)
            .map(|&x| i64::from(x))
            .collect();
        if let (Some(w), Some(first)) = (c.wide, v.first_mut()) {
            *first = w;
        }
        if c.scalar {
            v.truncate(1);
            v.resize(1, 0);
        }
        graph.initializer.push(TensorProto {
            name: Some(name.clone()),
            dims: if c.scalar {
                vec![]
            } else {
                vec![v.len() as i64]
            },
            data_type: Some(tensor_proto::DataType::Int64 as i32),
            int64_data: v,
            ..Default::default()
        });
        values.push(name);
    }
    for (i, b) in blobs.iter().take(MAX_BLOBS).enumerate() {
        let name = format!("b{i}");
        graph.initializer.push(blob_tensor(name.clone(), b));
        values.push(name);
    }
    if values.is_empty() {
        return Vec::new();
    }
    let mut last: Vec<String> = Vec::new();
    for (n, node) in spec.nodes.iter().take(MAX_NODES).enumerate() {
        let inputs = node
            .inputs
            .iter()
            .take(6)
            .map(|&i| {
                if i == 255 {
                    String::new()
                } else {
                    values[i as usize % values.len()].clone()
                }
            })
            .collect();
        let outputs: Vec<String> = (0..1 + node.outputs as usize % 3)
            .map(|o| format!("n{n}_{o}"))
            .collect();
        graph.node.push(NodeProto {
            name: Some(format!("n{n}")),
            op_type: Some(pick(table.ops, node.op as usize).into()),
            input: inputs,
            output: outputs.clone(),
            attribute: node
                .attrs
                .iter()
                .take(6)
                .map(|a| attribute(table, a))
                .collect(),
            ..Default::default()
        });
        values.extend(outputs.iter().cloned());
        last = outputs;
    }
    for o in &last {
        graph.output.push(value_info(o, 0, None));
    }
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(11 + i64::from(spec.opset % 12)),
        }],
        graph: Some(graph),
        ..Default::default()
    }
    .encode_to_vec()
}
