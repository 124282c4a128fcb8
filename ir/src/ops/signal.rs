//! Signal processing: the discrete Fourier transform (DFT), the short-time
//! Fourier transform (STFT) and the mel filter-bank matrix (MelWeightMatrix).
//! Complex tensors are real tensors whose last dim holds `[re, im]`.

use super::{attr_err, value_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::op_attrs;
use crate::shape::{Shape, TensorType};

const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];
const INTS: &[DType] = &[DType::I32, DType::I64];

/// The single integer held by scalar (or one-element) input `port`, if known.
fn scalar_int(cx: &InferCx, port: usize) -> Result<Option<i64>, InferError> {
    if cx.shape(port).numel().known().is_some_and(|n| n != 1) {
        return Err(value_err(port, "must hold exactly one element"));
    }
    Ok(cx.ints(port).and_then(|v| v.first().copied()))
}

op_attrs! {
    /// ONNX DFT along one signal axis of `x [..., 1|2]` (real or complex).
    /// Inputs `x`, then the scalar `dft_length` if `has_length`, then the
    /// scalar i64 axis if `axis_input` (otherwise the `axis` attribute holds it).
    /// `onesided` with `inverse` is the inverse real FFT: a one-sided complex
    /// spectrum in, a real signal (last dim 1) out.
    pub struct Dft {
        pub axis: i64,
        pub inverse: bool,
        pub onesided: bool,
        pub has_length: bool,
        pub axis_input: bool,
    }
}

impl Dft {
    /// The port of the axis input, if any.
    pub fn axis_port(&self) -> Option<usize> {
        self.axis_input.then_some(1 + usize::from(self.has_length))
    }

    /// True for the inverse real FFT.
    pub fn irfft(&self) -> bool {
        self.inverse && self.onesided
    }
}

/// Resolves a DFT axis against `rank`: `[-r, -2]` or `[0, r-2]`.
pub fn dft_axis(axis: i64, rank: usize) -> Result<usize, InferError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r - 1).contains(&a) {
        Ok(a as usize)
    } else {
        Err(InferError::Axis { axis, rank })
    }
}

impl OpDef for Dft {
    fn arity(&self) -> (usize, usize) {
        let n = 1 + usize::from(self.has_length) + usize::from(self.axis_input);
        (n, n)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[1, 2]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, FLOATS)?;
        cx.expect_min_rank(0, 2)?;
        let x = cx.shape(0).0.clone();
        let r = x.len();
        match x[r - 1].known() {
            Some(1) if self.irfft() => {
                return Err(value_err(0, "the inverse real FFT needs complex input"))
            }
            Some(1 | 2) | None => {}
            Some(c) => return Err(value_err(0, format!("last dim {c} is neither 1 nor 2"))),
        }
        let axis = match self.axis_port() {
            Some(port) => {
                cx.expect_dtype(port, INTS)?;
                scalar_int(cx, port)?
            }
            None => Some(self.axis),
        };
        let axis = axis.map(|a| dft_axis(a, r)).transpose()?;
        let length = if self.has_length {
            cx.expect_dtype(1, INTS)?;
            match scalar_int(cx, 1)? {
                Some(n) if n < 1 => return Err(value_err(1, "dft_length must be positive")),
                n => Some(n.map(Dim::Known)),
            }
        } else {
            None
        };
        let mut out = Vec::with_capacity(r);
        for (i, dim) in x[..r - 1].iter().enumerate() {
            let resized = self.onesided || self.has_length;
            out.push(match axis {
                Some(a) if a != i => dim.clone(),
                Some(_) => {
                    let n = match &length {
                        Some(Some(n)) => n.clone(),
                        Some(None) => cx.fresh(0, i),
                        None if self.irfft() => dim.sub(&Dim::Known(1)).mul(&Dim::Known(2)),
                        None => dim.clone(),
                    };
                    if self.onesided && !self.inverse {
                        n.floor_div(&Dim::Known(2))?.add(&Dim::Known(1))
                    } else {
                        n
                    }
                }
                None if resized => cx.fresh(0, i),
                None => dim.clone(),
            });
        }
        out.push(Dim::Known(if self.irfft() { 1 } else { 2 }));
        Ok(vec![TensorType::new(d, Shape(out))])
    }
}

op_attrs! {
    /// ONNX STFT of `signal [B, L, 1|2]` with a scalar `frame_step`, then a
    /// 1-D `window` if `has_window`, then a scalar `frame_length` if
    /// `has_length`. Output `[B, frames, bins, 2]`: `frames = 1 + (L - n) / step`
    /// for the frame length `n` (`frame_length`, else the window's length,
    /// else `L`), and `bins = n/2 + 1` when `onesided`, else `n`.
    pub struct Stft {
        pub onesided: bool,
        pub has_window: bool,
        pub has_length: bool,
    }
}

impl Stft {
    pub fn window_port(&self) -> Option<usize> {
        self.has_window.then_some(2)
    }

    pub fn length_port(&self) -> Option<usize> {
        self.has_length.then_some(2 + usize::from(self.has_window))
    }
}

impl OpDef for Stft {
    fn arity(&self) -> (usize, usize) {
        let n = 2 + usize::from(self.has_window) + usize::from(self.has_length);
        (n, n)
    }
    fn value_ports(&self) -> &'static [usize] {
        if self.has_window {
            &[1, 3]
        } else {
            &[1, 2]
        }
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, FLOATS)?;
        cx.expect_rank(0, 3)?;
        let s = cx.shape(0).0.clone();
        if s[2].known().is_some_and(|c| c != 1 && c != 2) {
            return Err(value_err(0, "last dim must be 1 (real) or 2 (complex)"));
        }
        cx.expect_dtype(1, INTS)?;
        let step = scalar_int(cx, 1)?;
        if step.is_some_and(|v| v < 1) {
            return Err(value_err(1, "frame_step must be positive"));
        }
        if let Some(port) = self.window_port() {
            cx.expect_same_dtype(port, 0)?;
            cx.expect_rank(port, 1)?;
        }
        let n = match self.length_port() {
            Some(port) => {
                cx.expect_dtype(port, INTS)?;
                match scalar_int(cx, port)? {
                    Some(v) if v < 1 => return Err(value_err(port, "must be positive")),
                    Some(v) => Dim::Known(v),
                    None => cx.fresh(0, 2),
                }
            }
            None => match self.window_port() {
                Some(port) => cx.shape(port).0[0].clone(),
                None => s[1].clone(),
            },
        };
        if let (Some(l), Some(nv)) = (s[1].known(), n.known()) {
            if l < nv {
                return Err(value_err(
                    0,
                    format!("signal length {l} is shorter than the frame length {nv}"),
                ));
            }
        }
        let frames = match step {
            Some(st) => s[1].sub(&n).floor_div(&Dim::Known(st))?.add(&Dim::Known(1)),
            None => cx.fresh(0, 1),
        };
        let bins = if self.onesided {
            n.floor_div(&Dim::Known(2))?.add(&Dim::Known(1))
        } else {
            n
        };
        let out = Shape(vec![s[0].clone(), frames, bins, Dim::Known(2)]);
        Ok(vec![TensorType::new(d, out)])
    }
}

op_attrs! {
    /// ONNX MelWeightMatrix: `[dft_length/2 + 1, num_mel_bins]` triangular
    /// filters of `dtype`, from the integer scalars `num_mel_bins`,
    /// `dft_length`, `sample_rate` and the float scalars `lower_edge_hertz`,
    /// `upper_edge_hertz`.
    pub struct MelWeightMatrix {
        pub dtype: DType,
    }
}

impl OpDef for MelWeightMatrix {
    fn arity(&self) -> (usize, usize) {
        (5, 5)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[0, 1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        if self.dtype == DType::Bool || self.dtype.size() == 0 {
            return Err(attr_err("dtype", format!("{} is not numeric", self.dtype)));
        }
        for port in 0..3 {
            cx.expect_dtype(port, INTS)?;
        }
        cx.expect_dtype(3, FLOATS)?;
        cx.expect_same_dtype(4, 3)?;
        let bins = match scalar_int(cx, 0)? {
            Some(v) if v < 1 => return Err(value_err(0, "num_mel_bins must be positive")),
            Some(v) => Dim::Known(v),
            None => cx.fresh(0, 1),
        };
        let spec = match scalar_int(cx, 1)? {
            Some(v) if v < 1 => return Err(value_err(1, "dft_length must be positive")),
            Some(v) => Dim::Known(v / 2 + 1),
            None => cx.fresh(0, 0),
        };
        Ok(vec![TensorType::new(self.dtype, Shape(vec![spec, bins]))])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{KnownValue, Op};
    use crate::tensor::Tensor;

    fn infer(
        op: impl Into<Op>,
        ins: &[TensorType],
        values: &[Option<KnownValue>],
    ) -> Result<Vec<TensorType>, InferError> {
        let mut values = values.to_vec();
        values.resize(ins.len(), None);
        let cx = InferCx {
            inputs: ins,
            values: &values,
            node: "n",
            prior: &[],
        };
        op.into().infer(&cx)
    }

    fn f32s(d: &[usize]) -> TensorType {
        TensorType::known(DType::F32, d)
    }

    fn int(v: i64) -> Option<KnownValue> {
        let t: Tensor = crate::ops::values::int_tensor(DType::I64, &[], &[v])?;
        Some(KnownValue::Tensor(t))
    }

    fn dft(inverse: bool, onesided: bool) -> Dft {
        Dft {
            axis: 1,
            inverse,
            onesided,
            has_length: false,
            axis_input: false,
        }
    }

    #[test]
    fn dft_output_shapes() {
        let x = f32s(&[1, 10, 7, 1]);
        let full = infer(dft(false, false), &[x.clone()], &[]).unwrap();
        assert_eq!(full[0], f32s(&[1, 10, 7, 2]));
        let rfft = infer(dft(false, true), &[x.clone()], &[]).unwrap();
        assert_eq!(rfft[0], f32s(&[1, 6, 7, 2]));
        let irfft = infer(dft(true, true), &[f32s(&[1, 6, 7, 2])], &[]).unwrap();
        assert_eq!(irfft[0], f32s(&[1, 10, 7, 1]));
        assert!(infer(dft(true, true), &[x.clone()], &[]).is_err());
        let last = Dft {
            axis: -1,
            ..dft(false, false)
        };
        assert!(infer(last, &[x.clone()], &[]).is_err());
    }

    #[test]
    fn dft_length_and_axis_inputs() {
        let op = Dft {
            axis: 0,
            inverse: false,
            onesided: true,
            has_length: true,
            axis_input: true,
        };
        assert_eq!(op.axis_port(), Some(2));
        let x = f32s(&[3, 10, 1]);
        let ins = [
            x,
            TensorType::scalar(DType::I64),
            TensorType::scalar(DType::I64),
        ];
        let out = infer(op.clone(), &ins, &[None, int(16), int(-2)]).unwrap();
        assert_eq!(out[0], f32s(&[3, 9, 2]));
        let unknown = infer(op, &ins, &[]).unwrap();
        assert_eq!(unknown[0].rank(), 3);
        assert!(!unknown[0].shape.is_known());
    }

    #[test]
    fn stft_frames_and_bins() {
        let op = Stft {
            onesided: true,
            has_window: true,
            has_length: false,
        };
        let ins = [
            f32s(&[1, 128, 1]),
            TensorType::scalar(DType::I64),
            f32s(&[16]),
        ];
        let out = infer(op.clone(), &ins, &[None, int(8)]).unwrap();
        assert_eq!(out[0], f32s(&[1, 15, 9, 2]));
        assert!(infer(op, &ins, &[None, int(0)]).is_err());
        let two_sided = Stft {
            onesided: false,
            has_window: false,
            has_length: true,
        };
        let ins = [
            f32s(&[2, 20, 2]),
            TensorType::scalar(DType::I32),
            TensorType::scalar(DType::I64),
        ];
        let out = infer(two_sided, &ins, &[None, int(5), int(10)]).unwrap();
        assert_eq!(out[0], f32s(&[2, 3, 10, 2]));
    }

    #[test]
    fn mel_matrix_shape() {
        let op = MelWeightMatrix { dtype: DType::F32 };
        let i = TensorType::scalar(DType::I64);
        let f = TensorType::scalar(DType::F32);
        let ins = [i.clone(), i.clone(), i, f.clone(), f];
        let out = infer(op, &ins, &[int(8), int(16), int(8192)]).unwrap();
        assert_eq!(out[0], f32s(&[9, 8]));
    }
}
