//! MatMul and FusedMatMul lowering onto the tiled, batched, strided GEMM in
//! `kernels/wgsl/matmul.wgsl`, which convolution reuses (see [`Gemm`]): a
//! fused product's bias and activation run in the GEMM's epilogue (or in
//! the split-K sum's). The GEMM's shape and parameters are planned by
//! rlx-gpu (`kernels::matmul`); splitting K to fit the binding limit is the
//! WGSL plan's.

use rlx_gpu::geometry::broadcast_strides;
use rlx_gpu::kernels::elementwise::wgsl::epilogue;
use rlx_gpu::kernels::matmul::{
    self as plan, split_k, MatmulParams, SplitKSumParams, MATMUL_OPERANDS, SPLIT_K_GROUPS,
    SPLIT_K_SUM_OPERANDS,
};
use rlx_gpu::Params;
use rlx_ir::ops::Activation;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, LResult};
use crate::schedule::Range;

const TILE: &str = include_str!("../../../../kernels/wgsl/matmul_tile.wgsl");
const WIDE: &str = include_str!("../../../../kernels/wgsl/matmul.wgsl");
const NARROW: &str = include_str!("../../../../kernels/wgsl/matmul_narrow.wgsl");
const SUM: &str = include_str!("../../../../kernels/wgsl/matmul_sum.wgsl");

/// One GEMM over arena ranges (`bias` with its strides in `shape.bias`),
/// `act` applied where `shape.activate` says.
#[derive(Debug, Clone)]
pub struct Gemm {
    pub a: Range,
    pub b: Range,
    pub c: Range,
    pub bias: Option<Range>,
    pub shape: plan::Gemm,
    pub act: Activation,
}

impl Gemm {
    /// Emits the GEMM; when an unbatched operand exceeds half the binding
    /// limit, as one dispatch per K chunk, accumulating into C (bias and
    /// activation with the last chunk).
    pub fn emit(&self, cx: &mut Cx) -> LResult<()> {
        let g = &self.shape;
        let span = |rows: usize, rs: usize, cols: usize, cs: usize| -> u64 {
            ((rows.saturating_sub(1) * rs + cols.saturating_sub(1) * cs + 1) * 4) as u64
        };
        let half = (cx.max_binding / 2).max(4);
        let big = span(g.m, g.a_s[0], g.k, g.a_s[1]).max(span(g.k, g.b_s[0], g.n, g.b_s[1]));
        if !g.batch.is_empty() || big <= half || g.k < 2 {
            return self.emit_one(cx, false);
        }
        let chunks = (big.div_ceil(half) as usize).clamp(2, g.k);
        let kc = g.k.div_ceil(chunks);
        let mut k0 = 0;
        while k0 < g.k {
            let k = kc.min(g.k - k0);
            let sub = |r: Range, at: usize, bytes: u64| Range {
                offset: r.offset + (at * 4) as u64,
                bytes,
            };
            let last = k0 + k == g.k;
            let part = Gemm {
                a: sub(self.a, k0 * g.a_s[1], span(g.m, g.a_s[0], k, g.a_s[1])),
                b: sub(self.b, k0 * g.b_s[0], span(k, g.b_s[0], g.n, g.b_s[1])),
                c: self.c,
                bias: if last { self.bias } else { None },
                act: self.act,
                shape: plan::Gemm {
                    bias: if last { g.bias } else { None },
                    activate: last && g.activate,
                    k,
                    ..g.clone()
                },
            };
            part.emit_one(cx, k0 > 0)?;
            k0 += k;
        }
        Ok(())
    }

    /// Whether A's and B's tiles load along K (K their contiguous axis), as
    /// the kernel's neighbouring invocations then read neighbouring words.
    fn along_k(&self) -> (bool, bool) {
        let g = &self.shape;
        (
            g.a_s[1] == 1 && g.a_s[0] != 1,
            g.b_s[0] == 1 && g.b_s[1] != 1,
        )
    }

    /// The source of `kernel` with this GEMM's epilogue activation and,
    /// for the product (`layout`), its operand layout and the tile code the
    /// product kernels share.
    fn source(&self, kernel: &str, layout: bool) -> LResult<String> {
        let act = epilogue(self.act)
            .ok_or_else(|| format!("a {} epilogue has no WGSL kernel", self.act.name()))?;
        if !layout {
            return Ok(format!("{act}\n{kernel}"));
        }
        let (a, b) = self.along_k();
        Ok(format!(
            "{act}\nconst A_ALONG_K: bool = {a};\nconst B_ALONG_K: bool = {b};\n{TILE}\n{kernel}"
        ))
    }

    /// The product kernel for `groups` workgroups of output tiles (and K
    /// chunks): its pipeline name and source.
    fn product(groups: u64) -> (&'static str, &'static str) {
        if narrow(groups) {
            ("matmul.narrow64x64", NARROW)
        } else {
            ("matmul.tiled64x64", WIDE)
        }
    }

    /// The pipeline name of `kernel`: for the product (`layout`), `.at` when
    /// A's tile loads along its rows (a transposed A) and `.bt` when B's
    /// loads along K (a transposed B); then the epilogue activation if any.
    fn name(&self, kernel: &str, layout: bool) -> String {
        let (a, b) = self.along_k();
        let mut name = kernel.to_string();
        if layout && !a {
            name += ".at";
        }
        if layout && b {
            name += ".bt";
        }
        if self.act != Activation::None {
            name += ".";
            name += self.act.name();
        }
        name
    }

    fn emit_one(&self, cx: &mut Cx, accumulate: bool) -> LResult<()> {
        if let Some(splits) = split_k(&self.shape).filter(|_| !accumulate) {
            return self.emit_split(cx, splits);
        }
        let p = self.shape.params(accumulate)?;
        let bias = self.bias.unwrap_or(self.c);
        let groups = self.shape.groups();
        let (kernel, src) = Self::product(groups);
        let pipe = cx.typed_pipeline(
            &self.name(kernel, true),
            MATMUL_OPERANDS,
            &MatmulParams::LAYOUT,
            &self.source(src, true)?,
        );
        cx.launch_params(pipe, vec![self.a, self.b, self.c, bias], &p, groups);
        Ok(())
    }
}

/// Whether a product of `groups` workgroups takes the narrow kernel (128
/// invocations of 8x4 outputs) rather than the wide one (64 of 8x8): where
/// the workgroups are too few to fill a large GPU's multiprocessors with
/// warps (up to [`SPLIT_K_GROUPS`], what a K split aims for). Measured on
/// an H200 (Vulkan): BERT-base's 128-row products 12-20% faster narrow;
/// 1024 x 768 x 3072 (768 groups) 9% and 4096^3 7% slower.
fn narrow(groups: u64) -> bool {
    groups <= SPLIT_K_GROUPS as u64
}

/// f32 operands only.
impl Gemm {
    /// A GEMM whose output tiles cannot fill a device: its K split in
    /// `splits` chunks computed at once (one batch entry each) into scratch,
    /// then summed into C with the bias and activation.
    fn emit_split(&self, cx: &mut Cx, splits: usize) -> LResult<()> {
        let g = &self.shape;
        let part = cx.scratch((splits * g.m * g.n * 4) as u64);
        let parts = g.split_parts(splits);
        let p = parts.params(false)?;
        let groups = parts.groups();
        let (kernel, src) = Self::product(groups);
        let pipe = cx.typed_pipeline(
            &self.name(kernel, true),
            MATMUL_OPERANDS,
            &MatmulParams::LAYOUT,
            &self.source(src, true)?,
        );
        cx.launch_params(pipe, vec![self.a, self.b, part, part], &p, groups);
        let sum = g.split_sum(splits)?;
        let pipe = cx.typed_pipeline(
            &self.name("matmul.split_k_sum", false),
            SPLIT_K_SUM_OPERANDS,
            &SplitKSumParams::LAYOUT,
            &self.source(SUM, false)?,
        );
        let bias = self.bias.unwrap_or(self.c);
        cx.launch_items(pipe, vec![part, self.c, bias], &sum, (g.m * g.n) as u64);
        Ok(())
    }
}

/// f32 operands; a fused product's bias must vary along columns only (a
/// row or batch bias is left to `legalize`, which splits the add off) and
/// its activation must be one the epilogue expresses.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    if inputs.len() < 2 {
        return Err("matmul needs two inputs".into());
    }
    for t in inputs.iter().take(2) {
        if t.dtype != DType::F32 {
            return Err(format!(
                "matmul on {} has no WGSL kernel (f32 only)",
                t.dtype
            ));
        }
    }
    if let Op::FusedMatMul(f) = &node.op {
        if epilogue(f.activation).is_none() {
            return Err(format!(
                "a {} epilogue has no WGSL kernel",
                f.activation.name()
            ));
        }
        if let Some(bias) = inputs.get(2) {
            if inputs[1].shape.rank() < 2 {
                // The product's last dim is then A's rows, not columns.
                return Err("a fused bias on a product with a vector has no WGSL epilogue".into());
            }
            let dims = &bias.shape.0;
            let along_rows = dims.iter().rev().skip(1).any(|d| d.known() != Some(1));
            if bias.dtype != DType::F32 || along_rows {
                return Err("a fused bias that is not one row of f32 has no WGSL epilogue".into());
            }
        }
    }
    Ok(())
}

/// MatMul, or FusedMatMul with its bias (one row, broadcast over the rows
/// and batch entries) and activation in the epilogue.
pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (a, b, c) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    if a.dtype != DType::F32 || b.dtype != DType::F32 {
        return Err(format!("matmul on {} has no WGSL kernel", a.dtype));
    }
    let act = match &cx.node.op {
        Op::FusedMatMul(f) => f.activation,
        _ => Activation::None,
    };
    let mut shape = plan::matmul(&a.dims, &b.dims)?;
    shape.activate = act != Activation::None;
    let bias = match cx.ins.get(2) {
        Some(t) if matches!(cx.node.op, Op::FusedMatMul(_)) => {
            let s = broadcast_strides(&t.dims, &c.dims)?;
            let rank = s.len();
            if rank == 0 || s[..rank - 1].iter().any(|&x| x != 0) {
                return Err("a fused bias that is not one row has no WGSL epilogue".into());
            }
            shape.bias = Some([0, s[rank - 1]]);
            Some(t.range())
        }
        _ => None,
    };
    Gemm {
        a: a.range(),
        b: b.range(),
        c: c.range(),
        bias,
        shape: shape.fold_batch_into_rows(),
        act,
    }
    .emit(cx)
}
