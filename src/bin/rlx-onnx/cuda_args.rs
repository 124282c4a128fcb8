//! The CUDA plan choices `bench` and `generate` take as flags (each a
//! [`rlx_onnx::cuda::PlanOptions`] field), to compare kernels on one model.

#[derive(clap::Args)]
pub struct CudaArgs {
    /// CUDA: where an f32 convolution's bias and ReLU run (cuDNN's fused
    /// call, or rlx's epilogue kernel after a plain cuDNN forward).
    #[arg(
        long,
        value_enum,
        default_value = "cudnn",
        help_heading = "CUDA (--target cuda)"
    )]
    cuda_conv_epilogue: ConvEpilogueArg,
    /// CUDA: which convolutions run as a cuBLASLt GEMM instead of cuDNN
    /// (never, pointwise ones, or all ungrouped ones through im2col).
    #[arg(
        long,
        value_enum,
        default_value = "all",
        help_heading = "CUDA (--target cuda)"
    )]
    cuda_conv_gemm: ConvGemmArg,
    /// CUDA: where MatMuls too small for cuBLASLt to pay its way run (rlx's
    /// tile kernel, or cuBLASLt like every larger one).
    #[arg(
        long,
        value_enum,
        default_value = "tile",
        help_heading = "CUDA (--target cuda)"
    )]
    cuda_small_gemm: SmallGemmArg,
    /// CUDA: where MatMuls of at most eight rows against a wide matrix run
    /// (a decoder's step): rlx's row GEMV from two rows, from one, or as
    /// larger ones.
    #[arg(
        long,
        value_enum,
        default_value = "batched",
        help_heading = "CUDA (--target cuda)"
    )]
    cuda_few_rows: FewRowsArg,
    /// CUDA: which kernel runs attention (the tiled one, its query tiles
    /// chosen by the grid; the tiled one with 64-row or key-split 16-row
    /// tiles whatever the grid; or the row kernel it replaced, to compare).
    #[arg(
        long,
        value_enum,
        default_value = "tiled",
        help_heading = "CUDA (--target cuda)"
    )]
    cuda_attention: AttentionArg,
    /// CUDA: how kernels are launched (overlapped: each placed while the
    /// one before it finishes, on compute capability 9.0 and newer;
    /// serial: each once the one before has finished).
    #[arg(
        long,
        value_enum,
        default_value = "overlapped",
        help_heading = "CUDA (--target cuda)"
    )]
    cuda_launch: LaunchArg,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LaunchArg {
    Overlapped,
    Serial,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ConvEpilogueArg {
    Cudnn,
    Kernel,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ConvGemmArg {
    Never,
    Pointwise,
    All,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum AttentionArg {
    Tiled,
    TiledWide,
    TiledSplit,
    Rows,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum FewRowsArg {
    Batched,
    All,
    Library,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SmallGemmArg {
    Tile,
    Cublaslt,
}

impl CudaArgs {
    /// The CUDA plan options the flags choose.
    pub fn plan(&self) -> rlx_onnx::cuda::PlanOptions {
        use rlx_onnx::cuda::{
            AttentionKernel, ConvEpilogue, ConvGemm, FewRows, KernelLaunch, PlanOptions, SmallGemm,
        };
        PlanOptions {
            conv_epilogue: match self.cuda_conv_epilogue {
                ConvEpilogueArg::Cudnn => ConvEpilogue::Cudnn,
                ConvEpilogueArg::Kernel => ConvEpilogue::Kernel,
            },
            conv_gemm: match self.cuda_conv_gemm {
                ConvGemmArg::Never => ConvGemm::Never,
                ConvGemmArg::Pointwise => ConvGemm::Pointwise,
                ConvGemmArg::All => ConvGemm::All,
            },
            small_gemm: match self.cuda_small_gemm {
                SmallGemmArg::Tile => SmallGemm::Tile,
                SmallGemmArg::Cublaslt => SmallGemm::Cublaslt,
            },
            few_rows: match self.cuda_few_rows {
                FewRowsArg::Batched => FewRows::Batched,
                FewRowsArg::All => FewRows::All,
                FewRowsArg::Library => FewRows::Library,
            },
            attention: match self.cuda_attention {
                AttentionArg::Tiled => AttentionKernel::Tiled,
                AttentionArg::TiledWide => AttentionKernel::TiledWide,
                AttentionArg::TiledSplit => AttentionKernel::TiledSplit,
                AttentionArg::Rows => AttentionKernel::Rows,
            },
            launch: match self.cuda_launch {
                LaunchArg::Overlapped => KernelLaunch::Overlapped,
                LaunchArg::Serial => KernelLaunch::Serial,
            },
            ..PlanOptions::default()
        }
    }
}
