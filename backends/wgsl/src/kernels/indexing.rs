//! Index kernels beyond plain gather: gather_elements
//! (`kernels/wgsl/gather_elements.wgsl`), trilu (`kernels/wgsl/trilu.wgsl`),
//! the key/value cache write tensor_scatter (`kernels/wgsl/tensor_scatter.wgsl`),
//! and cumulative sums and products along an axis
//! (`kernels/wgsl/cumulative.wgsl` for f32, `cumulative_int.wgsl` for 32/64-bit
//! integers), planned by rlx-gpu's `kernels::indexing`.

use rlx_gpu::kernels::indexing::{
    cumulative_params, gather_elements_params, trilu_params, CumulativeIntParams, CumulativeParams,
    GatherElementsParams, TriluParams, CUMULATIVE_OPERANDS, GATHER_ELEMENTS_OPERANDS,
    TRILU_OPERANDS,
};
use rlx_gpu::Params;
use rlx_ir::ops::CumulativeKind;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, LResult};
use crate::support::{dtype_of, f32_only, movable};

const GATHER_ELEMENTS: &str = include_str!("../../../../kernels/wgsl/gather_elements.wgsl");
const TRILU: &str = include_str!("../../../../kernels/wgsl/trilu.wgsl");
const TENSOR_SCATTER: &str = include_str!("../../../../kernels/wgsl/tensor_scatter.wgsl");
const CUMULATIVE: &str = include_str!("../../../../kernels/wgsl/cumulative.wgsl");
const CUMULATIVE_INT: &str = concat!(
    include_str!("../../../../kernels/wgsl/int64.wgsl"),
    "\n",
    include_str!("../../../../kernels/wgsl/cumulative_int.wgsl")
);

/// Words per element of a cumulative sum or product over integers: 1 for
/// 32-bit, 2 for 64-bit dtypes; `None` for dtypes without an integer kernel.
pub fn cumulative_words(d: DType) -> Option<u32> {
    match d {
        DType::I32 | DType::U32 => Some(1),
        DType::I64 | DType::U64 => Some(2),
        _ => None,
    }
}

/// gather_elements and trilu move 4- and 8-byte elements (i32 or i64
/// indices); cumulative ops run on f32 and 32/64-bit integers.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d0 = dtype_of(inputs, 0)?;
    match &node.op {
        Op::GatherElements(_) => {
            movable(node.op.name(), d0)?;
            match dtype_of(inputs, 1)? {
                DType::I32 | DType::I64 => Ok(()),
                _ => Err("gather_elements indices must be i32 or i64".into()),
            }
        }
        Op::Trilu(_) | Op::TensorScatter(_) => movable(node.op.name(), d0),
        Op::Cumulative(c) => {
            if cumulative_words(d0).is_some() {
                return Ok(());
            }
            f32_only(c.kind.name(), d0)
        }
        op => Err(format!("`{}` is not an index op", op.name())),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let x = cx.input(0)?.clone();
    let y = cx.output(0)?.clone();
    let n = y.numel();
    match &cx.node.op.clone() {
        Op::GatherElements(g) => {
            let idx = cx.input(1)?.clone();
            let p = gather_elements_params(
                &x.dims,
                &idx.dims,
                g.axis,
                x.dtype.size(),
                idx.dtype == DType::I64,
            )?;
            let pipe = cx.typed_pipeline(
                "indexing.gather_elements",
                GATHER_ELEMENTS_OPERANDS,
                &GatherElementsParams::LAYOUT,
                GATHER_ELEMENTS,
            );
            cx.launch_items(pipe, vec![x.range(), idx.range(), y.range()], &p, n as u64);
            Ok(())
        }
        Op::Trilu(t) => {
            let k = match cx.ints(1)? {
                Some(v) => *v.first().ok_or("trilu k is empty")?,
                None => 0,
            };
            let p = trilu_params(&x.dims, x.dtype.size(), k, t.upper)?;
            let pipe = cx.typed_pipeline(
                "indexing.trilu",
                TRILU_OPERANDS,
                &TriluParams::LAYOUT,
                TRILU,
            );
            cx.launch_items(pipe, vec![x.range(), y.range()], &p, n as u64);
            Ok(())
        }
        Op::TensorScatter(ts) => {
            use rlx_gpu::kernels::tensor_scatter::{
                tensor_scatter_params, TensorScatterParams, TENSOR_SCATTER_OPERANDS,
            };
            let upd = cx.input(1)?.clone();
            let a = rlx_gpu::geometry::axis(ts.axis, x.dims.len())?;
            let upd_len = upd.dims.get(a).copied().unwrap_or(0);
            let mut p =
                tensor_scatter_params(&x.dims, upd_len, ts.axis, ts.circular, ts.has_indices)?;
            p.words = rlx_gpu::kernels::movement::words(x.dtype.size())?;
            let write = match ts.has_indices {
                true => cx.input(2)?.range(),
                false => x.range(),
            };
            let pipe = cx.typed_pipeline(
                "indexing.tensor_scatter",
                TENSOR_SCATTER_OPERANDS,
                &TensorScatterParams::LAYOUT,
                TENSOR_SCATTER,
            );
            cx.launch_items(
                pipe,
                vec![x.range(), upd.range(), write, y.range()],
                &p,
                n as u64,
            );
            Ok(())
        }
        Op::Cumulative(c) => {
            let a = cx
                .ints(1)?
                .and_then(|v| v.first().copied())
                .ok_or("the axis must be a constant")?;
            let p = cumulative_params(
                &x.dims,
                a,
                c.exclusive,
                c.reverse,
                c.kind == CumulativeKind::Prod,
            )?;
            let ops = vec![x.range(), y.range()];
            let lines = u64::from(p.lines);
            match cumulative_words(x.dtype) {
                Some(w) => {
                    let pipe = cx.typed_pipeline(
                        "indexing.cumulative_int",
                        CUMULATIVE_OPERANDS,
                        &CumulativeIntParams::LAYOUT,
                        CUMULATIVE_INT,
                    );
                    cx.launch_items(pipe, ops, &CumulativeIntParams::of(p, w == 2), lines);
                }
                None => {
                    let pipe = cx.typed_pipeline(
                        "indexing.cumulative",
                        CUMULATIVE_OPERANDS,
                        &CumulativeParams::LAYOUT,
                        CUMULATIVE,
                    );
                    cx.launch_items(pipe, ops, &p, lines);
                }
            }
            Ok(())
        }
        op => Err(format!("`{}` is not an index op", op.name())),
    }
}
