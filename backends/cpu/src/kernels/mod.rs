//! CPU kernels, one module per op family. [`build`] picks the kernel for a node.

pub mod attention;
pub mod cast;
pub mod control;
pub mod conv;
pub mod data;
pub mod elementwise;
pub mod gelu_lanes;
pub mod gemm;
pub mod generators;
pub mod gqa;
pub mod grid;
pub mod image;
pub mod indexing;
#[cfg(target_arch = "x86_64")]
mod int8_amx;
mod int8_avx2;
pub mod int8_gemm;
pub mod layout;
pub mod linalg_extra;
pub mod linear_attention;
pub mod loss;
pub mod matmul;
pub mod matmul_integer;
pub mod minifloat;
pub mod movement;
pub mod norm;
pub mod norm_rows;
pub mod num;
pub mod pool;
pub mod quant;
pub mod re2;
pub mod recurrent;
mod recurrent_cells;
mod recurrent_f32;
mod recurrent_int8;
pub mod reduce;
pub mod region;
pub mod residual_norm;
pub mod resize;
pub mod rotary;
pub mod sequence;
pub mod signal;
pub mod softmax;
pub mod spectral;
pub mod strided;
pub mod string_cast;
pub mod strings;
pub mod tensor_scatter;
pub mod tfidf;
pub mod tree;
pub mod vmath;
#[cfg(target_arch = "x86_64")]
mod vmath_avx2;
#[cfg(target_arch = "x86_64")]
mod vmath_avx512;

use rlx_ir::{Node, Op, TensorType};

use crate::kernel::{EvalFn, Kernel, KernelError, Spec};

/// The evaluator of an op whose output shapes depend on data or subgraphs.
pub fn evaluated(op: &Op) -> Option<EvalFn> {
    Some(match op {
        Op::If(_) => control::if_,
        Op::Loop(_) => control::loop_,
        Op::Scan(_) => control::scan,
        Op::Refused(_) => control::refused,
        Op::NonZero(_) => data::nonzero,
        Op::Compress(_) => data::compress,
        Op::Unique(_) => data::unique,
        Op::NonMaxSuppression(_) => data::non_max_suppression,
        Op::SequenceConstruct(_) => sequence::construct,
        Op::SequenceEmpty(_) => sequence::empty,
        Op::SequenceInsert(_) => sequence::insert,
        Op::SequenceErase(_) => sequence::erase,
        Op::SequenceAt(_) => sequence::at,
        Op::SequenceLength(_) => sequence::length,
        Op::SplitToSequence(_) => sequence::split_to_sequence,
        Op::ConcatFromSequence(_) => sequence::concat_from_sequence,
        Op::SequenceMap(_) => sequence::sequence_map,
        Op::Optional(_) => sequence::optional,
        Op::OptionalHasElement(_) => sequence::has_element,
        Op::OptionalGetElement(_) => sequence::get_element,
        Op::StringNormalizer(_) => strings::normalizer,
        Op::StringConcat(_) => strings::concat,
        Op::StringSplit(_) => strings::split,
        Op::RegexFullMatch(_) => strings::regex_full_match,
        Op::StringEqual(_) => strings::equal,
        Op::StringCast(_) => string_cast::string_cast,
        Op::StringMap(_) => strings::map,
        Op::TfIdfVectorizer(_) => tfidf::tfidf,
        Op::ImageDecoder(_) => image::image_decoder,
        Op::ZipMap(_) => sequence::zip_map,
        _ => return None,
    })
}

/// Builds the kernel of one node.
pub type BuildFn = fn(&Spec) -> Result<Box<dyn Kernel>, KernelError>;

/// The kernel builder of `op`'s family; `None` if the CPU has no kernel for it.
pub fn builder(op: &Op) -> Option<BuildFn> {
    Some(match op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Logical(_)
        | Op::Where(_)
        | Op::Clip(_)
        | Op::Gelu(_) => elementwise::build,
        Op::Cast(_) | Op::BitCast(_) => cast::build,
        Op::MatMul(_) | Op::FusedMatMul(_) => matmul::build,
        Op::MatMulInteger(_) | Op::FusedMatMulInteger(_) => matmul_integer::build,
        Op::Conv(_) | Op::FusedConv(_) | Op::ConvTranspose(_) => conv::build,
        Op::Pool(_) | Op::GlobalPool(_) | Op::Lrn(_) | Op::MaxUnpool(_) => pool::build,
        Op::DeformConv(_) => conv::deform::build,
        Op::Col2Im(_) | Op::Window(_) => signal::build,
        Op::Einsum(_) | Op::Det(_) => linalg_extra::build,
        Op::Gather(_)
        | Op::GatherElements(_)
        | Op::GatherNd(_)
        | Op::ScatterElements(_)
        | Op::ScatterNd(_)
        | Op::OneHot(_)
        | Op::Trilu(_)
        | Op::ReverseSequence(_) => indexing::build,
        Op::QuantizeLinear(_) | Op::DequantizeLinear(_) | Op::DynamicQuantizeLinear(_) => {
            quant::build
        }
        Op::NllLoss(_) => loss::build,
        Op::LayerNorm(_) | Op::RmsNorm(_) | Op::GroupNorm(_) | Op::InstanceNorm(_) => norm::build,
        Op::Reduce(_) | Op::ArgReduce(_) => reduce::build,
        Op::Softmax(_) | Op::Cumulative(_) | Op::TopK(_) => softmax::build,
        Op::Reshape(_)
        | Op::Flatten(_)
        | Op::Squeeze(_)
        | Op::Unsqueeze(_)
        | Op::Transpose(_)
        | Op::Expand(_)
        | Op::Concat(_)
        | Op::Split(_)
        | Op::Slice(_)
        | Op::Pad(_)
        | Op::Tile(_)
        | Op::DepthToSpace(_)
        | Op::SpaceToDepth(_)
        | Op::CenterCropPad(_) => movement::build,
        Op::ShapeOf(_) | Op::Size(_) | Op::ConstantOfShape(_) | Op::Range(_) | Op::EyeLike(_) => {
            generators::build
        }
        Op::ElementwiseRegion(_) => region::build,
        Op::ResidualNorm(_) => residual_norm::build,
        Op::Resize(_) => resize::build,
        Op::GridSample(_) | Op::AffineGrid(_) | Op::RoiAlign(_) => grid::build,
        Op::Attention(_) => attention::build,
        Op::RotaryEmbedding(_) => rotary::build,
        Op::GroupQueryAttention(_) => gqa::build,
        Op::Recurrent(_) | Op::CausalConvWithState(_) => recurrent::build,
        Op::LinearAttention(_) => linear_attention::build,
        Op::Dft(_) | Op::Stft(_) | Op::MelWeightMatrix(_) => spectral::build,
        Op::TreeEnsemble(_) => tree::build,
        Op::TensorScatter(_) => tensor_scatter::build,
        _ => return None,
    })
}

/// The kernel for `spec.node`, or why there is none.
pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match builder(spec.op()) {
        Some(f) => f(spec),
        None => Err(KernelError::Unsupported(format!(
            "the CPU backend has no kernel for `{}`",
            spec.op().name()
        ))),
    }
}

/// Whether the CPU backend runs `node` with inputs of these types, or why
/// not: its op needs a kernel (or an evaluator), and some ops have limits of
/// their own.
pub fn supports(node: &Node, inputs: &[TensorType]) -> Result<(), String> {
    let op = &node.op;
    if evaluated(op).is_none() && builder(op).is_none() {
        return Err(format!("the CPU backend has no kernel for `{}`", op.name()));
    }
    if let Op::ResidualNorm(_) = op {
        if inputs.len() >= 2 && inputs[0].shape != inputs[1].shape {
            return Err("residual_norm runs only with a residual of the input's shape".into());
        }
    }
    Ok(())
}
