//! Cast where either side is a float8, float4, E8M0 or 2-/4-bit integer
//! dtype (`kernels/cuda/cast.cu`, the CPU backend's generic cast path),
//! and BitCast (a byte copy). Casts between the standard dtypes go to the
//! element-wise family.

use rlx_gpu::kernels::cast::{cast_params, is_special, CastParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, elementwise, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "cast",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/minifloat.cuh"),
        include_str!("../../../../kernels/cuda/cast.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![CastParams::LAYOUT]
}

/// The dtypes the cast kernel reads and writes: every RLX dtype.
fn castable(d: DType) -> bool {
    d.is_standard()
        || d.is_minifloat()
        || matches!(d, DType::I4 | DType::U4 | DType::I2 | DType::U2)
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let from = dtype_of(inputs, 0)?;
    match &node.op {
        Op::Cast(c) if !is_special(from, c.to) => elementwise::supports(node, inputs),
        Op::Cast(c) => {
            if castable(from) && castable(c.to) {
                Ok(())
            } else {
                Err(format!("cast from {from} to {} has no cuda kernel", c.to))
            }
        }
        Op::BitCast(b) => {
            if from.size() == b.to.size() {
                Ok(())
            } else {
                Err(format!(
                    "bitcast from {from} to {} (different storage sizes) has no cuda kernel",
                    b.to
                ))
            }
        }
        op => Err(format!("`{}` is not a cast", op.name())),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    match &cx.node.op {
        Op::Cast(c) if !is_special(x.dtype, c.to) => elementwise::lower(cx),
        Op::Cast(c) => {
            let p = cast_params(c, x.dtype, x.numel())?;
            let m = cx.modules.of(&SOURCE);
            cx.items(
                m,
                "cast_any",
                u64::from(p.n),
                vec![x.range(), y.range()],
                &p,
            );
            Ok(())
        }
        Op::BitCast(_) => {
            let p = CastParams {
                n: rlx_gpu::geometry::u32_of(x.numel() * x.dtype.size(), "bytes")?,
                ..CastParams::default()
            };
            let m = cx.modules.of(&SOURCE);
            let units = if p.n % 4 == 0 { p.n / 4 } else { p.n };
            cx.items(
                m,
                "bitcast_copy",
                u64::from(units),
                vec![x.range(), y.range()],
                &p,
            );
            Ok(())
        }
        op => Err(format!("`{}` is not a cast", op.name())),
    }
}
