//! QuantizeLinear and DequantizeLinear (`wgsl/quant.wgsl`) between f32 and
//! 8- or 16-bit integers (dequantize also reads i32), per tensor, per axis or
//! blocked, with f32 scales. Float8, 4- and 2-bit types have no kernel.

use rlx_ir::{DType, Op};

use super::{axis, u32_of, Cx, LResult};

const SRC: &str = include_str!("../../../../kernels/wgsl/quant.wgsl");

/// Bytes and signedness of a quantized dtype the kernel reads or writes.
pub fn qtype(d: DType, quantize: bool) -> Result<(u32, u32), String> {
    match d {
        DType::U8 => Ok((1, 0)),
        DType::I8 => Ok((1, 1)),
        DType::U16 => Ok((2, 0)),
        DType::I16 => Ok((2, 1)),
        DType::I32 if !quantize => Ok((4, 1)),
        d => Err(format!(
            "{} with {d} values has no wgpu kernel (8- and 16-bit integers{})",
            if quantize {
                "quantize_linear"
            } else {
                "dequantize_linear"
            },
            if quantize { "" } else { " and i32" }
        )),
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (ax, block, quantize) = match &cx.node.op {
        Op::QuantizeLinear(q) => (q.axis, q.block_size, true),
        Op::DequantizeLinear(q) => (q.axis, q.block_size, false),
        op => return Err(format!("`{}` is not a quantization", op.name())),
    };
    let (x, s, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let zp = cx.ins.get(2).filter(|z| z.numel() > 0).cloned();
    if s.dtype != DType::F32 || (quantize && x.dtype != DType::F32) {
        return Err("quantization has a wgpu kernel for f32 values and scales only".into());
    }
    let q = if quantize { y.dtype } else { x.dtype };
    let (qbytes, qsigned) = qtype(q, quantize)?;
    if let Some(z) = &zp {
        if z.dtype != q || z.dims != s.dims {
            return Err(
                "the zero point must match the scale's shape and the quantized dtype".into(),
            );
        }
    }
    let n = x.numel();
    let rank = x.dims.len();
    let (kind, len, inner, blk, slen) = if s.numel() == 1 && block == 0 {
        (0, 1, 1, 1, 1)
    } else {
        let a = axis(ax, rank)?;
        let len = x.dims[a];
        let inner: usize = x.dims[a + 1..].iter().product();
        if block == 0 {
            if s.dims != [len] {
                return Err(format!(
                    "per-axis scales of shape {:?} for axis size {len}",
                    s.dims
                ));
            }
            (1, len, inner, 1, len)
        } else {
            let blk = usize::try_from(block).map_err(|_| "negative block size")?;
            let slen = len.div_ceil(blk);
            let mut want = x.dims.clone();
            want[a] = slen;
            if s.dims != want {
                return Err(format!(
                    "blocked scales of shape {:?}, expected {want:?}",
                    s.dims
                ));
            }
            (2, len, inner, blk, slen)
        }
    };
    let items = if quantize {
        n.div_ceil(4 / qbytes as usize)
    } else {
        n
    };
    let p = vec![
        u32::from(quantize),
        u32_of(n, "size")?,
        qbytes,
        qsigned,
        u32::from(zp.is_some()),
        kind,
        u32_of(len.max(1), "axis size")?,
        u32_of(inner.max(1), "inner size")?,
        u32_of(blk.max(1), "block size")?,
        u32_of(slen.max(1), "scale axis size")?,
        u32_of(items, "words")?,
    ];
    // An absent zero point binds the scale again (never read).
    let zr = zp.as_ref().map_or(s.range(), |z| z.range());
    let pipe = cx.pipeline("quant", SRC);
    cx.dispatch_items(
        pipe,
        vec![x.range(), s.range(), zr, y.range()],
        p,
        items as u64,
    );
    Ok(())
}
