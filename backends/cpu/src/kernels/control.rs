//! If, Loop and Scan: their bodies run with the dynamic interpreter.

use rlx_ir::{DType, Node, Op, Tensor};

use crate::kernel::{run_subgraph, EvalCx, KernelError};

fn internal(e: impl ToString) -> KernelError {
    KernelError::Internal(e.to_string())
}

fn scalar_bool(t: &Tensor) -> Result<bool, KernelError> {
    t.bytes()
        .first()
        .map(|b| *b != 0)
        .ok_or_else(|| KernelError::Value("an empty condition".into()))
}

pub fn if_(node: &Node, inputs: &[Tensor], cx: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::If(op) = &node.op else {
        return Err(internal("not an if"));
    };
    let branch = if scalar_bool(&inputs[0])? {
        &op.then_branch
    } else {
        &op.else_branch
    };
    run_subgraph(branch, cx, inputs[1..].to_vec())
}

/// A branch the importer refused: running it is the import's error, now.
pub fn refused(node: &Node, _: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::Refused(op) = &node.op else {
        return Err(internal("not a refusal"));
    };
    Err(KernelError::Unsupported(op.reason.clone()))
}

/// Stacks equally shaped tensors along a new axis `axis`.
pub fn stack(
    parts: &[Tensor],
    axis: usize,
    empty: Option<(DType, &[usize])>,
) -> Result<Tensor, KernelError> {
    let Some(first) = parts.first() else {
        let (d, dims) = empty.ok_or_else(|| internal("nothing to stack"))?;
        let mut s = dims.to_vec();
        s.insert(axis.min(s.len()), 0);
        return Tensor::zeros(d, &s).map_err(internal);
    };
    let dims = first.dims();
    if parts
        .iter()
        .any(|p| p.dims() != dims || p.dtype() != first.dtype())
    {
        return Err(KernelError::Value(
            "scan outputs change shape between iterations".into(),
        ));
    }
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis..].iter().product::<usize>() * first.dtype().size();
    let mut out = Vec::with_capacity(outer * inner * parts.len());
    for o in 0..outer {
        for p in parts {
            out.extend_from_slice(&p.bytes()[o * inner..(o + 1) * inner]);
        }
    }
    let mut s = dims.to_vec();
    s.insert(axis, parts.len());
    Tensor::new(first.dtype(), s, rlx_ir::Bytes::copy_from(&out)).map_err(internal)
}

/// Slice `t` at index `i` of `axis`, dropping the axis.
fn take(t: &Tensor, axis: usize, i: usize) -> Result<Tensor, KernelError> {
    let dims = t.dims();
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product::<usize>() * t.dtype().size();
    let n = dims[axis];
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let at = (o * n + i) * inner;
        out.extend_from_slice(&t.bytes()[at..at + inner]);
    }
    let mut s = dims.to_vec();
    s.remove(axis);
    Tensor::new(t.dtype(), s, rlx_ir::Bytes::copy_from(&out)).map_err(internal)
}

pub fn loop_(node: &Node, inputs: &[Tensor], cx: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::Loop(op) = &node.op else {
        return Err(internal("not a loop"));
    };
    let k = usize::try_from(op.num_carried).map_err(|_| internal("negative num_carried"))?;
    let trip = inputs[0]
        .to_i64_vec()
        .and_then(|v| v.first().copied())
        .ok_or_else(|| KernelError::Value("bad trip count".into()))?;
    let mut cond = scalar_bool(&inputs[1])?;
    let mut carried: Vec<Tensor> = inputs[2..2 + k].to_vec();
    let captures = &inputs[2 + k..];
    let n_scan = op.body.outputs().len() - 1 - k;
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); n_scan];
    let mut i = 0i64;
    let max = cx.cache.limits.max_loop_iterations;
    // A loop whose condition stays true runs exactly `trip` iterations: a
    // count past the limit is refused before the first, not after hours.
    if cond && trip > 0 && trip as u64 > max && condition_stays_true(&op.body) {
        return Err(KernelError::Value(format!(
            "the loop would run {trip} iterations (its condition stays true); the limit is \
             {max}: RunLimits::max_loop_iterations (Limits::max_loop_iterations, \
             --max-loop-iterations)"
        )));
    }
    // What the scan outputs hold so far, bounded as a tensor is.
    let mut scanned = vec![0u64; n_scan];
    while i < trip && cond {
        if i as u64 >= max {
            return Err(KernelError::Value(format!(
                "the loop ran {max} iterations and would run more (trip count {trip}); the \
                 limit is RunLimits::max_loop_iterations (Limits::max_loop_iterations, \
                 --max-loop-iterations)"
            )));
        }
        let mut args = vec![
            Tensor::scalar_i64(i),
            Tensor::from_slice(DType::Bool, &[], &[u8::from(cond)]).map_err(internal)?,
        ];
        args.extend(carried.iter().cloned());
        args.extend(captures.iter().cloned());
        let outs = run_subgraph(&op.body, cx, args)?;
        cond = scalar_bool(&outs[0])?;
        carried = outs[1..1 + k].to_vec();
        for (j, s) in outs[1 + k..].iter().enumerate() {
            scanned[j] = scanned[j].saturating_add(s.numel() as u64);
            cx.check_count(scanned[j])?;
            scans[j].push(s.clone());
        }
        i += 1;
    }
    let mut result = carried;
    for (j, parts) in scans.iter().enumerate() {
        let declared = &node.outputs[k + j];
        let inner: Vec<usize> = declared.shape.0[1..]
            .iter()
            .map(|d| d.known().unwrap_or(0).max(0) as usize)
            .collect();
        result.push(stack(parts, 0, Some((declared.dtype, &inner)))?);
    }
    Ok(result)
}

/// True if the body's condition output is its condition input passed
/// through, or a constant true: the loop's condition never changes.
fn condition_stays_true(body: &rlx_ir::Graph) -> bool {
    let Some(out) = body.outputs().first() else {
        return false;
    };
    match &body.node(out.value.node).op {
        Op::Input(_) => body.inputs().get(1) == Some(&out.value.node),
        Op::Constant(c) => c.value.to_i64_vec().is_some_and(|v| v == [1]),
        _ => false,
    }
}

pub fn scan(node: &Node, inputs: &[Tensor], cx: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::Scan(op) = &node.op else {
        return Err(internal("not a scan"));
    };
    let count = |v: i64| usize::try_from(v).map_err(|_| internal("negative scan counts"));
    let (ns, ni) = (count(op.num_state)?, count(op.num_scan_inputs)?);
    if ns + ni > inputs.len() {
        return Err(internal("scan counts exceed the inputs"));
    }
    let mut states: Vec<Tensor> = inputs[..ns].to_vec();
    let scanned = &inputs[ns..ns + ni];
    let captures = &inputs[ns + ni..];
    let axes: Vec<usize> = (0..ni)
        .map(|j| {
            super::layout::axis(
                op.scan_input_axes.get(j).copied().unwrap_or(0),
                scanned[j].dims().len(),
            )
        })
        .collect();
    let len = scanned.first().map_or(0, |t| t.dims()[axes[0]]);
    if scanned.iter().zip(&axes).any(|(t, &a)| t.dims()[a] != len) {
        return Err(KernelError::Value("scanned inputs differ in length".into()));
    }
    let n_out = op.body.outputs().len() - ns;
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); n_out];
    for step in 0..len {
        let mut args = states.clone();
        for j in 0..ni {
            let reverse = op.scan_input_directions.get(j).copied().unwrap_or(0) == 1;
            args.push(take(
                &scanned[j],
                axes[j],
                if reverse { len - 1 - step } else { step },
            )?);
        }
        args.extend(captures.iter().cloned());
        let outs = run_subgraph(&op.body, cx, args)?;
        states = outs[..ns].to_vec();
        for (j, s) in outs[ns..].iter().enumerate() {
            scans[j].push(s.clone());
        }
    }
    let mut result = states;
    for (j, mut parts) in scans.into_iter().enumerate() {
        if op.scan_output_directions.get(j).copied().unwrap_or(0) == 1 {
            parts.reverse();
        }
        let declared = &node.outputs[ns + j];
        let axis = super::layout::axis(
            op.scan_output_axes.get(j).copied().unwrap_or(0),
            declared.rank(),
        );
        let mut inner: Vec<usize> = declared
            .shape
            .0
            .iter()
            .map(|d| d.known().unwrap_or(0).max(0) as usize)
            .collect();
        inner.remove(axis);
        result.push(stack(&parts, axis, Some((declared.dtype, &inner)))?);
    }
    Ok(result)
}
