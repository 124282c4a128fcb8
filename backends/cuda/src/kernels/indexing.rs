//! Index kernels on CUDA (`kernels/cuda/indexing.cu`): gather along an axis,
//! gather_elements, gather_nd and trilu for every dtype (instantiated per
//! element size), and cumulative sums and products for every numeric dtype
//! (a thread per line when lines lie side by side, else a block scan per
//! line), planned by rlx-gpu's `kernels::gather` and `kernels::indexing`.

use rlx_gpu::kernels::gather::{gather_nd_params, gather_params, GatherNdParams, GatherParams};
use rlx_gpu::kernels::indexing::{
    cumulative_axis_params, cumulative_params, gather_elements_params, trilu_params,
    CumulativeAxisParams, CumulativeParams, GatherElementsParams, TriluParams,
};
use rlx_gpu::{Layout, Params};
use rlx_ir::ops::CumulativeKind;
use rlx_ir::{DType, Node, Op, TensorType};

use super::movement::size_suffix;
use super::{dtype_of, num_name, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "indexing",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/indexing.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![
        GatherParams::LAYOUT,
        GatherElementsParams::LAYOUT,
        GatherNdParams::LAYOUT,
        TriluParams::LAYOUT,
        CumulativeParams::LAYOUT,
        CumulativeAxisParams::LAYOUT,
    ]
}

fn index_dtype(op: &str, d: DType) -> LResult<()> {
    match d {
        DType::I32 | DType::I64 => Ok(()),
        d => Err(format!(
            "{op} indices of {d} have no cuda kernel (i32 or i64)"
        )),
    }
}

/// Gathers and trilu: any dtype of 1, 2, 4 or 8 bytes, i32 or i64 indices;
/// cumulative ops: floats and integers (not bool).
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d0 = dtype_of(inputs, 0)?;
    let name = node.op.name();
    match &node.op {
        Op::Gather(_) | Op::GatherElements(_) | Op::GatherNd(_) => {
            size_suffix(d0).map_err(|e| format!("{name}: {e}"))?;
            index_dtype(name, dtype_of(inputs, 1)?)
        }
        Op::Trilu(_) => size_suffix(d0)
            .map(|_| ())
            .map_err(|e| format!("{name}: {e}")),
        Op::Cumulative(c) => num_name(d0)
            .map(|_| ())
            .ok_or_else(|| format!("{} of {d0} has no cuda kernel", c.kind.name())),
        op => Err(format!("`{}` is not an index op", op.name())),
    }
}

/// Lines at least this many apart run one thread each (reads coalesce
/// across the lines); closer ones run a block scan each.
const LINE_MIN_INNER: u32 = 32;

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let x = cx.input(0)?.clone();
    let y = cx.output(0)?.clone();
    let n = y.numel() as u64;
    let m = cx.modules.of(&SOURCE);
    match &cx.node.op.clone() {
        Op::Gather(g) => {
            let idx = cx.input(1)?.clone();
            let s = size_suffix(x.dtype)?;
            let wide = idx.dtype == DType::I64;
            // `words` is WGSL's; CUDA instantiates per size.
            let p = gather_params(&x.dims, g.axis, s.max(4), idx.numel(), wide, y.numel())?;
            let ops = vec![x.range(), idx.range(), y.range()];
            cx.items(m, &format!("gather_{s}"), n, ops, &p);
        }
        Op::GatherElements(g) => {
            let idx = cx.input(1)?.clone();
            let s = size_suffix(x.dtype)?;
            let wide = idx.dtype == DType::I64;
            let p = gather_elements_params(&x.dims, &idx.dims, g.axis, s.max(4), wide)?;
            let ops = vec![x.range(), idx.range(), y.range()];
            cx.items(m, &format!("gather_elements_{s}"), n, ops, &p);
        }
        Op::GatherNd(g) => {
            let idx = cx.input(1)?.clone();
            let s = size_suffix(x.dtype)?;
            let b = usize::try_from(g.batch_dims).map_err(|_| "negative batch_dims")?;
            let p = gather_nd_params(&x.dims, &idx.dims, b, idx.dtype == DType::I64)?;
            if u64::from(p.n) != n {
                return Err(format!("gather_nd gives {} elements, the plan {n}", p.n));
            }
            let ops = vec![x.range(), idx.range(), y.range()];
            cx.items(m, &format!("gather_nd_{s}"), n, ops, &p);
        }
        Op::Trilu(t) => {
            let s = size_suffix(x.dtype)?;
            let given = cx.io.ins.get(1).filter(|k| k.numel() > 0).cloned();
            let constant = matches!(cx.io.values.get(1), Some(Some(_)));
            match given {
                // k is a runtime value: read on the device.
                Some(k) if !constant => {
                    if k.dtype != DType::I64 {
                        return Err(format!("a trilu k of {}", k.dtype));
                    }
                    let p = trilu_params(&x.dims, s.max(4), 0, t.upper)?;
                    let ops = vec![x.range(), k.range(), y.range()];
                    cx.items(m, &format!("trilu_k_{s}"), n, ops, &p);
                }
                given => {
                    let k = match given {
                        Some(_) => *cx
                            .ints(1)?
                            .unwrap_or_default()
                            .first()
                            .ok_or("trilu k is empty")?,
                        None => 0,
                    };
                    let p = trilu_params(&x.dims, s.max(4), k, t.upper)?;
                    cx.items(m, &format!("trilu_{s}"), n, vec![x.range(), y.range()], &p);
                }
            }
        }
        Op::Cumulative(c) if !matches!(cx.io.values.get(1), Some(Some(_))) => {
            // The axis is a runtime value: read on the device.
            let a = cx.input(1)?.clone();
            let wide = match a.dtype {
                DType::I64 => true,
                DType::I32 => false,
                d => return Err(format!("a cumulative axis of {d}")),
            };
            let p = cumulative_axis_params(
                &x.dims,
                c.exclusive,
                c.reverse,
                c.kind == CumulativeKind::Prod,
                wide,
            )?;
            let t = num_name(x.dtype).ok_or("no cumulative kernel for this dtype")?;
            let ops = vec![x.range(), a.range(), y.range()];
            cx.items(m, &format!("cum_axis_{t}"), u64::from(p.n), ops, &p);
        }
        Op::Cumulative(c) => {
            let a = cx
                .ints(1)?
                .and_then(|v| v.first().copied())
                .ok_or("the cumulative axis must be a constant")?;
            let p = cumulative_params(
                &x.dims,
                a,
                c.exclusive,
                c.reverse,
                c.kind == CumulativeKind::Prod,
            )?;
            let t = num_name(x.dtype).ok_or("no cumulative kernel for this dtype")?;
            let ops = vec![x.range(), y.range()];
            let lines = u64::from(p.lines);
            if p.inner >= LINE_MIN_INNER || p.len <= 1 {
                cx.items(m, &format!("cum_line_{t}"), lines, ops, &p);
            } else {
                let block = if p.len <= 32 {
                    32
                } else if p.len <= 128 {
                    128
                } else {
                    256
                };
                cx.kernel_params(m, &format!("cum_block_{t}"), lines, block, ops, &p);
            }
        }
        op => return Err(format!("`{}` is not an index op", op.name())),
    }
    Ok(())
}
