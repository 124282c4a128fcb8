//! The `movement` kernel family: strided copies (transpose, slice, concat,
//! split, expand, depth/space rearrangement) and padding (pad, tile as wrap
//! padding). Parameter structs and the strided views every GPU backend
//! shares: each op is a copy of an output view whose element strides into
//! the input encode the op.

use rlx_ir::ops::{slice_range, DepthToSpaceMode};

use crate::geometry::{axis, strides, u32_of, LResult};

/// The most dims a copy or pad handles.
pub const MAX_RANK: usize = 8;

crate::kernel_params! {
    /// A strided copy, one invocation per output element (per output word
    /// for 1- and 2-byte elements, which need a dense output from 0).
    pub struct CopyParams {
        /// Output elements.
        pub n: u32,
        /// Bytes per element: 1, 2, 4 or 8.
        pub size: u32,
        /// Dims used of the arrays.
        pub rank: u32,
        /// The input element the view starts at.
        pub x_start: u32,
        /// The output element the view starts at.
        pub y_start: u32,
        /// The view's dims (unit past `rank`).
        pub dims: [u32; 8],
        /// Input element strides of the view (negative for reversed slices).
        pub x_strides: [i32; 8],
        /// Output element strides of the view.
        pub y_strides: [u32; 8],
    }
}

crate::kernel_params! {
    /// Constant, edge, reflect and wrap padding (and cropping), one
    /// invocation per output element.
    pub struct PadParams {
        /// Output elements.
        pub n: u32,
        /// Words per element (1 or 2).
        pub words: u32,
        /// Dims used of the arrays.
        pub rank: u32,
        /// 0 constant, 1 edge, 2 reflect, 3 wrap.
        pub mode: u32,
        /// The constant's words (low, high).
        pub value: [u32; 2],
        /// Output dims.
        pub out_dims: [u32; 8],
        /// Input dims.
        pub in_dims: [u32; 8],
        /// Begin pads (negative crops).
        pub pad_begin: [i32; 8],
    }
}

/// The operand names of the copy and pad kernels, in launch order.
pub const COPY_OPERANDS: &[&str] = &["x", "y"];
pub const PAD_OPERANDS: &[&str] = &["x", "y"];

/// Words per element of `size` bytes: 1 or 2 (what index and movement
/// kernels move whole).
pub fn words(size: usize) -> LResult<u32> {
    match size {
        4 => Ok(1),
        8 => Ok(2),
        _ => Err(format!(
            "moving {size}-byte elements has no GPU kernel (4- and 8-byte dtypes only)"
        )),
    }
}

/// A view of the input as the output's elements: `dims`, the input
/// element strides of each dim, and the input element it starts at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub dims: Vec<usize>,
    pub strides: Vec<i64>,
    pub start: usize,
}

fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

impl View {
    /// The whole of a dense value of `dims`.
    pub fn dense(dims: &[usize]) -> View {
        View {
            dims: dims.to_vec(),
            strides: i64s(&strides(dims)),
            start: 0,
        }
    }

    /// A transpose of `x` by `perm` (empty: reversed dims) into `y`.
    pub fn transpose(x: &[usize], perm: &[i64], y: &[usize]) -> LResult<View> {
        let perm: Vec<usize> = if perm.is_empty() {
            (0..x.len()).rev().collect()
        } else {
            perm.iter()
                .map(|&p| axis(p, x.len()))
                .collect::<LResult<_>>()?
        };
        let xst = strides(x);
        Ok(View {
            dims: y.to_vec(),
            strides: perm.iter().map(|&p| xst[p] as i64).collect(),
            start: 0,
        })
    }

    /// A slice of `x` into `y` by per-axis (axis, start, end, step), as
    /// `rlx_ir::ops::slice_params` gives them.
    pub fn slice(x: &[usize], y: &[usize], ps: &[(usize, i64, i64, i64)]) -> View {
        let xst = strides(x);
        let mut xs = i64s(&xst);
        let mut x0: i64 = 0;
        for &(a, s, e, step) in ps {
            let (start, _) = slice_range(x[a] as i64, s, e, step);
            x0 += start * xst[a] as i64;
            xs[a] *= step;
        }
        View {
            dims: y.to_vec(),
            strides: xs,
            start: x0 as usize,
        }
    }

    /// DepthToSpace of an (N, C, H, W) input by `b`.
    pub fn depth_to_space(x: &[usize], b: usize, mode: DepthToSpaceMode) -> LResult<View> {
        let [n, c, h, w] = dims4(x)?;
        let cc = c / (b * b).max(1);
        let xs = match mode {
            DepthToSpaceMode::Dcr => [c * h * w, h * w, w, cc * h * w * b, 1, cc * h * w],
            DepthToSpaceMode::Crd => [c * h * w, b * b * h * w, w, b * h * w, 1, h * w],
        };
        Ok(View {
            dims: vec![n, cc, h, b, w, b],
            strides: i64s(&xs),
            start: 0,
        })
    }

    /// SpaceToDepth of an (N, C, H, W) input by `b`.
    pub fn space_to_depth(x: &[usize], b: usize, mode: DepthToSpaceMode) -> LResult<View> {
        let [n, c, h, w] = dims4(x)?;
        let (hb, wb) = (h / b.max(1), w / b.max(1));
        // Output channel (block row, block column, channel) or (channel, ...).
        let (dims, xs) = match mode {
            DepthToSpaceMode::Dcr => (vec![n, b, b, c, hb, wb], [c * h * w, w, 1, h * w, b * w, b]),
            DepthToSpaceMode::Crd => (vec![n, c, b, b, hb, wb], [c * h * w, h * w, w, 1, b * w, b]),
        };
        Ok(View {
            dims,
            strides: i64s(&xs),
            start: 0,
        })
    }
}

fn dims4(x: &[usize]) -> LResult<[usize; 4]> {
    match *x {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err("depth/space rearrangement needs a 4-D input".into()),
    }
}

/// A copy of view `v` of the input to the output elements at `y_start`
/// with output strides `ys`, for `size`-byte elements packed `packed_bits`
/// to an element; also the invocations it takes.
pub fn copy_params(
    v: &View,
    ys: &[usize],
    y_start: usize,
    size: usize,
    packed_bits: usize,
) -> LResult<(CopyParams, u64)> {
    let rank = v.dims.len();
    if rank > MAX_RANK {
        return Err(format!("movement over rank {rank} has no GPU kernel"));
    }
    let n: usize = v.dims.iter().product();
    let sub_word = matches!(size, 1 | 2) && packed_bits == size * 8;
    if !sub_word {
        words(size)?;
    } else if y_start != 0 || ys != strides(&v.dims).as_slice() {
        return Err(format!(
            "writing {size}-byte elements into part of a tensor (concat) has no GPU kernel"
        ));
    }
    let items = if sub_word { n.div_ceil(4 / size) } else { n };
    let mut p = CopyParams {
        n: u32_of(n, "size")?,
        size: size as u32,
        rank: rank as u32,
        x_start: u32_of(v.start, "offset")?,
        y_start: u32_of(y_start, "offset")?,
        dims: [1; MAX_RANK],
        ..CopyParams::default()
    };
    for (i, ((&d, &xs), &ys)) in v.dims.iter().zip(&v.strides).zip(ys).enumerate() {
        p.dims[i] = u32_of(d, "a dim")?;
        p.x_strides[i] = i32::try_from(xs).map_err(|_| "stride out of the i32 range")?;
        p.y_strides[i] = u32_of(ys, "a stride")?;
    }
    Ok((p, items as u64))
}

/// Padding of `x` into `y` with `mode` (see [`PadParams::mode`]), constant
/// words `value` and per-axis begin pads, for `size`-byte elements.
pub fn pad_params(
    x: &[usize],
    y: &[usize],
    size: usize,
    mode: u32,
    value: [u32; 2],
    begin: &[i64],
) -> LResult<PadParams> {
    let rank = x.len();
    if rank > MAX_RANK || y.len() != rank || begin.len() != rank {
        return Err(format!("padding rank {rank} has no GPU kernel"));
    }
    let mut p = PadParams {
        n: u32_of(y.iter().product(), "size")?,
        words: words(size)?,
        rank: rank as u32,
        mode,
        value,
        out_dims: [1; MAX_RANK],
        in_dims: [1; MAX_RANK],
        pad_begin: [0; MAX_RANK],
    };
    for (i, ((&o, &d), &b)) in y.iter().zip(x).zip(begin).enumerate() {
        p.out_dims[i] = u32_of(o, "a dim")?;
        p.in_dims[i] = u32_of(d, "a dim")?;
        p.pad_begin[i] = i32::try_from(b).map_err(|_| "pad out of the i32 range")?;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_and_slices_are_strided_views() {
        let t = View::transpose(&[2, 3, 4], &[], &[4, 3, 2]).unwrap();
        assert_eq!(t.strides, vec![1, 4, 12]);
        let s = View::slice(&[4, 6], &[2, 3], &[(1, -1, 0, -2), (0, 1, 3, 1)]);
        assert_eq!((s.strides.clone(), s.start), (vec![6, -2], 6 + 5));
        let (p, items) = copy_params(&s, &[3, 1], 0, 4, 32).unwrap();
        assert_eq!((p.n, p.rank, p.x_start, items), (6, 2, 11, 6));
        assert_eq!(p.x_strides[..3], [6, -2, 0]);
        assert_eq!(p.dims[..3], [2, 3, 1]);
        let d = View::depth_to_space(&[1, 8, 2, 3], 2, DepthToSpaceMode::Crd).unwrap();
        assert_eq!(d.dims, vec![1, 2, 2, 2, 3, 2]);
    }

    #[test]
    fn byte_copies_pack_words_and_need_a_dense_output() {
        let v = View::dense(&[3, 3]);
        let (p, items) = copy_params(&v, &[3, 1], 0, 1, 8).unwrap();
        assert_eq!((p.size, items), (1, 3));
        assert!(copy_params(&v, &[6, 1], 3, 1, 8).is_err());
        assert!(copy_params(&v, &[3, 1], 0, 2, 1).is_err());
    }

    #[test]
    fn pads_carry_dims_and_begins() {
        let p = pad_params(&[2, 3], &[4, 3], 8, 1, [7, 0], &[1, -1]).unwrap();
        assert_eq!((p.n, p.words, p.rank, p.mode), (12, 2, 2, 1));
        assert_eq!(p.pad_begin[..2], [1, -1]);
        assert_eq!(p.in_dims[..3], [2, 3, 1]);
    }
}
