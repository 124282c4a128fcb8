//! NllLoss on CUDA (`kernels/cuda/loss.cu`): per target, or summed /
//! averaged by one block, planned by rlx-gpu's `kernels::loss`. Float
//! inputs (f32, f16, bf16, f64), i32 or i64 targets.

use rlx_gpu::kernels::loss::{nll_params, NllLossParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, float_name, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "loss",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/loss.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![NllLossParams::LAYOUT]
}

pub fn supports(_node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    float_name(d).ok_or_else(|| format!("nll_loss of {d} has no cuda kernel"))?;
    if let Some(w) = inputs.get(2) {
        if w.dtype != d {
            return Err(format!("nll_loss weights of {} for {d} input", w.dtype));
        }
    }
    match dtype_of(inputs, 1)? {
        DType::I32 | DType::I64 => Ok(()),
        t => Err(format!("nll_loss targets of {t} have no cuda kernel")),
    }
}

/// Threads of the reducing block.
const BLOCK: u32 = 1024;

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::NllLoss(l) = &cx.node.op else {
        return Err(format!("`{}` is not an nll_loss", cx.node.op.name()));
    };
    let (x, t, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let w = cx.io.ins.get(2).cloned();
    let p = nll_params(
        l,
        &x.dims,
        t.numel(),
        t.dtype == DType::I64,
        w.as_ref().map(|w| w.numel()),
    )?;
    let name = float_name(x.dtype).ok_or("not a float dtype")?;
    let wr = w.as_ref().map_or(x.range(), |w| w.range());
    let ops = vec![x.range(), t.range(), wr, y.range()];
    let m = cx.modules.of(&SOURCE);
    let entry = format!("nll_{name}");
    if p.mode == 0 {
        cx.items(m, &entry, u64::from(p.count), ops, &p);
    } else {
        cx.kernel_params(m, &entry, 1, BLOCK, ops, &p);
    }
    Ok(())
}
