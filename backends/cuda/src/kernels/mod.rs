//! CUDA kernel families: each family's source file in `kernels/cuda/`, the
//! parameter structs it reads (printed from their rlx-gpu [`Layout`]s, with
//! `static_assert`s of size and offsets, so host and kernel cannot drift),
//! and its lowering. [`family`] is the one table mapping ops to a family's
//! `supports` and `lower`, so what legalization is told and what the plan
//! emits cannot disagree. [`Modules`] collects the modules a schedule uses.

pub mod attention;
pub mod cast;
pub mod control;
pub mod conv;
pub mod einsum;
pub mod elementwise;
pub mod epilogue;
pub mod grid;
pub mod indexing;
pub mod loss;
pub mod matmul;
pub mod movement;
pub mod norm;
pub mod one_hot;
pub mod pool;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod resize;
pub mod row_gemv;
pub mod scatter;
pub mod sequence;
pub mod signal;
pub mod softmax;
pub mod tensor_scatter;
pub mod tile_gemm;
pub mod topk;

use rlx_gpu::geometry::{fold_grid, LResult};
use rlx_gpu::{ConstBlock, Layout, NodeIo, ParamBlock, Params, Range};
use rlx_ir::{DType, Node, Op, TensorType};

use crate::schedule::{KernelLaunch, Launch, Module};

/// Shared by every module.
pub const PRELUDE: &str = include_str!("../../../../kernels/cuda/prelude.cuh");

/// A CUDA module of fixed source: its name, its `.cu` text, and the
/// parameter structs its entry points take.
pub struct Source {
    pub name: &'static str,
    pub source: &'static str,
    pub layouts: fn() -> Vec<Layout>,
}

/// Every module of fixed source, for tests that compile them all.
pub const SOURCES: &[&Source] = &[
    &control::SOURCE,
    &cast::SOURCE,
    &movement::SOURCE,
    &indexing::SOURCE,
    &scatter::SOURCE,
    &resize::SOURCE,
    &quant::SOURCE,
    &loss::SOURCE,
    &conv::SOURCE,
    &epilogue::SOURCE,
    &tile_gemm::SOURCE,
    &row_gemv::SOURCE,
    &pool::SOURCE,
    &attention::SOURCE,
    &attention::FLASH_F32,
    &attention::FLASH_F16,
    &attention::FLASH_BF16,
    &attention::FLASH_F16_SPLIT,
    &attention::FLASH_BF16_SPLIT,
    &attention::FLASH_F16_PLAIN,
    &attention::FLASH_BF16_PLAIN,
    &attention::FLASH_F16_SPLIT_PLAIN,
    &attention::FLASH_BF16_SPLIT_PLAIN,
    &attention::FLASH_F16_UNMASKED,
    &attention::FLASH_BF16_UNMASKED,
    &attention::FLASH_F16_SPLIT_UNMASKED,
    &attention::FLASH_BF16_SPLIT_UNMASKED,
    &reduce::SOURCE,
    &softmax::SOURCE,
    &topk::SOURCE,
    &einsum::SOURCE,
    &one_hot::SOURCE,
    &tensor_scatter::SOURCE,
    &norm::SOURCE,
    &recurrent::SOURCE,
    &grid::SOURCE,
    &sequence::SOURCE,
    &signal::SOURCE,
];

/// Threads per block of element-wise and movement launches.
pub const BLOCK: u32 = 256;

/// The dtype of input `i`.
pub fn dtype_of(inputs: &[TensorType], i: usize) -> LResult<DType> {
    inputs
        .get(i)
        .map(|t| t.dtype)
        .ok_or_else(|| format!("input {i} is missing"))
}

/// The name of a numeric dtype in the kernels' `numeric.cuh` (entry
/// suffixes); `None` for bool and the sub-byte and float8 dtypes.
pub fn num_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::U16 => "u16",
        DType::U32 => "u32",
        DType::U64 => "u64",
        _ => return None,
    })
}

/// The complete source of a module: the prelude, each parameter struct and
/// its checks, then the kernels.
pub fn module_source(f: &Source) -> String {
    let mut s = String::from(PRELUDE);
    for l in (f.layouts)() {
        s.push('\n');
        s.push_str(&l.cuda());
        s.push_str(&l.cuda_checks());
    }
    s.push('\n');
    s.push_str(f.source);
    s
}

/// The modules of a schedule, each added once, in first-use order.
#[derive(Debug, Default)]
pub struct Modules {
    modules: Vec<Module>,
    /// Counters that every launch using them leaves at zero (zero as the
    /// plan's constants are uploaded), shared by all launches of the plan
    /// (they run one after another): the row GEMV's tickets.
    tickets: Option<Range>,
}

impl Modules {
    /// The index of `f`'s module, adding it on first use.
    pub fn of(&mut self, f: &Source) -> usize {
        self.generated(f.name, || module_source(f))
    }

    /// The index of the module called `name` (per-node generated source,
    /// named by a hash of it or by what makes it unique), adding `source()`
    /// on first use.
    pub fn generated(&mut self, name: &str, source: impl FnOnce() -> String) -> usize {
        if let Some(i) = self.modules.iter().position(|m| m.name == name) {
            return i;
        }
        self.modules.push(Module {
            name: name.to_string(),
            source: source(),
            ptx: None,
        });
        self.modules.len() - 1
    }

    pub fn into_vec(self) -> Vec<Module> {
        self.modules
    }
}

/// The entry-point suffix of a float dtype (`f32`, `f64`, `f16`, `bf16`),
/// or `None` for any other dtype.
pub fn float_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => return None,
    })
}

/// What a node's lowering sees and where its launches go.
pub struct Cx<'a> {
    /// The plan's lowering choices.
    pub opts: crate::PlanOptions,
    pub node: &'a Node,
    pub io: NodeIo,
    pub modules: &'a mut Modules,
    scratch_used: u64,
    launches: Vec<Launch>,
    consts: Vec<ConstBlock>,
}

impl<'a> Cx<'a> {
    pub fn new(node: &'a Node, io: NodeIo, modules: &'a mut Modules) -> Cx<'a> {
        Cx {
            opts: crate::PlanOptions::default(),
            node,
            io,
            modules,
            scratch_used: 0,
            launches: Vec::new(),
            consts: Vec::new(),
        }
    }

    pub fn input(&self, i: usize) -> LResult<&rlx_gpu::Operand> {
        self.io
            .ins
            .get(i)
            .ok_or_else(|| format!("input {i} is missing"))
    }

    pub fn output(&self, i: usize) -> LResult<&rlx_gpu::Operand> {
        self.io
            .outs
            .get(i)
            .ok_or_else(|| format!("output {i} is missing"))
    }

    /// The integer values of constant input `i`; `None` if the input is
    /// absent, an error if it is present but not a constant.
    pub fn ints(&self, i: usize) -> LResult<Option<Vec<i64>>> {
        if i >= self.io.ins.len() {
            return Ok(None);
        }
        match self.io.values.get(i) {
            Some(Some(t)) => t
                .to_i64_vec()
                .map(Some)
                .ok_or_else(|| format!("input {i} is not an integer tensor")),
            _ => Err(format!(
                "input {i} must be a constant here (the cuda plan reads it)"
            )),
        }
    }

    /// The float values of constant input `i`, if it is one.
    pub fn floats(&self, i: usize) -> Option<Vec<f64>> {
        match self.io.values.get(i) {
            Some(Some(t)) => t.to_f64_vec(),
            _ => None,
        }
    }

    /// A launch of one thread per item in [`BLOCK`]-thread blocks (kernels
    /// loop grid-stride, so any grid is correct).
    pub fn items<P: Params>(
        &mut self,
        module: usize,
        entry: &str,
        items: u64,
        operands: Vec<Range>,
        p: &P,
    ) {
        let blocks = items.div_ceil(u64::from(BLOCK));
        self.kernel_params(module, entry, blocks, BLOCK, operands, p);
    }

    /// `count` u32 counters at zero, which the launch using them must leave
    /// at zero: the plan's one block of them, made (as a constant) by the
    /// first node that asks, or a larger one when a node asks for more.
    pub fn tickets(&mut self, count: u64) -> Range {
        let bytes = count.max(1) * 4;
        if let Some(t) = self.modules.tickets.filter(|t| t.bytes >= bytes) {
            return Range {
                offset: t.offset,
                bytes,
            };
        }
        // Room for a few more than asked: later nodes ask alike.
        let block = self.constant(vec![0u8; (bytes.max(4096)) as usize]);
        self.modules.tickets = Some(block);
        Range {
            offset: block.offset,
            bytes,
        }
    }

    /// Scratch bytes for this node (the next node reuses them).
    pub fn scratch(&mut self, bytes: u64) -> Range {
        let offset = (self.io.scratch_at + self.scratch_used).next_multiple_of(256);
        self.scratch_used = offset + bytes - self.io.scratch_at;
        Range { offset, bytes }
    }

    /// Constant bytes for this node's launches (tap tables, say): placed in
    /// the buffer past every scratch byte used so far and uploaded with the
    /// graph's constants.
    pub fn constant(&mut self, bytes: Vec<u8>) -> Range {
        let offset = self
            .scratch_end()
            .max(self.io.consts_at)
            .next_multiple_of(256);
        let len = bytes.len() as u64;
        self.scratch_used = offset + len - self.io.scratch_at;
        self.consts.push(ConstBlock { offset, bytes });
        Range { offset, bytes: len }
    }

    pub fn take_consts(&mut self) -> Vec<ConstBlock> {
        std::mem::take(&mut self.consts)
    }

    pub fn scratch_end(&self) -> u64 {
        self.io.scratch_at + self.scratch_used
    }

    /// A launch of `entry` in module `module` over `blocks` blocks of `block`
    /// threads (the grid folded past 65535 blocks into y).
    pub fn kernel(
        &mut self,
        module: usize,
        entry: &str,
        blocks: u64,
        block: u32,
        operands: Vec<Range>,
        params: ParamBlock,
    ) {
        self.kernel_with_shared(module, entry, blocks, block, 0, operands, params);
    }

    /// The launch [`Cx::kernel`] and [`Cx::kernel_params_shared`] push, with
    /// `shared` bytes of dynamic shared memory a block.
    #[allow(clippy::too_many_arguments)]
    fn kernel_with_shared(
        &mut self,
        module: usize,
        entry: &str,
        blocks: u64,
        block: u32,
        shared: u32,
        operands: Vec<Range>,
        params: ParamBlock,
    ) {
        if blocks == 0 {
            return;
        }
        self.launches.push(Launch::Kernel(KernelLaunch {
            module,
            entry: entry.to_string(),
            grid: fold_grid(blocks),
            block: [block, 1, 1],
            shared,
            operands,
            params,
            node: String::new(),
            origin: Vec::new(),
        }));
    }

    /// [`Cx::kernel`] with a typed parameter struct.
    pub fn kernel_params<P: Params>(
        &mut self,
        module: usize,
        entry: &str,
        blocks: u64,
        block: u32,
        operands: Vec<Range>,
        p: &P,
    ) {
        self.kernel(module, entry, blocks, block, operands, ParamBlock::of(p));
    }

    /// [`Cx::kernel_params`] with `shared` bytes of dynamic shared memory a block.
    #[allow(clippy::too_many_arguments)]
    pub fn kernel_params_shared<P: Params>(
        &mut self,
        module: usize,
        entry: &str,
        blocks: u64,
        block: u32,
        shared: u32,
        operands: Vec<Range>,
        p: &P,
    ) {
        let params = ParamBlock::of(p);
        self.kernel_with_shared(module, entry, blocks, block, shared, operands, params);
    }

    /// A launch built elsewhere (a GEMM, say).
    pub fn push(&mut self, l: Launch) {
        self.launches.push(l);
    }

    pub fn take_launches(&mut self) -> Vec<Launch> {
        std::mem::take(&mut self.launches)
    }
}

/// A kernel family's two halves: whether a node runs (with the reason when
/// not), and its lowering.
#[derive(Clone, Copy)]
pub struct Family {
    pub supports: fn(&Node, &[TensorType]) -> LResult<()>,
    pub lower: fn(&mut Cx) -> LResult<()>,
}

/// The family that runs `op`, if any. Leaves, views and control flow are not
/// lowered here (the planner places and walks them).
pub fn family(op: &Op) -> Option<Family> {
    Some(match op {
        Op::MatMul(_) | Op::FusedMatMul(_) => Family {
            supports: matmul::supports,
            lower: matmul::lower,
        },
        Op::Transpose(_)
        | Op::Slice(_)
        | Op::Concat(_)
        | Op::Split(_)
        | Op::Expand(_)
        | Op::Pad(_)
        | Op::DepthToSpace(_)
        | Op::SpaceToDepth(_)
        | Op::Tile(_)
        | Op::CenterCropPad(_) => Family {
            supports: movement::supports,
            lower: movement::lower,
        },
        Op::Gather(_)
        | Op::GatherElements(_)
        | Op::GatherNd(_)
        | Op::Trilu(_)
        | Op::Cumulative(_) => Family {
            supports: indexing::supports,
            lower: indexing::lower,
        },
        Op::ScatterElements(_) | Op::ScatterNd(_) => Family {
            supports: scatter::supports,
            lower: scatter::lower,
        },
        Op::Resize(_) => Family {
            supports: resize::supports,
            lower: resize::lower,
        },
        Op::QuantizeLinear(_) | Op::DequantizeLinear(_) => Family {
            supports: quant::supports,
            lower: quant::lower,
        },
        Op::NllLoss(_) => Family {
            supports: loss::supports,
            lower: loss::lower,
        },
        Op::Conv(_) | Op::FusedConv(_) | Op::ConvTranspose(_) => Family {
            supports: conv::supports,
            lower: conv::lower,
        },
        Op::Pool(_) | Op::Lrn(_) => Family {
            supports: pool::supports,
            lower: pool::lower,
        },
        Op::Attention(_) => Family {
            supports: attention::supports,
            lower: attention::lower,
        },
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Logical(_)
        | Op::Where(_)
        | Op::Clip(_)
        | Op::Gelu(_)
        | Op::ElementwiseRegion(_) => Family {
            supports: elementwise::supports,
            lower: elementwise::lower,
        },
        Op::Cast(_) | Op::BitCast(_) => Family {
            supports: cast::supports,
            lower: cast::lower,
        },
        Op::Reduce(_) | Op::ArgReduce(_) | Op::GlobalPool(_) => Family {
            supports: reduce::supports,
            lower: reduce::lower,
        },
        Op::OneHot(_) => Family {
            supports: one_hot::supports,
            lower: one_hot::lower,
        },
        Op::TensorScatter(_) => Family {
            supports: tensor_scatter::supports,
            lower: tensor_scatter::lower,
        },
        Op::Einsum(_) => Family {
            supports: einsum::supports,
            lower: einsum::lower,
        },
        Op::TopK(_) => Family {
            supports: topk::supports,
            lower: topk::lower,
        },
        Op::Softmax(_) => Family {
            supports: softmax::supports,
            lower: softmax::lower,
        },
        Op::LayerNorm(_) | Op::RmsNorm(_) | Op::ResidualNorm(_) => Family {
            supports: norm::supports,
            lower: norm::lower,
        },
        Op::Recurrent(_) => Family {
            supports: recurrent::supports,
            lower: recurrent::lower,
        },
        Op::GridSample(_) | Op::AffineGrid(_) | Op::DeformConv(_) => Family {
            supports: grid::supports,
            lower: grid::lower,
        },
        Op::LinearAttention(_) | Op::CausalConvWithState(_) | Op::RotaryEmbedding(_) => Family {
            supports: sequence::supports,
            lower: sequence::lower,
        },
        Op::Dft(_) | Op::Stft(_) | Op::Col2Im(_) => Family {
            supports: signal::supports,
            lower: signal::lower,
        },
        _ => return None,
    })
}

/// Emits the launches of the node in `cx`, after its family's check.
pub fn lower(cx: &mut Cx) -> LResult<()> {
    let node = cx.node;
    let f = family(&node.op).ok_or_else(|| {
        format!(
            "the cuda backend has no kernel for `{}` yet",
            node.op.name()
        )
    })?;
    let types: Vec<TensorType> = cx
        .io
        .ins
        .iter()
        .map(|o| TensorType::known(o.dtype, &o.dims))
        .collect();
    (f.supports)(node, &types)?;
    if cx.io.outs.iter().all(|o| o.numel() == 0) {
        return Ok(());
    }
    (f.lower)(cx)
}
