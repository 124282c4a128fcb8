//! Convolutions and pooling: Conv, ConvTranspose, ConvInteger, DeformConv,
//! Col2Im, MaxPool, AveragePool, LpPool, the global pools, MaxUnpool and LRN.
//! ONNX defaults (strides, dilations, pads) are made explicit.

use rlx_ir::ops::{
    AutoPad, BinaryKind as B, Cast, Col2Im, Conv, ConvTranspose, DeformConv, GlobalPool,
    GlobalPoolKind, Lrn, MaxUnpool, Pool, PoolKind, RoundMode,
};
use rlx_ir::{DType, Value};

use super::binary;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("Conv", 1, conv);
    r.add("ConvTranspose", 1, conv_transpose);
    r.add("ConvInteger", 10, conv_integer);
    r.add("DeformConv", 19, deform_conv);
    r.add("Col2Im", 18, col2im);
    r.add("MaxPool", 1, pool);
    r.add("AveragePool", 1, pool);
    r.add("LpPool", 1, pool);
    r.add("GlobalAveragePool", 1, global_pool);
    r.add("GlobalMaxPool", 1, global_pool);
    r.add("GlobalLpPool", 1, global_pool);
    r.add("MaxUnpool", 9, max_unpool);
    r.add("LRN", 1, lrn);
}

fn auto_pad(cx: &mut NodeCtx) -> Result<AutoPad, MapError> {
    let s = cx.attr_choice(
        "auto_pad",
        "NOTSET",
        &["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", ""],
    )?;
    Ok(match s.as_str() {
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        "VALID" => AutoPad::Valid,
        _ => AutoPad::NotSet,
    })
}

/// Spatial attributes with ONNX defaults filled in for `n` spatial dims.
struct Spatial {
    strides: Vec<i64>,
    dilations: Vec<i64>,
    pads: Vec<i64>,
    auto_pad: AutoPad,
}

fn spatial(cx: &mut NodeCtx, n: usize) -> Result<Spatial, MapError> {
    let strides = cx.attr_ints("strides")?.unwrap_or_else(|| vec![1; n]);
    let dilations = cx.attr_ints("dilations")?.unwrap_or_else(|| vec![1; n]);
    let pads = cx.attr_ints("pads")?.unwrap_or_else(|| vec![0; 2 * n]);
    let auto_pad = auto_pad(cx)?;
    if strides.len() != n || dilations.len() != n || pads.len() != 2 * n {
        return Err(MapError::Attr {
            name: "strides".into(),
            reason: format!("strides, dilations and pads must match {n} spatial dims"),
        });
    }
    Ok(Spatial {
        strides,
        dilations,
        pads,
        auto_pad,
    })
}

/// The kernel shape attribute, if given, must match the weight.
fn check_kernel(cx: &mut NodeCtx, w: Value) -> Result<(), MapError> {
    if let Some(k) = cx.attr_ints("kernel_shape")? {
        let ws = cx.ty(w).shape;
        for (i, &kv) in k.iter().enumerate() {
            if let Some(d) = ws.0.get(i + 2).and_then(|d| d.known()) {
                if d != kv {
                    return Err(MapError::Attr {
                        name: "kernel_shape".into(),
                        reason: format!("{k:?} does not match the weight {ws}"),
                    });
                }
            }
        }
    }
    Ok(())
}

fn conv(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, w, b) = (cx.req(0)?, cx.req(1)?, cx.input(2)?);
    let y = conv_node(cx, x, w, b)?;
    cx.set_output(0, y);
    Ok(())
}

/// A convolution of `x` by `w` (plus `b`) with the node's Conv attributes.
pub(crate) fn conv_node(
    cx: &mut NodeCtx,
    x: Value,
    w: Value,
    b: Option<Value>,
) -> Result<Value, MapError> {
    let n = cx.rank(x).saturating_sub(2);
    let s = spatial(cx, n)?;
    check_kernel(cx, w)?;
    let group = cx.attr_i("group", 1)?;
    let mut ins = vec![x, w];
    ins.extend(b);
    cx.add1(
        Conv {
            strides: s.strides,
            dilations: s.dilations,
            pads: s.pads,
            auto_pad: s.auto_pad,
            group,
        },
        &ins,
    )
}

fn conv_transpose(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, w) = (cx.req(0)?, cx.req(1)?);
    let n = cx.rank(x).saturating_sub(2);
    let s = spatial(cx, n)?;
    check_kernel(cx, w)?;
    let group = cx.attr_i("group", 1)?;
    let output_padding = cx
        .attr_ints("output_padding")?
        .unwrap_or_else(|| vec![0; n]);
    let output_shape = cx.attr_ints("output_shape")?.unwrap_or_default();
    let mut ins = vec![x, w];
    if let Some(b) = cx.input(2)? {
        ins.push(b);
    }
    let op = ConvTranspose {
        strides: s.strides,
        dilations: s.dilations,
        pads: s.pads,
        auto_pad: s.auto_pad,
        group,
        output_padding,
        output_shape,
    };
    let y = cx.add1(op, &ins)?;
    cx.set_output(0, y);
    Ok(())
}

/// `conv(x - x_zero, w - w_zero)` in i32.
fn conv_integer(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, w) = (cx.req(0)?, cx.req(1)?);
    let n = cx.rank(x).saturating_sub(2);
    let s = spatial(cx, n)?;
    check_kernel(cx, w)?;
    let group = cx.attr_i("group", 1)?;
    let i32_of = |cx: &mut NodeCtx, v: Value| {
        cx.add1(
            Cast {
                to: DType::I32,
                saturate: false,
                round_mode: RoundMode::Nearest,
            },
            &[v],
        )
    };
    let mut x32 = i32_of(cx, x)?;
    let mut w32 = i32_of(cx, w)?;
    if let Some(zx) = cx.input(2)? {
        let z = i32_of(cx, zx)?;
        x32 = binary(cx, B::Sub, x32, z)?;
    }
    if let Some(zw) = cx.input(3)? {
        let mut z = i32_of(cx, zw)?;
        if cx.rank(zw) == 1 && cx.ty(zw).shape.numel().known() != Some(1) {
            let axes: Vec<i64> = (1..cx.rank(w) as i64).collect();
            z = super::unsqueeze(cx, z, &axes)?;
        }
        w32 = binary(cx, B::Sub, w32, z)?;
    }
    // Zero-point subtraction happens before padding, so padded zeros stay zero.
    let y = cx.add1(
        Conv {
            strides: s.strides,
            dilations: s.dilations,
            pads: s.pads,
            auto_pad: s.auto_pad,
            group,
        },
        &[x32, w32],
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn deform_conv(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, w, off) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let n = cx.rank(x).saturating_sub(2);
    if n != 2 {
        return cx.unsupported("DeformConv is supported for 2-D inputs only");
    }
    let s = spatial(cx, n)?;
    check_kernel(cx, w)?;
    if s.auto_pad != AutoPad::NotSet {
        return cx.unsupported("DeformConv has no auto_pad");
    }
    let group = cx.attr_i("group", 1)?;
    let offset_group = cx.attr_i("offset_group", 1)?;
    let bias = cx.input(3)?;
    let mask = cx.input(4)?;
    let mut ins = vec![x, w, off];
    ins.extend(bias);
    ins.extend(mask);
    let op = DeformConv {
        strides: s.strides,
        dilations: s.dilations,
        pads: s.pads,
        group,
        offset_group,
        has_bias: bias.is_some(),
        has_mask: mask.is_some(),
    };
    let y = cx.add1(op, &ins)?;
    cx.set_output(0, y);
    Ok(())
}

fn col2im(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, img, block) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let n = cx
        .ty(img)
        .shape
        .0
        .first()
        .and_then(|d| d.known())
        .unwrap_or(2) as usize;
    let strides = cx.attr_ints("strides")?.unwrap_or_else(|| vec![1; n]);
    let dilations = cx.attr_ints("dilations")?.unwrap_or_else(|| vec![1; n]);
    let pads = cx.attr_ints("pads")?.unwrap_or_else(|| vec![0; 2 * n]);
    let y = cx.add1(
        Col2Im {
            strides,
            dilations,
            pads,
        },
        &[x, img, block],
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn pool(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = match cx.op_type() {
        "MaxPool" => PoolKind::Max,
        "AveragePool" => PoolKind::Avg,
        _ => PoolKind::Lp,
    };
    let x = cx.req(0)?;
    let n = cx.rank(x).saturating_sub(2);
    let kernel_shape = cx
        .attr_ints("kernel_shape")?
        .ok_or_else(|| MapError::Attr {
            name: "kernel_shape".into(),
            reason: "is required".into(),
        })?;
    let s = spatial(cx, n)?;
    let ceil_mode = cx.attr_bool("ceil_mode", false)?;
    let count_include_pad = cx.attr_bool("count_include_pad", false)?;
    let storage_order = cx.attr_i("storage_order", 0)?;
    let p = if kind == PoolKind::Lp {
        if cx.opset < 2 {
            cx.attr_f("p", 2.0)? as i64
        } else {
            cx.attr_i("p", 2)?
        }
    } else {
        0
    };
    let with_indices = kind == PoolKind::Max && cx.output_used(1);
    let op = Pool {
        kind,
        kernel_shape,
        strides: s.strides,
        dilations: s.dilations,
        pads: s.pads,
        auto_pad: s.auto_pad,
        ceil_mode,
        count_include_pad,
        p,
        storage_order,
        with_indices,
    };
    let ys = cx.add(op, &[x])?;
    cx.set_outputs(&ys);
    Ok(())
}

fn global_pool(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = match cx.op_type() {
        "GlobalMaxPool" => GlobalPoolKind::Max,
        "GlobalAveragePool" => GlobalPoolKind::Avg,
        _ => GlobalPoolKind::Lp,
    };
    let p = if kind == GlobalPoolKind::Lp {
        if cx.opset < 2 {
            cx.attr_f("p", 2.0)? as i64
        } else {
            cx.attr_i("p", 2)?
        }
    } else {
        0
    };
    let x = cx.req(0)?;
    let y = cx.add1(GlobalPool { kind, p }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

fn max_unpool(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, idx) = (cx.req(0)?, cx.req(1)?);
    let n = cx.rank(x).saturating_sub(2);
    let kernel_shape = cx
        .attr_ints("kernel_shape")?
        .ok_or_else(|| MapError::Attr {
            name: "kernel_shape".into(),
            reason: "is required".into(),
        })?;
    let strides = cx.attr_ints("strides")?.unwrap_or_else(|| vec![1; n]);
    let pads = cx.attr_ints("pads")?.unwrap_or_else(|| vec![0; 2 * n]);
    let mut ins = vec![x, idx];
    if let Some(s) = cx.input(2)? {
        ins.push(s);
    }
    let y = cx.add1(
        MaxUnpool {
            kernel_shape,
            strides,
            pads,
        },
        &ins,
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn lrn(cx: &mut NodeCtx) -> Result<(), MapError> {
    let size = cx.attr_i_opt("size")?.ok_or_else(|| MapError::Attr {
        name: "size".into(),
        reason: "is required".into(),
    })?;
    let alpha = cx.attr_f("alpha", 1e-4)?;
    let beta = cx.attr_f("beta", 0.75)?;
    let bias = cx.attr_f("bias", 1.0)?;
    let x = cx.req(0)?;
    let y = cx.add1(
        Lrn {
            size,
            alpha,
            beta,
            bias,
        },
        &[x],
    )?;
    cx.set_output(0, y);
    Ok(())
}
