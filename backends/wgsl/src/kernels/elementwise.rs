//! Element-wise kernels, generated per node: unary, binary, compare, logical,
//! where, cast, clip, gelu and whole `elementwise_region` programs. rlx-gpu
//! builds the node's expression tree and its parameters
//! (`kernels::elementwise`) and prints it as WGSL (`elementwise::wgsl`, with
//! the helpers of `kernels/wgsl/elementwise.wgsl` and, for 64-bit integers,
//! `kernels/wgsl/int64.wgsl`); this file launches it.

use rlx_gpu::kernels::elementwise::{build, operands, params, wgsl, Geometry};
use rlx_ir::{DType, Node, TensorType};

use super::{Cx, LResult};
use crate::plan::WG;

pub use rlx_gpu::geometry::broadcast_strides;

/// Whether the node's expression prints as WGSL (and its dtypes load and store).
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let dtypes: Vec<DType> = inputs.iter().map(|t| t.dtype).collect();
    let e = build(&node.op, &dtypes)?;
    wgsl::kernel(&e, 0).map(|_| ())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let out = cx.output(0)?.clone();
    let dtypes: Vec<DType> = cx.ins.iter().map(|o| o.dtype).collect();
    let e = build(&cx.node.op, &dtypes)?;
    let ins: Vec<&[usize]> = cx.ins.iter().map(|o| o.dims.as_slice()).collect();
    let g = Geometry::new(&out.dims, &ins)?;
    let p = params(&g, &e.lits)?;
    let src = wgsl::kernel(&e, g.rank())?;
    let names = operands(e.inputs.len());
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let name = format!("elementwise.{}.{}", e.op, out.dtype);
    let pipe = cx.typed_pipeline(&name, &names, &p.layout, &src);
    let mut ranges = vec![out.range()];
    ranges.extend(cx.ins.iter().map(|o| o.range()));
    let items = wgsl::items(out.dtype, g.n as u64);
    cx.launch(pipe, ranges, p, items.div_ceil(WG));
    Ok(())
}
