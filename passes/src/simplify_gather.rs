//! Gathers that read every element once, in order (`simplify`): a `gather`
//! whose constant indices are `0, 1, .., n-1` along its axis of size `n`, or
//! a `gather_nd` whose constant index tuples enumerate the leading positions
//! of its data in row-major order (what `torch.export` writes for a `vmap`
//! over a mask), moves no element: a `reshape` of the data (a view) instead
//! of a kernel.

use rlx_ir::ops::Reshape;
use rlx_ir::{Graph, NodeId, Op, Tensor};

use crate::manager::PassContext;
use crate::rewrite::{const_of, constant, replace_root};

/// Rewrites `id` when it is such a gather; returns the rule that applied.
pub fn enumerating_gather(
    g: &mut Graph,
    cx: &mut PassContext,
    id: NodeId,
) -> Result<Option<&'static str>, String> {
    let ins = g.inputs_of(id);
    let (Some(&x), Some(&idx)) = (ins.first(), ins.get(1)) else {
        return Ok(None);
    };
    let (Some(data), Some(out)) = (
        g.ty(x).shape.as_known(),
        g.node(id).outputs[0].shape.as_known(),
    ) else {
        return Ok(None);
    };
    let Some(indices) = const_of(g, cx.weights, idx) else {
        return Ok(None);
    };
    let Some(values) = indices.to_i64_vec() else {
        return Ok(None);
    };
    let rule = match &g.node(id).op {
        Op::Gather(ga) => {
            let rank = data.len() as i64;
            let axis = if ga.axis < 0 { ga.axis + rank } else { ga.axis };
            let Some(&n) = usize::try_from(axis).ok().and_then(|a| data.get(a)) else {
                return Ok(None);
            };
            if !enumerates(&values, &[n]) {
                return Ok(None);
            }
            "simplify.enumerating-gather"
        }
        Op::GatherNd(gn) if gn.batch_dims == 0 => {
            let Some(&k) = indices.dims().last() else {
                return Ok(None);
            };
            if k == 0 || k > data.len() || !enumerates(&values, &data[..k]) {
                return Ok(None);
            }
            "simplify.enumerating-gather-nd"
        }
        _ => return Ok(None),
    };
    // Empty data: a 0 in a reshape's shape would read as "keep the dim".
    let numel: usize = data.iter().product();
    if numel == 0 || out.iter().product::<usize>() != numel {
        return Ok(None);
    }
    let (name, origin) = (g.node(id).name.clone(), g.node(id).origin.clone());
    let shape: Vec<i64> = out.iter().map(|&d| d as i64).collect();
    let t = Tensor::from_i64(&[shape.len()], &shape).map_err(|e| e.to_string())?;
    let s = constant(g, cx.weights, &format!("{name}.shape"), origin.clone(), t);
    replace_root(
        g,
        cx.weights,
        id,
        Reshape { allowzero: false },
        &[x, s],
        origin,
    )?;
    Ok(Some(rule))
}

/// True if `values`, read as tuples of `dims.len()` indices (negative ones
/// from the end, as ONNX reads them), are every position of `dims` once, in
/// row-major order.
fn enumerates(values: &[i64], dims: &[usize]) -> bool {
    let k = dims.len();
    let total: usize = dims.iter().product();
    if k == 0 || values.len() != total * k {
        return false;
    }
    let mut at = vec![0usize; k];
    for tuple in values.chunks(k) {
        for ((&v, &d), &want) in tuple.iter().zip(dims).zip(&at) {
            let v = if v < 0 { v + d as i64 } else { v };
            if v != want as i64 {
                return false;
            }
        }
        // The next position, last dim fastest.
        for j in (0..k).rev() {
            at[j] += 1;
            if at[j] < dims[j] {
                break;
            }
            at[j] = 0;
        }
    }
    true
}
