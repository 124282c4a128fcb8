//! QuantizeLinear and DequantizeLinear (`kernels/wgsl/quant.wgsl`) between
//! f32 and 8- or 16-bit integers (dequantize also reads i32), per tensor, per
//! axis or blocked, with f32 scales, planned by rlx-gpu's `kernels::quant`.
//! Float8, 4- and 2-bit types have no kernel.

use rlx_gpu::kernels::quant::{quant_params, QuantParams, QUANT_OPERANDS};
use rlx_gpu::Params;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only};

const SRC: &str = include_str!("../../../../kernels/wgsl/quant.wgsl");

/// Bytes and signedness of a quantized dtype the kernel reads or writes.
pub fn qtype(d: DType, quantize: bool) -> Result<(u32, u32), String> {
    match d {
        DType::U8 => Ok((1, 0)),
        DType::I8 => Ok((1, 1)),
        DType::U16 => Ok((2, 0)),
        DType::I16 => Ok((2, 1)),
        DType::I32 if !quantize => Ok((4, 1)),
        d => Err(format!(
            "{} with {d} values has no WGSL kernel (8- and 16-bit integers{})",
            if quantize {
                "quantize_linear"
            } else {
                "dequantize_linear"
            },
            if quantize { "" } else { " and i32" }
        )),
    }
}

/// f32 values and scales, 8- and 16-bit quantized integers (dequantize
/// also reads i32).
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d0 = dtype_of(inputs, 0)?;
    match node.op {
        Op::QuantizeLinear(_) => {
            f32_only("quantize_linear", d0)?;
            f32_only("quantize_linear scales", dtype_of(inputs, 1)?)?;
            let q = inputs.get(2).map_or(DType::U8, |t| t.dtype);
            qtype(q, true).map(|_| ())
        }
        _ => {
            f32_only("dequantize_linear scales", dtype_of(inputs, 1)?)?;
            qtype(d0, false).map(|_| ())
        }
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (ax, block, quantize) = match &cx.node.op {
        Op::QuantizeLinear(q) => (q.axis, q.block_size, true),
        Op::DequantizeLinear(q) => (q.axis, q.block_size, false),
        op => return Err(format!("`{}` is not a quantization", op.name())),
    };
    let (x, s, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let zp = cx.ins.get(2).filter(|z| z.numel() > 0).cloned();
    let q = if quantize { y.dtype } else { x.dtype };
    let (qbytes, qsigned) = qtype(q, quantize)?;
    if let Some(z) = &zp {
        if z.dtype != q || z.dims != s.dims {
            return Err(
                "the zero point must match the scale's shape and the quantized dtype".into(),
            );
        }
    }
    let p = quant_params(
        quantize,
        &x.dims,
        &s.dims,
        ax,
        block,
        qbytes,
        qsigned == 1,
        zp.is_some(),
    )?;
    // An absent zero point binds the scale again (never read).
    let zr = zp.as_ref().map_or(s.range(), |z| z.range());
    let pipe = cx.typed_pipeline("quant", QUANT_OPERANDS, &QuantParams::LAYOUT, SRC);
    let ops = vec![x.range(), s.range(), zr, y.range()];
    cx.launch_items(pipe, ops, &p, u64::from(p.items));
    Ok(())
}
