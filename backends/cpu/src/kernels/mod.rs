//! CPU kernels, one module per op family. [`build`] picks the kernel for a node.

pub mod attention;
pub mod cast;
pub mod control;
pub mod conv;
pub mod data;
pub mod deform_conv;
pub mod depthwise;
pub mod elementwise;
pub mod gemm;
pub mod generators;
pub mod grid;
pub mod indexing;
pub mod layout;
pub mod linalg_extra;
pub mod linear_attention;
pub mod loss;
pub mod matmul;
pub mod minifloat;
pub mod movement;
pub mod norm;
pub mod num;
pub mod pool;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod resize;
pub mod rotary;
pub mod signal;
pub mod softmax;
pub mod spectral;
pub mod tensor_scatter;

use rlx_ir::Op;

use crate::kernel::{EvalFn, Kernel, KernelError, Spec};

/// The evaluator of an op whose output shapes depend on data or subgraphs.
pub fn evaluated(op: &Op) -> Option<EvalFn> {
    Some(match op {
        Op::If(_) => control::if_,
        Op::Loop(_) => control::loop_,
        Op::Scan(_) => control::scan,
        Op::NonZero(_) => data::nonzero,
        Op::Compress(_) => data::compress,
        Op::Unique(_) => data::unique,
        Op::NonMaxSuppression(_) => data::non_max_suppression,
        _ => return None,
    })
}

/// The kernel for `spec.node`, or why there is none.
pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Logical(_)
        | Op::Where(_)
        | Op::Clip(_)
        | Op::Gelu(_) => elementwise::build(spec),
        Op::Cast(_) | Op::BitCast(_) => cast::build(spec),
        Op::MatMul(_) | Op::FusedMatMul(_) => matmul::build(spec),
        Op::Conv(_) | Op::FusedConv(_) | Op::ConvTranspose(_) => conv::build(spec),
        Op::Pool(_) | Op::GlobalPool(_) | Op::Lrn(_) | Op::MaxUnpool(_) => pool::build(spec),
        Op::DeformConv(_) => deform_conv::build(spec),
        Op::Col2Im(_) | Op::Window(_) => signal::build(spec),
        Op::Einsum(_) | Op::Det(_) => linalg_extra::build(spec),
        Op::Gather(_)
        | Op::GatherElements(_)
        | Op::GatherNd(_)
        | Op::ScatterElements(_)
        | Op::ScatterNd(_)
        | Op::OneHot(_)
        | Op::Trilu(_)
        | Op::ReverseSequence(_) => indexing::build(spec),
        Op::QuantizeLinear(_) | Op::DequantizeLinear(_) | Op::DynamicQuantizeLinear(_) => {
            quant::build(spec)
        }
        Op::NllLoss(_) => loss::build(spec),
        Op::LayerNorm(_) | Op::RmsNorm(_) | Op::GroupNorm(_) | Op::InstanceNorm(_) => {
            norm::build(spec)
        }
        Op::Reduce(_) | Op::ArgReduce(_) => reduce::build(spec),
        Op::Softmax(_) | Op::Cumulative(_) | Op::TopK(_) => softmax::build(spec),
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
        | Op::CenterCropPad(_) => movement::build(spec),
        Op::ShapeOf(_) | Op::Size(_) | Op::ConstantOfShape(_) | Op::Range(_) | Op::EyeLike(_) => {
            generators::build(spec)
        }
        Op::Resize(_) => resize::build(spec),
        Op::GridSample(_) | Op::AffineGrid(_) | Op::RoiAlign(_) => grid::build(spec),
        Op::Attention(_) => attention::build(spec),
        Op::RotaryEmbedding(_) => rotary::build(spec),
        Op::Recurrent(_) | Op::CausalConvWithState(_) => recurrent::build(spec),
        Op::LinearAttention(_) => linear_attention::build(spec),
        Op::Dft(_) | Op::Stft(_) | Op::MelWeightMatrix(_) => spectral::build(spec),
        Op::TensorScatter(_) => tensor_scatter::build(spec),
        op => Err(KernelError::Unsupported(format!(
            "the CPU backend has no kernel for `{}`",
            op.name()
        ))),
    }
}
