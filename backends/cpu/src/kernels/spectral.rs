//! DFT (complex, real-to-complex, inverse and inverse real), STFT and
//! MelWeightMatrix, computed in f64. Power-of-two lengths use a radix-2 FFT,
//! other lengths a direct transform over a twiddle table.

use std::f64::consts::PI;

use rlx_ir::ops::{dft_axis, Dft, Stft};
use rlx_ir::Op;

use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Dft(_) => Ok(fn_kernel(spec, dft)),
        Op::Stft(_) => Ok(fn_kernel(spec, stft)),
        Op::MelWeightMatrix(_) => Ok(fn_kernel(spec, mel_weight_matrix)),
        op => Err(KernelError::Internal(format!(
            "{} is not a signal op",
            op.name()
        ))),
    }
}

/// A complex number as `(re, im)`.
pub type C = (f64, f64);

/// In-place unnormalized DFT of `z` (`e^{-2 pi i kt/n}`, or `e^{+...}` when
/// `inverse`).
pub fn transform(z: &mut [C], inverse: bool) {
    let n = z.len();
    if n < 2 {
        return;
    }
    let sign = if inverse { 1.0 } else { -1.0 };
    if n.is_power_of_two() {
        let bits = n.trailing_zeros();
        for i in 0..n {
            let j = i.reverse_bits() >> (usize::BITS - bits);
            if i < j {
                z.swap(i, j);
            }
        }
        let mut len = 2;
        while len <= n {
            let ang = sign * 2.0 * PI / len as f64;
            for start in (0..n).step_by(len) {
                for k in 0..len / 2 {
                    let (s, c) = (ang * k as f64).sin_cos();
                    let (a, b) = (z[start + k], z[start + k + len / 2]);
                    let t = (b.0 * c - b.1 * s, b.0 * s + b.1 * c);
                    z[start + k] = (a.0 + t.0, a.1 + t.1);
                    z[start + k + len / 2] = (a.0 - t.0, a.1 - t.1);
                }
            }
            len *= 2;
        }
    } else {
        let tw: Vec<C> = (0..n)
            .map(|k| {
                let (s, c) = (sign * 2.0 * PI * k as f64 / n as f64).sin_cos();
                (c, s)
            })
            .collect();
        let src = z.to_vec();
        for (k, out) in z.iter_mut().enumerate() {
            let mut acc = (0.0, 0.0);
            for (t, x) in src.iter().enumerate() {
                let w = tw[(k * t) % n];
                acc.0 += x.0 * w.0 - x.1 * w.1;
                acc.1 += x.0 * w.1 + x.1 * w.0;
            }
            *out = acc;
        }
    }
}

/// How one line is transformed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    /// DFT length.
    pub n: usize,
    pub inverse: bool,
    pub onesided: bool,
}

impl Line {
    fn irfft(&self) -> bool {
        self.inverse && self.onesided
    }

    /// Output points per line.
    pub fn out_len(&self) -> usize {
        if self.onesided && !self.inverse {
            self.n / 2 + 1
        } else {
            self.n
        }
    }

    /// Transforms `input` (its first `n` values, zero-padded) into `out`
    /// (`out_len` values; only the real parts matter for the inverse real FFT).
    pub fn run(&self, input: &[C], buf: &mut Vec<C>) {
        let n = self.n;
        buf.clear();
        if self.irfft() {
            // Rebuild the Hermitian spectrum from its first n/2 + 1 points.
            let at = |k: usize| input.get(k).copied().unwrap_or((0.0, 0.0));
            buf.extend((0..n).map(|k| {
                if k <= n / 2 {
                    at(k)
                } else {
                    let (re, im) = at(n - k);
                    (re, -im)
                }
            }));
        } else {
            buf.extend((0..n).map(|t| input.get(t).copied().unwrap_or((0.0, 0.0))));
        }
        transform(buf, self.inverse);
        if self.inverse {
            let s = 1.0 / n as f64;
            buf.iter_mut().for_each(|v| *v = (v.0 * s, v.1 * s));
        }
        buf.truncate(self.out_len());
    }
}

/// A one-element integer input as usize, checked to be at least `min`.
fn scalar(t: &TensorRef, what: &str, min: i64) -> Result<usize, KernelError> {
    match t.to_i64s()?[..] {
        [v] if v >= min => Ok(v as usize),
        _ => Err(KernelError::Value(format!(
            "{what} must be one integer >= {min}"
        ))),
    }
}

fn check_out(out: &TensorMut, want: &[usize]) -> Result<(), KernelError> {
    if out.dims == want {
        Ok(())
    } else {
        Err(KernelError::Value(format!(
            "the input values give shape {want:?}, the plan expects {:?}",
            out.dims
        )))
    }
}

fn dft(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Dft(d) = op else {
        return Err(KernelError::Internal("not a DFT".into()));
    };
    let dims = ins[0].dims;
    let r = dims.len();
    let comps = dims.last().copied().unwrap_or(0);
    if r < 2 || !(comps == 1 || comps == 2) || (d.irfft() && comps != 2) {
        return Err(KernelError::Value(format!("bad DFT input shape {dims:?}")));
    }
    let axis = match Dft::axis_port(d) {
        Some(p) => ins[p].to_i64s()?.first().copied().unwrap_or(d.axis),
        None => d.axis,
    };
    let a = dft_axis(axis, r).map_err(|e| KernelError::Value(e.to_string()))?;
    let len_in = dims[a];
    let n = if d.has_length {
        scalar(&ins[1], "dft_length", 1)?
    } else if d.irfft() {
        2 * len_in.saturating_sub(1)
    } else {
        len_in
    };
    if n == 0 {
        return Err(KernelError::Value("the DFT length is 0".into()));
    }
    let line = Line {
        n,
        inverse: d.inverse,
        onesided: d.onesided,
    };
    let out_comps = if d.irfft() { 1 } else { 2 };
    let mut want = dims.to_vec();
    want[a] = line.out_len();
    want[r - 1] = out_comps;
    check_out(&outs[0], &want)?;
    let x = ins[0].to_f64s()?;
    let outer: usize = dims[..a].iter().product();
    let inner: usize = dims[a + 1..r - 1].iter().product();
    let out_len = line.out_len();
    let mut y = vec![0.0; outer * out_len * inner * out_comps];
    let (mut input, mut buf) = (Vec::with_capacity(len_in), Vec::with_capacity(n));
    for o in 0..outer {
        for i in 0..inner {
            input.clear();
            input.extend((0..len_in).map(|t| {
                let at = ((o * len_in + t) * inner + i) * comps;
                (x[at], if comps == 2 { x[at + 1] } else { 0.0 })
            }));
            line.run(&input, &mut buf);
            for (k, v) in buf.iter().enumerate() {
                let at = ((o * out_len + k) * inner + i) * out_comps;
                y[at] = v.0;
                if out_comps == 2 {
                    y[at + 1] = v.1;
                }
            }
        }
    }
    outs[0].store_f64s(&y)
}

fn stft(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Stft(s) = op else {
        return Err(KernelError::Internal("not an STFT".into()));
    };
    let [batch, len, comps] = ins[0].dims[..] else {
        return Err(KernelError::Value("the signal must be rank 3".into()));
    };
    if !(comps == 1 || comps == 2) {
        return Err(KernelError::Value(
            "the signal's last dim must be 1 or 2".into(),
        ));
    }
    let step = scalar(&ins[1], "frame_step", 1)?;
    let window = Stft::window_port(s).map(|p| ins[p].to_f64s()).transpose()?;
    let n = match Stft::length_port(s) {
        Some(p) => scalar(&ins[p], "frame_length", 1)?,
        None => window.as_ref().map_or(len, Vec::len),
    };
    if n == 0 || n > len {
        return Err(KernelError::Value(format!(
            "frame length {n} does not fit the signal length {len}"
        )));
    }
    let window = window.unwrap_or_else(|| vec![1.0; n]);
    let frames = 1 + (len - n) / step;
    let line = Line {
        n,
        inverse: false,
        onesided: s.onesided,
    };
    let bins = line.out_len();
    check_out(&outs[0], &[batch, frames, bins, 2])?;
    let x = ins[0].to_f64s()?;
    let mut y = vec![0.0; batch * frames * bins * 2];
    let (mut input, mut buf) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for b in 0..batch {
        for f in 0..frames {
            input.clear();
            input.extend((0..n).map(|j| {
                let t = f * step + j;
                match window.get(j) {
                    Some(w) if t < len => {
                        let at = (b * len + t) * comps;
                        let im = if comps == 2 { x[at + 1] } else { 0.0 };
                        (x[at] * w, im * w)
                    }
                    _ => (0.0, 0.0),
                }
            }));
            line.run(&input, &mut buf);
            for (k, v) in buf.iter().enumerate() {
                let at = ((b * frames + f) * bins + k) * 2;
                y[at] = v.0;
                y[at + 1] = v.1;
            }
        }
    }
    outs[0].store_f64s(&y)
}

/// The `[dft_length/2 + 1, num_mel_bins]` matrix of ONNX's MelWeightMatrix.
pub fn mel_matrix(
    bins: usize,
    dft_length: usize,
    sample_rate: f64,
    lower: f64,
    upper: f64,
) -> Result<Vec<f64>, KernelError> {
    let spec = dft_length / 2 + 1;
    let mel = |hz: f64| 2595.0 * (1.0 + hz / 700.0).log10();
    let (low, high) = (mel(lower), mel(upper));
    let step = (high - low) / (bins + 2) as f64;
    let edges: Vec<i64> = (0..bins + 2)
        .map(|i| {
            let hz = 700.0 * (10f64.powf((i as f64 * step + low) / 2595.0) - 1.0);
            ((dft_length + 1) as f64 * hz / sample_rate).floor() as i64
        })
        .collect();
    if edges.iter().any(|&e| e < 0 || e as usize >= spec) {
        return Err(KernelError::Value(format!(
            "the band edges {edges:?} fall outside the {spec} spectrogram bins"
        )));
    }
    let mut out = vec![0.0; spec * bins];
    for i in 0..bins {
        let (lo, mid, hi) = (edges[i], edges[i + 1], edges[i + 2]);
        if mid == lo {
            out[mid as usize * bins + i] = 1.0;
        } else {
            for j in lo..=mid {
                out[j as usize * bins + i] = (j - lo) as f64 / (mid - lo) as f64;
            }
        }
        if hi > mid {
            for j in mid..hi {
                out[j as usize * bins + i] = (hi - j) as f64 / (hi - mid) as f64;
            }
        }
    }
    Ok(out)
}

fn mel_weight_matrix(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let bins = scalar(&ins[0], "num_mel_bins", 1)?;
    let dft_length = scalar(&ins[1], "dft_length", 1)?;
    let rate = scalar(&ins[2], "sample_rate", 1)? as f64;
    let edge = |i: usize| -> Result<f64, KernelError> {
        match ins[i].to_f64s()?[..] {
            [v] if v.is_finite() => Ok(v),
            _ => Err(KernelError::Value(
                "the edge frequencies must be finite scalars".into(),
            )),
        }
    };
    check_out(&outs[0], &[dft_length / 2 + 1, bins])?;
    let m = mel_matrix(bins, dft_length, rate, edge(3)?, edge(4)?)?;
    outs[0].store_f64s(&m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[C], inverse: bool) -> Vec<C> {
        let n = x.len() as f64;
        let s = if inverse { 1.0 } else { -1.0 };
        (0..x.len())
            .map(|k| {
                x.iter().enumerate().fold((0.0, 0.0), |acc, (t, v)| {
                    let (sn, cs) = (s * 2.0 * PI * (k * t) as f64 / n).sin_cos();
                    (acc.0 + v.0 * cs - v.1 * sn, acc.1 + v.0 * sn + v.1 * cs)
                })
            })
            .collect()
    }

    fn close(a: &[C], b: &[C]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (x.0 - y.0).abs() < 1e-9 && (x.1 - y.1).abs() < 1e-9)
    }

    #[test]
    fn fft_matches_the_definition() {
        for n in [1, 2, 3, 5, 8, 12, 16] {
            let x: Vec<C> = (0..n)
                .map(|i| (i as f64 * 0.5 - 1.0, (i % 3) as f64))
                .collect();
            for inverse in [false, true] {
                let mut z = x.clone();
                transform(&mut z, inverse);
                assert!(close(&z, &naive(&x, inverse)), "n = {n}");
            }
        }
    }

    #[test]
    fn known_spectra() {
        // DFT of [1, 1, 1, 1] is [4, 0, 0, 0]; of [1, -1] is [0, 2].
        let mut z = vec![(1.0, 0.0); 4];
        transform(&mut z, false);
        assert!(close(&z, &[(4.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)]));
        let rfft = Line {
            n: 4,
            inverse: false,
            onesided: true,
        };
        let mut buf = Vec::new();
        // Zero-padded to 4: [1, 2, 0, 0] -> [3, 1-2i, -1] one-sided.
        rfft.run(&[(1.0, 0.0), (2.0, 0.0)], &mut buf);
        assert!(close(&buf, &[(3.0, 0.0), (1.0, -2.0), (-1.0, 0.0)]));
        // The inverse real FFT of that half spectrum gives the signal back.
        let irfft = Line {
            n: 4,
            inverse: true,
            onesided: true,
        };
        let half = buf.clone();
        irfft.run(&half, &mut buf);
        let re: Vec<f64> = buf.iter().map(|v| (v.0 * 1e9).round() / 1e9).collect();
        assert_eq!(re, vec![1.0, 2.0, 0.0, 0.0]);
    }

    #[test]
    fn mel_triangles() {
        // 8 bins over [0, 4096] Hz of a 16-point DFT at 8192 Hz: edges
        // [0, 0, 0, 1, 1, 2, 3, 4, 5, 6] (ONNX's reference values).
        let m = mel_matrix(8, 16, 8192.0, 0.0, 4096.0).unwrap();
        assert_eq!(m.len(), 9 * 8);
        let at = |j: usize, i: usize| m[j * 8 + i];
        assert_eq!(at(0, 0), 1.0); // lo == mid == 0
        assert_eq!(at(0, 1), 1.0); // lo = mid = 0, hi = 1: the peak at 0
        assert_eq!((at(0, 2), at(1, 2)), (0.0, 1.0));
        assert_eq!((at(5, 7), at(6, 7)), (1.0, 0.0));
        assert!(mel_matrix(8, 16, 8192.0, 0.0, 9000.0).is_err());
    }
}
