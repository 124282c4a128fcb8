//! Lowering of nodes to dispatches, one file per kernel family, and the
//! context they share ([`Cx`]): operands with their buffer offsets, constant
//! input values, scratch space, and the pipeline table.
//!
//! A kernel's params start with its operands' byte offsets (the plan rebases
//! them to the bound window), in the order of [`Draft::operands`], followed by
//! the family's own words as documented in its `.wgsl` file.

pub mod attention;
pub mod control;
pub mod conv;
pub mod conv_transpose;
pub mod elementwise;
pub mod expr;
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
pub mod scatter;
pub mod softmax;

use std::collections::HashMap;

use rlx_ir::{DType, Node, Op, Tensor};

use crate::plan::WG;
use crate::schedule::{Pipeline, Range};

pub const PRELUDE: &str = include_str!("wgsl/prelude.wgsl");

/// A tensor operand: where it starts in the buffer and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    pub at: u64,
    pub bytes: u64,
    pub dtype: DType,
    pub dims: Vec<usize>,
}

impl Operand {
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn range(&self) -> Range {
        Range {
            offset: self.at,
            bytes: self.bytes,
        }
    }
}

/// A dispatch before windowing: pipeline, touched ranges, params, workgroups.
#[derive(Debug, Clone)]
pub struct Draft {
    pub pipeline: usize,
    pub operands: Vec<Range>,
    pub params: Vec<u32>,
    pub groups: u64,
}

/// Pipelines, deduplicated by source.
#[derive(Default)]
pub struct Pipelines {
    list: Vec<Pipeline>,
    by_source: HashMap<String, usize>,
}

impl Pipelines {
    pub fn get(&mut self, name: &str, body: &str) -> usize {
        let source = format!("{PRELUDE}\n{body}");
        if let Some(&i) = self.by_source.get(&source) {
            return i;
        }
        self.list.push(Pipeline {
            name: name.to_string(),
            source: source.clone(),
        });
        self.by_source.insert(source, self.list.len() - 1);
        self.list.len() - 1
    }

    pub fn into_vec(self) -> Vec<Pipeline> {
        self.list
    }
}

/// What a lowering sees of its node and where it puts its dispatches.
pub struct Cx<'a> {
    pub node: &'a Node,
    pub ins: Vec<Operand>,
    pub outs: Vec<Operand>,
    /// Values of constant inputs (for value ports such as axes or pads).
    pub values: Vec<Option<Tensor>>,
    /// The binding limit: kernels split work whose operands exceed it.
    pub max_binding: u64,
    scratch_at: u64,
    scratch_used: u64,
    pipelines: &'a mut Pipelines,
    drafts: Vec<Draft>,
}

pub type LResult<T> = Result<T, String>;

impl<'a> Cx<'a> {
    pub fn new(
        node: &'a Node,
        ins: Vec<Operand>,
        outs: Vec<Operand>,
        values: Vec<Option<Tensor>>,
        scratch_at: u64,
        pipelines: &'a mut Pipelines,
    ) -> Cx<'a> {
        Cx {
            node,
            ins,
            outs,
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
                "input {i} must be a constant here (the wgpu plan reads it)"
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

    pub fn pipeline(&mut self, name: &str, body: &str) -> usize {
        self.pipelines.get(name, body)
    }

    /// A dispatch of `groups` workgroups.
    pub fn dispatch(
        &mut self,
        pipeline: usize,
        operands: Vec<Range>,
        params: Vec<u32>,
        groups: u64,
    ) {
        if groups > 0 {
            self.drafts.push(Draft {
                pipeline,
                operands,
                params,
                groups,
            });
        }
    }

    /// A dispatch of `items` invocations in workgroups of [`WG`].
    pub fn dispatch_items(
        &mut self,
        pipeline: usize,
        operands: Vec<Range>,
        params: Vec<u32>,
        items: u64,
    ) {
        self.dispatch(pipeline, operands, params, items.div_ceil(WG));
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

/// Row-major element strides of `dims`.
pub fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Checks that a count fits the u32 words kernels index with.
pub fn u32_of(v: usize, what: &str) -> LResult<u32> {
    u32::try_from(v).map_err(|_| format!("{what} ({v}) exceeds the u32 range of the wgpu kernels"))
}

/// Normalizes a possibly negative axis.
pub fn axis(a: i64, rank: usize) -> LResult<usize> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if (0..r.max(1)).contains(&v) {
        Ok(v as usize)
    } else {
        Err(format!("axis {a} is out of range for rank {rank}"))
    }
}

/// Emits the dispatches of the node in `cx`.
pub fn lower(cx: &mut Cx) -> LResult<()> {
    if cx.outs.iter().all(|o| o.numel() == 0) {
        return Ok(());
    }
    match &cx.node.op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Logical(_)
        | Op::Where(_)
        | Op::Cast(_)
        | Op::Clip(_)
        | Op::Gelu(_)
        | Op::ElementwiseRegion(_) => elementwise::lower(cx),
        Op::MatMul(_) => matmul::lower(cx),
        Op::Conv(c) => conv::lower(cx, c),
        Op::ConvTranspose(c) => conv_transpose::lower(cx, c),
        Op::Pool(p) => pool::lower(cx, p),
        Op::Lrn(l) => pool::lower_lrn(cx, l),
        Op::GlobalPool(_) | Op::Reduce(_) | Op::ArgReduce(_) => reduce::lower(cx),
        Op::Softmax(s) => softmax::lower(cx, s),
        Op::Attention(a) => attention::lower(cx, a),
        Op::LayerNorm(_) | Op::RmsNorm(_) => norm::lower(cx),
        Op::Transpose(_)
        | Op::Slice(_)
        | Op::Concat(_)
        | Op::Split(_)
        | Op::Expand(_)
        | Op::Pad(_)
        | Op::DepthToSpace(_)
        | Op::SpaceToDepth(_)
        | Op::Tile(_) => movement::lower(cx),
        Op::Gather(_) => gather::lower(cx),
        Op::GatherElements(_) | Op::Trilu(_) | Op::Cumulative(_) => indexing::lower(cx),
        Op::NllLoss(l) => loss::lower(cx, l),
        Op::Resize(_) => resize::lower(cx),
        Op::QuantizeLinear(_) | Op::DequantizeLinear(_) => quant::lower(cx),
        Op::ScatterElements(_) | Op::ScatterNd(_) => scatter::lower(cx),
        op => Err(format!(
            "the wgpu backend has no kernel for `{}`",
            op.name()
        )),
    }
}
