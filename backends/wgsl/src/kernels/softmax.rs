//! Softmax, LogSoftmax and Hardmax over one axis (`kernels/wgsl/softmax.wgsl`):
//! a workgroup tree reduction per row, planned by rlx-gpu's `kernels::softmax`.

use rlx_gpu::kernels::softmax::{softmax_params, SoftmaxParams, SOFTMAX_OPERANDS};
use rlx_gpu::Params;
use rlx_ir::ops::Softmax;
use rlx_ir::{Node, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only};

const SRC: &str = include_str!("../../../../kernels/wgsl/softmax.wgsl");

/// f32 only.
pub fn supports(_node: &Node, inputs: &[TensorType]) -> LResult<()> {
    f32_only("softmax", dtype_of(inputs, 0)?)
}

pub fn lower(cx: &mut Cx, s: &Softmax) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    let p = softmax_params(s, &x.dims)?;
    let pipe = cx.typed_pipeline(
        "softmax.tree64",
        SOFTMAX_OPERANDS,
        &SoftmaxParams::LAYOUT,
        SRC,
    );
    cx.launch_params(pipe, vec![x.range(), y.range()], &p, u64::from(p.rows));
    Ok(())
}
