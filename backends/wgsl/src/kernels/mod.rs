//! Lowering of nodes to dispatches, one file per kernel family, and the
//! context they share ([`Cx`]): operands with their buffer offsets, constant
//! input values, scratch space, and the pipeline table.
//!
//! A kernel's parameters are a typed struct (rlx-gpu `kernel_params!`) after
//! one handle per operand (the plan rebases them to the bound window), in
//! the order of [`Draft::operands`]; WGSL reads both as the struct `p`.

pub mod attention;
pub mod control;
pub mod conv;
pub mod conv_transpose;
pub mod elementwise;
pub mod gather;
pub mod indexing;
pub mod loss;
pub mod matmul;
pub mod movement;
pub mod norm;
pub mod pool;
pub mod quant;
pub mod reduce;
pub mod resize;
pub mod rotary;
pub mod scatter;
pub mod softmax;

use std::collections::HashMap;

use rlx_gpu::{Layout, ParamBlock, Params};
use rlx_ir::{Node, Op, Tensor, TensorType};

pub use rlx_gpu::geometry::{axis, strides, u32_of, LResult};
pub use rlx_gpu::Operand;

use crate::plan::WG;
use crate::schedule::{Pipeline, PipelineParams, Range};

pub const PRELUDE: &str = include_str!("../../../../kernels/wgsl/prelude.wgsl");
/// `rd`/`wr` through up to four windows of the buffer (a branch per access).
const ACCESS_WINDOWS: &str = include_str!("../../../../kernels/wgsl/access_windows.wgsl");
/// `rd`/`wr` when the whole buffer is one window (one load or store).
const ACCESS_WHOLE: &str = include_str!("../../../../kernels/wgsl/access_whole.wgsl");

/// A dispatch before windowing: pipeline, touched ranges (one per operand
/// handle of the kernel, in order), parameters, workgroups.
#[derive(Debug, Clone)]
pub struct Draft {
    pub pipeline: usize,
    pub operands: Vec<Range>,
    /// Which operands the dispatch may write (parallel to `operands`): the
    /// plan marks them after lowering (see [`crate::sync`]); until then all.
    pub writes: Vec<bool>,
    pub params: ParamBlock,
    pub groups: u64,
}

/// Pipelines, deduplicated by source. Sources are kept without the
/// prelude's buffer access, which the plan picks once the buffer's size is
/// known ([`Pipelines::into_vec`]).
#[derive(Default)]
pub struct Pipelines {
    list: Vec<Pipeline>,
    by_source: HashMap<String, usize>,
}

impl Pipelines {
    fn add(&mut self, name: &str, source: String, params: Option<PipelineParams>) -> usize {
        if let Some(&i) = self.by_source.get(&source) {
            return i;
        }
        self.list.push(Pipeline {
            name: name.to_string(),
            source: source.clone(),
            params,
        });
        self.by_source.insert(source, self.list.len() - 1);
        self.list.len() - 1
    }

    /// A kernel whose parameters are the struct `p` of `layout`, after one
    /// handle per name in `operands`.
    pub fn typed(&mut self, name: &str, operands: &[&str], layout: &Layout, body: &str) -> usize {
        let text = layout.wgsl(operands, 4);
        let params = PipelineParams {
            operands: operands.iter().map(|o| o.to_string()).collect(),
            layout: layout.clone(),
        };
        self.add(name, format!("{PRELUDE}\n{text}\n{body}"), Some(params))
    }

    /// The pipelines with their buffer access: `whole` when the buffer fits
    /// one binding, so every operand handle is an offset into binding 0.
    pub fn into_vec(self, whole: bool) -> Vec<Pipeline> {
        let access = if whole { ACCESS_WHOLE } else { ACCESS_WINDOWS };
        self.list
            .into_iter()
            .map(|p| Pipeline {
                source: format!("{access}\n{}", p.source),
                ..p
            })
            .collect()
    }
}

/// What a lowering sees of its node and where it puts its dispatches.
pub struct Cx<'a> {
    pub node: &'a Node,
    pub ins: Vec<Operand>,
    pub outs: Vec<Operand>,
    /// Whether each output is read (a split's unread pieces go unwritten);
    /// all by default.
    pub read: Vec<bool>,
    /// Values of constant inputs (for value ports such as axes or pads).
    pub values: Vec<Option<Tensor>>,
    /// The binding limit: kernels split work whose operands exceed it.
    pub max_binding: u64,
    scratch_at: u64,
    scratch_used: u64,
    pipelines: &'a mut Pipelines,
    drafts: Vec<Draft>,
}

impl<'a> Cx<'a> {
    pub fn new(
        node: &'a Node,
        ins: Vec<Operand>,
        outs: Vec<Operand>,
        values: Vec<Option<Tensor>>,
        scratch_at: u64,
        pipelines: &'a mut Pipelines,
    ) -> Cx<'a> {
        let read = vec![true; outs.len()];
        Cx {
            node,
            ins,
            outs,
            read,
            values,
            max_binding: u64::MAX,
            scratch_at,
            scratch_used: 0,
            pipelines,
            drafts: Vec::new(),
        }
    }

    pub fn input(&self, i: usize) -> LResult<&Operand> {
        self.ins
            .get(i)
            .ok_or_else(|| format!("input {i} is missing"))
    }

    pub fn output(&self, i: usize) -> LResult<&Operand> {
        self.outs
            .get(i)
            .ok_or_else(|| format!("output {i} is missing"))
    }

    /// The integer values of constant input `i`, if that input is present and constant.
    pub fn ints(&self, i: usize) -> LResult<Option<Vec<i64>>> {
        if i >= self.ins.len() {
            return Ok(None);
        }
        match self.values.get(i) {
            Some(Some(t)) => t
                .to_i64_vec()
                .map(Some)
                .ok_or_else(|| format!("input {i} is not an integer tensor")),
            _ => Err(format!(
                "input {i} must be a constant here (the WGSL plan reads it)"
            )),
        }
    }

    /// A float scalar constant input.
    pub fn scalar_f64(&self, i: usize) -> Option<f64> {
        match self.values.get(i) {
            Some(Some(t)) if t.numel() == 1 => t.to_f64_vec().map(|v| v[0]),
            _ => None,
        }
    }

    /// Scratch bytes for this node (reused by the next node).
    pub fn scratch(&mut self, bytes: u64) -> Range {
        let offset = (self.scratch_at + self.scratch_used).next_multiple_of(256);
        self.scratch_used = offset + bytes - self.scratch_at;
        Range { offset, bytes }
    }

    pub fn scratch_end(&self) -> u64 {
        self.scratch_at + self.scratch_used
    }

    /// A typed kernel's pipeline (see [`Pipelines::typed`]).
    pub fn typed_pipeline(
        &mut self,
        name: &str,
        operands: &[&str],
        layout: &Layout,
        body: &str,
    ) -> usize {
        self.pipelines.typed(name, operands, layout, body)
    }

    /// A dispatch of `groups` workgroups with typed parameters.
    pub fn launch(
        &mut self,
        pipeline: usize,
        operands: Vec<Range>,
        params: ParamBlock,
        groups: u64,
    ) {
        if groups > 0 {
            self.drafts.push(Draft {
                pipeline,
                writes: vec![true; operands.len()],
                operands,
                params,
                groups,
            });
        }
    }

    /// A typed dispatch of `p` (its pipeline, operands in the kernel's order).
    pub fn launch_params<P: Params>(
        &mut self,
        pipeline: usize,
        operands: Vec<Range>,
        p: &P,
        groups: u64,
    ) {
        self.launch(pipeline, operands, ParamBlock::of(p), groups);
    }

    /// A typed dispatch of `items` invocations in workgroups of [`WG`].
    pub fn launch_items<P: Params>(
        &mut self,
        pipeline: usize,
        operands: Vec<Range>,
        p: &P,
        items: u64,
    ) {
        self.launch_params(pipeline, operands, p, items.div_ceil(WG));
    }

    /// The pipeline table, for dispatch builders shared with the plan.
    pub fn pipelines_mut(&mut self) -> &mut Pipelines {
        self.pipelines
    }

    /// A dispatch built elsewhere (see [`control::copy`]).
    pub fn push(&mut self, d: Draft) {
        if d.groups > 0 {
            self.drafts.push(d);
        }
    }

    pub fn take_drafts(&mut self) -> Vec<Draft> {
        std::mem::take(&mut self.drafts)
    }
}

/// A kernel family's two halves: whether a node runs (with the reason when
/// not), and its lowering. [`family`] is the one place that maps ops to
/// them, so `supports` and `lower` cannot disagree.
#[derive(Clone, Copy)]
pub struct Family {
    pub supports: fn(&Node, &[TensorType]) -> LResult<()>,
    pub lower: fn(&mut Cx) -> LResult<()>,
}

const fn fam(
    supports: fn(&Node, &[TensorType]) -> LResult<()>,
    lower: fn(&mut Cx) -> LResult<()>,
) -> Family {
    Family { supports, lower }
}

/// The family that runs `op`, if any. Leaves, views and control flow are
/// not lowered here (the planner places and walks them).
pub fn family(op: &Op) -> Option<Family> {
    Some(match op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Logical(_)
        | Op::Where(_)
        | Op::Cast(_)
        | Op::Clip(_)
        | Op::Gelu(_)
        | Op::ElementwiseRegion(_) => fam(elementwise::supports, elementwise::lower),
        Op::MatMul(_) | Op::FusedMatMul(_) => fam(matmul::supports, matmul::lower),
        Op::Conv(_) | Op::FusedConv(_) => fam(conv::supports, |cx| match &cx.node.op {
            Op::Conv(c) => conv::lower(cx, c, rlx_ir::ops::Activation::None),
            Op::FusedConv(f) => conv::lower(cx, &f.conv(), f.activation),
            _ => Err("not a conv".into()),
        }),
        Op::ConvTranspose(_) => fam(conv_transpose::supports, |cx| match &cx.node.op {
            Op::ConvTranspose(c) => conv_transpose::lower(cx, c),
            _ => Err("not a conv_transpose".into()),
        }),
        Op::Pool(_) => fam(pool::supports, |cx| match &cx.node.op {
            Op::Pool(p) => pool::lower(cx, p),
            _ => Err("not a pool".into()),
        }),
        Op::Lrn(_) => fam(pool::supports, |cx| match &cx.node.op {
            Op::Lrn(l) => pool::lower_lrn(cx, l),
            _ => Err("not an lrn".into()),
        }),
        Op::GlobalPool(_) | Op::Reduce(_) | Op::ArgReduce(_) => {
            fam(reduce::supports, reduce::lower)
        }
        Op::Softmax(_) => fam(softmax::supports, |cx| match &cx.node.op {
            Op::Softmax(s) => softmax::lower(cx, s),
            _ => Err("not a softmax".into()),
        }),
        Op::Attention(_) => fam(attention::supports, |cx| match &cx.node.op {
            Op::Attention(a) => attention::lower(cx, a),
            _ => Err("not an attention".into()),
        }),
        Op::LayerNorm(_) | Op::RmsNorm(_) | Op::ResidualNorm(_) => fam(norm::supports, norm::lower),
        Op::Transpose(_)
        | Op::Slice(_)
        | Op::Concat(_)
        | Op::Split(_)
        | Op::Expand(_)
        | Op::Pad(_)
        | Op::DepthToSpace(_)
        | Op::SpaceToDepth(_)
        | Op::Tile(_) => fam(movement::supports, movement::lower),
        Op::Gather(_) | Op::GatherNd(_) => fam(gather::supports, gather::lower),
        Op::GatherElements(_) | Op::Trilu(_) | Op::Cumulative(_) | Op::TensorScatter(_) => {
            fam(indexing::supports, indexing::lower)
        }
        Op::NllLoss(_) => fam(loss::supports, |cx| match &cx.node.op {
            Op::NllLoss(l) => loss::lower(cx, l),
            _ => Err("not an nll_loss".into()),
        }),
        Op::Resize(_) => fam(resize::supports, resize::lower),
        Op::RotaryEmbedding(_) => fam(rotary::supports, rotary::lower),
        Op::QuantizeLinear(_) | Op::DequantizeLinear(_) => fam(quant::supports, quant::lower),
        Op::ScatterElements(_) | Op::ScatterNd(_) => fam(scatter::supports, scatter::lower),
        _ => return None,
    })
}

/// Emits the dispatches of the node in `cx`, after its family's check.
pub fn lower(cx: &mut Cx) -> LResult<()> {
    let node = cx.node;
    let f = family(&node.op)
        .ok_or_else(|| format!("the WGSL plan has no kernel for `{}`", node.op.name()))?;
    let types: Vec<TensorType> = cx
        .ins
        .iter()
        .map(|o| TensorType::known(o.dtype, &o.dims))
        .collect();
    (f.supports)(node, &types)?;
    if cx.outs.iter().all(|o| o.numel() == 0) {
        return Ok(());
    }
    (f.lower)(cx)
}
