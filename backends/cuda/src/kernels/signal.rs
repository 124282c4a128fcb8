//! Signal ops on CUDA (`kernels/cuda/signal.cu`): DFT (forward, inverse,
//! one-sided, inverse real, any axis) and STFT as direct transforms in
//! double, and Col2Im (1 to 3 image dims), over f32, f64, f16 and bf16.
//! Lengths, axes, steps and shapes are constant inputs read at plan time.

use rlx_gpu::geometry::{u32_of, LResult};
use rlx_gpu::{Layout, Params};
use rlx_ir::ops::{dft_axis, Col2Im};
use rlx_ir::{Node, Op, TensorType};

use super::{dtype_of, float_name, Cx, Source};

pub const SOURCE: Source = Source {
    name: "signal",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/signal.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![DftParams::LAYOUT, StftParams::LAYOUT, Col2ImParams::LAYOUT]
}

rlx_gpu::kernel_params! {
    /// A DFT along one axis of `[outer, len_in, inner, comps]`.
    pub struct DftParams {
        /// Output points (outer * out_len * inner).
        pub count: u32,
        pub inner: u32,
        pub len_in: u32,
        /// The DFT length.
        pub n: u32,
        pub out_len: u32,
        pub comps: u32,
        pub out_comps: u32,
        pub inverse: u32,
        pub irfft: u32,
    }
}

rlx_gpu::kernel_params! {
    /// An STFT of `[B, len, comps]` into `[B, frames, bins, 2]`.
    pub struct StftParams {
        /// Output points (B * frames * bins).
        pub count: u32,
        pub len: u32,
        pub comps: u32,
        pub step: u32,
        /// Frame length.
        pub n: u32,
        pub frames: u32,
        pub bins: u32,
        pub has_window: u32,
        /// Window values (n without a window).
        pub win_len: u32,
    }
}

rlx_gpu::kernel_params! {
    /// Col2Im of `[N, C*kprod, L]` into `[N, C, image...]`.
    pub struct Col2ImParams {
        /// Output elements.
        pub count: u32,
        /// Image dims (1 to 3).
        pub rank: u32,
        /// Elements per image plane.
        pub plane: u32,
        pub kprod: u32,
        /// Block positions (L).
        pub blocks_total: u32,
        pub image: [u32; 3],
        pub block: [u32; 3],
        pub blocks: [u32; 3],
        pub strides: [i32; 3],
        pub dilations: [i32; 3],
        pub pad_begin: [i32; 3],
    }
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    let name = node.op.name();
    float_name(d).ok_or_else(|| format!("{name} of {d} has no cuda kernel"))?;
    if let Op::Stft(s) = &node.op {
        if let Some(w) = s.window_port().and_then(|p| inputs.get(p)) {
            if w.dtype != d {
                return Err(format!("{name} of {d} with a {} window", w.dtype));
            }
        }
    }
    Ok(())
}

/// The single integer of constant input `i`.
fn scalar(cx: &Cx, i: usize, what: &str) -> LResult<usize> {
    match cx.ints(i)?.as_deref() {
        Some([v]) if *v >= 1 => Ok(*v as usize),
        _ => Err(format!("{what} must be one integer >= 1")),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    match cx.node.op.clone() {
        Op::Dft(d) => {
            let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
            let r = x.dims.len();
            let comps = x.dims.last().copied().unwrap_or(0);
            if r < 2 || !(comps == 1 || comps == 2) || (d.irfft() && comps != 2) {
                return Err(format!("bad DFT input shape {:?}", x.dims));
            }
            let axis = match d.axis_port() {
                Some(p) => cx
                    .ints(p)?
                    .and_then(|v| v.first().copied())
                    .unwrap_or(d.axis),
                None => d.axis,
            };
            let a = dft_axis(axis, r).map_err(|e| e.to_string())?;
            let len_in = x.dims[a];
            let n = if d.has_length {
                scalar(cx, 1, "dft_length")?
            } else if d.irfft() {
                2 * len_in.saturating_sub(1)
            } else {
                len_in
            };
            if n == 0 {
                return Err("the DFT length is 0".into());
            }
            let out_len = if d.onesided && !d.inverse {
                n / 2 + 1
            } else {
                n
            };
            let out_comps = if d.irfft() { 1 } else { 2 };
            let mut want = x.dims.clone();
            want[a] = out_len;
            want[r - 1] = out_comps;
            if want != y.dims {
                return Err(format!("DFT output {:?}, expected {want:?}", y.dims));
            }
            let inner: usize = x.dims[a + 1..r - 1].iter().product();
            let p = DftParams {
                count: u32_of(y.numel() / out_comps, "DFT output")?,
                inner: u32_of(inner, "DFT inner size")?,
                len_in: u32_of(len_in, "DFT input length")?,
                n: u32_of(n, "DFT length")?,
                out_len: u32_of(out_len, "DFT output length")?,
                comps: comps as u32,
                out_comps: out_comps as u32,
                inverse: u32::from(d.inverse),
                irfft: u32::from(d.irfft()),
            };
            let name = float_name(x.dtype).ok_or("not a float input")?;
            let m = cx.modules.of(&SOURCE);
            let ops = vec![x.range(), y.range()];
            cx.items(m, &format!("dft_{name}"), u64::from(p.count), ops, &p);
            Ok(())
        }
        Op::Stft(s) => {
            let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
            let [batch, len, comps] = x.dims[..] else {
                return Err("the STFT signal must be rank 3".into());
            };
            if !(comps == 1 || comps == 2) {
                return Err("the STFT signal's last dim must be 1 or 2".into());
            }
            let step = scalar(cx, 1, "frame_step")?;
            let window = s.window_port().and_then(|p| cx.io.ins.get(p)).cloned();
            let n = match s.length_port() {
                Some(p) => scalar(cx, p, "frame_length")?,
                None => window.as_ref().map_or(len, |w| w.numel()),
            };
            if n == 0 || n > len {
                return Err(format!(
                    "frame length {n} does not fit the signal length {len}"
                ));
            }
            let frames = 1 + (len - n) / step;
            let bins = if s.onesided { n / 2 + 1 } else { n };
            if y.dims != [batch, frames, bins, 2] {
                return Err(format!("STFT output {:?}", y.dims));
            }
            let p = StftParams {
                count: u32_of(batch * frames * bins, "STFT output")?,
                len: u32_of(len, "signal length")?,
                comps: comps as u32,
                step: u32_of(step, "frame step")?,
                n: u32_of(n, "frame length")?,
                frames: u32_of(frames, "frames")?,
                bins: u32_of(bins, "bins")?,
                has_window: u32::from(window.is_some()),
                win_len: u32_of(window.as_ref().map_or(n, |w| w.numel()), "window")?,
            };
            let name = float_name(x.dtype).ok_or("not a float signal")?;
            let m = cx.modules.of(&SOURCE);
            let ops = vec![
                x.range(),
                window.map_or(x.range(), |w| w.range()),
                y.range(),
            ];
            cx.items(m, &format!("stft_{name}"), u64::from(p.count), ops, &p);
            Ok(())
        }
        Op::Col2Im(c) => col2im(cx, &c),
        op => Err(format!("`{}` is not a signal op", op.name())),
    }
}

fn col2im(cx: &mut Cx, c: &Col2Im) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    let positive = |v: Option<Vec<i64>>, what: &str| -> LResult<Vec<usize>> {
        v.ok_or_else(|| format!("col2im {what} is missing"))?
            .into_iter()
            .map(|d| {
                usize::try_from(d)
                    .ok()
                    .filter(|&d| d > 0)
                    .ok_or_else(|| format!("col2im {what} value {d} must be positive"))
            })
            .collect()
    };
    let image = positive(cx.ints(1)?, "image_shape")?;
    let block = positive(cx.ints(2)?, "block_shape")?;
    let nd = image.len();
    if !(1..=3).contains(&nd)
        || block.len() != nd
        || c.strides.len() != nd
        || c.dilations.len() != nd
        || c.pads.len() != 2 * nd
    {
        return Err(format!(
            "col2im of {nd} image dims (1 to 3 on cuda, with as many blocks, strides, dilations)"
        ));
    }
    let mut p = Col2ImParams {
        count: u32_of(y.numel(), "col2im output")?,
        rank: nd as u32,
        plane: u32_of(image.iter().product(), "image plane")?,
        kprod: u32_of(block.iter().product(), "block size")?,
        blocks_total: 1,
        image: [1; 3],
        block: [1; 3],
        blocks: [1; 3],
        strides: [1; 3],
        dilations: [1; 3],
        pad_begin: [0; 3],
    };
    let mut total = 1usize;
    for d in 0..nd {
        let span = image[d] as i64 + c.pads[d] + c.pads[d + nd]
            - (c.dilations[d] * (block[d] as i64 - 1) + 1);
        if span < 0 || c.strides[d] < 1 || c.dilations[d] < 1 || c.pads[d] < 0 {
            return Err(format!(
                "col2im along dim {d}: strides and dilations must be positive, pads \
                 non-negative, and a block must fit the padded image"
            ));
        }
        let blocks = (span / c.strides[d] + 1) as usize;
        total *= blocks;
        let i32_of = |v: i64| i32::try_from(v).map_err(|_| format!("col2im value {v}"));
        p.image[d] = u32_of(image[d], "image dim")?;
        p.block[d] = u32_of(block[d], "block dim")?;
        p.blocks[d] = u32_of(blocks, "blocks")?;
        p.strides[d] = i32_of(c.strides[d])?;
        p.dilations[d] = i32_of(c.dilations[d])?;
        p.pad_begin[d] = i32_of(c.pads[d])?;
    }
    let kprod = p.kprod as usize;
    if x.dims.len() != 3 || x.dims[1] % kprod != 0 || x.dims[2] != total {
        return Err(format!(
            "col2im input {:?} does not match blocks {block:?} at {total} positions",
            x.dims
        ));
    }
    p.blocks_total = u32_of(total, "block positions")?;
    let name = float_name(x.dtype).ok_or("not a float input")?;
    let m = cx.modules.of(&SOURCE);
    let ops = vec![x.range(), y.range()];
    cx.items(m, &format!("col2im_{name}"), y.numel() as u64, ops, &p);
    Ok(())
}
