//! Index kernels beyond plain gather: gather_elements, trilu, and cumulative
//! sums and products along an axis (f32, and 32/64-bit integers).

use rlx_ir::ops::CumulativeKind;
use rlx_ir::{DType, Op};

use super::movement::words;
use super::{axis, strides, u32_of, Cx, LResult};

const GATHER_ELEMENTS: &str = include_str!("../../../../kernels/wgsl/gather_elements.wgsl");
const TRILU: &str = include_str!("../../../../kernels/wgsl/trilu.wgsl");
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

fn wide(d: DType) -> LResult<u32> {
    match d {
        DType::I32 => Ok(0),
        DType::I64 => Ok(1),
        d => Err(format!("indices of {d} have no wgpu kernel")),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let x = cx.input(0)?.clone();
    let y = cx.output(0)?.clone();
    let n = y.numel();
    match &cx.node.op.clone() {
        Op::GatherElements(g) => {
            let idx = cx.input(1)?.clone();
            let rank = x.dims.len();
            if rank > 8 || idx.dims.len() != rank {
                return Err("gather_elements of rank over 8 has no wgpu kernel".into());
            }
            let a = axis(g.axis, rank)?;
            let mut p = vec![
                u32_of(n, "size")?,
                words(x.dtype)?,
                rank as u32,
                a as u32,
                wide(idx.dtype)?,
                u32_of(x.dims[a], "axis size")?,
            ];
            let (mut od, mut xs) = ([1u32; 8], [0u32; 8]);
            let st = strides(&x.dims);
            for i in 0..rank {
                od[i] = u32_of(idx.dims[i], "a dim")?;
                xs[i] = u32_of(st[i], "a stride")?;
            }
            p.extend(od);
            p.extend(xs);
            let pipe = cx.pipeline("indexing.gather_elements", GATHER_ELEMENTS);
            cx.dispatch_items(pipe, vec![x.range(), idx.range(), y.range()], p, n as u64);
            Ok(())
        }
        Op::Trilu(t) => {
            let rank = x.dims.len();
            if rank < 2 {
                return Err("trilu needs rank 2 or more".into());
            }
            let k = match cx.ints(1)? {
                Some(v) => *v.first().ok_or("trilu k is empty")?,
                None => 0,
            };
            let k = k.clamp(i32::MIN as i64 + 1, i32::MAX as i64) as i32;
            let p = vec![
                u32_of(n, "size")?,
                words(x.dtype)?,
                u32_of(x.dims[rank - 2], "rows")?,
                u32_of(x.dims[rank - 1], "cols")?,
                k as u32,
                u32::from(t.upper),
            ];
            let pipe = cx.pipeline("indexing.trilu", TRILU);
            cx.dispatch_items(pipe, vec![x.range(), y.range()], p, n as u64);
            Ok(())
        }
        Op::Cumulative(c) => {
            let words = cumulative_words(x.dtype);
            if x.dtype != DType::F32 && words.is_none() {
                return Err(format!(
                    "{} on {} has no wgpu kernel",
                    c.kind.name(),
                    x.dtype
                ));
            }
            let a = cx
                .ints(1)?
                .and_then(|v| v.first().copied())
                .ok_or("the axis must be a constant")?;
            let a = axis(a, x.dims.len())?;
            let len = x.dims.get(a).copied().unwrap_or(1);
            let inner: usize = x.dims.get(a + 1..).unwrap_or(&[]).iter().product();
            let lines = x.numel() / len.max(1);
            let mut p = vec![
                u32_of(lines, "lines")?,
                u32_of(len, "axis size")?,
                u32_of(inner.max(1), "inner size")?,
                u32::from(c.exclusive),
                u32::from(c.reverse),
                u32::from(c.kind == CumulativeKind::Prod),
            ];
            let pipe = match words {
                Some(w) => {
                    p.push(w - 1);
                    cx.pipeline("indexing.cumulative_int", CUMULATIVE_INT)
                }
                None => cx.pipeline("indexing.cumulative", CUMULATIVE),
            };
            cx.dispatch_items(pipe, vec![x.range(), y.range()], p, lines as u64);
            Ok(())
        }
        op => Err(format!("`{}` is not an index op", op.name())),
    }
}
