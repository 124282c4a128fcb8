//! Signal processing: DFT (opset 17: `axis` attribute; opset 20: `axis`
//! input), STFT and MelWeightMatrix (opset 17).

use rlx_ir::ops::{Dft, MelWeightMatrix, Stft};
use rlx_ir::DType;

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("DFT", 17, dft);
    r.add("STFT", 17, stft);
    r.add("MelWeightMatrix", 17, mel_weight_matrix);
}

fn dft(cx: &mut NodeCtx) -> Result<(), MapError> {
    let inverse = cx.attr_bool("inverse", false)?;
    let onesided = cx.attr_bool("onesided", false)?;
    let x = cx.req(0)?;
    let length = cx.input(1)?;
    let mut ins = vec![x];
    ins.extend(length);
    let (axis, axis_input) = if cx.opset >= 20 {
        match cx.input(2)? {
            None => (-2, false),
            Some(a) => match cx.known_ints(a) {
                Some(v) if v.len() == 1 => (v[0], false),
                Some(_) => return cx.unsupported("the axis input must hold one value"),
                None => {
                    ins.push(a);
                    (-2, true)
                }
            },
        }
    } else {
        (cx.attr_i("axis", 1)?, false)
    };
    let op = Dft {
        axis,
        inverse,
        onesided,
        has_length: length.is_some(),
        axis_input,
    };
    let y = cx.add1(op, &ins)?;
    cx.set_output(0, y);
    Ok(())
}

fn stft(cx: &mut NodeCtx) -> Result<(), MapError> {
    let onesided = cx.attr_bool("onesided", true)?;
    let (signal, step) = (cx.req(0)?, cx.req(1)?);
    let window = cx.input(2)?;
    let length = cx.input(3)?;
    let mut ins = vec![signal, step];
    ins.extend(window);
    ins.extend(length);
    let op = Stft {
        onesided,
        has_window: window.is_some(),
        has_length: length.is_some(),
    };
    let y = cx.add1(op, &ins)?;
    cx.set_output(0, y);
    Ok(())
}

fn mel_weight_matrix(cx: &mut NodeCtx) -> Result<(), MapError> {
    let dtype = cx.attr_dtype("output_datatype")?.unwrap_or(DType::F32);
    let ins = (0..5).map(|i| cx.req(i)).collect::<Result<Vec<_>, _>>()?;
    let y = cx.add1(MelWeightMatrix { dtype }, &ins)?;
    cx.set_output(0, y);
    Ok(())
}
