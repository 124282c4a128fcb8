//! TensorScatter: writes an update into a copy of a KV cache along the
//! sequence axis, from each batch row's write index (linear or circular),
//! or into the cache itself where the memory plan gave the output its
//! buffer.

use rlx_ir::Op;

use super::layout::axis;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_width;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::TensorScatter(_) => Ok(fn_kernel(spec, tensor_scatter)),
        op => Err(KernelError::Internal(format!(
            "{} is not TensorScatter",
            op.name()
        ))),
    }
}

/// The write where the memory plan gave the output the cache's own buffer
/// (`MemoryPlan::updates_in_place`): the step's inputs are the update (and
/// the write indices), its output the cache as the run left it; only the
/// update moves.
pub fn build_update(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::TensorScatter(_) => Ok(fn_kernel(spec, tensor_update)),
        op => Err(KernelError::Internal(format!(
            "{} is not TensorScatter",
            op.name()
        ))),
    }
}

/// Sizes around the sequence axis: batch rows, rows per batch, cache and
/// update lengths, elements per position.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Geom {
    batch: usize,
    rows_per_batch: usize,
    max: usize,
    seq: usize,
    inner: usize,
}

fn scatter<T: Copy>(
    g: Geom,
    circular: bool,
    write: &[i64],
    upd: &[T],
    out: &mut [T],
) -> Result<(), KernelError> {
    for b in 0..g.batch {
        let start = write[b];
        for row in b * g.rows_per_batch..(b + 1) * g.rows_per_batch {
            for s in 0..g.seq {
                let pos = start + s as i64;
                let pos = if circular {
                    pos.rem_euclid(g.max as i64)
                } else if (0..g.max as i64).contains(&pos) {
                    pos
                } else {
                    return Err(KernelError::Value(format!(
                        "write index {start} + {s} is outside the cache length {}",
                        g.max
                    )));
                } as usize;
                let dst = (row * g.max + pos) * g.inner;
                let src = (row * g.seq + s) * g.inner;
                out[dst..dst + g.inner].copy_from_slice(&upd[src..src + g.inner]);
            }
        }
    }
    Ok(())
}

fn tensor_scatter(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let (g, circular, write) = geometry(op, ins[0].dims, &ins[1..])?;
    let out = &mut outs[0];
    with_width!(ins[0].dtype, T => {
        let o = out.slice::<T>()?;
        o.copy_from_slice(ins[0].slice::<T>()?);
        scatter(g, circular, &write, ins[1].slice::<T>()?, o)
    })
}

fn tensor_update(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let dims = outs[0].dims;
    let (g, circular, write) = geometry(op, dims, ins)?;
    let out = &mut outs[0];
    with_width!(ins[0].dtype, T => {
        scatter(g, circular, &write, ins[0].slice::<T>()?, out.slice::<T>()?)
    })
}

/// The write's sizes, whether it wraps, and each batch row's write index,
/// from the cache's dims and `rest`: the update, then the indices if any.
fn geometry(
    op: &Op,
    dims: &[usize],
    rest: &[TensorRef],
) -> Result<(Geom, bool, Vec<i64>), KernelError> {
    let Op::TensorScatter(ts) = op else {
        return Err(KernelError::Internal("not TensorScatter".into()));
    };
    let udims = rest[0].dims;
    let a = axis(ts.axis, dims.len());
    let compatible = udims.len() == dims.len()
        && a > 0
        && a < dims.len()
        && dims
            .iter()
            .zip(udims)
            .enumerate()
            .all(|(i, (d, u))| if i == a { u <= d } else { u == d });
    if !compatible {
        return Err(KernelError::Value(format!(
            "update {udims:?} does not fit cache {dims:?} along axis {a}"
        )));
    }
    let g = Geom {
        batch: dims[0],
        rows_per_batch: dims[1..a].iter().product(),
        max: dims[a],
        seq: udims[a],
        inner: dims[a + 1..].iter().product(),
    };
    let write = match (ts.has_indices, rest.get(1)) {
        (true, Some(w)) => w.to_i64s()?,
        (true, None) => return Err(KernelError::Internal("no write indices".into())),
        (false, _) => vec![0; g.batch],
    };
    if write.len() != g.batch {
        return Err(KernelError::Value(format!(
            "{} write indices for batch {}",
            write.len(),
            g.batch
        )));
    }
    Ok((g, ts.circular, write))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_and_circular_writes() {
        // Cache [2, 4, 1] (batch, seq, inner), update of 2 positions.
        let g = Geom {
            batch: 2,
            rows_per_batch: 1,
            max: 4,
            seq: 2,
            inner: 1,
        };
        let upd = [1, 2, 3, 4];
        let mut out = [0; 8];
        scatter(g, false, &[1, 2], &upd, &mut out).unwrap();
        assert_eq!(out, [0, 1, 2, 0, 0, 0, 3, 4]);
        let mut out = [0; 8];
        scatter(g, true, &[3, -1], &upd, &mut out).unwrap();
        assert_eq!(out, [2, 0, 0, 1, 4, 0, 0, 3]);
        assert!(scatter(g, false, &[3, 0], &upd, &mut out).is_err());
    }
}
