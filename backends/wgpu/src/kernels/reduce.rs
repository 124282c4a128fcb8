//! Reductions (reduce_*, global pools, argmax/argmin) onto the workgroup tree
//! reductions in `wgsl/reduce.wgsl` (f32) and `wgsl/reduce_int.wgsl` (32- and
//! 64-bit integers): one workgroup per output element.

use rlx_ir::ops::{ArgReduceKind, GlobalPoolKind, ReduceKind};
use rlx_ir::{DType, Op};

use super::{axis, strides, u32_of, Cx, LResult};

const SRC: &str = include_str!("../../../../kernels/wgsl/reduce.wgsl");
const SRC_INT: &str = concat!(
    include_str!("../../../../kernels/wgsl/int64.wgsl"),
    "\n",
    include_str!("../../../../kernels/wgsl/reduce_int.wgsl")
);
const MAX_RANK: usize = 6;

/// How `op` reduces integers of dtype `d`: the `reduce_int.wgsl` words
/// (wide, signed), or why it has no kernel. Means are exact only where the
/// 64-bit sum cannot overflow (32-bit inputs); float-valued kinds are refused.
pub fn int_mode(op: &Op, d: DType) -> LResult<[u32; 2]> {
    let mode = match d {
        DType::I32 => [0, 1],
        DType::U32 => [0, 0],
        DType::I64 => [1, 1],
        DType::U64 => [1, 0],
        d => {
            return Err(format!(
                "reductions on {d} have no wgpu kernel (f32, 32- and 64-bit integers only)"
            ))
        }
    };
    let why = match op {
        Op::ArgReduce(_) => return Ok(mode),
        Op::Reduce(r) => match r.kind {
            ReduceKind::Sum
            | ReduceKind::Max
            | ReduceKind::Min
            | ReduceKind::Prod
            | ReduceKind::L1
            | ReduceKind::SumSquare => return Ok(mode),
            ReduceKind::Mean if mode[0] == 0 => return Ok(mode),
            ReduceKind::Mean => " (an exact mean needs a sum wider than 64 bits)",
            _ => " (float-valued reductions of integers are not emulated)",
        },
        _ => "",
    };
    Err(format!("`{}` on {d} has no wgpu kernel{why}", op.name()))
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    let int = match x.dtype {
        DType::F32 => None,
        d => Some(int_mode(&cx.node.op, d)?),
    };
    let rank = x.dims.len();
    let (kind, axes, select_last) = match &cx.node.op {
        Op::Reduce(r) => {
            let k = match r.kind {
                ReduceKind::Sum => 0,
                ReduceKind::Mean => 1,
                ReduceKind::Max => 2,
                ReduceKind::Min => 3,
                ReduceKind::Prod => 4,
                ReduceKind::L1 => 5,
                ReduceKind::L2 => 6,
                ReduceKind::LogSum => 7,
                ReduceKind::LogSumExp => 8,
                ReduceKind::SumSquare => 9,
            };
            let a = cx.ints(1)?;
            let axes = r.axes(a.as_deref(), rank).map_err(|e| e.to_string())?;
            (k, axes, false)
        }
        Op::GlobalPool(g) => {
            let k = match g.kind {
                GlobalPoolKind::Avg => 1,
                GlobalPoolKind::Max => 2,
                GlobalPoolKind::Lp if g.p == 1 => 5,
                GlobalPoolKind::Lp if g.p == 2 => 6,
                GlobalPoolKind::Lp => {
                    return Err(format!(
                        "global lp pooling with p = {} has no wgpu kernel",
                        g.p
                    ))
                }
            };
            (k, (2..rank).collect(), false)
        }
        Op::ArgReduce(a) => {
            let k = match a.kind {
                ArgReduceKind::Max => 10,
                ArgReduceKind::Min => 11,
            };
            (k, vec![axis(a.axis, rank)?], a.select_last_index)
        }
        op => return Err(format!("`{}` is not a reduction", op.name())),
    };
    let st = strides(&x.dims);
    let (mut kd, mut ks, mut rd, mut rs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for d in 0..rank {
        if x.dims[d] == 1 {
            continue;
        }
        if axes.contains(&d) {
            rd.push(x.dims[d]);
            rs.push(st[d]);
        } else {
            kd.push(x.dims[d]);
            ks.push(st[d]);
        }
    }
    if kd.len() > MAX_RANK || rd.len() > MAX_RANK {
        return Err(format!(
            "reductions over more than {MAX_RANK} non-unit dims have no wgpu kernel"
        ));
    }
    let count: usize = rd.iter().product();
    let n_out = y.numel();
    let mut p = vec![
        u32_of(n_out, "output size")?,
        u32_of(count, "reduced size")?,
        kind,
        u32::from(select_last),
        kd.len() as u32,
        rd.len() as u32,
    ];
    for v in [&kd, &ks, &rd, &rs] {
        let mut w = [0u32; MAX_RANK];
        for (i, &e) in v.iter().enumerate() {
            w[i] = u32_of(e, "a dim")?;
        }
        p.extend(w);
    }
    let pipe = match int {
        Some(mode) => {
            p.extend(mode);
            cx.pipeline("reduce.int_tree64", SRC_INT)
        }
        None => cx.pipeline("reduce.tree64", SRC),
    };
    cx.dispatch(pipe, vec![x.range(), y.range()], p, n_out as u64);
    Ok(())
}
