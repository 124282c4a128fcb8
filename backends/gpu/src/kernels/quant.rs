//! The `quant` kernel family: QuantizeLinear (f32 to 8/16-bit integers,
//! saturating, round half to even) and DequantizeLinear (8/16/32-bit
//! integers to f32), per tensor, per axis or blocked. The parameter struct
//! and the scale geometry every GPU backend shares.

use crate::geometry::{axis, u32_of, LResult};

crate::kernel_params! {
    /// One invocation per output word: quantize packs 4 bytes or 2 halves
    /// into it, dequantize writes one f32.
    pub struct QuantParams {
        /// 1: quantize, 0: dequantize.
        pub quantize: u32,
        /// Elements.
        pub n: u32,
        /// Bytes per quantized element (1, 2 or 4).
        pub qbytes: u32,
        /// 1: signed quantized elements.
        pub qsigned: u32,
        /// 1: a zero point is given.
        pub has_zp: u32,
        /// 0 one scale, 1 per axis, 2 blocked along the axis.
        pub kind: u32,
        /// The axis size.
        pub axis_len: u32,
        /// Elements after the axis.
        pub inner: u32,
        /// Elements of the axis per scale (blocked).
        pub block: u32,
        /// The scale's size along the axis.
        pub scale_len: u32,
        /// Invocations (output words).
        pub items: u32,
    }
}

/// The operand names of the quant kernel, in launch order (an absent zero
/// point binds the scale again, never read).
pub const QUANT_OPERANDS: &[&str] = &["x", "scale", "zp", "y"];

/// Quantizing (or dequantizing) `x` of `dims` along `ax` with scales of
/// `scale` dims (`block` 0: per tensor or per axis) to (or from) integers
/// of `qbytes` bytes.
#[allow(clippy::too_many_arguments)]
pub fn quant_params(
    quantize: bool,
    dims: &[usize],
    scale: &[usize],
    ax: i64,
    block: i64,
    qbytes: u32,
    qsigned: bool,
    has_zp: bool,
) -> LResult<QuantParams> {
    let n: usize = dims.iter().product();
    let (kind, len, inner, blk, slen) = if scale.iter().product::<usize>() == 1 && block == 0 {
        (0, 1, 1, 1, 1)
    } else {
        let a = axis(ax, dims.len())?;
        let len = dims[a];
        let inner: usize = dims[a + 1..].iter().product();
        if block == 0 {
            if scale != [len] {
                return Err(format!(
                    "per-axis scales of shape {scale:?} for axis size {len}"
                ));
            }
            (1, len, inner, 1, len)
        } else {
            let blk = usize::try_from(block).map_err(|_| "negative block size")?;
            let slen = len.div_ceil(blk);
            let mut want = dims.to_vec();
            want[a] = slen;
            if scale != want {
                return Err(format!(
                    "blocked scales of shape {scale:?}, expected {want:?}"
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
    Ok(QuantParams {
        quantize: u32::from(quantize),
        n: u32_of(n, "size")?,
        qbytes,
        qsigned: u32::from(qsigned),
        has_zp: u32::from(has_zp),
        kind,
        axis_len: u32_of(len.max(1), "axis size")?,
        inner: u32_of(inner.max(1), "inner size")?,
        block: u32_of(blk.max(1), "block size")?,
        scale_len: u32_of(slen.max(1), "scale axis size")?,
        items: u32_of(items, "words")?,
    })
}

crate::kernel_params! {
    /// QuantizeLinear / DequantizeLinear on CUDA: one thread per element,
    /// any integer width (the kernel is instantiated per dtype pair).
    pub struct QuantCudaParams {
        /// Elements.
        pub n: u32,
        /// 0 one scale, 1 per axis, 2 blocked along the axis.
        pub kind: u32,
        /// The axis size.
        pub axis_len: u32,
        /// Elements after the axis.
        pub inner: u32,
        /// Elements of the axis per scale (blocked).
        pub block: u32,
        /// The scale's size along the axis.
        pub scale_len: u32,
        /// 0 no zero point, 1 one for all scales, 2 one per scale.
        pub zp: u32,
        /// Bits of the quantized dtype (its saturation range).
        pub bits: u32,
        /// 1: signed quantized elements.
        pub qsigned: u32,
    }
}

/// The operand names of the CUDA quant kernels, in launch order (an absent
/// zero point binds the scale again, never read).
pub const QUANT_CUDA_OPERANDS: &[&str] = &["x", "scale", "zp", "y"];

impl QuantCudaParams {
    /// The scale geometry of `p` (from [`quant_params`]) with `zp` zero
    /// points (0, 1, or one per scale) and a dtype of `bits` bits.
    pub fn of(p: &QuantParams, zp: u32, bits: u32, qsigned: bool) -> QuantCudaParams {
        QuantCudaParams {
            n: p.n,
            kind: p.kind,
            axis_len: p.axis_len,
            inner: p.inner,
            block: p.block,
            scale_len: p.scale_len,
            zp,
            bits,
            qsigned: u32::from(qsigned),
        }
    }
}

crate::kernel_params! {
    /// QuantizeLinear / DequantizeLinear between a float dtype and a float8
    /// or float4 format on CUDA: [`QuantCudaParams`]' scale geometry, the
    /// format's ONNX dtype code and saturation.
    pub struct QuantFloatCudaParams {
        /// Elements.
        pub n: u32,
        /// 0 one scale, 1 per axis, 2 blocked along the axis.
        pub kind: u32,
        /// The axis size.
        pub axis_len: u32,
        /// Elements after the axis.
        pub inner: u32,
        /// Elements of the axis per scale (blocked).
        pub block: u32,
        /// The scale's size along the axis.
        pub scale_len: u32,
        /// 0 no zero point, 1 one for all scales, 2 one per scale.
        pub zp: u32,
        /// The quantized format's ONNX dtype code.
        pub format: u32,
        /// 1: out-of-range quotients saturate.
        pub saturate: u32,
    }
}

impl QuantFloatCudaParams {
    /// The scale geometry of `p` with `zp` zero points, into or out of the
    /// format of ONNX dtype code `format`.
    pub fn of(p: &QuantParams, zp: u32, format: u32, saturate: bool) -> QuantFloatCudaParams {
        QuantFloatCudaParams {
            n: p.n,
            kind: p.kind,
            axis_len: p.axis_len,
            inner: p.inner,
            block: p.block,
            scale_len: p.scale_len,
            zp,
            format,
            saturate: u32::from(saturate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_per_tensor_axis_and_block() {
        let p = quant_params(true, &[2, 6], &[], 1, 0, 1, false, false).unwrap();
        assert_eq!((p.kind, p.n, p.items), (0, 12, 3));
        let p = quant_params(false, &[2, 6], &[6], 1, 0, 2, true, true).unwrap();
        assert_eq!((p.kind, p.axis_len, p.inner, p.items), (1, 6, 1, 12));
        let p = quant_params(true, &[2, 6, 3], &[2, 2, 3], 1, 4, 2, true, false).unwrap();
        assert_eq!(
            (p.kind, p.block, p.scale_len, p.inner, p.items),
            (2, 4, 2, 3, 18)
        );
        assert!(quant_params(true, &[2, 6], &[5], 1, 0, 1, false, false).is_err());
    }
}
