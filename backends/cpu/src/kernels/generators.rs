//! Shape, Size, ConstantOfShape, Range and EyeLike.

use rlx_ir::Op;

use super::cast::{write, Val};
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    let f: fn(&Op, &[TensorRef], &mut [TensorMut]) -> Result<(), KernelError> = match spec.op() {
        Op::ShapeOf(_) => shape,
        Op::Size(_) => size,
        Op::ConstantOfShape(_) => constant_of_shape,
        Op::Range(_) => range,
        Op::EyeLike(_) => eye_like,
        op => {
            return Err(KernelError::Internal(format!(
                "{} is not a generator",
                op.name()
            )))
        }
    };
    Ok(fn_kernel(spec, f))
}

fn shape(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::ShapeOf(s) = op else {
        return Err(KernelError::Internal("not shape".into()));
    };
    let r = s.range(ins[0].rank());
    let v: Vec<i64> = ins[0].dims[r].iter().map(|&d| d as i64).collect();
    outs[0].slice::<i64>()?.copy_from_slice(&v);
    Ok(())
}

fn size(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    outs[0].slice::<i64>()?[0] = ins[0].numel() as i64;
    Ok(())
}

fn constant_of_shape(op: &Op, _: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::ConstantOfShape(c) = op else {
        return Err(KernelError::Internal("not constant_of_shape".into()));
    };
    let one = c.value.bytes();
    for chunk in outs[0].bytes.chunks_mut(one.len().max(1)) {
        chunk.copy_from_slice(one);
    }
    Ok(())
}

fn range(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let out = &mut outs[0];
    let d = out.dtype;
    let n = out.numel();
    if d.is_float() {
        let (s, dl) = (ins[0].to_f64s()?[0], ins[2].to_f64s()?[0]);
        for i in 0..n {
            write(
                d,
                out.bytes,
                i,
                Val::Float(s + i as f64 * dl),
                false,
                rlx_ir::ops::RoundMode::Nearest,
            );
        }
    } else {
        let (s, dl) = (ins[0].to_i64s()?[0], ins[2].to_i64s()?[0]);
        for i in 0..n {
            write(
                d,
                out.bytes,
                i,
                Val::Int((s + i as i64 * dl) as i128),
                false,
                rlx_ir::ops::RoundMode::Nearest,
            );
        }
    }
    Ok(())
}

fn eye_like(op: &Op, _: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::EyeLike(e) = op else {
        return Err(KernelError::Internal("not eye_like".into()));
    };
    let out = &mut outs[0];
    let (r, c) = (out.dims[0], out.dims[1]);
    let d = out.dtype;
    out.bytes.fill(0);
    for i in 0..r {
        let j = i as i64 + e.k;
        if (0..c as i64).contains(&j) {
            write(
                d,
                out.bytes,
                i * c + j as usize,
                Val::Int(1),
                false,
                rlx_ir::ops::RoundMode::Nearest,
            );
        }
    }
    Ok(())
}
