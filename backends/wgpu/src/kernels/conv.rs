//! Convolution (1-D and 2-D, groups, dilation, pads): im2col into scratch, in
//! column chunks, then the tiled GEMM with the bias as its epilogue. Pointwise
//! convolutions (1x1, stride 1, no pads) read the image directly.

use rlx_ir::ops::{resolve_pads, Conv};
use rlx_ir::DType;

use super::matmul::Gemm;
use super::{u32_of, Cx, LResult};
use crate::schedule::Range;

const IM2COL: &str = include_str!("../../../../kernels/wgsl/im2col.wgsl");

/// Largest im2col buffer per dispatch.
const COL_BYTES: usize = 32 << 20;

fn sub(r: Range, at: usize, bytes: usize) -> Range {
    Range {
        offset: r.offset + at as u64,
        bytes: bytes as u64,
    }
}

pub fn lower(cx: &mut Cx, conv: &Conv) -> LResult<()> {
    let (x, w, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = cx.ins.get(2).cloned();
    if x.dtype != DType::F32 || w.dtype != DType::F32 {
        return Err(format!("conv on {} has no wgpu kernel", x.dtype));
    }
    let sp = x.dims.len().saturating_sub(2);
    if !(1..=2).contains(&sp) {
        return Err(format!(
            "{sp}-D convolution has no wgpu kernel (1-D and 2-D only)"
        ));
    }
    if w.dims.len() != x.dims.len() || y.dims.len() != x.dims.len() {
        return Err("conv weight and output ranks differ from the input's".into());
    }
    let two = |v: &[usize]| if sp == 1 { [1, v[0]] } else { [v[0], v[1]] };
    let (n, c) = (x.dims[0], x.dims[1]);
    let [h, wd] = two(&x.dims[2..]);
    let [kh, kw] = two(&w.dims[2..]);
    let [oh, ow] = two(&y.dims[2..]);
    let cout = y.dims[1];
    let g = usize::try_from(conv.group)
        .map_err(|_| "negative group")?
        .max(1);
    if c % g != 0 || cout % g != 0 {
        return Err("channels do not divide into groups".into());
    }
    let ones = vec![1; sp];
    let st = if conv.strides.is_empty() {
        ones.clone()
    } else {
        conv.strides.clone()
    };
    let dl = if conv.dilations.is_empty() {
        ones.clone()
    } else {
        conv.dilations.clone()
    };
    let xs: Vec<i64> = x.dims[2..].iter().map(|&d| d as i64).collect();
    let ks: Vec<i64> = w.dims[2..].iter().map(|&d| d as i64).collect();
    let pads = if conv.pads.is_empty() && conv.auto_pad == rlx_ir::ops::AutoPad::NotSet {
        vec![0; 2 * sp]
    } else {
        resolve_pads(conv.auto_pad, &conv.pads, &xs, &ks, &st, &dl)
    };
    let pair = |v: &[i64], i: usize| -> i64 {
        if sp == 1 {
            [0, v[i]][1]
        } else {
            v[i]
        }
    };
    let (sh, sw) = if sp == 1 { (1, st[0]) } else { (st[0], st[1]) };
    let (dh, dw) = if sp == 1 { (1, dl[0]) } else { (dl[0], dl[1]) };
    let (pt, pl) = if sp == 1 {
        (0, pads[0])
    } else {
        (pads[0], pads[1])
    };
    let _ = pair;
    let (cg, mg) = (c / g, cout / g);
    let kg = cg * kh * kw;
    let p = oh * ow;
    let pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && pads.iter().all(|&v| v == 0);
    let img = c * h * wd * 4;
    let oimg = cout * p * 4;
    let chunk = if pointwise {
        p
    } else {
        (COL_BYTES / (c * kh * kw * 4).max(1)).clamp(1, p.max(1))
    };
    let col = if pointwise {
        None
    } else {
        Some(cx.scratch((c * kh * kw * chunk * 4) as u64))
    };
    let im2col = cx.pipeline("conv.im2col", IM2COL);
    for i in 0..n {
        let xr = sub(x.range(), i * img, img);
        let yr = sub(y.range(), i * oimg, oimg);
        let mut p0 = 0;
        while p0 < p {
            let cols = chunk.min(p - p0);
            let (b, b_sk) = match col {
                None => (xr, p),
                Some(colr) => {
                    let total = c * kh * kw * cols;
                    let params = [
                        total,
                        c,
                        h,
                        wd,
                        kh,
                        kw,
                        ow,
                        sh as usize,
                        sw as usize,
                        dh as usize,
                        dw as usize,
                        pt as usize,
                        pl as usize,
                        p0,
                        cols,
                    ]
                    .iter()
                    .map(|&v| u32_of(v, "a conv size"))
                    .collect::<LResult<Vec<u32>>>()?;
                    let colr = sub(colr, 0, total * 4);
                    cx.dispatch_items(im2col, vec![xr, colr], params, total as u64);
                    (colr, cols)
                }
            };
            let gemm = Gemm {
                a: w.range(),
                b,
                c: sub(yr, p0 * 4, oimg - p0 * 4),
                bias: bias.as_ref().map(|bo| (bo.range(), 1, 0)),
                m: mg,
                n: cols,
                k: kg,
                a_s: [kg, 1],
                b_s: [b_sk, 1],
                c_s: [p, 1],
                relu: false,
                batch: if g > 1 {
                    vec![(g, mg * kg, kg * b_sk, mg * p)]
                } else {
                    Vec::new()
                },
                bias_batch: if g > 1 { vec![mg] } else { Vec::new() },
            };
            gemm.emit(cx)?;
            p0 += cols;
        }
    }
    Ok(())
}
