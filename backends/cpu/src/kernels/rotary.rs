//! RotaryEmbedding (opset 23): rotates pairs of head features by cached
//! cos/sin angles, whole or partial heads, interleaved or split-half pairs.

use rlx_ir::ops::RotaryEmbedding;
use rlx_ir::Op;

use super::layout::par_rows;
use super::num::Real;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::RotaryEmbedding(_) => Ok(fn_kernel(spec, rotary)),
        op => Err(KernelError::Internal(format!(
            "{} is not rotary_embedding",
            op.name()
        ))),
    }
}

/// Rotates one head vector `x` into `y` with angles `(cos, sin)` of `half` pairs.
fn rotate<T: Real>(r: &RotaryEmbedding, x: &[T], y: &mut [T], cos: &[T], sin: &[T], half: usize) {
    for i in 0..half {
        let (a, b) = if r.interleaved {
            (2 * i, 2 * i + 1)
        } else {
            (i, i + half)
        };
        let (c, s) = (cos[i].up(), sin[i].up());
        let (x1, x2) = (x[a].up(), x[b].up());
        y[a] = T::down(c * x1 - s * x2);
        y[b] = T::down(s * x1 + c * x2);
    }
    y[2 * half..].copy_from_slice(&x[2 * half..]);
}

fn rotary_typed<T: Real>(
    r: &RotaryEmbedding,
    ins: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    let x = &ins[0];
    let xs = x.slice::<T>()?;
    let (cos, sin) = (ins[1].slice::<T>()?, ins[2].slice::<T>()?);
    // (batch, heads, seq, head size) and the element strides of head and seq.
    let (b, h, s, d, h_st, s_st) = match *x.dims {
        [b, h, s, d] => (b, h, s, d, s * d, d),
        [b, s, hidden] => {
            let h = r.num_heads.max(0) as usize;
            if h == 0 || hidden % h != 0 {
                return Err(KernelError::Value(format!(
                    "hidden size {hidden} is not a multiple of num_heads {}",
                    r.num_heads
                )));
            }
            (b, h, s, hidden / h, hidden / h, hidden)
        }
        _ => {
            return Err(KernelError::Value(format!(
                "rotary input must be 3-D or 4-D, got {:?}",
                x.dims
            )))
        }
    };
    let rd = if r.rotary_embedding_dim > 0 {
        r.rotary_embedding_dim as usize
    } else {
        d
    };
    if rd > d || rd % 2 != 0 {
        return Err(KernelError::Value(format!(
            "rotary_embedding_dim {rd} must be even and at most the head size {d}"
        )));
    }
    let half = rd / 2;
    let cache = ins[1].dims;
    if ins[2].dims != cache || cache.last() != Some(&half) {
        return Err(KernelError::Value(format!(
            "cos/sin caches {:?}, {:?} must end in rotary_embedding_dim/2 = {half}",
            cache, ins[2].dims
        )));
    }
    // The cache row of every (batch, position).
    let rows: Vec<usize> = match ins.get(3) {
        Some(p) => {
            let ids = p.to_i64s()?;
            let max = cache.first().copied().unwrap_or(0);
            if cache.len() != 2 || ids.len() != b * s {
                return Err(KernelError::Value(format!(
                    "position_ids {:?} with cache {cache:?} for input {:?}",
                    p.dims, x.dims
                )));
            }
            ids.iter()
                .map(|&i| {
                    usize::try_from(i).ok().filter(|&i| i < max).ok_or_else(|| {
                        KernelError::Value(format!("position id {i} outside the cache of {max}"))
                    })
                })
                .collect::<Result<_, _>>()?
        }
        None => {
            if cache != [b, s, half] {
                return Err(KernelError::Value(format!(
                    "without position_ids the caches must be [{b}, {s}, {half}], got {cache:?}"
                )));
            }
            (0..b * s).collect()
        }
    };
    let y = out.slice::<T>()?;
    // One row per (batch, head, position) in 4-D order or (batch, position,
    // head) in 3-D order; both are contiguous head vectors of d.
    let four = x.rank() == 4;
    par_rows(y, d, |row, yv| {
        let (bi, hi, si) = if four {
            (row / (h * s), row / s % h, row % s)
        } else {
            (row / (s * h), row % h, row / h % s)
        };
        let at = bi * h * s * d + hi * h_st + si * s_st;
        let c = rows[bi * s + si] * half;
        rotate(
            r,
            &xs[at..at + d],
            yv,
            &cos[c..c + half],
            &sin[c..c + half],
            half,
        );
    });
    Ok(())
}

fn rotary(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::RotaryEmbedding(r) = op else {
        return Err(KernelError::Internal("not rotary_embedding".into()));
    };
    with_dtype!(ins[0].dtype, T => rotary_typed::<T>(r, ins, &mut outs[0]), float)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(interleaved: bool, dim: i64) -> RotaryEmbedding {
        RotaryEmbedding {
            interleaved,
            rotary_embedding_dim: dim,
            num_heads: 0,
        }
    }

    #[test]
    fn split_half_rotation() {
        // Pairs (x0, x2) and (x1, x3); angle 90° on the first, 0° on the second.
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let mut y = [0f32; 4];
        rotate(&op(false, 0), &x, &mut y, &[0.0, 1.0], &[1.0, 0.0], 2);
        assert_eq!(y, [-3.0, 2.0, 1.0, 4.0]);
    }

    #[test]
    fn interleaved_partial_rotation_keeps_the_tail() {
        // Pair (x0, x1) rotated by 90°; x2, x3 pass through.
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let mut y = [0f32; 4];
        rotate(&op(true, 2), &x, &mut y, &[0.0], &[1.0], 1);
        assert_eq!(y, [-2.0, 1.0, 3.0, 4.0]);
    }
}
