//! The RLX op set: a closed enum of attribute structs, grouped by family.
//!
//! Every op struct lives in its family file with its `infer` rules. The table at
//! the bottom of this file binds each variant to its text name, so the printer
//! and the parser always agree. Families with a `kind` (unary, binary, reduce,
//! ...) print the kind as the op name: `add(%0, %1)`, `reduce_sum(%2, %3) {...}`.

pub mod control;
pub mod conv;
pub mod elementwise;
pub mod generators;
pub mod gqa;
pub mod image;
pub mod indexing;
mod infer;
pub mod leaves;
pub mod linalg;
pub mod loss;
pub mod movement;
pub mod norm;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod region;
pub mod resize;
pub mod resize_taps;
pub mod sequence;
pub mod signal;
pub mod strings;
pub mod transformer;
pub mod tree;
pub mod values;

pub use control::*;
pub use conv::*;
pub use elementwise::*;
pub use generators::*;
pub use gqa::*;
pub use image::*;
pub use indexing::*;
pub use infer::*;
pub use leaves::*;
pub use linalg::*;
pub use loss::*;
pub use movement::*;
pub use norm::*;
pub use quant::*;
pub use recurrent::*;
pub use reduce::*;
pub use region::*;
pub use resize::*;
pub use sequence::*;
pub use signal::*;
pub use strings::*;
pub use transformer::*;
pub use tree::*;
pub use values::eval_known;

use crate::shape::TensorType;
use crate::text::{ParseError, Parser, Writer};

/// Shape and type rules of one op.
pub trait OpDef {
    /// Accepted number of inputs, inclusive.
    fn arity(&self) -> (usize, usize);

    /// Output types from input types and whatever input values are known.
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError>;

    /// Input ports whose *values* (not only types) determine the output types.
    fn value_ports(&self) -> &'static [usize] {
        &[]
    }
}

/// Attributes of an op whose printed name is its kind.
pub trait KindedAttrs: Sized {
    type Kind: Copy;
    const HAS_ATTRS: bool;
    fn kind(&self) -> Self::Kind;
    fn write_attrs(&self, w: &mut Writer);
    fn read_attrs(kind: Self::Kind, p: &mut Parser) -> Result<Self, ParseError>;
}

/// Defines an op struct whose first field is its `kind`, printed as the op name.
#[macro_export]
macro_rules! kinded_op {
    ($(#[$m:meta])* pub struct $name:ident [$kty:ty] { $( $(#[$fm:meta])* pub $field:ident : $ty:ty ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name { pub kind: $kty, $( $(#[$fm])* pub $field: $ty ),* }

        impl $crate::ops::KindedAttrs for $name {
            type Kind = $kty;
            const HAS_ATTRS: bool = 0 $(+ { let _ = stringify!($field); 1 })* > 0;

            fn kind(&self) -> $kty {
                self.kind
            }

            #[allow(unused_variables, unused_mut)]
            fn write_attrs(&self, w: &mut $crate::text::Writer) {
                let mut first = true;
                $( w.attr(&mut first, stringify!($field), &self.$field); )*
            }

            #[allow(unused_variables, unused_mut)]
            fn read_attrs(kind: $kty, p: &mut $crate::text::Parser) -> Result<Self, $crate::text::ParseError> {
                let mut first = true;
                Ok($name { kind, $( $field: p.attr(&mut first, stringify!($field))?, )* })
            }
        }
    };
}

macro_rules! define_ops {
    (
        plain { $( $pv:ident($pty:ty) = $ptext:literal, )* }
        kinded { $( $kv:ident($kty:ty, $kenum:ty), )* }
    ) => {
        /// An RLX op with its attributes.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Op {
            $( $pv($pty), )*
            $( $kv($kty), )*
        }

        impl Op {
            /// The op's name in the text form.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Op::$pv(_) => $ptext, )*
                    $( Op::$kv(o) => <$kty as KindedAttrs>::kind(o).name(), )*
                }
            }

            /// Every op name of the text form.
            pub fn all_names() -> Vec<&'static str> {
                let mut v: Vec<&'static str> = vec![$($ptext),*];
                $( v.extend(<$kenum>::ALL.iter().map(|k| k.name())); )*
                v
            }

            pub fn arity(&self) -> (usize, usize) {
                match self {
                    $( Op::$pv(o) => o.arity(), )*
                    $( Op::$kv(o) => o.arity(), )*
                }
            }

            pub fn value_ports(&self) -> &'static [usize] {
                match self {
                    $( Op::$pv(o) => o.value_ports(), )*
                    $( Op::$kv(o) => o.value_ports(), )*
                }
            }

            /// Output types; checks the input count first.
            pub fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
                let (min, max) = self.arity();
                if cx.inputs.len() < min || cx.inputs.len() > max {
                    return Err(InferError::Arity { min, max, got: cx.inputs.len() });
                }
                self.check_value_kinds(cx)?;
                match self {
                    $( Op::$pv(o) => o.infer(cx), )*
                    $( Op::$kv(o) => o.infer(cx), )*
                }
            }

            pub fn has_attrs(&self) -> bool {
                match self {
                    $( Op::$pv(_) => <$pty as $crate::text::Attrs>::HAS_ATTRS, )*
                    $( Op::$kv(_) => <$kty as KindedAttrs>::HAS_ATTRS, )*
                }
            }

            /// Writes `{name=value, ...}` (nothing for ops without attributes).
            pub fn write_attrs(&self, w: &mut Writer) {
                if !self.has_attrs() {
                    return;
                }
                w.push(" {");
                match self {
                    $( Op::$pv(o) => $crate::text::Attrs::write_attrs(o, w), )*
                    $( Op::$kv(o) => KindedAttrs::write_attrs(o, w), )*
                }
                w.push("}");
            }

            /// Parses the attributes of the op called `name`; `None` if no op has that name.
            pub fn read(name: &str, p: &mut Parser) -> Option<Result<Op, ParseError>> {
                fn braced<T>(has: bool, p: &mut Parser, f: impl FnOnce(&mut Parser) -> Result<T, ParseError>) -> Result<T, ParseError> {
                    if has {
                        p.expect('{')?;
                    }
                    let v = f(p)?;
                    if has {
                        p.expect('}')?;
                    }
                    Ok(v)
                }
                match name {
                    $( $ptext => return Some(braced(<$pty as $crate::text::Attrs>::HAS_ATTRS, p, |p| <$pty as $crate::text::Attrs>::read_attrs(p)).map(Op::$pv)), )*
                    _ => {}
                }
                $(
                    if let Some(k) = <$kenum>::from_name(name) {
                        return Some(braced(<$kty as KindedAttrs>::HAS_ATTRS, p, |p| <$kty as KindedAttrs>::read_attrs(k, p)).map(Op::$kv));
                    }
                )*
                None
            }
        }

        $( impl From<$pty> for Op { fn from(o: $pty) -> Op { Op::$pv(o) } } )*
        $( impl From<$kty> for Op { fn from(o: $kty) -> Op { Op::$kv(o) } } )*
    };
}

define_ops! {
    plain {
        Input(Input) = "input",
        Weight(Weight) = "weight",
        Constant(Constant) = "constant",
        Where(Where) = "where",
        Cast(Cast) = "cast",
        Clip(Clip) = "clip",
        BitCast(BitCast) = "bitcast",
        Gelu(Gelu) = "gelu",
        MatMul(MatMul) = "matmul",
        FusedMatMul(FusedMatMul) = "fused_matmul",
        MatMulInteger(MatMulInteger) = "matmul_integer",
        FusedMatMulInteger(FusedMatMulInteger) = "fused_matmul_integer",
        ElementwiseRegion(ElementwiseRegion) = "elementwise_region",
        Einsum(Einsum) = "einsum",
        Det(Det) = "det",
        Conv(Conv) = "conv",
        FusedConv(FusedConv) = "fused_conv",
        ConvTranspose(ConvTranspose) = "conv_transpose",
        DeformConv(DeformConv) = "deform_conv",
        Col2Im(Col2Im) = "col2im",
        MaxUnpool(MaxUnpool) = "max_unpool",
        Lrn(Lrn) = "lrn",
        LayerNorm(LayerNorm) = "layer_norm",
        RmsNorm(RmsNorm) = "rms_norm",
        ResidualNorm(ResidualNorm) = "residual_norm",
        GroupNorm(GroupNorm) = "group_norm",
        InstanceNorm(InstanceNorm) = "instance_norm",
        TopK(TopK) = "topk",
        Reshape(Reshape) = "reshape",
        Flatten(Flatten) = "flatten",
        Squeeze(Squeeze) = "squeeze",
        Unsqueeze(Unsqueeze) = "unsqueeze",
        Transpose(Transpose) = "transpose",
        Expand(Expand) = "expand",
        Concat(Concat) = "concat",
        Split(Split) = "split",
        Slice(Slice) = "slice",
        Pad(Pad) = "pad",
        Tile(Tile) = "tile",
        DepthToSpace(DepthToSpace) = "depth_to_space",
        SpaceToDepth(SpaceToDepth) = "space_to_depth",
        ReverseSequence(ReverseSequence) = "reverse_sequence",
        CenterCropPad(CenterCropPad) = "center_crop_pad",
        Gather(Gather) = "gather",
        GatherElements(GatherElements) = "gather_elements",
        GatherNd(GatherNd) = "gather_nd",
        ScatterElements(ScatterElements) = "scatter_elements",
        ScatterNd(ScatterNd) = "scatter_nd",
        TensorScatter(TensorScatter) = "tensor_scatter",
        OneHot(OneHot) = "one_hot",
        Compress(Compress) = "compress",
        NonZero(NonZero) = "nonzero",
        Unique(Unique) = "unique",
        Trilu(Trilu) = "trilu",
        ShapeOf(ShapeOf) = "shape",
        Size(Size) = "size",
        ConstantOfShape(ConstantOfShape) = "constant_of_shape",
        Range(Range) = "range",
        EyeLike(EyeLike) = "eye_like",
        Resize(Resize) = "resize",
        GridSample(GridSample) = "grid_sample",
        AffineGrid(AffineGrid) = "affine_grid",
        RoiAlign(RoiAlign) = "roi_align",
        NonMaxSuppression(NonMaxSuppression) = "non_max_suppression",
        Attention(Attention) = "attention",
        RotaryEmbedding(RotaryEmbedding) = "rotary_embedding",
        LinearAttention(LinearAttention) = "linear_attention",
        CausalConvWithState(CausalConvWithState) = "causal_conv_with_state",
        Dft(Dft) = "dft",
        Stft(Stft) = "stft",
        MelWeightMatrix(MelWeightMatrix) = "mel_weight_matrix",
        QuantizeLinear(QuantizeLinear) = "quantize_linear",
        DequantizeLinear(DequantizeLinear) = "dequantize_linear",
        DynamicQuantizeLinear(DynamicQuantizeLinear) = "dynamic_quantize_linear",
        If(If) = "if",
        Refused(Refused) = "refused",
        Loop(Loop) = "loop",
        Scan(Scan) = "scan",
        NllLoss(NllLoss) = "nll_loss",
        TreeEnsemble(TreeEnsemble) = "tree_ensemble",
        SequenceConstruct(SequenceConstruct) = "sequence_construct",
        SequenceEmpty(SequenceEmpty) = "sequence_empty",
        SequenceInsert(SequenceInsert) = "sequence_insert",
        SequenceErase(SequenceErase) = "sequence_erase",
        SequenceAt(SequenceAt) = "sequence_at",
        SequenceLength(SequenceLength) = "sequence_length",
        SplitToSequence(SplitToSequence) = "split_to_sequence",
        ConcatFromSequence(ConcatFromSequence) = "concat_from_sequence",
        SequenceMap(SequenceMap) = "sequence_map",
        Optional(Optional) = "optional",
        OptionalHasElement(OptionalHasElement) = "optional_has_element",
        OptionalGetElement(OptionalGetElement) = "optional_get_element",
        StringNormalizer(StringNormalizer) = "string_normalizer",
        StringConcat(StringConcat) = "string_concat",
        StringSplit(StringSplit) = "string_split",
        RegexFullMatch(RegexFullMatch) = "regex_full_match",
        StringEqual(StringEqual) = "string_equal",
        StringCast(StringCast) = "string_cast",
        StringMap(StringMap) = "string_map",
        TfIdfVectorizer(TfIdfVectorizer) = "tfidf_vectorizer",
        ImageDecoder(ImageDecoder) = "image_decoder",
        ZipMap(ZipMap) = "zip_map",
        GroupQueryAttention(GroupQueryAttention) = "group_query_attention",
    }
    kinded {
        Unary(Unary, UnaryKind),
        Binary(Binary, BinaryKind),
        Compare(Compare, CompareKind),
        Logical(Logical, LogicalKind),
        Pool(Pool, PoolKind),
        GlobalPool(GlobalPool, GlobalPoolKind),
        Reduce(Reduce, ReduceKind),
        ArgReduce(ArgReduce, ArgReduceKind),
        Softmax(Softmax, SoftmaxKind),
        Cumulative(Cumulative, CumulativeKind),
        Window(Window, WindowKind),
        Recurrent(Recurrent, RecurrentKind),
    }
}

impl Op {
    /// Sequences and optionals go only into the ops made for them and into
    /// control flow; strings only into string ops, those and control flow.
    /// Every other op takes tensors of numbers, and says so here, once.
    fn check_value_kinds(&self, cx: &InferCx) -> Result<(), InferError> {
        let control = matches!(self, Op::If(_) | Op::Loop(_) | Op::Scan(_));
        let containers = control || sequence::is_container_op(self);
        let strings = containers || strings::is_string_op(self);
        for (port, t) in cx.inputs.iter().enumerate() {
            if t.kind != crate::ValueKind::Tensor && !containers {
                return Err(value_err(
                    port,
                    format!(
                        "is a {}; `{}` takes tensors",
                        sequence::kind_name(t.kind),
                        self.name()
                    ),
                ));
            }
            if t.dtype == crate::DType::Str && !strings {
                return Err(InferError::DType {
                    port,
                    got: t.dtype,
                    expected: format!("numbers (`{}` takes no strings)", self.name()),
                });
            }
        }
        Ok(())
    }

    /// True for the leaves of a graph: inputs, weights and constants.
    pub fn is_leaf(&self) -> bool {
        matches!(self, Op::Input(_) | Op::Weight(_) | Op::Constant(_))
    }

    /// Subgraphs held by this op (If branches, Loop and Scan bodies).
    pub fn subgraphs(&self) -> Vec<&crate::graph::Graph> {
        match self {
            Op::If(o) => vec![&o.then_branch, &o.else_branch],
            Op::Loop(o) => vec![&o.body],
            Op::Scan(o) => vec![&o.body],
            Op::SequenceMap(o) => vec![&o.body],
            _ => Vec::new(),
        }
    }

    pub fn subgraphs_mut(&mut self) -> Vec<&mut crate::graph::Graph> {
        match self {
            Op::If(o) => vec![&mut o.then_branch, &mut o.else_branch],
            Op::Loop(o) => vec![&mut o.body],
            Op::Scan(o) => vec![&mut o.body],
            Op::SequenceMap(o) => vec![&mut o.body],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_are_unique() {
        let names = Op::all_names();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "two ops share a text name");
    }
}
