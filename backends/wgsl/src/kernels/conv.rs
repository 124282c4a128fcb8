//! Convolution (1-D and 2-D, groups, dilation, pads): im2col into scratch
//! (`kernels/wgsl/im2col.wgsl`), in column chunks, then the tiled GEMM with
//! the bias as its epilogue. Pointwise convolutions (1x1, stride 1, no pads)
//! read the image directly. Geometry and parameters are planned by rlx-gpu
//! (`kernels::conv`).

use rlx_gpu::kernels::conv::{conv2d, Im2colParams, IM2COL_OPERANDS};
use rlx_gpu::kernels::elementwise::wgsl::epilogue;
use rlx_gpu::kernels::matmul as plan;
use rlx_gpu::Params;
use rlx_ir::ops::{Activation, Conv};
use rlx_ir::{DType, Node, Op, TensorType};

use super::matmul::Gemm;
use super::{Cx, LResult};
use crate::schedule::Range;

const IM2COL: &str = include_str!("../../../../kernels/wgsl/im2col.wgsl");

/// Largest im2col buffer per dispatch.
const COL_BYTES: usize = 32 << 20;

fn sub(r: Range, at: usize, bytes: usize) -> Range {
    Range {
        offset: r.offset + at as u64,
        bytes: bytes as u64,
    }
}

/// f32 input and weights, 1 or 2 spatial dims; a fused conv's activation
/// one the GEMM epilogue expresses, and no residual (`legalize` splits that
/// add off).
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    if let Op::FusedConv(f) = &node.op {
        if inputs.len() > 3 {
            return Err("a fused conv with a residual has no WGSL kernel".into());
        }
        if epilogue(f.activation).is_none() {
            return Err(format!(
                "a {} epilogue has no WGSL kernel",
                f.activation.name()
            ));
        }
    }
    for t in inputs.iter().take(2) {
        if t.dtype != DType::F32 {
            return Err(format!("conv on {} has no WGSL kernel (f32 only)", t.dtype));
        }
    }
    let r = inputs.first().map_or(0, |t| t.shape.rank());
    if (3..=4).contains(&r) {
        Ok(())
    } else {
        Err(format!(
            "conv over {} spatial dims has no WGSL kernel (1-D and 2-D only)",
            r.saturating_sub(2)
        ))
    }
}

/// Conv, or FusedConv with its activation in the GEMM's epilogue (the bias
/// is the GEMM's either way).
pub fn lower(cx: &mut Cx, conv: &Conv, act: Activation) -> LResult<()> {
    let (x, w, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = cx.ins.get(2).cloned();
    if x.dtype != DType::F32 || w.dtype != DType::F32 {
        return Err(format!("conv on {} has no WGSL kernel", x.dtype));
    }
    let g = conv2d(conv, &x.dims, &w.dims, &y.dims)?;
    let p = g.positions();
    let img = g.c * g.h * g.w * 4;
    let oimg = g.cout * p * 4;
    let chunk = g.chunk(COL_BYTES);
    let col = if g.pointwise {
        None
    } else {
        Some(cx.scratch((g.c * g.kh * g.kw * chunk * 4) as u64))
    };
    let im2col = cx.typed_pipeline(
        "conv.im2col",
        IM2COL_OPERANDS,
        &Im2colParams::LAYOUT,
        IM2COL,
    );
    for i in 0..g.n {
        let xr = sub(x.range(), i * img, img);
        let yr = sub(y.range(), i * oimg, oimg);
        let mut p0 = 0;
        while p0 < p {
            let cols = chunk.min(p - p0);
            let (b, b_sk) = match col {
                None => (xr, p),
                Some(colr) => {
                    let params = g.im2col(p0, cols)?;
                    let colr = sub(colr, 0, params.total as usize * 4);
                    cx.launch_items(im2col, vec![xr, colr], &params, u64::from(params.total));
                    (colr, cols)
                }
            };
            Gemm {
                a: w.range(),
                b,
                c: sub(yr, p0 * 4, oimg - p0 * 4),
                bias: bias.as_ref().map(|bo| bo.range()),
                shape: plan::Gemm {
                    activate: act != Activation::None,
                    ..g.gemm(cols, b_sk, bias.is_some())
                },
                act,
            }
            .emit(cx)?;
            p0 += cols;
        }
    }
    Ok(())
}
