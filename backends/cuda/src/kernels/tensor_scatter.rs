//! TensorScatter on CUDA (`kernels/cuda/tensor_scatter.cu`): the key/value
//! cache write, one thread per cache element, any element width; where the
//! memory plan wrote the output over the cache (`scatter_in_place`), one
//! thread per element of the update.

use rlx_gpu::kernels::tensor_scatter::{tensor_scatter_params, TensorScatterParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::{Node, Op, TensorType};

use super::{dtype_of, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "tensor_scatter",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/tensor_scatter.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![TensorScatterParams::LAYOUT]
}

fn width(bytes: usize) -> Option<&'static str> {
    Some(match bytes {
        1 => "b1",
        2 => "b2",
        4 => "b4",
        8 => "b8",
        _ => return None,
    })
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    if width(d.size()).is_none() {
        return Err(format!("`{}` of {d} has no cuda kernel", node.op.name()));
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::TensorScatter(ts) = &cx.node.op else {
        return Err(format!("`{}` is not a tensor_scatter", cx.node.op.name()));
    };
    let (past, upd, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let write = if ts.has_indices {
        cx.input(2)?.range()
    } else {
        past.range()
    };
    let a = rlx_gpu::geometry::axis(ts.axis, past.dims.len())?;
    let upd_len = upd.dims.get(a).copied().unwrap_or(0);
    let p = tensor_scatter_params(&past.dims, upd_len, ts.axis, ts.circular, ts.has_indices)?;
    let w = width(y.dtype.size()).ok_or("element width")?;
    let m = cx.modules.of(&SOURCE);
    // The memory plan gave the output the cache's buffer: only the update
    // moves, one thread an element of it.
    if past.range() == y.range() {
        let updates = u64::from(p.n) / u64::from(p.len).max(1) * upd_len as u64;
        if updates == 0 {
            return Ok(());
        }
        let ops = vec![upd.range(), write, y.range()];
        cx.items(m, &format!("tensor_update_{w}"), updates, ops, &p);
        return Ok(());
    }
    let ops = vec![past.range(), upd.range(), write, y.range()];
    cx.items(m, &format!("tensor_scatter_{w}"), u64::from(p.n), ops, &p);
    Ok(())
}
