//! Einsum on CUDA (`kernels/cuda/einsum.cu`): one thread per output
//! element summing products over the summed labels, bound by rlx-gpu's
//! `kernels::einsum` as the CPU backend binds it. Up to 4 operands and 8
//! labels.

use rlx_gpu::kernels::einsum::{einsum_params, EinsumParams, MAX_OPERANDS};
use rlx_gpu::{Layout, Params};
use rlx_ir::{Node, Op, TensorType};

use super::{dtype_of, num_name, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "einsum",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/einsum.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![EinsumParams::LAYOUT]
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    if num_name(d).is_none() || inputs.iter().any(|t| t.dtype != d) {
        return Err(format!("`{}` on {d} has no cuda kernel", node.op.name()));
    }
    if inputs.len() > MAX_OPERANDS {
        return Err(format!(
            "`{}` of {} operands has no cuda kernel (at most {MAX_OPERANDS})",
            node.op.name(),
            inputs.len()
        ));
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::Einsum(e) = &cx.node.op else {
        return Err(format!("`{}` is not an einsum", cx.node.op.name()));
    };
    let y = cx.output(0)?.clone();
    let dims: Vec<Vec<usize>> = cx.io.ins.iter().map(|o| o.dims.clone()).collect();
    let p = einsum_params(e, &dims, &y.dims)?;
    let sfx = num_name(y.dtype).ok_or_else(|| format!("einsum on {}", y.dtype))?;
    let first = cx.input(0)?.range();
    let mut ops: Vec<_> = cx.io.ins.iter().map(|o| o.range()).collect();
    ops.resize(MAX_OPERANDS, first);
    ops.push(y.range());
    let m = cx.modules.of(&SOURCE);
    cx.items(m, &format!("einsum_{sfx}"), u64::from(p.n), ops, &p);
    Ok(())
}
