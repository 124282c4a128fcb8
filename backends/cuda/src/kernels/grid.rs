//! Sampling at computed coordinates on CUDA (`kernels/cuda/grid.cu`):
//! GridSample (1 to 3 spatial dims, every mode and padding) and AffineGrid
//! (2-D and 3-D), one thread per output element computed in double like the
//! CPU backend, over f32, f64, f16 and bf16 inputs and grids; and 2-D
//! DeformConv (f32): a bilinear im2col kernel, then one cuBLASLt GEMM per
//! group batched over the images, then the bias.

use rlx_gpu::geometry::{strides, u32_of, LResult};
use rlx_gpu::Range;
use rlx_gpu::{Layout, Params};
use rlx_ir::ops::{DeformConv, GridMode, GridPadding};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, float_name, Cx, Source};
use crate::schedule::{Gemm, GemmAct, GemmLaunch, Launch};

pub const SOURCE: Source = Source {
    name: "grid",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/grid.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![
        GridSampleParams::LAYOUT,
        AffineGridParams::LAYOUT,
        DeformParams::LAYOUT,
    ]
}

rlx_gpu::kernel_params! {
    /// GridSample of input `[N, C, spatial...]` at grid `[N, out..., r]`.
    pub struct GridSampleParams {
        /// Output elements.
        pub count: u32,
        pub channels: u32,
        /// Spatial dims (1 to 3).
        pub rank: u32,
        /// Output positions per (batch, channel).
        pub npos: u32,
        /// Input elements per (batch, channel).
        pub plane: u32,
        /// 0 nearest, 1 linear, 2 cubic.
        pub mode: u32,
        /// 0 zeros, 1 border, 2 reflection.
        pub padding: u32,
        pub align: u32,
        /// Input spatial dims and their strides (unused axes 1 and 0).
        pub in_dims: [u32; 3],
        pub in_strides: [u32; 3],
    }
}

rlx_gpu::kernel_params! {
    /// AffineGrid of theta `[N, r, r+1]` into `[N, spatial..., r]`.
    pub struct AffineGridParams {
        /// Output elements.
        pub count: u32,
        /// Spatial dims (2 or 3).
        pub rank: u32,
        /// Positions per batch.
        pub npos: u32,
        pub align: u32,
        pub dims: [u32; 3],
    }
}

rlx_gpu::kernel_params! {
    /// DeformConv (2-D) of x `[N, C, ih, iw]` into `[N, OC, oh, ow]`.
    pub struct DeformParams {
        pub batch: u32,
        pub channels: u32,
        pub out_channels: u32,
        pub ih: u32,
        pub iw: u32,
        pub oh: u32,
        pub ow: u32,
        pub kh: u32,
        pub kw: u32,
        pub offset_groups: u32,
        /// Channels per offset group.
        pub per_offset_group: u32,
        pub has_mask: u32,
        pub stride_h: i32,
        pub stride_w: i32,
        pub dil_h: i32,
        pub dil_w: i32,
        pub pad_t: i32,
        pub pad_l: i32,
    }
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    let name = node.op.name();
    float_name(d).ok_or_else(|| format!("{name} of {d} has no cuda kernel"))?;
    match &node.op {
        Op::DeformConv(dc) => {
            if let Some((i, t)) = inputs
                .iter()
                .enumerate()
                .find(|(_, t)| t.dtype != DType::F32)
            {
                return Err(format!(
                    "{name} on {} (input {i}) has no cuda kernel (f32 only)",
                    t.dtype
                ));
            }
            if dc.strides.len() != 2 || dc.dilations.len() != 2 || dc.pads.len() != 4 {
                return Err(format!("{name} is implemented for 2-D inputs only"));
            }
            Ok(())
        }
        Op::GridSample(_) => {
            let g = dtype_of(inputs, 1)?;
            float_name(g).ok_or_else(|| format!("{name} with a {g} grid has no cuda kernel"))?;
            let r = inputs[0].shape.rank();
            if !(3..=5).contains(&r) {
                return Err(format!("{name} of rank {r} (1 to 3 spatial dims on cuda)"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    match cx.node.op.clone() {
        Op::GridSample(g) => {
            let (x, grid, y) = (
                cx.input(0)?.clone(),
                cx.input(1)?.clone(),
                cx.output(0)?.clone(),
            );
            let r = x.dims.len() - 2;
            let sp = &x.dims[2..];
            if grid.dims.len() != r + 2 || grid.dims[r + 1] != r || grid.dims[0] != x.dims[0] {
                return Err(format!(
                    "grid {:?} does not match input {:?}",
                    grid.dims, x.dims
                ));
            }
            let plane: usize = sp.iter().product();
            if plane == 0 {
                return Err("grid_sample of an empty spatial input".into());
            }
            let st = strides(sp);
            let mut p = GridSampleParams {
                count: u32_of(y.numel(), "grid_sample output")?,
                channels: u32_of(x.dims[1], "channels")?,
                rank: r as u32,
                npos: u32_of(grid.dims[1..=r].iter().product(), "grid positions")?,
                plane: u32_of(plane, "input plane")?,
                mode: match g.mode {
                    GridMode::Nearest => 0,
                    GridMode::Linear => 1,
                    GridMode::Cubic => 2,
                },
                padding: match g.padding_mode {
                    GridPadding::Zeros => 0,
                    GridPadding::Border => 1,
                    GridPadding::Reflection => 2,
                },
                align: u32::from(g.align_corners),
                in_dims: [1; 3],
                in_strides: [0; 3],
            };
            for a in 0..r {
                p.in_dims[a] = u32_of(sp[a], "input dim")?;
                p.in_strides[a] = u32_of(st[a], "input stride")?;
            }
            let (xn, gn) = (
                float_name(x.dtype).ok_or("not a float input")?,
                float_name(grid.dtype).ok_or("not a float grid")?,
            );
            let m = cx.modules.of(&SOURCE);
            let ops = vec![x.range(), grid.range(), y.range()];
            cx.items(
                m,
                &format!("grid_sample_{xn}_{gn}"),
                y.numel() as u64,
                ops,
                &p,
            );
            Ok(())
        }
        Op::AffineGrid(a) => {
            let (theta, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
            let r = y.dims.len().saturating_sub(2);
            if !(2..=3).contains(&r) || y.dims[r + 1] != r || theta.dims != [y.dims[0], r, r + 1] {
                return Err(format!(
                    "affine_grid theta {:?} does not fit the output {:?}",
                    theta.dims, y.dims
                ));
            }
            let mut p = AffineGridParams {
                count: u32_of(y.numel(), "affine_grid output")?,
                rank: r as u32,
                npos: u32_of(y.dims[1..=r].iter().product(), "grid positions")?,
                align: u32::from(a.align_corners),
                dims: [1; 3],
            };
            for i in 0..r {
                p.dims[i] = u32_of(y.dims[1 + i], "grid dim")?;
            }
            let n = float_name(theta.dtype).ok_or("not a float theta")?;
            let m = cx.modules.of(&SOURCE);
            let ops = vec![theta.range(), y.range()];
            cx.items(m, &format!("affine_grid_{n}"), y.numel() as u64, ops, &p);
            Ok(())
        }
        Op::DeformConv(d) => deform(cx, &d),
        op => Err(format!("`{}` is not a grid op", op.name())),
    }
}

fn deform(cx: &mut Cx, d: &DeformConv) -> LResult<()> {
    let (x, w, off, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.input(2)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = d
        .has_bias
        .then(|| cx.io.ins.get(3).map(|o| o.range()))
        .flatten();
    let mask = d
        .has_mask
        .then(|| cx.io.ins.get(if d.has_bias { 4 } else { 3 }).cloned())
        .flatten();
    let four = |v: &[usize], what: &str| -> LResult<[usize; 4]> {
        v.try_into()
            .map_err(|_| format!("deform_conv {what} must be 4-D, got {v:?}"))
    };
    let [n, c, ih, iw] = four(&x.dims, "input")?;
    let [oc, cg, kh, kw] = four(&w.dims, "weight")?;
    let [_, _, oh, ow] = four(&y.dims, "output")?;
    let (g, og) = (d.group.max(1) as usize, d.offset_group.max(1) as usize);
    let (kk, sp) = (kh * kw, oh * ow);
    if c != cg * g || oc % g != 0 || c % og != 0 {
        return Err(format!(
            "{c} input channels, weight {:?}, group {g}, offset_group {og} do not fit",
            w.dims
        ));
    }
    if off.dims != [n, og * kk * 2, oh, ow]
        || mask
            .as_ref()
            .is_some_and(|m| m.dims != [n, og * kk, oh, ow])
    {
        return Err(format!("deform_conv offset {:?} or mask shape", off.dims));
    }
    let i32_of = |v: i64| i32::try_from(v).map_err(|_| format!("deform_conv value {v}"));
    let p = DeformParams {
        batch: u32_of(n, "batch")?,
        channels: u32_of(c, "channels")?,
        out_channels: u32_of(oc, "output channels")?,
        ih: u32_of(ih, "height")?,
        iw: u32_of(iw, "width")?,
        oh: u32_of(oh, "output height")?,
        ow: u32_of(ow, "output width")?,
        kh: u32_of(kh, "kernel height")?,
        kw: u32_of(kw, "kernel width")?,
        offset_groups: u32_of(og, "offset groups")?,
        per_offset_group: u32_of(c / og, "channels per offset group")?,
        has_mask: u32::from(mask.is_some()),
        stride_h: i32_of(d.strides[0])?,
        stride_w: i32_of(d.strides[1])?,
        dil_h: i32_of(d.dilations[0])?,
        dil_w: i32_of(d.dilations[1])?,
        pad_t: i32_of(d.pads[0])?,
        pad_l: i32_of(d.pads[1])?,
    };
    let rows = c * kk;
    let col = cx.scratch((n * rows * sp * 4) as u64);
    let m = cx.modules.of(&SOURCE);
    let ops = vec![
        x.range(),
        off.range(),
        mask.map_or(off.range(), |m| m.range()),
        col,
    ];
    cx.items(m, "deform_im2col_f32", (n * rows * sp) as u64, ops, &p);
    let (ocg, k) = (oc / g, cg * kk);
    let f32s = |offset: u64, elems: usize| Range {
        offset,
        bytes: (elems * 4) as u64,
    };
    for gi in 0..g {
        let gemm = Gemm {
            dtype: rlx_ir::DType::F32,
            m: ocg as u64,
            n: sp as u64,
            k: k as u64,
            trans_a: false,
            trans_b: false,
            lda: k as u64,
            ldb: sp as u64,
            ldc: sp as u64,
            batch: n as u64,
            stride_a: 0,
            stride_b: (rows * sp) as u64,
            stride_c: (oc * sp) as u64,
            a: f32s(w.at + (gi * ocg * k * 4) as u64, ocg * k),
            b: f32s(
                col.offset + (gi * k * sp * 4) as u64,
                (n - 1) * rows * sp + k * sp,
            ),
            c: f32s(
                y.at + (gi * ocg * sp * 4) as u64,
                (n - 1) * oc * sp + ocg * sp,
            ),
            bias: None,
            act: GemmAct::None,
        };
        cx.push(Launch::Gemm(GemmLaunch {
            gemm,
            node: String::new(),
            origin: Vec::new(),
        }));
    }
    if let Some(b) = bias {
        cx.items(
            m,
            "deform_bias_f32",
            y.numel() as u64,
            vec![b, y.range()],
            &p,
        );
    }
    Ok(())
}
