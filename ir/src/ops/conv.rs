//! Convolution and pooling: Conv (1/2/3-D, grouped, dilated), its fused form,
//! ConvTranspose, DeformConv, Col2Im, max/avg/Lp pooling, global pooling,
//! MaxUnpool and local response normalization.
//!
//! Spatial attributes are always explicit in the IR (the importer fills ONNX
//! defaults). `pads` lists all begins, then all ends. Output sizes are computed
//! on dims, so symbolic spatial sizes stay symbolic.

use super::Activation;
use super::{attr_err, value_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, kinded_op, op_attrs};

const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

attr_enum! {
    /// ONNX `auto_pad`: explicit pads, or padding computed from the input size.
    pub enum AutoPad { NotSet = "notset", SameUpper = "same_upper", SameLower = "same_lower", Valid = "valid" }
}

/// Spatial geometry shared by convolutions and pools.
#[derive(Debug, Clone, PartialEq)]
pub struct SpatialWindow<'a> {
    pub kernel: &'a [Dim],
    pub strides: &'a [i64],
    pub dilations: &'a [i64],
    pub pads: &'a [i64],
    pub auto_pad: AutoPad,
}

impl SpatialWindow<'_> {
    fn check(&self) -> Result<usize, InferError> {
        let n = self.kernel.len();
        if self.strides.len() != n || self.dilations.len() != n {
            return Err(attr_err(
                "strides",
                format!("strides and dilations need {n} values"),
            ));
        }
        if self.auto_pad == AutoPad::NotSet && self.pads.len() != 2 * n {
            return Err(attr_err(
                "pads",
                format!("{} values for {n} spatial dims", self.pads.len()),
            ));
        }
        if self.strides.iter().chain(self.dilations).any(|&v| v < 1) {
            return Err(attr_err(
                "strides",
                "strides and dilations must be positive",
            ));
        }
        if self.pads.iter().any(|&p| p < 0) {
            return Err(attr_err("pads", "pads must be non-negative"));
        }
        // A kernel of 0 (or less) covers nothing: refused, not run.
        if self.kernel.iter().any(|k| k.known().is_some_and(|k| k < 1)) {
            return Err(attr_err("kernel_shape", "kernel sizes must be positive"));
        }
        Ok(n)
    }

    /// Output spatial sizes for `input` spatial sizes (floor mode, or ceil
    /// mode for pools); a window that does not fit the padded input is an
    /// error (a convolution's).
    pub fn output(&self, input: &[Dim], ceil_mode: bool) -> Result<Vec<Dim>, InferError> {
        self.sizes(input, ceil_mode, 1)
    }

    /// A pool's output sizes: as [`SpatialWindow::output`], but a window
    /// that just does not fit gives an axis of 0 windows (an empty output,
    /// as ONNX Runtime gives), where a convolution's is an error.
    pub fn pool_output(&self, input: &[Dim], ceil_mode: bool) -> Result<Vec<Dim>, InferError> {
        self.sizes(input, ceil_mode, 0)
    }

    /// The output sizes, each at least `least` where known.
    fn sizes(&self, input: &[Dim], ceil_mode: bool, least: i64) -> Result<Vec<Dim>, InferError> {
        let n = self.check()?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let s = Dim::Known(self.strides[i]);
            let extent = self.kernel[i]
                .sub(&Dim::Known(1))
                .mul(&Dim::Known(self.dilations[i]))
                .add(&Dim::Known(1));
            let o = match self.auto_pad {
                AutoPad::SameUpper | AutoPad::SameLower => input[i].ceil_div(&s)?,
                AutoPad::Valid | AutoPad::NotSet => {
                    let (pb, pe) = if self.auto_pad == AutoPad::Valid {
                        (0, 0)
                    } else {
                        (self.pads[i], self.pads[i + n])
                    };
                    let span = input[i].add(&Dim::Known(pb + pe)).sub(&extent);
                    if ceil_mode {
                        // A window may not start inside the end padding.
                        let o = span.ceil_div(&s)?.add(&Dim::Known(1));
                        let limit = input[i]
                            .add(&Dim::Known(pb - 1))
                            .floor_div(&s)?
                            .add(&Dim::Known(1));
                        o.min_dim(&limit)
                    } else {
                        span.floor_div(&s)?.add(&Dim::Known(1))
                    }
                }
            };
            if let Some(v) = o.known() {
                if v < least {
                    return Err(InferError::Mismatch {
                        what: "window larger than padded input",
                        a: input[i].to_string(),
                        b: extent.to_string(),
                    });
                }
            }
            out.push(o);
        }
        Ok(out)
    }
}

/// Concrete begin/end pads for a window over concrete input sizes.
pub fn resolve_pads(
    auto_pad: AutoPad,
    pads: &[i64],
    input: &[i64],
    kernel: &[i64],
    strides: &[i64],
    dilations: &[i64],
) -> Vec<i64> {
    let n = input.len();
    match auto_pad {
        AutoPad::NotSet => pads.to_vec(),
        AutoPad::Valid => vec![0; 2 * n],
        AutoPad::SameUpper | AutoPad::SameLower => {
            let mut p = vec![0; 2 * n];
            for i in 0..n {
                let out = (input[i] + strides[i] - 1) / strides[i];
                let extent = (kernel[i] - 1) * dilations[i] + 1;
                let total = ((out - 1) * strides[i] + extent - input[i]).max(0);
                let small = total / 2;
                let (b, e) = if auto_pad == AutoPad::SameUpper {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                p[i] = b;
                p[i + n] = e;
            }
            p
        }
    }
}

op_attrs! {
    /// Convolution; inputs `x [N,C,*]`, `w [M,C/group,*k]`, optional `bias [M]`.
    pub struct Conv {
        pub strides: Vec<i64>,
        pub dilations: Vec<i64>,
        pub pads: Vec<i64>,
        pub auto_pad: AutoPad,
        pub group: i64,
    }
}

/// A bias (input 2) of one value per output channel, where both are known.
fn bias_fits(cx: &InferCx, channels: &Dim) -> Result<(), InferError> {
    if let (Some(b), Some(m)) = (cx.shape(2).0[0].known(), channels.known()) {
        if b != m {
            return Err(InferError::Mismatch {
                what: "bias length vs output channels",
                a: b.to_string(),
                b: m.to_string(),
            });
        }
    }
    Ok(())
}

fn conv_infer(c: &Conv, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
    let d = cx.expect_dtype(
        0,
        &[DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32],
    )?;
    cx.expect_same_dtype(1, 0)?;
    cx.expect_min_rank(0, 3)?;
    let (x, w) = (cx.shape(0), cx.shape(1));
    if w.rank() != x.rank() {
        return Err(InferError::Rank {
            port: 1,
            got: w.rank(),
            expected: x.rank().to_string(),
        });
    }
    if c.group < 1 {
        return Err(attr_err("group", "must be positive"));
    }
    if let (Some(cin), Some(wc)) = (x.0[1].known(), w.0[1].known()) {
        let want = i128::from(wc) * i128::from(c.group);
        if i128::from(cin) != want {
            return Err(InferError::Mismatch {
                what: "input channels vs weight channels * group",
                a: cin.to_string(),
                b: want.to_string(),
            });
        }
    }
    if cx.has(2) {
        cx.expect_same_dtype(2, 0)?;
        cx.expect_rank(2, 1)?;
        bias_fits(cx, &w.0[0])?;
    }
    let win = SpatialWindow {
        kernel: &w.0[2..],
        strides: &c.strides,
        dilations: &c.dilations,
        pads: &c.pads,
        auto_pad: c.auto_pad,
    };
    let mut out = vec![x.0[0].clone(), w.0[0].clone()];
    out.extend(win.output(&x.0[2..], false)?);
    Ok(vec![TensorType::new(d, Shape(out))])
}

impl OpDef for Conv {
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        conv_infer(self, cx)
    }
}

op_attrs! {
    /// `activation(conv(x, w) + bias + residual)`, made by fusion; inputs
    /// `x`, `w`, optional `bias [M]`, and an optional `residual` of the
    /// output's type (which needs the bias before it).
    pub struct FusedConv {
        pub strides: Vec<i64>,
        pub dilations: Vec<i64>,
        pub pads: Vec<i64>,
        pub auto_pad: AutoPad,
        pub group: i64,
        pub activation: Activation,
    }
}

impl FusedConv {
    pub fn conv(&self) -> Conv {
        Conv {
            strides: self.strides.clone(),
            dilations: self.dilations.clone(),
            pads: self.pads.clone(),
            auto_pad: self.auto_pad,
            group: self.group,
        }
    }
}

impl OpDef for FusedConv {
    fn arity(&self) -> (usize, usize) {
        (2, 4)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let out = conv_infer(&self.conv(), cx)?;
        if cx.has(3) {
            cx.expect_same_dtype(3, 0)?;
            let (r, y) = (cx.shape(3), &out[0].shape);
            cx.expect_rank(3, y.rank())?;
            for (a, b) in r.0.iter().zip(&y.0) {
                if let (Some(a), Some(b)) = (a.known(), b.known()) {
                    if a != b {
                        return Err(InferError::Mismatch {
                            what: "residual dims vs output dims",
                            a: r.to_string(),
                            b: y.to_string(),
                        });
                    }
                }
            }
        }
        Ok(out)
    }
}

op_attrs! {
    /// Transposed convolution; inputs `x [N,C,*]`, `w [C,M/group,*k]`, optional `bias [M]`.
    /// A non-empty `output_shape` (spatial sizes) fixes the output and the pads.
    pub struct ConvTranspose {
        pub strides: Vec<i64>,
        pub dilations: Vec<i64>,
        pub pads: Vec<i64>,
        pub auto_pad: AutoPad,
        pub group: i64,
        pub output_padding: Vec<i64>,
        pub output_shape: Vec<i64>,
    }
}

impl ConvTranspose {
    /// Concrete pads and output sizes for concrete input and kernel sizes.
    pub fn resolve(&self, input: &[i64], kernel: &[i64]) -> (Vec<i64>, Vec<i64>) {
        let n = input.len();
        let full: Vec<i64> = (0..n)
            .map(|i| {
                self.strides[i] * (input[i] - 1)
                    + self.output_padding[i]
                    + (kernel[i] - 1) * self.dilations[i]
                    + 1
            })
            .collect();
        let target: Option<Vec<i64>> = if !self.output_shape.is_empty() {
            Some(self.output_shape[self.output_shape.len() - n..].to_vec())
        } else if matches!(self.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
            Some((0..n).map(|i| input[i] * self.strides[i]).collect())
        } else {
            None
        };
        match target {
            Some(out) => {
                let mut pads = vec![0; 2 * n];
                for i in 0..n {
                    // Floor division, as in the ONNX reference: an output
                    // larger than the full size (negative total) pads the end.
                    let total = full[i] - out[i];
                    let half = total.div_euclid(2);
                    let (b, e) = if self.auto_pad == AutoPad::SameUpper {
                        (half, total - half)
                    } else {
                        (total - half, half)
                    };
                    pads[i] = b;
                    pads[i + n] = e;
                }
                (pads, out)
            }
            None => {
                let pads = if self.auto_pad == AutoPad::Valid {
                    vec![0; 2 * n]
                } else {
                    self.pads.clone()
                };
                let out = (0..n).map(|i| full[i] - pads[i] - pads[i + n]).collect();
                (pads, out)
            }
        }
    }
}

impl OpDef for ConvTranspose {
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, FLOATS)?;
        cx.expect_same_dtype(1, 0)?;
        cx.expect_min_rank(0, 3)?;
        let (x, w) = (cx.shape(0), cx.shape(1));
        let n = x.rank() - 2;
        if w.rank() != x.rank() {
            return Err(InferError::Rank {
                port: 1,
                got: w.rank(),
                expected: x.rank().to_string(),
            });
        }
        if self.strides.len() != n || self.dilations.len() != n || self.output_padding.len() != n {
            return Err(attr_err(
                "strides",
                format!("strides, dilations and output_padding need {n} values"),
            ));
        }
        if self.auto_pad == AutoPad::NotSet && self.pads.len() != 2 * n {
            return Err(attr_err(
                "pads",
                format!("{} values for {n} spatial dims", self.pads.len()),
            ));
        }
        if !self.output_shape.is_empty() && self.output_shape.len() < n {
            return Err(attr_err("output_shape", format!("needs {n} spatial sizes")));
        }
        if self.group < 1 {
            return Err(attr_err("group", "must be positive"));
        }
        // An output padding adds positions a stride (or dilation) would
        // have produced; past that it asks for ones no input reaches.
        for i in 0..n {
            let most = self.strides[i].max(self.dilations[i]);
            if self.output_padding[i] < 0 || self.output_padding[i] >= most {
                return Err(attr_err(
                    "output_padding",
                    format!(
                        "{} on spatial axis {i}: must be at least 0 and less than the stride or \
                         dilation ({most})",
                        self.output_padding[i]
                    ),
                ));
            }
        }
        // Weights `[C, M/group, k...]` over an input of C channels.
        if let (Some(c), Some(wc)) = (x.0[1].known(), w.0[0].known()) {
            if c != wc || c % self.group != 0 {
                return Err(InferError::Mismatch {
                    what: "input channels vs weight rows (a multiple of group)",
                    a: c.to_string(),
                    b: format!("{wc} in {} groups", self.group),
                });
            }
        }
        let m = w.0[1].mul(&Dim::Known(self.group));
        if cx.has(2) {
            cx.expect_same_dtype(2, 0)?;
            cx.expect_rank(2, 1)?;
            bias_fits(cx, &m)?;
        }
        let mut out = vec![x.0[0].clone(), m];
        if !self.output_shape.is_empty() {
            out.extend(
                self.output_shape[self.output_shape.len() - n..]
                    .iter()
                    .map(|&v| Dim::Known(v)),
            );
        } else {
            for i in 0..n {
                let s = Dim::Known(self.strides[i]);
                let o = match self.auto_pad {
                    AutoPad::SameUpper | AutoPad::SameLower => x.0[i + 2].mul(&s),
                    _ => {
                        let (pb, pe) = if self.auto_pad == AutoPad::Valid {
                            (0, 0)
                        } else {
                            (self.pads[i], self.pads[i + n])
                        };
                        x.0[i + 2]
                            .sub(&Dim::Known(1))
                            .mul(&s)
                            .add(&Dim::Known(self.output_padding[i] + 1 - pb - pe))
                            .add(
                                &w.0[i + 2]
                                    .sub(&Dim::Known(1))
                                    .mul(&Dim::Known(self.dilations[i])),
                            )
                    }
                };
                out.push(o);
            }
        }
        Ok(vec![TensorType::new(d, Shape(out))])
    }
}

op_attrs! {
    /// Deformable convolution; inputs `x`, `w`, `offset`, optional `bias`, optional `mask`.
    pub struct DeformConv {
        pub strides: Vec<i64>,
        pub dilations: Vec<i64>,
        pub pads: Vec<i64>,
        pub group: i64,
        pub offset_group: i64,
        pub has_bias: bool,
        pub has_mask: bool,
    }
}

impl OpDef for DeformConv {
    fn arity(&self) -> (usize, usize) {
        (3, 5)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, FLOATS)?;
        cx.expect_rank(0, 4)?;
        let (x, w) = (cx.shape(0), cx.shape(1));
        let win = SpatialWindow {
            kernel: &w.0[2..],
            strides: &self.strides,
            dilations: &self.dilations,
            pads: &self.pads,
            auto_pad: AutoPad::NotSet,
        };
        let mut out = vec![x.0[0].clone(), w.0[0].clone()];
        out.extend(win.output(&x.0[2..], false)?);
        Ok(vec![TensorType::new(d, Shape(out))])
    }
}

op_attrs! {
    /// Rearranges column blocks into an image; inputs `x [N, C*prod(block), L]`,
    /// `image_shape`, `block_shape` (constants).
    pub struct Col2Im {
        pub strides: Vec<i64>,
        pub dilations: Vec<i64>,
        pub pads: Vec<i64>,
    }
}

impl OpDef for Col2Im {
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1, 2]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_rank(0, 3)?;
        let x = cx.shape(0);
        let (Some(img), Some(block)) = (cx.ints(1), cx.ints(2)) else {
            let n = cx.shape(1).0.first().and_then(Dim::known).unwrap_or(0) as usize;
            let mut s = vec![x.0[0].clone(), cx.fresh(0, 1)];
            s.extend((0..n).map(|a| cx.fresh(0, a + 2)));
            return Ok(vec![TensorType::new(cx.dtype(0), Shape(s))]);
        };
        let bp = block
            .iter()
            .try_fold(1i64, |a, &b| a.checked_mul(b))
            .ok_or_else(|| value_err(2, "the block's size overflows i64"))?;
        let c = x.0[1].floor_div(&Dim::Known(bp.max(1)))?;
        let mut s = vec![x.0[0].clone(), c];
        s.extend(img.iter().map(|&v| Dim::Known(v)));
        Ok(vec![TensorType::new(cx.dtype(0), Shape(s))])
    }
}

attr_enum! {
    pub enum PoolKind { Max = "max_pool", Avg = "avg_pool", Lp = "lp_pool" }
}

kinded_op! {
    /// Windowed pooling. `p` is the norm of Lp pooling; `with_indices` adds the
    /// flat argmax indices output of max pooling.
    pub struct Pool [PoolKind] {
        pub kernel_shape: Vec<i64>,
        pub strides: Vec<i64>,
        pub dilations: Vec<i64>,
        pub pads: Vec<i64>,
        pub auto_pad: AutoPad,
        pub ceil_mode: bool,
        pub count_include_pad: bool,
        pub p: i64,
        pub storage_order: i64,
        pub with_indices: bool,
    }
}

impl OpDef for Pool {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let allowed: &[DType] = if self.kind == PoolKind::Max {
            &[
                DType::F32,
                DType::F64,
                DType::F16,
                DType::BF16,
                DType::I8,
                DType::U8,
            ]
        } else {
            FLOATS
        };
        let d = cx.expect_dtype(0, allowed)?;
        cx.expect_min_rank(0, 3)?;
        let x = cx.shape(0);
        if self.kernel_shape.len() != x.rank() - 2 {
            return Err(attr_err(
                "kernel_shape",
                format!(
                    "{} values for {} spatial dims",
                    self.kernel_shape.len(),
                    x.rank() - 2
                ),
            ));
        }
        let k: Vec<Dim> = self.kernel_shape.iter().map(|&v| Dim::Known(v)).collect();
        let win = SpatialWindow {
            kernel: &k,
            strides: &self.strides,
            dilations: &self.dilations,
            pads: &self.pads,
            auto_pad: self.auto_pad,
        };
        let mut out = vec![x.0[0].clone(), x.0[1].clone()];
        out.extend(win.pool_output(&x.0[2..], self.ceil_mode)?);
        let shape = Shape(out);
        let mut v = vec![TensorType::new(d, shape.clone())];
        if self.with_indices {
            v.push(TensorType::new(DType::I64, shape));
        }
        Ok(v)
    }
}

attr_enum! {
    pub enum GlobalPoolKind { Max = "global_max_pool", Avg = "global_avg_pool", Lp = "global_lp_pool" }
}

kinded_op! {
    /// Pooling over all spatial dims; output `[N, C, 1, ...]`.
    pub struct GlobalPool [GlobalPoolKind] {
        pub p: i64,
    }
}

impl OpDef for GlobalPool {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, FLOATS)?;
        cx.expect_min_rank(0, 3)?;
        let x = cx.shape(0);
        let mut out = vec![x.0[0].clone(), x.0[1].clone()];
        out.extend((2..x.rank()).map(|_| Dim::Known(1)));
        Ok(vec![TensorType::new(d, Shape(out))])
    }
}

op_attrs! {
    /// Inverse of max pooling; inputs `x`, `indices` and an optional constant `output_shape`.
    pub struct MaxUnpool {
        pub kernel_shape: Vec<i64>,
        pub strides: Vec<i64>,
        pub pads: Vec<i64>,
    }
}

impl OpDef for MaxUnpool {
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[2]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, FLOATS)?;
        cx.expect_dtype(1, &[DType::I64])?;
        let x = cx.shape(0);
        let n = x.rank().saturating_sub(2);
        if cx.has(2) {
            return Ok(vec![TensorType::new(
                d,
                match cx.dims_value(2) {
                    Some(v) => Shape(v),
                    None => cx.fresh_shape(0, x.rank())?,
                },
            )]);
        }
        if self.kernel_shape.len() != n || self.strides.len() != n || self.pads.len() != 2 * n {
            return Err(attr_err(
                "kernel_shape",
                format!("kernel_shape, strides and pads need {n} spatial values"),
            ));
        }
        let mut out = vec![x.0[0].clone(), x.0[1].clone()];
        for i in 0..n {
            out.push(
                x.0[i + 2]
                    .sub(&Dim::Known(1))
                    .mul(&Dim::Known(self.strides[i]))
                    .add(&Dim::Known(
                        self.kernel_shape[i] - self.pads[i] - self.pads[i + n],
                    )),
            );
        }
        Ok(vec![TensorType::new(d, Shape(out))])
    }
}

op_attrs! {
    /// Local response normalization across channels.
    pub struct Lrn {
        pub size: i64,
        pub alpha: f32,
        pub beta: f32,
        pub bias: f32,
    }
}

impl OpDef for Lrn {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, FLOATS)?;
        cx.expect_min_rank(0, 2)?;
        if self.size < 1 {
            return Err(attr_err("size", "must be positive"));
        }
        Ok(vec![cx.ty(0).clone()])
    }
}

#[cfg(test)]
mod tests {
    use crate::text::parse_graph;

    fn infer(node: &str, out: &str) -> Result<String, String> {
        let text = format!(
            "rlx-ir 2\ngraph {{\n  %0 = input \"x\" : f32[1,1,3,5]\n  %1 = constant f32[1,1,4,2] [1, 1, 1, 1, 1, 1, 1, 1] : f32[1,1,4,2]\n  %2 = {node} : {out}\n  output \"y\" = %2\n}}\n"
        );
        let mut g = parse_graph(&text).map_err(|e| e.to_string())?;
        crate::analysis::infer_graph(&mut g, None).map_err(|e| e.to_string())?;
        Ok(g.ty(g.outputs()[0].value).to_string())
    }

    /// A pool window taller than its input gives no windows along that axis
    /// (ONNX Runtime's empty output); a convolution's is an error.
    #[test]
    fn a_window_past_the_input_is_an_empty_pool_and_a_conv_error() {
        let pool = "avg_pool(%0) {kernel_shape=[4, 2], strides=[1, 1], dilations=[1, 1], pads=[0, 0, 0, 0], auto_pad=notset, ceil_mode=false, count_include_pad=false, p=0, storage_order=0, with_indices=false}";
        assert_eq!(infer(pool, "f32[1,1,0,4]").unwrap(), "f32[1,1,0,4]");
        // Ceil mode at stride 2 keeps the one window that starts inside.
        let ceil = pool
            .replace("strides=[1, 1]", "strides=[2, 2]")
            .replace("ceil_mode=false", "ceil_mode=true");
        assert_eq!(infer(&ceil, "f32[1,1,1,3]").unwrap(), "f32[1,1,1,3]");
        let conv = "conv(%0, %1) {strides=[1, 1], dilations=[1, 1], pads=[0, 0, 0, 0], auto_pad=notset, group=1}";
        let e = infer(conv, "f32[1,1,0,4]").unwrap_err();
        assert!(e.contains("window larger than padded input"), "{e}");
    }
}
