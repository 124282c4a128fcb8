//! The `resize` kernel family: separable f32 resampling, one axis per
//! launch, with nearest, (antialiased) linear and cubic modes and every ONNX
//! coordinate transformation mode. The taps of each output position are
//! computed at plan time from the constant scales, sizes and roi (as the
//! CPU kernel does, in f64) and travel in the launch's parameters, whose
//! tap tables have a length per launch (a [`LayoutBuilder`] layout).

use rlx_ir::ops::resize_taps::{axis_taps, AxisPlan, Taps};
use rlx_ir::ops::{CoordMode, Resize};

use crate::geometry::{axis, u32_of, LResult};
use crate::params::{LayoutBuilder, ParamBlock};

/// The operand names of the resize kernel, in launch order.
pub const RESIZE_OPERANDS: &[&str] = &["x", "y"];

/// The name of the (built) parameter layout. Fields: `n` (outputs), `n_in`
/// and `n_out` (the axis size before and after), `inner` (elements after
/// the axis), `k` (taps per output position), `fill` (one f32: the
/// extrapolation value), then the tap table: `index` and `weight`, `k` per
/// output position, unused taps weighing 0.
pub const RESIZE_PARAMS: &str = "ResizeParams";

/// The largest tap table (index and weight words) one launch carries.
pub const MAX_TABLE_WORDS: usize = 1 << 22;

/// A first tap index marking an output position outside the crop box of
/// `tf_crop_and_resize` (it takes the extrapolation value).
pub const EXTRAPOLATE: u32 = u32::MAX;

/// One axis pass: the dims it reads, the axis, and each output position's taps.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisPass {
    pub dims: Vec<usize>,
    pub axis: usize,
    pub taps: Vec<Taps>,
}

impl AxisPass {
    /// The dims the pass writes.
    pub fn out_dims(&self) -> Vec<usize> {
        let mut d = self.dims.clone();
        d[self.axis] = self.taps.len();
        d
    }
}

/// The passes resizing `x` to `out` with per-axis scales `sc` (as
/// [`Resize::resolve`] gives them) and the roi input (empty if absent),
/// skipping identity axes; a resize that changes nothing is one identity
/// pass over the last axis (a copy).
pub fn passes(
    r: &Resize,
    x: &[usize],
    out: &[i64],
    sc: &[f64],
    roi: &[f64],
) -> LResult<Vec<AxisPass>> {
    let rank = x.len();
    let axes: Vec<usize> = if r.axes.is_empty() {
        (0..rank).collect()
    } else {
        r.axes
            .iter()
            .map(|&a| axis(a, rank))
            .collect::<LResult<_>>()?
    };
    let mut rois = vec![(0.0, 1.0); rank];
    if r.coordinate_transformation_mode == CoordMode::TfCropAndResize {
        if roi.len() != 2 * axes.len() {
            return Err(format!(
                "tf_crop_and_resize needs {} roi values, got {}",
                2 * axes.len(),
                roi.len()
            ));
        }
        for (i, &a) in axes.iter().enumerate() {
            rois[a] = (roi[i], roi[i + axes.len()]);
        }
    }
    let mut sorted = axes.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let mut plans = Vec::new();
    let mut dims = x.to_vec();
    for a in sorted {
        let p = AxisPlan {
            input: dims[a],
            output: out[a] as usize,
            scale: sc[a],
            roi: rois[a],
        };
        let identity = (p.scale - 1.0).abs() <= 1e-9 && p.output == p.input && p.roi == (0.0, 1.0);
        if identity {
            continue;
        }
        if p.input == 0 {
            return Err("resize of an empty axis to a non-empty one".into());
        }
        let pass = AxisPass {
            dims: dims.clone(),
            axis: a,
            taps: axis_taps(r, &p)?,
        };
        dims[a] = p.output;
        plans.push(pass);
    }
    if plans.is_empty() {
        let a = rank.checked_sub(1).ok_or("resize of a scalar")?;
        plans.push(AxisPass {
            dims: x.to_vec(),
            axis: a,
            taps: (0..x[a]).map(|i| Taps::Mix(vec![(i, 1.0)])).collect(),
        });
    }
    Ok(plans)
}

crate::kernel_params! {
    /// One resize pass on CUDA, whose tap table is constant data in the
    /// buffer (an operand, not a parameter): `n_out * k` f64 weights, then
    /// as many u32 input positions ([`tap_table`]).
    pub struct ResizeAxisParams {
        /// Output elements.
        pub n: u32,
        /// The axis size before the pass.
        pub n_in: u32,
        /// The axis size after it.
        pub n_out: u32,
        /// Elements after the axis (at least 1).
        pub inner: u32,
        /// Taps per output position.
        pub k: u32,
        /// The extrapolation value.
        pub fill: f32,
    }
}

/// The operand names of the CUDA resize kernel, in launch order.
pub const RESIZE_AXIS_OPERANDS: &[&str] = &["x", "taps", "y"];

/// Taps per output position of `taps` (the widest), and each position's
/// input indices and weights padded to it.
fn taps_k(taps: &[Taps]) -> usize {
    taps.iter()
        .map(|t| match t {
            Taps::Mix(v) => v.len(),
            Taps::Extrapolate => 1,
        })
        .max()
        .unwrap_or(1)
        .max(1)
}

/// One CUDA pass: its parameters, its tap table's bytes (f64 weights, then
/// u32 input positions, [`EXTRAPOLATE`] first for extrapolated outputs),
/// and its threads (one per output element).
pub fn tap_table(pass: &AxisPass, fill: f32) -> LResult<(ResizeAxisParams, Vec<u8>, u64)> {
    let (dims, a, taps) = (&pass.dims, pass.axis, &pass.taps);
    let inner: usize = dims[a + 1..].iter().product();
    let outer: usize = dims[..a].iter().product();
    let (n_out, k) = (taps.len(), taps_k(taps));
    let mut weight = vec![0f64; n_out * k];
    let mut index = vec![0u32; n_out * k];
    for (y, t) in taps.iter().enumerate() {
        match t {
            Taps::Extrapolate => index[y * k] = EXTRAPOLATE,
            Taps::Mix(v) => {
                for (q, &(i, w)) in v.iter().enumerate() {
                    index[y * k + q] = u32_of(i, "a tap index")?;
                    weight[y * k + q] = w;
                }
            }
        }
    }
    let mut bytes = Vec::with_capacity(n_out * k * 12);
    for w in &weight {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    for i in &index {
        bytes.extend_from_slice(&i.to_le_bytes());
    }
    let n = outer * n_out * inner;
    let p = ResizeAxisParams {
        n: u32_of(n, "size")?,
        n_in: u32_of(dims[a], "axis size")?,
        n_out: u32_of(n_out, "output axis size")?,
        inner: u32_of(inner.max(1), "inner size")?,
        k: k as u32,
        fill,
    };
    Ok((p, bytes, n as u64))
}

/// The parameters of one pass (layout [`RESIZE_PARAMS`]) and its
/// invocations (one per output element).
pub fn pass_params(pass: &AxisPass, fill: f32) -> LResult<(ParamBlock, u64)> {
    let (dims, a, taps) = (&pass.dims, pass.axis, &pass.taps);
    let inner: usize = dims[a + 1..].iter().product();
    let outer: usize = dims[..a].iter().product();
    let n_out = taps.len();
    let k = taps
        .iter()
        .map(|t| match t {
            Taps::Mix(v) => v.len(),
            Taps::Extrapolate => 1,
        })
        .max()
        .unwrap_or(1)
        .max(1);
    if n_out * k * 2 > MAX_TABLE_WORDS {
        return Err(format!(
            "a resize tap table of {} words exceeds the GPU limit of {MAX_TABLE_WORDS}",
            n_out * k * 2
        ));
    }
    let mut index = vec![0u32; n_out * k];
    let mut weight = vec![0f32; n_out * k];
    for (y, t) in taps.iter().enumerate() {
        match t {
            Taps::Extrapolate => index[y * k] = EXTRAPOLATE,
            Taps::Mix(v) => {
                for (q, &(i, w)) in v.iter().enumerate() {
                    index[y * k + q] = u32_of(i, "a tap index")?;
                    weight[y * k + q] = w as f32;
                }
            }
        }
    }
    let n = outer * n_out * inner;
    let block = LayoutBuilder::new()
        .u32("n", u32_of(n, "size")?)
        .u32("n_in", u32_of(dims[a], "axis size")?)
        .u32("n_out", u32_of(n_out, "output axis size")?)
        .u32("inner", u32_of(inner.max(1), "inner size")?)
        .u32("k", k as u32)
        .f32s("fill", &[fill])
        .u32s("index", &index)
        .f32s("weight", &weight)
        .build(RESIZE_PARAMS);
    Ok((block, n as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_tables_pad_to_the_widest_position() {
        let pass = AxisPass {
            dims: vec![2, 3, 4],
            axis: 1,
            taps: vec![
                Taps::Mix(vec![(0, 1.0)]),
                Taps::Mix(vec![(1, 0.25), (2, 0.75)]),
                Taps::Extrapolate,
            ],
        };
        assert_eq!(pass.out_dims(), vec![2, 3, 4]);
        let (b, items) = pass_params(&pass, -1.5).unwrap();
        assert_eq!(items, 24);
        assert_eq!(
            b.to_string(),
            "n=24 n_in=3 n_out=3 inner=4 k=2 fill=[-1.5] \
             index=[0,0,1,2,4294967295,0] weight=[1.0,0.0,0.25,0.75,0.0,0.0]"
        );
        let (p, bytes, n) = tap_table(&pass, 2.0).unwrap();
        assert_eq!((p.n, p.k, p.n_out, n), (24, 2, 3, 24));
        assert_eq!(bytes.len(), 3 * 2 * 12);
        assert_eq!(&bytes[48 + 16..48 + 20], &u32::MAX.to_le_bytes());
    }
}
