//! GridSample (1 to 3 spatial dims, every mode and padding) and AffineGrid
//! (2-D and 3-D) on CUDA (`kernels/cuda/grid.cu`): one thread per output
//! element, computed in double like the CPU backend, over f32, f64, f16 and
//! bf16 inputs and grids.

use rlx_gpu::geometry::{strides, u32_of, LResult};
use rlx_gpu::{Layout, Params};
use rlx_ir::ops::{GridMode, GridPadding};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, Cx, Source};

pub const SOURCE: Source = Source {
    name: "grid",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/grid.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![GridSampleParams::LAYOUT, AffineGridParams::LAYOUT]
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

fn float_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => return None,
    })
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    let name = node.op.name();
    float_name(d).ok_or_else(|| format!("{name} of {d} has no cuda kernel"))?;
    match &node.op {
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
        op => Err(format!("`{}` is not a grid op", op.name())),
    }
}
