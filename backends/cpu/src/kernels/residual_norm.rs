//! ResidualNorm: `sum = x + residual` then LayerNorm (or RmsNorm) of each row of
//! `sum`, in one pass per row. The sum is rounded to the element type before
//! the statistics (accumulated in f64), exactly as the unfused add + norm do.

use rlx_ir::Op;

use super::layout::{axis, par_rows};
use super::num::Real;
use super::{norm, norm_rows};
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::ResidualNorm(_) => {
            if spec.in_dims(0) != spec.in_dims(1) {
                return Err(KernelError::Unsupported(
                    "residual_norm with a broadcast residual".into(),
                ));
            }
            Ok(fn_kernel(spec, residual_norm))
        }
        op => Err(KernelError::Internal(format!(
            "{} is not residual_norm",
            op.name()
        ))),
    }
}

fn typed<T: Real>(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::ResidualNorm(r) = op else {
        return Err(KernelError::Internal("not residual_norm".into()));
    };
    let (x, res) = (ins[0].slice::<T>()?, ins[1].slice::<T>()?);
    if x.len() != res.len() {
        return Err(KernelError::Unsupported(
            "residual_norm with a broadcast residual".into(),
        ));
    }
    let dims = ins[0].dims;
    let a = axis(r.axis, dims.len());
    let len: usize = dims[a..].iter().product();
    let scale = ins[2].to_f64s()?;
    let bias = match ins.get(3) {
        Some(b) => b.to_f64s()?,
        None => Vec::new(),
    };
    let row = &dims[a..];
    let si = norm::ParamIndex::new(ins[2].dims, row, "scale")?;
    let bi = match ins.get(3) {
        Some(t) => Some(norm::ParamIndex::new(t.dims, row, "bias")?),
        None => None,
    };
    let (first, rest) = outs.split_at_mut(1);
    let y = first[0].slice::<T>()?;
    let sum = rest[0].slice::<T>()?;
    // The sum first (it is an output too), then each row from it.
    par_rows(sum, len.max(1), |row, s| {
        let base = row * len;
        for (i, o) in s.iter_mut().enumerate() {
            *o = T::down(x[base + i].up() + res[base + i].up());
        }
    });
    let sum: &[T] = sum;
    let eps = f64::from(r.epsilon);
    let params = if si.dense && bi.as_ref().is_none_or(|b| b.dense) {
        norm::per_position(&scale, bi.as_ref().map(|_| bias.as_slice()), len)
    } else {
        None
    };
    if let (Some(sf32), Some((sc, bi))) = (norm::as_f32(sum), params) {
        norm_rows::f32_rows(
            sf32,
            bytemuck::cast_slice_mut(y),
            len,
            eps,
            r.rms,
            &sc,
            bi.as_deref(),
        );
        return Ok(());
    }
    par_rows(y, len.max(1), |row, out| {
        let s = &sum[row * len..(row + 1) * len];
        let mean = if r.rms {
            0.0
        } else {
            s.iter().map(|v| v.to_f64()).sum::<f64>() / len as f64
        };
        let var = s.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / len as f64;
        let inv = 1.0 / (var + eps).sqrt();
        for (i, o) in out.iter_mut().enumerate() {
            let b = bi.as_ref().map_or(0.0, |b| bias[b.at(i)]);
            *o = T::from_f64((s[i].to_f64() - mean) * inv * scale[si.at(i)] + b);
        }
    });
    Ok(())
}

fn residual_norm(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    with_dtype!(ins[0].dtype, T => typed::<T>(op, ins, outs), float)
}

#[cfg(test)]
mod tests {
    use crate::dynamic::eval_node;
    use rlx_ir::text::parse_graph;
    use rlx_ir::{Tensor, Weights};

    #[test]
    fn sum_and_normalized_rows_match_hand_computation() {
        let src = "rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[2,2]\n  %1 = input \"r\" : f32[2,2]\n  %2 = input \"g\" : f32[2]\n  %3 = input \"b\" : f32[2]\n  %4:2 = residual_norm(%0, %1, %2, %3) {axis=-1, epsilon=0.0, rms=false} : (f32[2,2], f32[2,2])\n  output \"y\" = %4.0\n}\n";
        let g = parse_graph(src).unwrap();
        let id = g
            .node_ids()
            .into_iter()
            .find(|i| g.node(*i).op.name() == "residual_norm")
            .unwrap();
        let x = Tensor::from_f32(&[2, 2], &[1.0, 2.0, 0.0, 0.0]).unwrap();
        let r = Tensor::from_f32(&[2, 2], &[1.0, 4.0, 3.0, 1.0]).unwrap();
        let gm = Tensor::from_f32(&[2], &[2.0, 3.0]).unwrap();
        let b = Tensor::from_f32(&[2], &[0.5, -0.5]).unwrap();
        let out = eval_node(g.node(id), &[x, r, gm, b], &Weights::new()).unwrap();
        // Row 0: sum [2, 6], mean 4, std 2 -> [-1, 1] -> [-2+0.5, 3-0.5].
        // Row 1: sum [3, 1], mean 2, std 1 -> [1, -1] -> [2+0.5, -3-0.5].
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[-1.5, 2.5, 2.5, -3.5]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), &[2.0, 6.0, 3.0, 1.0]);
    }
}
