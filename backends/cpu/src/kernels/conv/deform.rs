//! DeformConv (2-D): each kernel tap samples the input at its regular position
//! plus a learned offset, by bilinear interpolation with zeros outside the
//! image, optionally scaled by a mask; the samples form im2col columns that a
//! GEMM per group multiplies by the weights.

use rlx_ir::ops::DeformConv;
use rlx_ir::Op;

use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::kernels::gemm::{gemm, GemmElem};
use crate::kernels::layout::par_rows;
use crate::kernels::num::{Comp, Real};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::DeformConv(_) => Ok(fn_kernel(spec, deform_conv)),
        op => Err(KernelError::Internal(format!(
            "{} is not deform_conv",
            op.name()
        ))),
    }
}

/// Bilinear sample of an `h×w` plane at `(y, x)`; corners outside count as zero.
pub fn bilinear<T: Real>(plane: &[T], h: usize, w: usize, y: f64, x: f64) -> f64 {
    if !(y > -1.0 && y < h as f64 && x > -1.0 && x < w as f64) {
        return 0.0;
    }
    let (y0, x0) = (y.floor(), x.floor());
    let (ly, lx) = (y - y0, x - x0);
    let (y0, x0) = (y0 as i64, x0 as i64);
    let at = |r: i64, c: i64| {
        if r >= 0 && c >= 0 && (r as usize) < h && (c as usize) < w {
            plane[r as usize * w + c as usize].to_f64()
        } else {
            0.0
        }
    };
    (1.0 - ly) * (1.0 - lx) * at(y0, x0)
        + (1.0 - ly) * lx * at(y0, x0 + 1)
        + ly * (1.0 - lx) * at(y0 + 1, x0)
        + ly * lx * at(y0 + 1, x0 + 1)
}

fn dims4(d: &[usize], what: &str) -> Result<[usize; 4], KernelError> {
    d.try_into()
        .map_err(|_| KernelError::Value(format!("deform_conv {what} must be 4-D, got {d:?}")))
}

fn deform_typed<T: Real>(
    d: &DeformConv,
    ins: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), KernelError>
where
    T::C: GemmElem,
{
    let (x, w, off) = (&ins[0], &ins[1], &ins[2]);
    let bias = if d.has_bias {
        Some(ins[3].slice::<T>()?)
    } else {
        None
    };
    let mask = if d.has_mask {
        Some(&ins[if d.has_bias { 4 } else { 3 }])
    } else {
        None
    };
    let [n, c, ih, iw] = dims4(x.dims, "input")?;
    let [oc, cg, kh, kw] = dims4(w.dims, "weight")?;
    let [_, _, oh, ow] = dims4(out.dims, "output")?;
    let (g, og) = (d.group.max(1) as usize, d.offset_group.max(1) as usize);
    let (kk, sp) = (kh * kw, oh * ow);
    let bad = |why: String| Err(KernelError::Value(why));
    if c != cg * g || oc % g != 0 || c % og != 0 {
        return bad(format!(
            "{c} input channels, weight {:?}, group {g}, offset_group {og} do not fit",
            w.dims
        ));
    }
    if off.dims != [n, og * kk * 2, oh, ow] {
        return bad(format!("offset shape {:?}", off.dims));
    }
    if mask.is_some_and(|m| m.dims != [n, og * kk, oh, ow]) {
        return bad("mask shape does not match the offsets".into());
    }
    if bias.is_some_and(|b| b.len() != oc) {
        return bad("bias length differs from the output channels".into());
    }
    let (xs, offs) = (x.slice::<T>()?, off.slice::<T>()?);
    let ms = mask.map(|m| m.slice::<T>()).transpose()?;
    let ws: Vec<T::C> = w.slice::<T>()?.iter().map(|v| v.up()).collect();
    let (sh, sw) = (d.strides[0] as f64, d.strides[1] as f64);
    let (dh, dw) = (d.dilations[0] as f64, d.dilations[1] as f64);
    let (pt, pl) = (d.pads[0] as f64, d.pads[1] as f64);
    let cpo = c / og;
    let ocg = oc / g;
    let mut col = vec![<T::C as GemmElem>::ZERO; c * kk * sp];
    let mut y = vec![<T::C as GemmElem>::ZERO; oc * sp];
    let yo = out.slice::<T>()?;
    for b in 0..n {
        par_rows(&mut col, sp, |r, row| {
            let (ch, k) = (r / kk, r % kk);
            let (i, j) = ((k / kw) as f64, (k % kw) as f64);
            let grp = ch / cpo;
            let plane = &xs[(b * c + ch) * ih * iw..(b * c + ch + 1) * ih * iw];
            let tap = (b * og + grp) * kk + k;
            for (p, v) in row.iter_mut().enumerate() {
                let (py, px) = ((p / ow) as f64, (p % ow) as f64);
                let yy = py * sh - pt + i * dh + offs[2 * tap * sp + p].to_f64();
                let xx = px * sw - pl + j * dw + offs[(2 * tap + 1) * sp + p].to_f64();
                let mut s = bilinear(plane, ih, iw, yy, xx);
                if let Some(m) = ms {
                    s *= m[tap * sp + p].to_f64();
                }
                *v = <T::C as Comp>::from_f64c(s);
            }
        });
        for gi in 0..g {
            gemm(
                ocg,
                sp,
                cg * kk,
                &ws[gi * ocg * cg * kk..],
                cg * kk,
                &col[gi * cg * kk * sp..],
                sp,
                &mut y[gi * ocg * sp..],
                sp,
                false,
            );
        }
        for o in 0..oc {
            let add = bias.map_or(<T::C as GemmElem>::ZERO, |bs| bs[o].up());
            for p in 0..sp {
                yo[(b * oc + o) * sp + p] = T::down(y[o * sp + p] + add);
            }
        }
    }
    Ok(())
}

fn deform_conv(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::DeformConv(d) = op else {
        return Err(KernelError::Internal("not deform_conv".into()));
    };
    if d.strides.len() != 2 || d.dilations.len() != 2 || d.pads.len() != 4 {
        return Err(KernelError::Unsupported(
            "deform_conv is implemented for 2-D inputs only".into(),
        ));
    }
    with_dtype!(ins[0].dtype, T => deform_typed::<T>(d, ins, &mut outs[0]), float)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bilinear_interpolates_and_zero_pads() {
        let p = [1f32, 2., 3., 4.]; // [[1,2],[3,4]]
        assert_eq!(bilinear(&p, 2, 2, 0.0, 0.0), 1.0);
        assert_eq!(bilinear(&p, 2, 2, 0.5, 0.5), 2.5);
        // Half a pixel above the top row: half of the row, half zeros.
        assert_eq!(bilinear(&p, 2, 2, -0.5, 0.0), 0.5);
        assert_eq!(bilinear(&p, 2, 2, 2.0, 0.0), 0.0);
    }

    #[test]
    fn zero_offsets_give_a_plain_convolution() {
        // 1x1x2x2 input, 1x1x2x2 weights of ones, no padding: one output = sum.
        let x = [1f32, 2., 3., 4.];
        let w = [1f32; 4];
        let off = [0f32; 8];
        let op = DeformConv {
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pads: vec![0, 0, 0, 0],
            group: 1,
            offset_group: 1,
            has_bias: false,
            has_mask: false,
        };
        let ins = [
            TensorRef {
                dtype: rlx_ir::DType::F32,
                dims: &[1, 1, 2, 2],
                bytes: bytemuck::cast_slice(&x),
            },
            TensorRef {
                dtype: rlx_ir::DType::F32,
                dims: &[1, 1, 2, 2],
                bytes: bytemuck::cast_slice(&w),
            },
            TensorRef {
                dtype: rlx_ir::DType::F32,
                dims: &[1, 8, 1, 1],
                bytes: bytemuck::cast_slice(&off),
            },
        ];
        let mut y = [0f32];
        let mut outs = [TensorMut {
            dtype: rlx_ir::DType::F32,
            dims: &[1, 1, 1, 1],
            bytes: bytemuck::cast_slice_mut(&mut y),
        }];
        deform_conv(&Op::DeformConv(op), &ins, &mut outs).unwrap();
        assert_eq!(y, [10.0]);
    }
}
