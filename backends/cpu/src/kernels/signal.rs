//! Signal ops: the Hann, Hamming and Blackman windows, and Col2Im.

use std::f64::consts::PI;

use rlx_ir::ops::{RoundMode, WindowKind};
use rlx_ir::Op;

use super::cast::{write, Val};
use super::layout::par_rows;
use super::num::AnyNum;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Window(_) => Ok(fn_kernel(spec, window)),
        Op::Col2Im(_) => Ok(fn_kernel(spec, col2im)),
        op => Err(KernelError::Internal(format!(
            "{} is not a signal op",
            op.name()
        ))),
    }
}

/// Element `i` of a window of `size` values, as ONNX defines them: the
/// denominator is `size` for periodic windows and `size - 1` for symmetric
/// ones. A symmetric window of one value is `[1]` (numpy's convention), where
/// the formula would divide by zero.
pub fn window_value(kind: WindowKind, periodic: bool, size: usize, i: usize) -> f64 {
    let n1 = if periodic { size } else { size - 1 };
    if n1 == 0 {
        return 1.0;
    }
    let t = i as f64 / n1 as f64;
    match kind {
        WindowKind::Hann => (PI * t).sin().powi(2),
        WindowKind::Hamming => {
            let alpha = 25.0 / 46.0;
            alpha - (2.0 * PI * t).cos() * (1.0 - alpha)
        }
        WindowKind::Blackman => {
            let mut y = (2.0 * PI * t).cos() * -0.5;
            y += (4.0 * PI * t).cos() * 0.08;
            y + 0.42
        }
    }
}

fn window(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Window(w) = op else {
        return Err(KernelError::Internal("not a window".into()));
    };
    let size = *ins[0]
        .to_i64s()?
        .first()
        .ok_or_else(|| KernelError::Value("window size is empty".into()))?;
    let out = &mut outs[0];
    if size < 0 || out.numel() != size as usize {
        return Err(KernelError::Value(format!(
            "window size {size} for an output of {} values",
            out.numel()
        )));
    }
    let d = out.dtype;
    for i in 0..out.numel() {
        let v = window_value(w.kind, w.periodic, size as usize, i);
        write(d, out.bytes, i, Val::Float(v), false, RoundMode::Nearest);
    }
    Ok(())
}

/// Col2Im geometry for one image: spatial sizes, block (kernel) sizes, and the
/// number of block positions per spatial dim.
struct Geom {
    image: Vec<usize>,
    block: Vec<usize>,
    blocks: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pad_begin: Vec<i64>,
}

fn col2im_typed<T: AnyNum>(
    g: &Geom,
    x: &TensorRef,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let src = x.slice::<T>()?;
    let plane: usize = g.image.iter().product();
    let kprod: usize = g.block.iter().product();
    let l: usize = g.blocks.iter().product();
    let nd = g.image.len();
    par_rows(out.slice::<T>()?, plane, |nc, row| {
        // Row `nc` is image plane (n, c): columns c*kprod.. of batch n.
        let base = nc * kprod * l;
        let mut acc = vec![0f64; plane];
        let mut kk = vec![0usize; nd];
        let mut bb = vec![0usize; nd];
        for kf in 0..kprod {
            let mut rem = kf;
            for d in (0..nd).rev() {
                kk[d] = rem % g.block[d];
                rem /= g.block[d];
            }
            for bf in 0..l {
                let mut rem = bf;
                for d in (0..nd).rev() {
                    bb[d] = rem % g.blocks[d];
                    rem /= g.blocks[d];
                }
                let mut at = 0usize;
                let mut inside = true;
                for d in 0..nd {
                    let p = (bb[d] * g.strides[d] + kk[d] * g.dilations[d]) as i64 - g.pad_begin[d];
                    if p < 0 || p >= g.image[d] as i64 {
                        inside = false;
                        break;
                    }
                    at = at * g.image[d] + p as usize;
                }
                if inside {
                    acc[at] += src[base + kf * l + bf].as_f64();
                }
            }
        }
        for (o, a) in row.iter_mut().zip(acc) {
            *o = T::of_f64(a);
        }
    });
    Ok(())
}

fn col2im(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Col2Im(c) = op else {
        return Err(KernelError::Internal("not col2im".into()));
    };
    let x = &ins[0];
    let to_usize = |v: Vec<i64>, what: &str| -> Result<Vec<usize>, KernelError> {
        v.into_iter()
            .map(|d| {
                usize::try_from(d)
                    .ok()
                    .filter(|&d| d > 0)
                    .ok_or_else(|| KernelError::Value(format!("{what} value {d} must be positive")))
            })
            .collect()
    };
    let image = to_usize(ins[1].to_i64s()?, "image_shape")?;
    let block = to_usize(ins[2].to_i64s()?, "block_shape")?;
    let nd = image.len();
    if block.len() != nd
        || c.strides.len() != nd
        || c.dilations.len() != nd
        || c.pads.len() != 2 * nd
    {
        return Err(KernelError::Value(format!(
            "col2im needs {nd} block sizes, strides and dilations and {} pads",
            2 * nd
        )));
    }
    let mut blocks = Vec::with_capacity(nd);
    for d in 0..nd {
        let span = image[d] as i64 + c.pads[d] + c.pads[d + nd]
            - (c.dilations[d] * (block[d] as i64 - 1) + 1);
        if span < 0 || c.strides[d] < 1 || c.dilations[d] < 1 || c.pads[d] < 0 {
            return Err(KernelError::Value(format!(
                "col2im along dim {d}: strides and dilations must be positive, pads \
                 non-negative, and a block must fit the padded image"
            )));
        }
        blocks.push((span / c.strides[d] + 1) as usize);
    }
    let kprod: usize = block.iter().product();
    let l: usize = blocks.iter().product();
    if x.dims[1] % kprod != 0 || x.dims[2] != l {
        return Err(KernelError::Value(format!(
            "col2im input {:?} does not match blocks {block:?} at {blocks:?} positions",
            x.dims
        )));
    }
    let g = Geom {
        image,
        block,
        blocks,
        strides: c.strides.iter().map(|&s| s as usize).collect(),
        dilations: c.dilations.iter().map(|&s| s as usize).collect(),
        pad_begin: c.pads[..nd].to_vec(),
    };
    with_dtype!(x.dtype, T => col2im_typed::<T>(&g, x, &mut outs[0]), num)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_match_their_formulas() {
        // Periodic Hann of 4: sin^2(pi*n/4) = [0, 0.5, 1, 0.5].
        let h: Vec<f64> = (0..4)
            .map(|i| window_value(WindowKind::Hann, true, 4, i))
            .collect();
        for (a, b) in h.iter().zip([0.0, 0.5, 1.0, 0.5]) {
            assert!((a - b).abs() < 1e-12);
        }
        // Symmetric Hamming of 3 ends at alpha - beta and peaks at 1.
        let alpha = 25.0 / 46.0;
        assert!(
            (window_value(WindowKind::Hamming, false, 3, 0) - (2.0 * alpha - 1.0)).abs() < 1e-12
        );
        assert!((window_value(WindowKind::Hamming, false, 3, 1) - 1.0).abs() < 1e-12);
        // Blackman peaks at 1 in the middle of a symmetric window.
        assert!((window_value(WindowKind::Blackman, false, 5, 2) - 1.0).abs() < 1e-12);
        assert!(window_value(WindowKind::Blackman, false, 5, 0).abs() < 1e-12);
    }

    #[test]
    fn col2im_sums_overlapping_blocks() {
        // One channel, image 1x3, block 1x2, stride 1: two blocks at x=0 and x=1.
        // Columns: kernel pos 0 -> [a0, a1], kernel pos 1 -> [b0, b1].
        let x = [1f32, 2., 10., 20.];
        let img = [1i64, 3];
        let blk = [1i64, 2];
        let op = Op::Col2Im(rlx_ir::ops::Col2Im {
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pads: vec![0, 0, 0, 0],
        });
        let ins = [
            TensorRef {
                dtype: rlx_ir::DType::F32,
                dims: &[1, 2, 2],
                bytes: bytemuck::cast_slice(&x),
            },
            TensorRef {
                dtype: rlx_ir::DType::I64,
                dims: &[2],
                bytes: bytemuck::cast_slice(&img),
            },
            TensorRef {
                dtype: rlx_ir::DType::I64,
                dims: &[2],
                bytes: bytemuck::cast_slice(&blk),
            },
        ];
        let mut out = [0f32; 3];
        let mut outs = [TensorMut {
            dtype: rlx_ir::DType::F32,
            dims: &[1, 1, 1, 3],
            bytes: bytemuck::cast_slice_mut(&mut out),
        }];
        col2im(&op, &ins, &mut outs).unwrap();
        // x=0: a0; x=1: a1 + b0; x=2: b1.
        assert_eq!(out, [1., 12., 20.]);
    }
}
