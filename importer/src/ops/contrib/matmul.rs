//! FusedMatMul, MatMulNBits, MatMulIntegerToFloat and DynamicQuantizeMatMul.

use rlx_ir::ops::values::float_tensor;
use rlx_ir::ops::{BinaryKind as B, DynamicQuantizeLinear, MatMul, Transpose};
use rlx_ir::{DType, Tensor, Value};

use super::MS;
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::ops::linalg::int_matmul;
use crate::ops::{binary, cast};
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add_in(MS, "FusedMatMul", 1, fused_matmul);
    r.add_in(MS, "MatMulNBits", 1, matmul_nbits);
    r.add_in(MS, "MatMulIntegerToFloat", 1, matmul_integer_to_float);
    r.add_in(MS, "DynamicQuantizeMatMul", 1, dynamic_quantize_matmul);
}

/// `v` with ORT's FusedMatMul transposes: `batch` moves the first dim to
/// just before the last two (`[d0, b.., m, k] -> [b.., d0, k]`, the matrix
/// rows becoming `d0`), then `last` swaps the last two dims.
fn arrange(cx: &mut NodeCtx, v: Value, last: bool, batch: bool) -> Result<Value, MapError> {
    let r = cx.rank(v) as i64;
    if r < 2 || (!last && !batch) {
        return Ok(v);
    }
    let mut perm: Vec<i64> = if batch && r >= 3 {
        (1..r - 1).chain([0, r - 1]).collect()
    } else {
        (0..r).collect()
    };
    if last {
        let n = perm.len();
        perm.swap(n - 2, n - 1);
    }
    cx.add1(Transpose { perm }, &[v])
}

/// `alpha * op(A) @ op(B)`.
fn fused_matmul(cx: &mut NodeCtx) -> Result<(), MapError> {
    let alpha = cx.attr_f("alpha", 1.0)?;
    let (ta, tb) = (
        cx.attr_bool("transA", false)?,
        cx.attr_bool("transB", false)?,
    );
    let (ba, bb) = (
        cx.attr_bool("transBatchA", false)?,
        cx.attr_bool("transBatchB", false)?,
    );
    let (a, b) = (cx.req(0)?, cx.req(1)?);
    let a = arrange(cx, a, ta, ba)?;
    let b = arrange(cx, b, tb, bb)?;
    let mut y = cx.add1(MatMul {}, &[a, b])?;
    if alpha != 1.0 {
        let s = cx.scalar(cx.dtype(y), alpha as f64)?;
        y = binary(cx, B::Mul, y, s)?;
    }
    cx.set_output(0, y);
    Ok(())
}

fn constant(cx: &mut NodeCtx, port: usize, what: &str) -> Result<Option<Tensor>, MapError> {
    match cx.input(port)? {
        None => Ok(None),
        Some(v) => cx
            .known_tensor(v)
            .map(Some)
            .ok_or_else(|| MapError::Unsupported(format!("{what} must be a constant"))),
    }
}

/// The quantized weight of MatMulNBits as a float `[K, N]` tensor.
struct NBits {
    k: usize,
    n: usize,
    bits: usize,
    block: usize,
}

impl NBits {
    fn blocks(&self) -> usize {
        self.k.div_ceil(self.block)
    }

    /// The zero point of column `n`, block `blk`.
    fn zero(&self, zp: Option<&Zero>, n: usize, blk: usize) -> f64 {
        let nb = self.blocks();
        match zp {
            None => (1u32 << (self.bits - 1)) as f64,
            Some(Zero::Float(z)) => z[n * nb + blk],
            Some(Zero::Packed(z)) => {
                let per_byte = 8 / self.bits;
                let row = nb.div_ceil(per_byte);
                let byte = z[n * row + blk / per_byte];
                let shift = (blk % per_byte) * self.bits;
                ((byte >> shift) & self.mask()) as f64
            }
        }
    }

    fn mask(&self) -> u8 {
        ((1u16 << self.bits) - 1) as u8
    }

    fn dequantize(&self, q: &[u8], scales: &[f64], zp: Option<&Zero>) -> Vec<f64> {
        let (nb, per_byte) = (self.blocks(), 8 / self.bits);
        let blob = self.block / per_byte;
        let mut w = vec![0.0; self.k * self.n];
        for n in 0..self.n {
            for blk in 0..nb {
                let (s, z) = (scales[n * nb + blk], self.zero(zp, n, blk));
                let base = (n * nb + blk) * blob;
                for i in 0..self.block {
                    let k = blk * self.block + i;
                    if k >= self.k {
                        break;
                    }
                    let byte = q[base + i / per_byte];
                    let v = (byte >> ((i % per_byte) * self.bits)) & self.mask();
                    w[k * self.n + n] = (v as f64 - z) * s;
                }
            }
        }
        w
    }
}

enum Zero {
    Packed(Vec<u8>),
    Float(Vec<f64>),
}

/// `A @ dequantize(B) + bias` for block-quantized 4- or 8-bit weights; the
/// weight is dequantized once, here, to A's dtype.
fn matmul_nbits(cx: &mut NodeCtx) -> Result<(), MapError> {
    let attr = |cx: &mut NodeCtx, name: &str| -> Result<usize, MapError> {
        match cx.attr_i_opt(name)? {
            Some(v) if v > 0 => Ok(v as usize),
            _ => Err(MapError::Attr {
                name: name.into(),
                reason: "is required and positive".into(),
            }),
        }
    };
    let (k, n, block) = (attr(cx, "K")?, attr(cx, "N")?, attr(cx, "block_size")?);
    let bits = cx.attr_i("bits", 4)? as usize;
    cx.ignore_attr("accuracy_level");
    if !matches!(bits, 4 | 8) || block < 16 || !block.is_power_of_two() {
        return cx.unsupported(format!(
            "bits={bits}, block_size={block} (supported: 4 or 8 bits, power-of-two blocks of 16 or more)"
        ));
    }
    let nb = NBits { k, n, bits, block };
    let a = cx.req(0)?;
    let q = constant(cx, 1, "the quantized weight")?
        .ok_or_else(|| MapError::Unsupported("no weight".into()))?;
    let scales =
        constant(cx, 2, "the scales")?.ok_or_else(|| MapError::Unsupported("no scales".into()))?;
    let zp = constant(cx, 3, "the zero points")?;
    if cx.input(4)?.is_some() {
        return cx.unsupported("g_idx (act-order weights)");
    }
    let blocks = nb.blocks();
    if q.dtype() != DType::U8 || q.numel() != n * blocks * block * bits / 8 {
        return cx.unsupported(format!(
            "a weight of {} {}, expected {} u8 for N={n}, K={k}, block_size={block}",
            q.numel(),
            q.dtype(),
            n * blocks * block * bits / 8
        ));
    }
    let s = scales
        .to_f64_vec()
        .filter(|s| s.len() == n * blocks)
        .ok_or_else(|| MapError::Unsupported(format!("scales must be {} floats", n * blocks)))?;
    let zero = match zp {
        None => None,
        Some(z) if z.dtype() == DType::U8 && z.numel() == n * blocks.div_ceil(8 / bits) => {
            Some(Zero::Packed(z.bytes().to_vec()))
        }
        Some(z) if z.dtype() == scales.dtype() && z.numel() == n * blocks => {
            Some(Zero::Float(z.to_f64_vec().unwrap_or_default()))
        }
        Some(z) => return cx.unsupported(format!("zero points of {} {}", z.numel(), z.dtype())),
    };
    let w = nb.dequantize(q.bytes(), &s, zero.as_ref());
    let dt = cx.dtype(a);
    let w = float_tensor(dt, &[k, n], &w)
        .ok_or_else(|| MapError::Unsupported(format!("activations of dtype {dt}")))?;
    let w = cx.constant(w);
    let mut y = cx.add1(MatMul {}, &[a, w])?;
    if let Some(b) = cx.input(5)? {
        y = binary(cx, B::Add, y, b)?;
    }
    cx.set_output(0, y);
    Ok(())
}

/// `float((A - a_zero) @ (B - b_zero)) * a_scale * b_scale + bias`.
fn scaled(
    cx: &mut NodeCtx,
    (a, b): (Value, Value),
    (a_zero, b_zero): (Option<Value>, Option<Value>),
    (a_scale, b_scale): (Value, Value),
    bias: Option<Value>,
) -> Result<Value, MapError> {
    let acc = int_matmul(cx, a, b, a_zero, b_zero)?;
    let dt = cx.dtype(b_scale);
    let f = cast(cx, acc, dt)?;
    let s = binary(cx, B::Mul, a_scale, b_scale)?;
    let mut y = binary(cx, B::Mul, f, s)?;
    if let Some(bias) = bias {
        y = binary(cx, B::Add, y, bias)?;
    }
    Ok(y)
}

fn matmul_integer_to_float(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (a, b, sa, sb) = (cx.req(0)?, cx.req(1)?, cx.req(2)?, cx.req(3)?);
    let (za, zb, bias) = (cx.input(4)?, cx.input(5)?, cx.input(6)?);
    let y = scaled(cx, (a, b), (za, zb), (sa, sb), bias)?;
    cx.set_output(0, y);
    Ok(())
}

/// A quantized to u8 per tensor (as DynamicQuantizeLinear), then as
/// MatMulIntegerToFloat.
fn dynamic_quantize_matmul(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (a, b, sb) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let (zb, bias) = (cx.input(3)?, cx.input(4)?);
    let a = cast(cx, a, DType::F32)?;
    let q = cx.add(DynamicQuantizeLinear {}, &[a])?;
    let y = scaled(cx, (q[0], b), (Some(q[2]), zb), (q[1], sb), bias)?;
    cx.set_output(0, y);
    Ok(())
}
