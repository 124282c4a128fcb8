//! The `reduce` kernel family: reductions (reduce_*, global pools,
//! argmax/argmin) as one workgroup tree reduction per output element, over
//! f32 and (on u32 pairs) 32- and 64-bit integers. Parameter structs, the
//! kind codes, and the split of the input into kept and reduced dims.

use rlx_ir::ops::{ArgReduceKind, GlobalPoolKind, ReduceKind};
use rlx_ir::Op;

use crate::geometry::{axis, strides, u32_of, LResult};

/// The most non-unit kept (and reduced) dims a reduction handles.
pub const MAX_RANK: usize = 6;

crate::kernel_params! {
    /// An f32 reduction, one workgroup per output element.
    pub struct ReduceParams {
        /// Output elements (workgroups).
        pub n_out: u32,
        /// Elements reduced into each output.
        pub count: u32,
        /// 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 l1, 6 l2, 7 log_sum,
        /// 8 log_sum_exp, 9 sum_square, 10 argmax, 11 argmin (i64 output).
        pub kind: u32,
        /// Ties of argmax/argmin go to the last index (1) or the first (0).
        pub select_last: u32,
        /// Kept (non-unit) dims used of `kept_dims`.
        pub kept_rank: u32,
        /// Reduced (non-unit) dims used of `reduced_dims`.
        pub reduced_rank: u32,
        /// Kept dims, outermost first.
        pub kept_dims: [u32; 6],
        /// The input's element strides of the kept dims.
        pub kept_strides: [u32; 6],
        /// Reduced dims, outermost first.
        pub reduced_dims: [u32; 6],
        /// The input's element strides of the reduced dims.
        pub reduced_strides: [u32; 6],
    }
}

crate::kernel_params! {
    /// An integer reduction: [`ReduceParams`] plus the element format.
    pub struct ReduceIntParams {
        /// Output elements (workgroups).
        pub n_out: u32,
        /// Elements reduced into each output.
        pub count: u32,
        /// As [`ReduceParams::kind`] (float-valued kinds excluded).
        pub kind: u32,
        /// Ties of argmax/argmin go to the last index (1) or the first (0).
        pub select_last: u32,
        /// Kept (non-unit) dims used of `kept_dims`.
        pub kept_rank: u32,
        /// Reduced (non-unit) dims used of `reduced_dims`.
        pub reduced_rank: u32,
        /// Kept dims, outermost first.
        pub kept_dims: [u32; 6],
        /// The input's element strides of the kept dims.
        pub kept_strides: [u32; 6],
        /// Reduced dims, outermost first.
        pub reduced_dims: [u32; 6],
        /// The input's element strides of the reduced dims.
        pub reduced_strides: [u32; 6],
        /// 1: two words per element (64-bit), 0: one.
        pub wide: u32,
        /// 1: signed elements.
        pub is_signed: u32,
    }
}

crate::kernel_params! {
    /// A reduction on CUDA: [`ReduceParams`] plus how rows map to threads.
    /// Each row is split into `splits` chunks, each reduced by one warp
    /// (`warp` = 1) or one block; with more than one split, the chunks'
    /// partial states go to scratch and a second launch combines them.
    pub struct CudaReduceParams {
        /// Output elements.
        pub n_out: u32,
        /// Elements reduced into each output.
        pub count: u32,
        /// As [`ReduceParams::kind`].
        pub kind: u32,
        /// Ties of argmax/argmin go to the last index (1) or the first (0).
        pub select_last: u32,
        /// Kept (non-unit) dims used of `kept_dims`.
        pub kept_rank: u32,
        /// Reduced (non-unit) dims used of `reduced_dims`.
        pub reduced_rank: u32,
        /// Kept dims, outermost first.
        pub kept_dims: [u32; 6],
        /// The input's element strides of the kept dims.
        pub kept_strides: [u32; 6],
        /// Reduced dims, outermost first.
        pub reduced_dims: [u32; 6],
        /// The input's element strides of the reduced dims.
        pub reduced_strides: [u32; 6],
        /// Chunks per row (1: the first launch writes the outputs).
        pub splits: u32,
        /// 1: one warp per chunk, 0: one block.
        pub warp: u32,
    }
}

impl CudaReduceParams {
    pub fn of(p: ReduceParams, splits: u32, warp: bool) -> CudaReduceParams {
        CudaReduceParams {
            n_out: p.n_out,
            count: p.count,
            kind: p.kind,
            select_last: p.select_last,
            kept_rank: p.kept_rank,
            reduced_rank: p.reduced_rank,
            kept_dims: p.kept_dims,
            kept_strides: p.kept_strides,
            reduced_dims: p.reduced_dims,
            reduced_strides: p.reduced_strides,
            splits,
            warp: u32::from(warp),
        }
    }
}

/// The operand names of both reduction kernels, in launch order.
pub const REDUCE_OPERANDS: &[&str] = &["x", "y"];

/// What a reduction node computes: kind code, reduced axes (sorted) and
/// argmax/argmin tie-breaking. `axes` is the constant axes input of a
/// `Reduce`, if given.
pub fn reduction(op: &Op, rank: usize, axes: Option<&[i64]>) -> LResult<(u32, Vec<usize>, bool)> {
    Ok(match op {
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
            let axes = r.axes(axes, rank).map_err(|e| e.to_string())?;
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
                        "global lp pooling with p = {} has no GPU kernel",
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
    })
}

/// The parameters of reducing `axes` of an input of `dims` (kind and
/// tie-breaking from [`reduction`]): unit dims are dropped, the rest split
/// into kept and reduced dims with their strides.
pub fn reduce_params(
    dims: &[usize],
    axes: &[usize],
    kind: u32,
    select_last: bool,
) -> LResult<ReduceParams> {
    let st = strides(dims);
    let (mut kd, mut ks, mut rd, mut rs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for d in 0..dims.len() {
        if dims[d] == 1 {
            continue;
        }
        if axes.contains(&d) {
            rd.push(dims[d]);
            rs.push(st[d]);
        } else {
            kd.push(dims[d]);
            ks.push(st[d]);
        }
    }
    if kd.len() > MAX_RANK || rd.len() > MAX_RANK {
        return Err(format!(
            "reductions over more than {MAX_RANK} non-unit dims have no GPU kernel"
        ));
    }
    let six = |v: &[usize]| -> LResult<[u32; MAX_RANK]> {
        let mut w = [0u32; MAX_RANK];
        for (w, &e) in w.iter_mut().zip(v) {
            *w = u32_of(e, "a dim")?;
        }
        Ok(w)
    };
    Ok(ReduceParams {
        n_out: u32_of(kd.iter().product(), "output size")?,
        count: u32_of(rd.iter().product(), "reduced size")?,
        kind,
        select_last: u32::from(select_last),
        kept_rank: kd.len() as u32,
        reduced_rank: rd.len() as u32,
        kept_dims: six(&kd)?,
        kept_strides: six(&ks)?,
        reduced_dims: six(&rd)?,
        reduced_strides: six(&rs)?,
    })
}

impl ReduceIntParams {
    /// `p` over elements of two words (`wide`), signed or not.
    pub fn of(p: ReduceParams, wide: bool, signed: bool) -> ReduceIntParams {
        ReduceIntParams {
            n_out: p.n_out,
            count: p.count,
            kind: p.kind,
            select_last: p.select_last,
            kept_rank: p.kept_rank,
            reduced_rank: p.reduced_rank,
            kept_dims: p.kept_dims,
            kept_strides: p.kept_strides,
            reduced_dims: p.reduced_dims,
            reduced_strides: p.reduced_strides,
            wide: u32::from(wide),
            is_signed: u32::from(signed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_split_into_kept_and_reduced_dims() {
        let p = reduce_params(&[2, 1, 3, 4], &[2], 0, false).unwrap();
        assert_eq!((p.n_out, p.count), (8, 3));
        assert_eq!((p.kept_rank, p.reduced_rank), (2, 1));
        assert_eq!(p.kept_dims[..2], [2, 4]);
        assert_eq!(p.kept_strides[..2], [12, 1]);
        assert_eq!(p.reduced_dims[..1], [3]);
        assert_eq!(p.reduced_strides[..1], [4]);
        let all = reduce_params(&[2, 3], &[0, 1], 1, false).unwrap();
        assert_eq!((all.n_out, all.count, all.kept_rank), (1, 6, 0));
        assert!(reduce_params(&[2; 7], &[], 0, false).is_err());
        let i = ReduceIntParams::of(p, true, false);
        assert_eq!((i.wide, i.is_signed, i.count), (1, 0, 3));
    }
}
