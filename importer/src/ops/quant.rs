//! Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and
//! QLinearMatMul / QLinearConv, which are imported as dequantize -> float op ->
//! quantize.

use rlx_ir::ops::{
    AutoPad, BinaryKind as B, Cast, Conv, DequantizeLinear, DynamicQuantizeLinear, MatMul,
    QuantizeLinear, RoundMode,
};
use rlx_ir::{DType, Tensor, Value};

use super::binary;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("QuantizeLinear", 10, quantize);
    r.add("DequantizeLinear", 10, dequantize);
    r.add("DynamicQuantizeLinear", 11, dynamic_quantize);
    r.add("QLinearMatMul", 10, qlinear_matmul);
    r.add("QLinearConv", 10, qlinear_conv);
}

/// A scalar zero of `dtype` (all-zero bits).
fn zero(cx: &mut NodeCtx, dtype: DType) -> Result<Value, MapError> {
    let t = Tensor::zeros(dtype, &[]).map_err(|e| MapError::Unsupported(e.to_string()))?;
    Ok(cx.constant(t))
}

fn quantize_op(cx: &mut NodeCtx) -> Result<QuantizeLinear, MapError> {
    let axis = cx.attr_i("axis", 1)?;
    let block_size = cx.attr_i("block_size", 0)?;
    let saturate = cx.attr_bool("saturate", true)?;
    match cx.attr_dtype("precision")? {
        None | Some(DType::F32) => {}
        Some(p) => return cx.unsupported(format!("precision {p} (quantization computes in f32)")),
    }
    Ok(QuantizeLinear {
        axis,
        block_size,
        saturate,
    })
}

pub(crate) fn quantize(cx: &mut NodeCtx) -> Result<(), MapError> {
    let op = quantize_op(cx)?;
    let out_dtype = cx.attr_dtype("output_dtype")?;
    let (x, scale) = (cx.req(0)?, cx.req(1)?);
    let zp = match cx.input(2)? {
        Some(z) => {
            if out_dtype.is_some_and(|d| d != cx.dtype(z)) {
                return Err(MapError::Attr {
                    name: "output_dtype".into(),
                    reason: "differs from the zero point's dtype".into(),
                });
            }
            z
        }
        None => zero(cx, out_dtype.unwrap_or(DType::U8))?,
    };
    let y = cx.add1(op, &[x, scale, zp])?;
    cx.set_output(0, y);
    Ok(())
}

pub(crate) fn dequantize(cx: &mut NodeCtx) -> Result<(), MapError> {
    let axis = cx.attr_i("axis", 1)?;
    let block_size = cx.attr_i("block_size", 0)?;
    let out_dtype = cx.attr_dtype("output_dtype")?;
    let (x, scale) = (cx.req(0)?, cx.req(1)?);
    let zp = match cx.input(2)? {
        Some(z) => z,
        None => zero(cx, cx.dtype(x))?,
    };
    let mut y = cx.add1(DequantizeLinear { axis, block_size }, &[x, scale, zp])?;
    if let Some(d) = out_dtype {
        if d != cx.dtype(y) {
            y = cx.add1(
                Cast {
                    to: d,
                    saturate: true,
                    round_mode: RoundMode::Nearest,
                },
                &[y],
            )?;
        }
    }
    cx.set_output(0, y);
    Ok(())
}

fn dynamic_quantize(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let ys = cx.add(DynamicQuantizeLinear {}, &[x])?;
    cx.set_outputs(&ys);
    Ok(())
}

/// Dequantizes with a per-tensor or per-`axis` scale.
pub(crate) fn deq(
    cx: &mut NodeCtx,
    x: Value,
    s: Value,
    z: Value,
    axis: i64,
) -> Result<Value, MapError> {
    cx.add1(
        DequantizeLinear {
            axis,
            block_size: 0,
        },
        &[x, s, z],
    )
}

fn qlinear_matmul(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (a, sa, za, b, sb, zb, sy, zy) = (
        cx.req(0)?,
        cx.req(1)?,
        cx.req(2)?,
        cx.req(3)?,
        cx.req(4)?,
        cx.req(5)?,
        cx.req(6)?,
        cx.req(7)?,
    );
    let af = deq(cx, a, sa, za, 1)?;
    let rb = cx.rank(b) as i64;
    let bf = deq(cx, b, sb, zb, rb - 1)?;
    let y = cx.add1(MatMul {}, &[af, bf])?;
    let q = cx.add1(
        QuantizeLinear {
            axis: 1,
            block_size: 0,
            saturate: true,
        },
        &[y, sy, zy],
    )?;
    cx.set_output(0, q);
    Ok(())
}

fn qlinear_conv(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, sx, zx, w, sw, zw, sy, zy) = (
        cx.req(0)?,
        cx.req(1)?,
        cx.req(2)?,
        cx.req(3)?,
        cx.req(4)?,
        cx.req(5)?,
        cx.req(6)?,
        cx.req(7)?,
    );
    let n = cx.rank(x).saturating_sub(2);
    let strides = cx.attr_ints("strides")?.unwrap_or_else(|| vec![1; n]);
    let dilations = cx.attr_ints("dilations")?.unwrap_or_else(|| vec![1; n]);
    let pads = cx.attr_ints("pads")?.unwrap_or_else(|| vec![0; 2 * n]);
    let ap = cx.attr_choice(
        "auto_pad",
        "NOTSET",
        &["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"],
    )?;
    let auto_pad = AutoPad::from_name(&ap.to_ascii_lowercase()).unwrap_or(AutoPad::NotSet);
    let group = cx.attr_i("group", 1)?;
    cx.ignore_attr("kernel_shape");
    let xf = deq(cx, x, sx, zx, 1)?;
    let wf = deq(cx, w, sw, zw, 0)?;
    let mut ins = vec![xf, wf];
    if let Some(bias) = cx.input(8)? {
        // The int32 bias has scale x_scale * w_scale and no zero point.
        let bf = cx.add1(
            Cast {
                to: DType::F32,
                saturate: false,
                round_mode: RoundMode::Nearest,
            },
            &[bias],
        )?;
        let s = binary(cx, B::Mul, sx, sw)?;
        ins.push(binary(cx, B::Mul, bf, s)?);
    }
    let y = cx.add1(
        Conv {
            strides,
            dilations,
            pads,
            auto_pad,
            group,
        },
        &ins,
    )?;
    let q = cx.add1(
        QuantizeLinear {
            axis: 1,
            block_size: 0,
            saturate: true,
        },
        &[y, sy, zy],
    )?;
    cx.set_output(0, q);
    Ok(())
}
