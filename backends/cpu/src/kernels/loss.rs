//! NegativeLogLikelihoodLoss (SoftmaxCrossEntropyLoss arrives as LogSoftmax
//! followed by it).
//!
//! `loss[n, d] = -input[n, target[n, d], d] * weight[target[n, d]]`, zero where
//! the target is `ignore_index`. `sum` adds the losses; `mean` divides that sum
//! by the sum of the weights of the targets that are not ignored (the ONNX
//! definition; with no weight input every weight is 1).

use rlx_ir::ops::LossReduction;
use rlx_ir::Op;

use super::num::Real;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::NllLoss(_) => Ok(fn_kernel(spec, nll_loss)),
        op => Err(KernelError::Internal(format!(
            "{} is not a loss",
            op.name()
        ))),
    }
}

fn nll_typed<T: Real>(
    reduction: LossReduction,
    ignore: Option<i64>,
    ins: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let (x, target) = (&ins[0], &ins[1]);
    let src = x.slice::<T>()?;
    let tg = target.to_i64s()?;
    let (n, c) = (x.dims[0], x.dims[1]);
    let inner: usize = x.dims[2..].iter().product();
    if target.dims.first() != Some(&n) || target.dims[1..] != x.dims[2..] {
        return Err(KernelError::Value(format!(
            "target {:?} does not match input {:?}",
            target.dims, x.dims
        )));
    }
    let weight: Option<Vec<f64>> = match ins.get(2) {
        Some(w) if w.numel() != c => {
            return Err(KernelError::Value(format!(
                "{} weights for {c} classes",
                w.numel()
            )))
        }
        Some(w) => Some(w.to_f64s()?),
        None => None,
    };
    let mut losses = vec![0f64; n * inner];
    let mut wsum = 0f64;
    for b in 0..n {
        for d in 0..inner {
            let t = tg[b * inner + d];
            if ignore == Some(t) {
                continue;
            }
            if t < 0 || t as usize >= c {
                return Err(KernelError::Value(format!(
                    "target {t} is outside [0, {c})"
                )));
            }
            let t = t as usize;
            let w = weight.as_ref().map_or(1.0, |w| w[t]);
            losses[b * inner + d] = -src[(b * c + t) * inner + d].to_f64() * w;
            wsum += w;
        }
    }
    let y = out.slice::<T>()?;
    match reduction {
        LossReduction::None => {
            for (o, l) in y.iter_mut().zip(&losses) {
                *o = T::from_f64(*l);
            }
        }
        LossReduction::Sum => y[0] = T::from_f64(losses.iter().sum()),
        LossReduction::Mean => y[0] = T::from_f64(losses.iter().sum::<f64>() / wsum),
    }
    Ok(())
}

fn nll_loss(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::NllLoss(l) = op else {
        return Err(KernelError::Internal("not nll_loss".into()));
    };
    let d = ins[0].dtype;
    with_dtype!(d, T => nll_typed::<T>(l.reduction, l.ignore_index, ins, &mut outs[0]), float)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::ops::NllLoss;
    use rlx_ir::DType;

    fn run(reduction: LossReduction, ignore: Option<i64>, weight: Option<&[f32]>) -> Vec<f32> {
        // N=3, C=2: log-probabilities and targets [1, 0, 1].
        let x = [-0.1f32, -2.0, -0.5, -1.0, -3.0, -0.2];
        let t = [1i64, 0, 1];
        let mut ins = vec![
            TensorRef {
                dtype: DType::F32,
                dims: &[3, 2],
                bytes: bytemuck::cast_slice(&x),
            },
            TensorRef {
                dtype: DType::I64,
                dims: &[3],
                bytes: bytemuck::cast_slice(&t),
            },
        ];
        if let Some(w) = weight {
            ins.push(TensorRef {
                dtype: DType::F32,
                dims: &[2],
                bytes: bytemuck::cast_slice(w),
            });
        }
        let dims: &[usize] = if reduction == LossReduction::None {
            &[3]
        } else {
            &[]
        };
        let mut out = vec![0f32; if dims.is_empty() { 1 } else { 3 }];
        let mut outs = [TensorMut {
            dtype: DType::F32,
            dims,
            bytes: bytemuck::cast_slice_mut(&mut out),
        }];
        let op = Op::NllLoss(NllLoss {
            reduction,
            ignore_index: ignore,
        });
        nll_loss(&op, &ins, &mut outs).unwrap();
        out
    }

    #[test]
    fn nll_reductions_with_weights_and_ignore() {
        assert_eq!(run(LossReduction::None, None, None), [2.0, 0.5, 0.2]);
        assert!((run(LossReduction::Sum, None, None)[0] - 2.7).abs() < 1e-6);
        // Weights [1, 3]: losses [6, 0.5, 0.6], mean divides by 3 + 1 + 3.
        let m = run(LossReduction::Mean, None, Some(&[1.0, 3.0]))[0];
        assert!((m - 7.1 / 7.0).abs() < 1e-6);
        // Ignoring class 1 leaves one target of weight 1.
        assert_eq!(run(LossReduction::Mean, Some(1), Some(&[1.0, 3.0])), [0.5]);
    }
}
