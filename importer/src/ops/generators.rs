//! Constant (every attribute form), ConstantOfShape, Range, EyeLike and the
//! Hann/Hamming/Blackman windows.

use rlx_ir::ops::values::{float_tensor, int_tensor};
use rlx_ir::ops::{ConstantOfShape, EyeLike, Range, Window, WindowKind};
use rlx_ir::{DType, Tensor};

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("Constant", 1, constant);
    r.add("ConstantOfShape", 9, constant_of_shape);
    r.add("Range", 11, range);
    r.add("EyeLike", 9, eye_like);
    r.add("HannWindow", 17, window);
    r.add("HammingWindow", 17, window);
    r.add("BlackmanWindow", 17, window);
}

fn built(t: Option<Tensor>) -> Result<Tensor, MapError> {
    t.ok_or_else(|| MapError::Unsupported("cannot build the constant".into()))
}

fn constant(cx: &mut NodeCtx) -> Result<(), MapError> {
    if cx.has_attr("sparse_value") {
        return cx.unsupported("sparse constants are not supported");
    }
    if cx.has_attr("value_string") || cx.has_attr("value_strings") {
        return cx.unsupported("string constants are not supported");
    }
    let t = if let Some(t) = cx.attr_t("value")? {
        t
    } else if let Some(f) = cx.attr_f_opt("value_float")? {
        built(float_tensor(DType::F32, &[], &[f as f64]))?
    } else if let Some(v) = cx.attr_floats("value_floats")? {
        built(float_tensor(
            DType::F32,
            &[v.len()],
            &v.iter().map(|&x| x as f64).collect::<Vec<_>>(),
        ))?
    } else if let Some(i) = cx.attr_i_opt("value_int")? {
        built(int_tensor(DType::I64, &[], &[i]))?
    } else if let Some(v) = cx.attr_ints("value_ints")? {
        built(int_tensor(DType::I64, &[v.len()], &v))?
    } else {
        return cx.unsupported("Constant without a value");
    };
    let y = cx.constant(t);
    cx.set_output(0, y);
    Ok(())
}

fn constant_of_shape(cx: &mut NodeCtx) -> Result<(), MapError> {
    let value = match cx.attr_t("value")? {
        Some(t) => t,
        None => built(float_tensor(DType::F32, &[1], &[0.0]))?,
    };
    let value = value.reshaped(vec![1]).map_err(|_| MapError::Attr {
        name: "value".into(),
        reason: "must hold one element".into(),
    })?;
    let s = cx.req(0)?;
    let y = cx.add1(ConstantOfShape { value }, &[s])?;
    cx.set_output(0, y);
    Ok(())
}

fn range(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (s, l, d) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let y = cx.add1(Range {}, &[s, l, d])?;
    cx.set_output(0, y);
    Ok(())
}

fn eye_like(cx: &mut NodeCtx) -> Result<(), MapError> {
    let k = cx.attr_i("k", 0)?;
    let x = cx.req(0)?;
    let dtype = cx.attr_dtype("dtype")?.unwrap_or(cx.dtype(x));
    let y = cx.add1(EyeLike { dtype, k }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

fn window(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = match cx.op_type() {
        "HannWindow" => WindowKind::Hann,
        "HammingWindow" => WindowKind::Hamming,
        _ => WindowKind::Blackman,
    };
    let periodic = cx.attr_bool("periodic", true)?;
    let dtype = cx.attr_dtype("output_datatype")?.unwrap_or(DType::F32);
    let n = cx.req(0)?;
    let y = cx.add1(
        Window {
            kind,
            periodic,
            dtype,
        },
        &[n],
    )?;
    cx.set_output(0, y);
    Ok(())
}
