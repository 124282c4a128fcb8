//! Reductions on CUDA (reduce_*, global pools, argmax/argmin) onto
//! `kernels/cuda/reduce.cu`: rlx-gpu's `kernels::reduce` plans the kept and
//! reduced dims; this file picks the instantiation for the dtype and kind,
//! a warp per row for short rows or a block for long ones, and splits rows
//! too long for one block (when there are few rows) into chunks whose
//! partial states a second launch combines through scratch.

use rlx_gpu::kernels::reduce::{reduce_params, reduction, CudaReduceParams, ReduceParams};
use rlx_gpu::Params;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "reduce",
    source: include_str!("../../../../kernels/cuda/reduce.cu"),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![CudaReduceParams::LAYOUT]
}

use rlx_gpu::Layout;

/// Threads per block.
const BLOCK: u32 = 256;
/// Rows up to this long reduce in one warp.
const WARP_ROW: u32 = 512;
/// Bytes of one partial state in scratch (`RdState` of the widest type).
const STATE: u64 = 48;
/// Elements a block reduces at least before rows are split.
const CHUNK: u32 = 4096;
/// Rows below this count are split when long (fewer blocks than the GPU holds).
const FEW_ROWS: u32 = 264;

/// The entry-point suffix of elements of `d` (bool as u8).
fn dtype_suffix(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 | DType::Bool => "u8",
        DType::U16 => "u16",
        DType::U32 => "u32",
        DType::U64 => "u64",
        _ => return None,
    })
}

/// The instantiation for elements of `d` reduced by `kind`: integer means
/// of 64-bit elements sum in 128 bits, float-valued kinds of integers
/// compute in double.
fn entry(d: DType, kind: u32) -> LResult<String> {
    let s = dtype_suffix(d).ok_or_else(|| format!("reductions on {d} have no cuda kernel"))?;
    if d.is_float() {
        return Ok(format!("reduce_{s}"));
    }
    Ok(match kind {
        1 if d.size() == 8 => format!("reduce_{s}_wide"),
        6..=8 => format!("reduce_{s}_dbl"),
        _ => format!("reduce_{s}"),
    })
}

/// Every dtype but the minifloats and sub-byte integers; global pools on floats.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = inputs
        .first()
        .map(|t| t.dtype)
        .ok_or("input 0 is missing")?;
    if let Op::GlobalPool(_) = node.op {
        if !d.is_float() {
            return Err(format!("global pooling on {d} has no cuda kernel"));
        }
        reduction(&node.op, inputs[0].shape.rank().max(2), None)?;
    }
    entry(d, 0).map(|_| ())
}

/// How a reduction's rows map to launches: (splits, warp per chunk).
fn split(p: &ReduceParams) -> (u32, bool) {
    if p.count <= WARP_ROW {
        return (1, true);
    }
    if p.n_out >= FEW_ROWS || p.count <= 2 * CHUNK {
        return (1, false);
    }
    let splits = p
        .count
        .div_ceil(CHUNK)
        .min((4 * FEW_ROWS / p.n_out).max(1))
        .min(1024);
    (splits, false)
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    let axes = match cx.node.op {
        Op::Reduce(_) => cx.ints(1)?,
        _ => None,
    };
    let (kind, axes, select_last) = reduction(&cx.node.op, x.dims.len(), axes.as_deref())?;
    let p = reduce_params(&x.dims, &axes, kind, select_last)?;
    let name = entry(x.dtype, kind)?;
    let (splits, warp) = split(&p);
    let cp = CudaReduceParams::of(p, splits, warp);
    let m = cx.modules.of(&SOURCE);
    let items = u64::from(p.n_out) * u64::from(splits);
    let blocks = if warp {
        items.div_ceil(u64::from(BLOCK / 32))
    } else {
        items
    };
    if splits == 1 {
        cx.kernel_params(m, &name, blocks, BLOCK, vec![x.range(), y.range()], &cp);
        return Ok(());
    }
    let parts = cx.scratch(items * STATE);
    cx.kernel_params(m, &name, blocks, BLOCK, vec![x.range(), parts], &cp);
    let fin = u64::from(p.n_out).div_ceil(u64::from(BLOCK / 32));
    cx.kernel_params(
        m,
        &format!("{name}_final"),
        fin,
        BLOCK,
        vec![parts, y.range()],
        &cp,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_follow_dtype_and_kind() {
        assert_eq!(entry(DType::F16, 8).unwrap(), "reduce_f16");
        assert_eq!(entry(DType::I64, 1).unwrap(), "reduce_i64_wide");
        assert_eq!(entry(DType::I32, 1).unwrap(), "reduce_i32");
        assert_eq!(entry(DType::U8, 6).unwrap(), "reduce_u8_dbl");
        assert_eq!(entry(DType::Bool, 2).unwrap(), "reduce_u8");
    }

    #[test]
    fn long_rows_of_few_outputs_split() {
        let p = reduce_params(&[4, 100], &[1], 0, false).unwrap();
        assert_eq!(split(&p), (1, true));
        let p = reduce_params(&[2, 1 << 20], &[1], 0, false).unwrap();
        assert_eq!(split(&p), (256, false));
        let p = reduce_params(&[4096, 10000], &[1], 0, false).unwrap();
        assert_eq!(split(&p), (1, false));
    }
}
