//! Generated models: an [`arbitrary`]-driven [`Spec`] of float inputs,
//! small int64 constants and up to 12 nodes drawn from [`OPS`], each
//! reading earlier values and carrying attributes from [`ATTRS`], encoded
//! as an ONNX model. Most specs are invalid models (the importer must say
//! why); coverage guidance finds the ones that reach inference, the passes
//! and the kernels with odd shapes and attribute values.

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

fn attribute(a: &AttrSpec) -> AttributeProto {
    use attribute_proto::AttributeType as T;
    let mut p = AttributeProto {
        name: Some(pick(ATTRS, a.name as usize).into()),
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
            p.s = Some(pick(STRINGS, *i as usize).as_bytes().to_vec());
        }
    }
    p
}

/// The ONNX model of `spec`, serialized.
pub fn encode(spec: &Spec) -> Vec<u8> {
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
        let elem = if input.kind % 2 == 0 { 1 } else { 7 };
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
            op_type: Some(pick(OPS, node.op as usize).into()),
            input: inputs,
            output: outputs.clone(),
            attribute: node.attrs.iter().take(6).map(attribute).collect(),
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
