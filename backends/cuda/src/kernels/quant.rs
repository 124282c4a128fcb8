//! QuantizeLinear and DequantizeLinear on CUDA (`kernels/cuda/quant.cu`)
//! between the float dtypes (f32, f16, bf16, f64; scales of the float
//! dtype) and every integer dtype, 4- and 2-bit ones stored a byte each,
//! per tensor, per axis or blocked, with one zero point or one per scale,
//! planned by rlx-gpu's `kernels::quant`. Float8 and float4 have no kernel.

use rlx_gpu::kernels::quant::{quant_params, QuantCudaParams, QuantFloatCudaParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "quant",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/minifloat.cuh"),
        include_str!("../../../../kernels/cuda/quant.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![QuantCudaParams::LAYOUT, QuantFloatCudaParams::LAYOUT]
}

/// The entry name, bits and signedness of a quantized integer dtype.
fn qint(d: DType) -> Option<(&'static str, u32, bool)> {
    Some(match d {
        DType::U8 => ("u8", 8, false),
        DType::I8 => ("i8", 8, true),
        DType::U4 => ("u8", 4, false),
        DType::I4 => ("i8", 4, true),
        DType::U2 => ("u8", 2, false),
        DType::I2 => ("i8", 2, true),
        DType::U16 => ("u16", 16, false),
        DType::I16 => ("i16", 16, true),
        DType::U32 => ("u32", 32, false),
        DType::I32 => ("i32", 32, true),
        DType::U64 => ("u64", 64, false),
        DType::I64 => ("i64", 64, true),
        _ => return None,
    })
}

/// The float8 and float4 formats (quantized a byte each).
fn minifloat(d: DType) -> bool {
    matches!(
        d,
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::F4E2M1
    )
}

fn qfloat(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F64 => "f64",
        _ => return None,
    })
}

/// (float, integer) dtypes of a node whose inputs are `inputs` and whose
/// float side's scale has dtype `scale`.
fn pair(node: &Node, inputs: &[TensorType]) -> LResult<(DType, DType)> {
    let x = dtype_of(inputs, 0)?;
    let s = dtype_of(inputs, 1)?;
    let (f, q) = match node.op {
        Op::QuantizeLinear(_) => {
            let q = node
                .outputs
                .first()
                .map(|o| o.dtype)
                .or_else(|| inputs.get(2).map(|t| t.dtype))
                .unwrap_or(DType::U8);
            (x, q)
        }
        _ => (s, x),
    };
    let name = node.op.name();
    if qfloat(f).is_none() || s != f {
        return Err(format!(
            "{name} with {f} values and {s} scales has no cuda kernel (f32, f16, bf16 or f64, scales alike)"
        ));
    }
    if qint(q).is_none() && !minifloat(q) {
        return Err(format!(
            "{name} with {q} quantized values has no cuda kernel (integers, float8 and float4)"
        ));
    }
    if let Some(z) = inputs.get(2) {
        if z.dtype != q {
            return Err(format!("{name}: a {} zero point for {q} values", z.dtype));
        }
    }
    Ok((f, q))
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    pair(node, inputs).map(|_| ())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (ax, block, quantize, saturate) = match &cx.node.op {
        Op::QuantizeLinear(q) => (q.axis, q.block_size, true, q.saturate),
        Op::DequantizeLinear(q) => (q.axis, q.block_size, false, false),
        op => return Err(format!("`{}` is not a quantization", op.name())),
    };
    let (x, s, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let (f, q) = if quantize {
        (x.dtype, y.dtype)
    } else {
        (y.dtype, x.dtype)
    };
    let fname = qfloat(f).ok_or("not a float dtype")?;
    if minifloat(q) {
        return lower_minifloat(cx, quantize, saturate, ax, block, fname, q);
    }
    let (qn, bits, signed) = qint(q).ok_or("not an integer dtype")?;
    let zp = cx.io.ins.get(2).filter(|z| z.numel() > 0).cloned();
    let zmode = match &zp {
        None => 0,
        Some(z) if z.numel() == 1 => 1,
        Some(z) if z.numel() == s.numel() => 2,
        Some(z) => {
            return Err(format!(
                "{} zero points for {} scales",
                z.numel(),
                s.numel()
            ))
        }
    };
    let g = quant_params(
        quantize,
        &x.dims,
        &s.dims,
        ax,
        block,
        1,
        signed,
        zp.is_some(),
    )?;
    let p = QuantCudaParams::of(&g, zmode, bits, signed);
    let entry = if quantize {
        format!("quantize_{fname}_{qn}")
    } else {
        format!("dequantize_{qn}_{fname}")
    };
    // An absent zero point binds the scale again (never read).
    let zr = zp.as_ref().map_or(s.range(), |z| z.range());
    let m = cx.modules.of(&SOURCE);
    let ops = vec![x.range(), s.range(), zr, y.range()];
    cx.items(m, &entry, u64::from(p.n), ops, &p);
    Ok(())
}

/// Quantization into or out of a float8 or float4 format `q`.
fn lower_minifloat(
    cx: &mut Cx,
    quantize: bool,
    saturate: bool,
    ax: i64,
    block: i64,
    fname: &str,
    q: DType,
) -> LResult<()> {
    let (x, s, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let zp = cx.io.ins.get(2).filter(|z| z.numel() > 0).cloned();
    let zmode = match &zp {
        None => 0,
        Some(z) if z.numel() == 1 => 1,
        Some(z) if z.numel() == s.numel() => 2,
        Some(z) => {
            return Err(format!(
                "{} zero points for {} scales",
                z.numel(),
                s.numel()
            ))
        }
    };
    let g = quant_params(
        quantize,
        &x.dims,
        &s.dims,
        ax,
        block,
        1,
        false,
        zp.is_some(),
    )?;
    let format = u32::try_from(q.onnx_code()).map_err(|_| "a dtype code")?;
    let p = QuantFloatCudaParams::of(&g, zmode, format, saturate);
    let entry = if quantize {
        format!("quantize_{fname}_mf")
    } else {
        format!("dequantize_mf_{fname}")
    };
    let zr = zp.as_ref().map_or(s.range(), |z| z.range());
    let m = cx.modules.of(&SOURCE);
    let ops = vec![x.range(), s.range(), zr, y.range()];
    cx.items(m, &entry, u64::from(p.n), ops, &p);
    Ok(())
}
