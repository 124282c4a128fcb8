//! The `scatter` kernel family: ScatterElements and ScatterND write updates
//! into a copy of the data, duplicate indices in order (each invocation owns
//! the writes that can collide and loops over them). The parameter struct
//! and the line / slice geometry every GPU backend shares.

use rlx_ir::ops::ScatterReduction;

use super::movement::{words, MAX_RANK};
use crate::geometry::{axis, strides, u32_of, LResult};

crate::kernel_params! {
    /// One entry point for both modes. Elements (mode 0): one invocation per
    /// update line along the axis; `dims`/`strides` are the updates', and
    /// `y_strides` the output's. ND (mode 1): one invocation per element of
    /// a slice; `dims`/`strides` are the data's.
    pub struct ScatterParams {
        /// 0 scatter_elements, 1 scatter_nd.
        pub mode: u32,
        /// Words per element (1 or 2).
        pub words: u32,
        /// 0 none, 1 add, 2 mul, 3 max, 4 min (f32 only).
        pub reduction: u32,
        /// 1: i64 indices, 0: i32.
        pub idx_wide: u32,
        /// Invocations: update lines (mode 0) or slice elements (mode 1).
        pub items: u32,
        /// Mode 0: the rank.
        pub rank: u32,
        /// Mode 0: the scattered axis.
        pub axis: u32,
        /// Mode 0: the data's size along the axis.
        pub axis_len: u32,
        /// Mode 1: elements per slice (the data dims after the first `k`).
        pub slice: u32,
        /// Mode 1: index tuples.
        pub tuples: u32,
        /// Mode 1: the length of an index tuple.
        pub k: u32,
        /// The update dims (mode 0) or the data dims (mode 1).
        pub dims: [u32; 8],
        /// The strides of `dims`.
        pub strides: [u32; 8],
        /// Mode 0: the output's strides.
        pub y_strides: [u32; 8],
    }
}

/// The operand names of the scatter kernel, in launch order (the output
/// already holds a copy of the data).
pub const SCATTER_OPERANDS: &[&str] = &["idx", "upd", "y"];

/// The kernel's reduction code; reductions are f32 only (`float`).
pub fn reduction_code(r: ScatterReduction, float: bool) -> LResult<u32> {
    let code = match r {
        ScatterReduction::None => return Ok(0),
        ScatterReduction::Add => 1,
        ScatterReduction::Mul => 2,
        ScatterReduction::Max => 3,
        ScatterReduction::Min => 4,
    };
    if !float {
        return Err("scatter with a reduction has no GPU kernel on non-f32 data".into());
    }
    Ok(code)
}

fn pad8(v: &[usize], what: &str) -> LResult<[u32; MAX_RANK]> {
    if v.len() > MAX_RANK {
        return Err(format!(
            "scatter over rank {} has no GPU kernel (8 at most)",
            v.len()
        ));
    }
    let mut o = [1u32; MAX_RANK];
    for (o, &x) in o.iter_mut().zip(v) {
        *o = u32_of(x, what)?;
    }
    Ok(o)
}

/// The parts every scatter shares: element words, reduction, index width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scatter {
    /// Bytes per data element.
    pub size: usize,
    /// The reduction code ([`reduction_code`]).
    pub reduction: u32,
    /// i64 indices.
    pub wide: bool,
}

/// scatter_elements along `ax` of data of `x` dims by indices and updates
/// of `upd` dims.
pub fn elements_params(
    s: Scatter,
    x: &[usize],
    idx: &[usize],
    upd: &[usize],
    ax: i64,
) -> LResult<ScatterParams> {
    let rank = x.len();
    if idx != upd || upd.len() != rank {
        return Err(
            "scatter_elements indices and updates must have the data's rank and one shape".into(),
        );
    }
    let a = axis(ax, rank)?;
    let items = upd.iter().product::<usize>() / upd[a].max(1);
    Ok(ScatterParams {
        mode: 0,
        words: words(s.size)?,
        reduction: s.reduction,
        idx_wide: u32::from(s.wide),
        items: u32_of(items, "lines")?,
        rank: rank as u32,
        axis: a as u32,
        axis_len: u32_of(x[a], "axis size")?,
        dims: pad8(upd, "a dim")?,
        strides: pad8(&strides(upd), "a stride")?,
        y_strides: pad8(&strides(x), "a stride")?,
        ..ScatterParams::default()
    })
}

/// scatter_nd into data of `x` dims by index tuples of `idx` dims and
/// `n_upd` update elements.
pub fn nd_params(s: Scatter, x: &[usize], idx: &[usize], n_upd: usize) -> LResult<ScatterParams> {
    let rank = x.len();
    let k = *idx.last().ok_or("scatter_nd indices need rank 1 or more")?;
    if k == 0 || k > rank {
        return Err(format!(
            "scatter_nd index tuples of {k} for data of rank {rank}"
        ));
    }
    let slice: usize = x[k..].iter().product();
    let tuples = idx.iter().product::<usize>() / k;
    if n_upd != tuples * slice {
        return Err("scatter_nd updates do not match indices and data".into());
    }
    Ok(ScatterParams {
        mode: 1,
        words: words(s.size)?,
        reduction: s.reduction,
        idx_wide: u32::from(s.wide),
        items: u32_of(slice, "slice size")?,
        slice: u32_of(slice, "slice size")?,
        tuples: u32_of(tuples, "index tuples")?,
        k: k as u32,
        dims: pad8(x, "a dim")?,
        strides: pad8(&strides(x), "a stride")?,
        ..ScatterParams::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Scatter = Scatter {
        size: 4,
        reduction: 0,
        wide: true,
    };

    #[test]
    fn elements_run_one_line_per_invocation() {
        let p = elements_params(S, &[3, 5], &[2, 5], &[2, 5], 0).unwrap();
        assert_eq!((p.items, p.rank, p.axis, p.axis_len), (5, 2, 0, 3));
        assert_eq!(p.strides[..2], [5, 1]);
        assert_eq!(p.y_strides[..2], [5, 1]);
        assert!(elements_params(S, &[3, 5], &[2, 5], &[2, 4], 0).is_err());
    }

    #[test]
    fn nd_runs_one_slice_element_per_invocation() {
        let p = nd_params(S, &[4, 3, 2], &[5, 1], 30).unwrap();
        assert_eq!((p.mode, p.items, p.slice, p.tuples, p.k), (1, 6, 6, 5, 1));
        assert!(nd_params(S, &[4, 3, 2], &[5, 1], 29).is_err());
        assert!(reduction_code(ScatterReduction::Add, false).is_err());
    }
}
