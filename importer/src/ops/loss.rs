//! NegativeLogLikelihoodLoss, and SoftmaxCrossEntropyLoss as LogSoftmax + NLL.

use rlx_ir::ops::{LossReduction, NllLoss, Softmax, SoftmaxKind};

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("NegativeLogLikelihoodLoss", 12, nll);
    r.add("SoftmaxCrossEntropyLoss", 12, softmax_cross_entropy);
}

fn loss_attrs(cx: &mut NodeCtx) -> Result<NllLoss, MapError> {
    let r = cx.attr_choice("reduction", "mean", &["none", "sum", "mean"])?;
    let ignore_index = cx.attr_i_opt("ignore_index")?;
    Ok(NllLoss {
        reduction: LossReduction::from_name(&r).unwrap_or(LossReduction::Mean),
        ignore_index,
    })
}

fn nll(cx: &mut NodeCtx) -> Result<(), MapError> {
    let op = loss_attrs(cx)?;
    let (x, t) = (cx.req(0)?, cx.req(1)?);
    let mut ins = vec![x, t];
    if let Some(w) = cx.input(2)? {
        ins.push(w);
    }
    let y = cx.add1(op, &ins)?;
    cx.set_output(0, y);
    Ok(())
}

fn softmax_cross_entropy(cx: &mut NodeCtx) -> Result<(), MapError> {
    let op = loss_attrs(cx)?;
    let (x, t) = (cx.req(0)?, cx.req(1)?);
    let logp = cx.add1(
        Softmax {
            kind: SoftmaxKind::LogSoftmax,
            axis: 1,
        },
        &[x],
    )?;
    let mut ins = vec![logp, t];
    if let Some(w) = cx.input(2)? {
        ins.push(w);
    }
    let y = cx.add1(op, &ins)?;
    cx.set_output(0, y);
    cx.set_output(1, logp);
    Ok(())
}
