//! Shape arithmetic every GPU lowering shares: row-major strides, numpy
//! broadcasting as strides, collapsing of dims that stay contiguous, axis
//! normalization, u32 range checks and launch-grid folding.

/// A lowering's refusal or failure: the reason, without the node (the
/// caller names it).
pub type LResult<T> = Result<T, String>;

/// Row-major element strides of `dims`.
pub fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Checks that a count fits the u32 words kernels index with.
pub fn u32_of(v: usize, what: &str) -> LResult<u32> {
    u32::try_from(v).map_err(|_| format!("{what} ({v}) exceeds the u32 range of the GPU kernels"))
}

/// Normalizes a possibly negative axis.
pub fn axis(a: i64, rank: usize) -> LResult<usize> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if (0..r.max(1)).contains(&v) {
        Ok(v as usize)
    } else {
        Err(format!("axis {a} is out of range for rank {rank}"))
    }
}

/// Broadcast strides of an input of `dims` against output `out` (0 where
/// the input repeats).
pub fn broadcast_strides(dims: &[usize], out: &[usize]) -> LResult<Vec<usize>> {
    if dims.len() > out.len() {
        return Err("an input has a higher rank than the output".into());
    }
    let pad = out.len() - dims.len();
    let s = strides(dims);
    let mut v = vec![0; out.len()];
    for (i, &d) in dims.iter().enumerate() {
        if d == out[pad + i] {
            v[pad + i] = if d == 1 { 0 } else { s[i] };
        } else if d != 1 {
            return Err(format!("dims {dims:?} do not broadcast to {out:?}"));
        }
    }
    Ok(v)
}

/// Merges adjacent output dims wherever every input stays contiguous across
/// them, and drops dims of size 1: the fewest dims an indexing loop needs.
pub fn collapse(out: &[usize], ins: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut dims: Vec<usize> = Vec::new();
    let mut st: Vec<Vec<usize>> = vec![Vec::new(); ins.len()];
    for d in 0..out.len() {
        if out[d] == 1 {
            continue;
        }
        let merge = !dims.is_empty()
            && ins
                .iter()
                .enumerate()
                .all(|(j, s)| st[j].last().copied() == Some(s[d] * out[d]));
        if merge {
            let last = dims.len() - 1;
            dims[last] *= out[d];
            for (j, s) in ins.iter().enumerate() {
                let l = st[j].len() - 1;
                st[j][l] = s[d];
            }
        } else {
            dims.push(out[d]);
            for (j, s) in ins.iter().enumerate() {
                st[j].push(s[d]);
            }
        }
    }
    (dims, st)
}

/// The largest grid dimension every backend accepts in y and z (and x on wgpu).
pub const MAX_GRID: u64 = 65535;

/// A grid of `n` workgroups (blocks): x up to [`MAX_GRID`], the rest in y;
/// kernels recover the linear index as `x + y * grid_x`.
pub fn fold_grid(n: u64) -> [u32; 3] {
    if n <= MAX_GRID {
        return [n as u32, 1, 1];
    }
    [MAX_GRID as u32, n.div_ceil(MAX_GRID) as u32, 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_and_collapse() {
        assert_eq!(
            broadcast_strides(&[3, 1], &[2, 3, 4]).unwrap(),
            vec![0, 1, 0]
        );
        assert!(broadcast_strides(&[3], &[4]).is_err());
        let (d, s) = collapse(&[2, 3, 4], &[vec![12, 4, 1], vec![0, 0, 1]]);
        assert_eq!(d, vec![6, 4]);
        assert_eq!(s, vec![vec![4, 1], vec![0, 1]]);
        let (d, s) = collapse(&[2, 3, 4], &[vec![12, 4, 1]]);
        assert_eq!((d, s), (vec![24], vec![vec![1]]));
    }

    #[test]
    fn large_grids_fold_into_y() {
        assert_eq!(fold_grid(10), [10, 1, 1]);
        assert_eq!(fold_grid(65536), [65535, 2, 1]);
        assert_eq!(fold_grid(65535 * 3), [65535, 3, 1]);
    }

    #[test]
    fn axes_and_strides() {
        assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(axis(-1, 3), Ok(2));
        assert!(axis(3, 3).is_err());
        assert!(u32_of(1 << 33, "x").is_err());
    }
}
